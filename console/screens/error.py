"""Shown instead of a traceback when the ledger cannot be opened at all."""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from ..text import safe_line
from .base import WardenScreen


def is_database_url(target: str) -> bool:
    """A ledger on a database server (PostgreSQL), not a file: say "database", not "file"."""
    return "://" in target and not target.lower().startswith("sqlite")


def how_to_fix(message: str, *, database: bool = False) -> str:
    m = message.lower()
    if database:
        if "no ledger at" in m or "not a warden ledger" in m or "is empty" in m or "no meta table" in m:
            return ("This database holds no Warden ledger. Check --ledger names the right database (and schema); "
                    "an agent's Ledger.open creates the ledger in it, or run `warden demo` for a local one.")
        if "newer warden" not in m and "warden migrate" not in m:  # (those read as for a file, below)
            return ("Check --ledger (host, port, database, user), that the server is up and reachable, and this "
                    "user's rights on the database; then press r to retry.")
    if "newer warden" in m:
        return "Upgrade Warden to a version that reads this ledger's schema."
    if "warden migrate" in m:
        return "Stop the agents, then run `warden migrate --ledger <path>`, then start the console again."
    if "no ledger at" in m or "disappeared" in m:
        return ("Check --ledger (or $WARDEN_LEDGER). To get a ledger, start an agent (Ledger.open creates one) "
                "or run `warden demo`.")
    if "not a warden ledger" in m or "not a database" in m or "malformed" in m or "cannot open" in m:
        return ("This file is not a readable Warden ledger. Check --ledger points at the right file; "
                "restore it from a backup if it was damaged.")
    return "Check --ledger and the file's permissions, then press r to retry."


class LedgerErrorScreen(WardenScreen):
    header = "cannot open the ledger"
    BINDINGS = [
        Binding("r", "retry", "Retry", id="retry"),
        Binding("q", "app.quit", "Quit", id="quit"),
    ]

    def __init__(self, message: str, *, target: str = "") -> None:
        super().__init__()
        self.message = message
        self.database = is_database_url(target)

    def compose_body(self) -> Iterable[Widget]:
        out = Text()
        out.append("Warden cannot open the ledger\n\n", style="bold")
        out.append(safe_line(self.message) + "\n\n")
        out.append("How to fix: ", style="bold")
        out.append(how_to_fix(self.message, database=self.database) + "\n\n")
        out.append("r retry · q quit", style="dim")
        with VerticalScroll(id="error-scroll"):
            yield Static(out, markup=False, id="error")

    def action_retry(self) -> None:
        self.wapp.retry_open()

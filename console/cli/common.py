"""What every ``warden`` subcommand shares: the parser class, the ledger and directory defaults,
who acts, and the two ways of printing (one JSON object; a plain table that fits the terminal).

Everything an agent wrote reaches the terminal as literal text (``rich.text.Text`` of
``console.text.safe_line``) or as ASCII-escaped JSON, never as markup or raw control bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from store import Ledger

from ..operator import resolve_operator


class UsageError(Exception):
    """A usage error: exit 2."""


class CliParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # one line, exit 2, no usage dump
        raise UsageError(f"{self.prog}: {message}")


def ledger_target(args: argparse.Namespace) -> str:
    return args.ledger or os.environ.get("WARDEN_LEDGER") or "ledger.db"


def runs_dir(args: argparse.Namespace) -> str:
    return args.runs or os.environ.get("WARDEN_RUNS") or "runs"


APPLICATION_NAME = "warden-cli"  # what PostgreSQL's pg_stat_activity shows for these connections


def open_ledger(args: argparse.Namespace, *, read_only: bool = False) -> Ledger:
    """Open an existing ledger (never create one: a typo must not leave an empty database)."""
    return Ledger.open(ledger_target(args), create=False, read_only=read_only, application_name=APPLICATION_NAME)


def operator_of(args: argparse.Namespace) -> str:
    """``--operator``, else ``$USER@host`` (console/operator.py)."""
    return resolve_operator(getattr(args, "operator", None))


def print_json(obj: Any, *, err: bool = False) -> None:
    # ensure_ascii: agent text with C1 or bidi controls stays escaped (\\u202e) on the terminal
    stream = sys.stderr if err else sys.stdout
    stream.write(json.dumps(obj, ensure_ascii=True, sort_keys=False) + "\n")
    stream.flush()


def out_console(*, err: bool = False) -> Console:
    return Console(stderr=err, highlight=False, soft_wrap=False)


def print_fitted(c: Console, headers: list[str], rows: list[list[str]], give_way: list[str]) -> None:
    """A plain table that fits the terminal: columns in ``give_way`` shrink (then vanish), in that
    order, before any other column is touched. Cells are plain (already made safe) text."""
    widths = [max([cell_len(h)] + [cell_len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    avail = max(20, c.width)

    def total() -> int:
        shown = [w for w in widths if w > 0]
        return sum(shown) + 2 * (len(shown) - 1)

    for name in give_way:
        i = headers.index(name)
        excess = total() - avail
        if excess <= 0:
            break
        keep = widths[i] - excess
        widths[i] = keep if keep >= max(6, cell_len(name)) else 0
    t = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0), collapse_padding=True)
    keep_cols = [i for i, w in enumerate(widths) if w > 0]
    for i in keep_cols:
        t.add_column(headers[i], width=widths[i], no_wrap=True, overflow="ellipsis")
    for r in rows:
        t.add_row(*(Text(r[i]) for i in keep_cols))
    c.print(t)


__all__ = [
    "CliParser", "UsageError", "ledger_target", "open_ledger", "operator_of", "out_console", "print_fitted",
    "print_json", "runs_dir",
]

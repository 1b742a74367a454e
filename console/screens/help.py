"""Every key, in one place."""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from .base import WardenScreen

KEYS: list[tuple[str, str]] = [
    ("enter", "open: task → graph → node detail (event log, handoffs: the node)"),
    ("escape", "back (does nothing on the task list); leaves a filter input"),
    ("↑ ↓  j k", "move; PgUp PgDn Home End jump"),
    ("/", "filter (task list, graph: text, status:running, kind:llm_call)"),
    ("?", "this help"),
    ("q", "quit"),
    ("e", "event log (f follow, l layer, t task of the selected event)"),
    ("h", "handoff inbox"),
    ("g", "runs and recovery"),
    ("p", "park the selected task or node"),
    ("u", "resume the selected task or node"),
    ("n", "narrow the selected task"),
    ("r", "rewind the selected node"),
    ("a", "abort the selected task"),
    ("R", "recovery advice for the selected node"),
    ("ctrl+p", "command palette (every command, searchable)"),
]


def help_text(read_only: bool) -> Text:
    out = Text()
    out.append("Keys\n\n", style="bold")
    for key, what in KEYS:
        out.append(f"  {key:<10}", style="bold")
        out.append(what + "\n")
    out.append("\nWhile a text input has focus, keys type into it; escape leaves the input.\n")
    out.append("Statuses: ○ pending ▶ running ✋ blocked ⏸ parked ✔ succeeded ✖ failed ⊘ abandoned; "
               "⚠ n = signals; ✋n = open handoffs.\n")
    if read_only:
        out.append("\nread-only: the action keys (p u n r a R) only show a notice.\n", style="bold")
    return out


class HelpScreen(WardenScreen):
    header = "help"
    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("question_mark", "back", "Close", show=False),
    ]

    def compose_body(self) -> Iterable[Widget]:
        with VerticalScroll(id="help-scroll"):
            yield Static(help_text(self.wapp.read_only), markup=False, id="help")

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()

    def action_back(self) -> None:
        self.wapp.pop_screen()


__all__ = ["HelpScreen", "KEYS", "help_text"]

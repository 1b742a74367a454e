"""Every key, in one place."""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from ..action_keys import ACTION_KEYS, RECOVER
from ..glyphs import MARKS, NODE_GLYPHS
from .base import WardenScreen

# (title, the classes whose BINDINGS the section covers, [(keys, what they do)]). A test walks
# every console class with BINDINGS and checks each key is listed in its section.
SECTIONS: list[tuple[str, tuple[str, ...], list[tuple[tuple[str, ...], str]]]] = [
    ("Everywhere", ("WardenApp",), [
        (("?",), "this help"),
        (("q",), "quit"),
        (("e",), "event log"),
        (("h",), "handoff inbox"),
        (("g",), "runs and recovery"),
        *(((k.key,), k.help) for k in ACTION_KEYS),  # every registered action's key (console/action_keys.py)
        (("o",), "the selected task's report: best result, unfinished, budget, handoffs, effects"),
        (("m",), "the selected task's mind: requirements, conclusions, rejected paths, plan history"),
        (("M",), "memory inbox: memories agents proposed, to confirm or reject"),
        (("ctrl+p",), "command palette (every command, searchable)"),
    ]),
    ("Lists", ("RowList",), [
        (("↑", "↓", "k", "j"), "move"),
        (("PgUp", "PgDn", "Home", "End"), "jump"),
    ]),
    ("Task list", ("TaskListScreen", "AllTasksScreen"), [
        (("enter",), "open the task's graph"),
        (("/",), "filter by id, title, status or origin (every word must match)"),
        (("s",), "sort by urgency (alarms, handoffs, budget, P80) / by creation"),
    ]),
    ("Several ledgers (warden console --ledger A --ledger B)", ("AllTasksScreen",), [
        (("l",), "one ledger's tasks only, the next one's, every ledger's again (palette: Ledger: …)"),
    ]),
    ("Task graph", ("TaskGraphScreen",), [
        (("enter",), "open the node's detail"),
        (("/",), "filter: text, status:running, kind:llm_call"),
        (("x",), "the task's estimate explained (why, the nodes that weigh most) and its signals"),
        (("m",), "the task's mind"),
        (("escape",), "back"),
    ]),
    ("Mind", ("MindScreen",), [
        (("r",), "on a conclusion or rejected path: rewind the node that produced it"),
        (("enter",), "open that node's detail"),
        (("1", "2", "3", "4", "5", "6"), "jump to requirements, constraints, conclusions, rejected paths, plans, memories"),
        (("m", "escape"), "back"),
    ]),
    ("Memory inbox", ("MemoryInboxScreen",), [
        (("y",), "confirm the selected memory (preview, reason, ctrl+s): later claims of its kind / workflow get it"),
        (("x",), "reject it (a confirmed one: retract it)"),
        (("M", "escape"), "back"),
    ]),
    ("Filter input", ("FilterInput",), [
        (("escape",), "leave the input (the filter stays)"),
    ]),
    ("Node detail", ("NodeDetailScreen",), [
        (("↑", "↓", "k", "j"), "scroll"),
        (("s", "1"), "act on the first signal: its suggested dialog, prefilled"),
        (("2", "3", "4", "5", "6", "7", "8", "9"), "act on signal 2 … 9"),
        (("escape",), "back"),
    ]),
    ("Event log", ("EventLogScreen",), [
        (("f",), "follow the newest event on / off"),
        (("l",), "filter by layer (cycles)"),
        (("t",), "only the selected event's task (again: all)"),
        (("enter",), "open the event's node"),
        (("escape",), "back"),
    ]),
    ("Handoff inbox", ("HandoffInboxScreen",), [
        (("enter",), "resolve the selected handoff"),
        (("o",), "open its node"),
        (("escape",), "back"),
    ]),
    ("Handoff resolution", ("ResolveHandoffScreen",), [
        (("ctrl+s",), "resolve with the chosen option and answer"),
        (("n",), "next open handoff of the task"),
        (("escape",), "cancel"),
    ]),
    ("Runs", ("RunsScreen",), [
        (("enter",), "recovery wizard for the selected run"),
        (("escape",), "back"),
    ]),
    ("Recovery wizard", ("RecoveryWizardScreen",), [
        (("enter", "space", "→"), "next check"),
        (("←", "backspace"), "previous check"),
        (("ctrl+s",), "confirm the decision"),
        (("escape",), "leave"),
    ]),
    ("Action dialogs and recovery advice", ("ActionDialog", "AdviceDialog"), [
        (("ctrl+s",), "apply (when the reason is filled)"),
        (("escape",), "cancel: nothing changes"),
        (("enter",), "in a text field: the next field (never applies)"),
    ]),
    ("Every dialog", ("WardenModal",), [
        (("tab", "shift+tab"), "next / previous field (keys typed right after go there)"),
    ]),
    ("Ledger error screen", ("LedgerErrorScreen",), [
        (("r",), "retry opening the ledger"),
        (("q",), "quit"),
    ]),
    ("Task report", ("TaskReportScreen",), [
        (("escape", "o"), "close"),
    ]),
    ("Help", ("HelpScreen",), [
        (("escape", "?"), "close"),
    ]),
]

# How a Binding's key is written in the help.
KEY_NAMES = {"question_mark": "?", "slash": "/", "up": "↑", "down": "↓", "left": "←", "right": "→",
             "pageup": "PgUp", "pagedown": "PgDn", "home": "Home", "end": "End"}


def help_keys(class_name: str) -> set[str]:
    """Every key the help lists for ``class_name``'s section(s)."""
    return {k for _, owners, rows in SECTIONS if class_name in owners for keys, _ in rows for k in keys}


def help_text(read_only: bool) -> Text:
    out = Text()
    for title, _, rows in SECTIONS:
        out.append(f"{title}\n", style="bold")
        for keys, what in rows:
            out.append(f"  {' '.join(keys):<20}", style="bold")
            out.append(what + "\n")
        out.append("\n")
    out.append("While a text input has focus, keys type into it; escape leaves the input. "
               "escape on the task list does nothing.\n")
    statuses = " ".join(f"{glyph} {status}" for status, glyph in NODE_GLYPHS.items())
    out.append(f"Statuses: {statuses}; {MARKS['signal']} n = signals; {MARKS['handoff']}n = open handoffs; "
               f"{MARKS['clock']} = the budget clock is paused (the task waits: parked, or on a human).\n")
    if read_only:
        inert = [k.key for k in ACTION_KEYS if k is not RECOVER] + [RECOVER.key]  # the actions', then R
        out.append(f"\nread-only: the action keys ({' '.join(inert)}) only show a notice.\n", style="bold")
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


__all__ = ["HelpScreen", "KEY_NAMES", "SECTIONS", "help_keys", "help_text"]

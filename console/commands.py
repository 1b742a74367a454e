"""The command palette (ctrl+p): every screen and action, plus "open task X" for each task."""

from __future__ import annotations

from functools import partial
from typing import Callable, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher

from .action_keys import ACTION_KEYS
from .host import host_of
from .text import literal, safe_line

COMMANDS: list[tuple[str, str, str]] = [
    ("Event log", "action_events", "the journal's tail; follow, filter by layer and task (e)"),
    ("Handoff inbox", "action_handoffs", "open needs_human requests (h)"),
    ("Mark alerts seen", "action_alerts_seen", "clear the header's count of new alerts"),
    ("Runs and recovery", "action_runs", "run directories (g)"),
    ("Help", "action_help", "every key (?)"),
    *((k.palette, f"action_operator:{k.action}", k.palette_help) for k in ACTION_KEYS),  # console/action_keys.py
    ("Task report", "action_report", "what the selected task leaves behind: best result, unfinished, budget (o)"),
    ("Quit", "action_quit", "leave the console (q)"),
]


#: how many "Open task …" entries the palette offers (the first tasks a ledger's model holds, in
#: the order it read them; a task further on is opened from the list)
OPEN_TASKS = 500


def action_string(command: str) -> str:
    """A COMMANDS entry as the app's action it runs: ``action_events`` → ``events``,
    ``action_operator:park`` → ``operator('park')``."""
    name, _, arg = command.removeprefix("action_").partition(":")
    return f"{name}({arg!r})" if arg else name


class WardenCommands(Provider):
    # A provider lives as long as one opening of the palette: its entries (up to OPEN_TASKS tasks)
    # are built once then, not again at every key typed into it.
    _entries: list[tuple[str, Callable[[], object], str]] | None = None

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        if self._entries is None:
            self._entries = self._build()
        return self._entries

    def _build(self) -> list[tuple[str, Callable[[], object], str]]:
        host = host_of(self.app)
        out: list[tuple[str, Callable[[], object], str]] = []
        for name, command, help_text in COMMANDS:
            out.append((name, partial(self.app.run_action, action_string(command)), help_text))
        if getattr(self.app, "several", False):  # k9s's :ctx — every open ledger, or one (console/screens/all_tasks.py)
            show = getattr(self.app, "show_ledger")
            open_in = getattr(self.app, "open_task_in")
            out.append(("Ledger: all", partial(show, None), "every open ledger's tasks in one list (l)"))
            sides = getattr(self.app, "every_side")()
            for side in sides:
                name = safe_line(side.ledger_name)
                out.append((f"Ledger: {name}", partial(show, side.ledger_name), f"only {name}'s tasks (l)"))
            for side in sides:  # a task id may be in two ledgers: each entry names its own
                name = safe_line(side.ledger_name)
                for row in side.tasks_model.rows[:OPEN_TASKS // len(sides)]:
                    tid = row.view.task_id
                    out.append((f"Open task {safe_line(tid)} in {name}", partial(open_in, side, tid),
                                safe_line(row.view.title, limit=80) or "task graph"))
            return out
        for row in host.tasks_model.rows[:OPEN_TASKS]:
            tid = row.view.task_id
            out.append((f"Open task {safe_line(tid)}", partial(host.open_graph, tid),
                        safe_line(row.view.title, limit=80) or "task graph"))
        return out

    # The palette parses a str prompt or help as markup (a task titled "[/]" would crash it):
    # every entry goes in as Content, which it takes as it is.
    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(literal(name), callback, text=name, help=cast(str, literal(help_text)))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, highlighted(matcher, name), callback, text=name, help=cast(str, literal(help_text)))


def highlighted(matcher: Matcher, text: str) -> Content:
    """``matcher.highlight`` without parsing ``text`` as markup: the matched characters styled."""
    content = literal(text)
    if content.plain != text:  # escapes changed the offsets: show it plain
        return content
    score, offsets = matcher.fuzzy_search.match(matcher.query, text)
    for offset in offsets if score else ():
        if not text[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content

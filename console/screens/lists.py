"""Read-only listings: the handoff inbox and the runs directory (the resolution screen and the
recovery wizard build on these)."""

from __future__ import annotations

from typing import Callable, Generic, Iterable, Sequence, TypeVar

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

from store.runs import RunSummary, list_runs
from store.storage.events import HandoffOpened
from store.views import HandoffView

from ..glyphs import age_label
from ..hub import EventsChanged
from ..text import safe_line
from ..widgets import Column, InfoLine, RowList
from ..widgets.rowlist import Cell
from .base import ListScreen

HANDOFF_COLUMNS = [
    Column("ID", 4, align="right"),
    Column("TASK", 16),
    Column("NODE", 16),
    Column("KIND", 10, priority=1),
    Column("AGE", 10),
    Column("QUESTION", 16, flex=True),
]

RUN_COLUMNS = [
    Column("RUN", 20),
    Column("STATUS", 12),
    Column("TASK", 20, priority=1),
    Column("NODE", 14, priority=2),
    Column("UPDATED", 20, priority=1),
    Column("PROBLEMS", 10, flex=True, priority=3),
]


_Item = TypeVar("_Item")


class ListRead(Message, Generic[_Item]):
    """A listing's rows, read in its screen's thread worker."""

    def __init__(self, items: Sequence[_Item]) -> None:
        super().__init__()
        self.items = items


class LoadedListScreen(ListScreen, Generic[_Item]):
    """A list read whole in a thread worker of its own (``read`` on a worker thread), read again
    with :meth:`reload`; ``show`` puts the rows on screen."""

    def read(self) -> Sequence[_Item]:
        raise NotImplementedError

    def reload(self) -> None:
        self._read(self.read)

    @work(thread=True, exclusive=True, exit_on_error=False, group="ledger")
    def _read(self, read: Callable[[], Sequence[_Item]]) -> None:
        self.post_message(ListRead(read()))

    @on(ListRead)
    def _list_read(self, msg: ListRead[_Item]) -> None:
        msg.stop()
        self.show(msg.items)

    def show(self, items: Sequence[_Item]) -> None:
        raise NotImplementedError


class HandoffSource:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.items: Sequence[HandoffView] = ()

    def row_count(self) -> int:
        return len(self.items)

    def row_cells(self, i: int) -> list[Cell]:
        h = self.items[i]
        return [
            (safe_line(h.id), "dim"), (safe_line(h.task_id), "key"), (safe_line(h.node), ""),
            (safe_line(h.kind), "blocked"), (age_label(self.clock() - h.opened_at), "dim"),
            (safe_line(h.question), ""),
        ]


class RunSource:
    def __init__(self) -> None:
        self.items: Sequence[RunSummary] = ()

    def row_count(self) -> int:
        return len(self.items)

    def row_cells(self, i: int) -> list[Cell]:
        r = self.items[i]
        status = r.status or "unreadable"
        return [
            (safe_line(r.name), "key"),
            (safe_line(status) + (" (sim)" if r.simulation else ""),
             {"completed": "succeeded", "failed": "failed", "interrupted": "warn", "running": "running"}.get(status, "alarm")),
            (safe_line(r.task_id or "—"), ""), (safe_line(r.node_key or "—"), ""),
            (safe_line(r.updated_at or "—"), "dim"),
            (safe_line("; ".join(r.problems)) if r.problems else "—", "alarm" if r.problems else "dim"),
        ]


class HandoffInboxScreen(LoadedListScreen[HandoffView]):
    header = "handoff inbox"
    list_id = "handoffs"
    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("enter", "resolve", "Resolve", id="resolve"),
        Binding("o", "open", "Node", id="open"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.source = HandoffSource(lambda: self.wapp.now())
        self.loaded = False

    def compose_body(self) -> Iterable[Widget]:
        yield RowList(self.source, HANDOFF_COLUMNS, id="handoffs")
        yield InfoLine(id="info")

    def on_mount(self) -> None:
        hub = self.wapp.hub
        hub.subscribe(self, hub.events_changed, self._events_changed)
        self.row_list.reset()
        self.update_info()
        self.reload()

    def read(self) -> Sequence[HandoffView]:
        return self.wapp.feed.read(lambda ledger: ledger.handoffs())

    def _events_changed(self, change: EventsChanged) -> None:
        if any(e.kind == HandoffOpened.KIND for e in change.events):
            self.reload()  # one opened

    def show(self, items: Sequence[HandoffView]) -> None:
        self.source.items = tuple(items)
        self.loaded = True
        self.row_list.reset()
        self.update_info()

    def selected_handoff(self) -> HandoffView | None:
        c = self.row_list.cursor
        return self.source.items[c] if 0 <= c < len(self.source.items) else None

    def selected_task(self) -> str | None:
        h = self.selected_handoff()
        return h.task_id if h else None

    def selected_node(self) -> str | None:
        h = self.selected_handoff()
        return h.node if h else None

    def action_back(self) -> None:
        self.wapp.pop_screen()

    def action_open(self) -> None:
        h = self.selected_handoff()
        if h is not None:
            self.wapp.open_node(h.task_id, h.node)

    def action_resolve(self) -> None:
        """The resolution screen (console/screens/resolve.py); the list reloads when it closes."""
        from .resolve import ResolveHandoffScreen

        h = self.selected_handoff()
        if h is not None:
            self.wapp.push_screen(ResolveHandoffScreen(h.id), lambda _done: self.reload())

    def on_row_list_highlighted(self) -> None:
        self.update_info()

    def update_info(self) -> None:
        out = Text(no_wrap=True, overflow="ellipsis")
        h = self.selected_handoff()
        if not self.loaded:
            out.append("loading…", style="dim")
        elif h is None:
            out.append("no open handoffs", style="dim")
        else:
            opts = ", ".join(f"{safe_line(o.get('id'))}={safe_line(o.get('label'))}" for o in h.options)
            out.append(f"options: {opts or '—'}")
            if h.recommendation:
                out.append(f"  recommended: {safe_line(h.recommendation)}", style="bold")
        self.query_one("#info", InfoLine).update(out)


class RunsScreen(LoadedListScreen[RunSummary]):
    header = "runs and recovery"
    list_id = "runs"
    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("enter", "recover", "Recover", id="recover-run"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.source = RunSource()
        self.loaded = False

    def compose_body(self) -> Iterable[Widget]:
        yield RowList(self.source, RUN_COLUMNS, id="runs")
        yield InfoLine(id="info")

    def on_mount(self) -> None:
        self.row_list.reset()
        self.update_info()
        self.reload()

    def read(self) -> Sequence[RunSummary]:
        return list_runs(self.wapp.runs_dir)

    def show(self, items: Sequence[RunSummary]) -> None:
        self.source.items = tuple(items)
        self.loaded = True
        self.row_list.reset()
        self.update_info()

    def selected_run(self) -> RunSummary | None:
        c = self.row_list.cursor
        return self.source.items[c] if 0 <= c < len(self.source.items) else None

    def selected_task(self) -> str | None:
        r = self.selected_run()
        return r.task_id if r else None

    def selected_node(self) -> str | None:
        r = self.selected_run()
        return r.node_key if r else None

    def action_back(self) -> None:
        self.wapp.pop_screen()

    def action_recover(self) -> None:
        """The recovery wizard (console/screens/recovery.py) for the selected run."""
        from .recovery import RecoveryWizardScreen

        r = self.selected_run()
        if r is not None:
            self.wapp.push_screen(RecoveryWizardScreen(r.name), lambda _rec: self.reload())

    def update_info(self) -> None:
        out = Text(no_wrap=True, overflow="ellipsis")
        if not self.loaded:
            out.append("loading…", style="dim")
        elif not self.source.items:
            out.append(f"no runs in {safe_line(self.wapp.runs_dir)}", style="dim")
        else:
            out.append(f"{len(self.source.items)} runs in {safe_line(self.wapp.runs_dir)}", style="dim")
        self.query_one("#info", InfoLine).update(out)

"""The task's mind: the Mind screen (``m`` on a task's graph) and the memory inbox (``M``).

**Mind** — one list, in sections: the requirements with the nodes serving each (and those serving
none), the drift and alignment counters, the constraints, the conclusions and the rejected paths
(newest first, each with its reason, time and source), the plan history (every version: trigger,
who, in-flight handling, the diff), the memories the task proposed. The full text of the selected
line is under the list. On a conclusion or a rejected path, ``r`` opens the rewind dialog of the
node that produced it (the app's rewind key acts on :meth:`MindScreen.selected_node`) and
``enter`` its node detail; ``1``-``6`` jump to a section.

**Memory inbox** — the memories agents proposed, pending first: ``y`` confirm, ``x`` reject (or
retract a confirmed one), each through the action dialog (plan → preview → reason → ``ctrl+s``),
audited like every operator action.

Both read in a thread worker (``feed.read``) and read again when the ledger changes: each
subscribes to the app's feed hub on mount (console/hub.py) — the Mind screen to its task's rows,
the inbox to the journal's memory events; everything agent-written goes through the one sanitiser
(console/mind_view.py builds the lines).
"""

from __future__ import annotations

from typing import Callable, Generic, Iterable, Sequence, TypeVar

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from store import Ledger
from store.actions.memory import ConfirmMemoryParams, RejectMemoryParams
from store.errors import WardenError
from store.storage.events import MemoryProposed, OperatorActed
from store.mind.views import MemoryView, MindView

from ..dialogs.memory import DECISION_DIALOGS
from ..glyphs import READ_ONLY_NOTICE, age_label
from ..hub import EventsChanged, TasksChanged
from ..mind_view import MEMORY_STYLES, SECTIONS, MindRow, memory_line, mind_rows
from ..text import safe_line
from ..widgets import Column, InfoLine, RowList
from ..widgets.rowlist import Cell, RowSource
from .base import ListScreen

MIND_COLUMNS = [Column("", 10, shrink=6), Column("", 20, flex=True)]
MEMORY_COLUMNS = [
    Column("ID", 5, align="right"),
    Column("STATUS", 10),
    Column("SCOPE", 12, priority=2),
    Column("FROM", 18, priority=1),
    Column("AGE", 8, priority=1),
    Column("MEMORY", 20, flex=True),
]
MEMORY_EVENTS = frozenset({MemoryProposed.KIND, OperatorActed.kind_of(ConfirmMemoryParams.action),
                           OperatorActed.kind_of(RejectMemoryParams.action)})
DETAIL_LINES = 4  # lines of the selected row's full text under the list


_Data = TypeVar("_Data")


class MindRead(Message, Generic[_Data]):
    def __init__(self, key: str, data: _Data | None, error: str | None = None) -> None:
        super().__init__()
        self.key, self.data, self.error = key, data, error


class MindSource:
    def __init__(self) -> None:
        self.rows: Sequence[MindRow] = ()

    def row_count(self) -> int:
        return len(self.rows)

    def row_cells(self, i: int) -> list[Cell]:
        return list(self.rows[i].cells)


class _ReadScreen(ListScreen, Generic[_Data]):
    """A list screen (its rows, the selection's full text, the info line) that reads its data in a
    thread worker and reads again when asked."""

    read_key = ""
    columns: list[Column] = []
    source: RowSource
    loaded = False  # the first read arrived

    def compose_body(self) -> Iterable[Widget]:
        yield RowList(self.source, self.columns, id=self.list_id)
        yield Static(Text(""), markup=False, id="mind-detail")
        yield InfoLine(id="info")

    def on_mount(self) -> None:
        self.subscribe_feed()
        self.row_list.reset()
        self.update_info()
        self.reload()

    def subscribe_feed(self) -> None:
        """Subscribe to the feed hub for what makes this screen read again (console/hub.py)."""

    def on_row_list_highlighted(self) -> None:
        self.update_info()

    def read(self, ledger: Ledger) -> _Data:
        raise NotImplementedError

    def show(self, data: _Data) -> None:
        raise NotImplementedError

    def reload(self) -> None:
        self._read(self.read_key, self.read)

    @work(thread=True, exclusive=True, exit_on_error=False, group="mind")
    def _read(self, key: str, fn: Callable[[Ledger], _Data]) -> None:
        try:
            data = self.wapp.feed.read(fn)
        except WardenError as e:
            self.post_message(MindRead(key, None, error=str(e)))
        else:
            self.post_message(MindRead(key, data))

    @on(MindRead)
    def _read_done(self, msg: MindRead[_Data]) -> None:
        msg.stop()
        if msg.key != self.read_key:
            return
        if msg.data is None:
            self.query_one("#info", InfoLine).update(
                Text("cannot read: " + safe_line(msg.error or "unknown error"), style="bold"))
            return
        self.show(msg.data)

    def action_back(self) -> None:
        self.wapp.pop_screen()


class MindScreen(_ReadScreen[MindView]):
    """A task's mind (see the module's docstring)."""

    list_id = "mind"
    columns = MIND_COLUMNS
    source: MindSource
    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("m", "back", "Close", show=False),
        Binding("enter", "open", "Node", id="open"),
        *[Binding(str(i + 1), f"section({i})", f"Section {name}", show=False) for i, name in enumerate(SECTIONS)],
    ]

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.read_key = f"mind:{task_id}"
        self.header = f"mind of task {safe_line(task_id)}"
        self.source = MindSource()
        self.mind: MindView | None = None

    def subscribe_feed(self) -> None:
        hub = self.wapp.hub
        hub.subscribe(self, hub.tasks_changed, self._tasks_changed)

    def _tasks_changed(self, change: TasksChanged) -> None:
        if self.task_id in change.task_ids and not change.analysis:
            self.reload()  # its task changed: its mind may have (a conclusion, a plan version)

    def read(self, ledger: Ledger) -> MindView:
        return ledger.mind(self.task_id)

    def show(self, data: MindView) -> None:
        keep = self.selected_row()
        self.mind = data
        self.loaded = True
        self.source.rows = tuple(mind_rows(data, self.wapp.now()))
        self.row_list.reset()
        if keep is not None:  # stay on the same line when it is still there
            for i, r in enumerate(self.source.rows):
                if r.cells == keep.cells and r.section == keep.section:
                    self.row_list.cursor = i
                    break
        self.update_info()

    def selected_row(self) -> MindRow | None:
        c = self.row_list.cursor
        return self.source.rows[c] if 0 <= c < len(self.source.rows) else None

    def selected_task(self) -> str | None:
        return self.task_id

    def selected_node(self) -> str | None:
        row = self.selected_row()
        return row.node if row is not None else None

    def action_open(self) -> None:
        node = self.selected_node()
        if node:
            self.wapp.open_node(self.task_id, node)
        else:
            self.wapp.notify("select a conclusion or a rejected path to open its node", severity="warning")

    def action_section(self, i: int) -> None:
        name = SECTIONS[i]
        for n, r in enumerate(self.source.rows):
            if r.section == name:
                self.row_list.cursor = n
                return

    def update_info(self) -> None:
        detail = self.query_one("#mind-detail", Static)
        info = Text(no_wrap=True, overflow="ellipsis")
        row = self.selected_row()
        if not self.loaded:
            info.append("reading the task's mind…", style="dim")
            detail.update(Text(""))
        else:
            detail.update(row.detail if row is not None and row.detail is not None else Text(""))
            if row is not None and row.node:
                info.append("r", style="bold")
                info.append(f": rewind {safe_line(row.node, limit=40)} · ")
                info.append("enter", style="bold")
                info.append(": its detail · ")
            info.append("1-6", style="bold")
            info.append(": requirements, constraints, conclusions, rejected, plans, memories", style="dim")
        self.query_one("#info", InfoLine).update(info)


class MemorySource:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.items: Sequence[MemoryView] = ()

    def row_count(self) -> int:
        return len(self.items)

    def row_cells(self, i: int) -> list[Cell]:
        m = self.items[i]
        style = MEMORY_STYLES.get(m.status, "")
        scope = f"kind {m.kind}" if m.scope == "kind" else "workflow"
        return [
            (f"#{safe_line(m.id)}", "dim"), (safe_line(m.status, limit=10), style), (safe_line(scope, limit=40), "dim"),
            (safe_line(f"{m.task_id}/{m.node}", limit=80), ""), (age_label(self.clock() - m.proposed_at), "dim"),
            (safe_line(m.text, limit=300), ""),
        ]


class MemoryInboxScreen(_ReadScreen[Sequence[MemoryView]]):
    """The memories agents proposed: confirm or reject (see the module's docstring)."""

    header = "memory inbox"
    list_id = "memories"
    read_key = "memories"
    columns = MEMORY_COLUMNS
    source: MemorySource
    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("M", "back", "Close", show=False),
        Binding("y", "decide('confirm')", "Confirm", id="confirm-memory"),
        Binding("x", "decide('reject')", "Reject", id="reject-memory"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.source = MemorySource(lambda: self.wapp.now())

    def subscribe_feed(self) -> None:
        hub = self.wapp.hub
        hub.subscribe(self, hub.events_changed, self._events_changed)

    def _events_changed(self, change: EventsChanged) -> None:
        if change.reshaped or any(e.kind in MEMORY_EVENTS for e in change.events):
            self.reload()  # proposed by an agent, decided by someone (here or elsewhere)

    def read(self, ledger: Ledger) -> Sequence[MemoryView]:
        found = ledger.memories()
        order = {"pending": 0, "confirmed": 1, "rejected": 2}
        return sorted(found, key=lambda m: (order.get(m.status, 3), -int(m.id)))

    def show(self, data: Sequence[MemoryView]) -> None:
        keep = self.selected_memory()
        self.source.items = tuple(data)
        self.loaded = True
        self.row_list.reset()
        if keep is not None:
            for i, m in enumerate(self.source.items):
                if m.id == keep.id:
                    self.row_list.cursor = i
                    break
        self.update_info()

    def selected_memory(self) -> MemoryView | None:
        c = self.row_list.cursor
        return self.source.items[c] if 0 <= c < len(self.source.items) else None

    def selected_task(self) -> str | None:
        m = self.selected_memory()
        return m.task_id if m else None

    def selected_node(self) -> str | None:
        m = self.selected_memory()
        return m.node if m else None

    def action_decide(self, decision: str) -> None:
        """The memory dialog (console/dialogs/memory.py): plan, preview, reason, apply."""
        if self.wapp.read_only:
            self.wapp.notify(READ_ONLY_NOTICE, severity="warning")
            return
        m = self.selected_memory()
        if m is None:
            self.wapp.notify("no memory selected", severity="warning")
            return
        self.wapp.push_screen(DECISION_DIALOGS[decision](m.task_id, m.id), lambda _done: self.reload())

    def update_info(self) -> None:
        detail = self.query_one("#mind-detail", Static)
        info = Text(no_wrap=True, overflow="ellipsis")
        m = self.selected_memory()
        if not self.loaded:
            info.append("reading the memories…", style="dim")
        elif m is None:
            info.append("no memories proposed: an agent proposes one with ledger.propose_memory", style="dim")
        else:
            pending = sum(1 for x in self.source.items if x.status == "pending")
            info.append(f"{pending} waiting for a person · ", style="dim")
            info.append("y", style="bold")
            info.append(": confirm (later claims get it) · ")
            info.append("x", style="bold")
            info.append(": reject")
        detail.update(memory_line(m, self.wapp.now()) if m is not None else Text(""))
        self.query_one("#info", InfoLine).update(info)


__all__ = ["MemoryInboxScreen", "MindScreen"]

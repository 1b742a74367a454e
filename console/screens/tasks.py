"""The first screen: every task with status, progress, P80, budget, signals, handoffs.

At fleet size (thousands of tasks) a summary line heads the list (agents alive, tasks
active, alarms, open handoffs, spend rate: ``TaskListModel.summary_text``); ``s`` sorts by urgency
(alarms, handoffs, budget, P80 — ``console.tasklist``) and back to creation order; ``/`` filters.
The cursor follows the selected task when rows move (a new alarm lifts a task to the top)."""

from __future__ import annotations

from typing import Iterable, Protocol, Sequence

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Input

from store.reading.cli_json import budget_json

from ..glyphs import pause_label, task_status_label
from ..follow import Pending
from ..hub import TasksChanged
from ..model import TASK_COLUMNS, signal_text
from ..tasklist import TaskRow
from ..widgets.rowlist import Cell
from ..text import safe_line
from ..widgets import InfoLine, RowList, StatusBar
from .base import ListScreen


class TaskRows(Protocol):
    """What the task list screen reads of its rows: a ledger's ``TaskListModel``, or every open
    ledger's (``console.merged_tasklist.MergedTaskList``)."""

    @property
    def filter_text(self) -> str: ...
    @property
    def order(self) -> str: ...
    def row_count(self) -> int: ...
    def row_cells(self, pos: int) -> Sequence[Cell]: ...
    def row_at(self, pos: int) -> TaskRow | None: ...
    def any_tasks(self) -> bool: ...
    def set_order(self, order: str) -> None: ...
    def set_filter(self, text: str) -> None: ...
    def summary_text(self) -> str: ...


class TaskListScreen(ListScreen):
    header = "tasks"
    list_id = "tasks"

    BINDINGS = [
        Binding("enter", "open", "Open", id="open"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("s", "sort", "Sort", id="sort"),
    ]

    selected: str | None = None  # the task under the cursor (the cursor follows it when rows move)

    def list_model(self) -> "TaskRows":
        """The rows this list shows (every ledger's, on the all-ledgers list: console/merged_tasklist.py)."""
        return self.wapp.tasks_model

    def compose_body(self) -> Iterable[Widget]:
        self.summary_line = InfoLine(id="summary")
        yield self.summary_line
        yield RowList(self.list_model(), TASK_COLUMNS, id="tasks")
        yield InfoLine(id="info")
        yield self._filter_input("filter tasks by id, title, status or origin")

    def on_mount(self) -> None:
        hub = self.wapp.hub
        hub.subscribe(self, hub.tasks_changed, self._tasks_changed)
        hub.subscribe(self, hub.applied, self._applied)
        hub.show(self)  # the tasks on screen get their estimates and signals
        self.row_list.reset()
        self.update_info()
        self.update_summary()

    def _tasks_changed(self, change: TasksChanged) -> None:
        lst = self.row_list
        model = self.wapp.tasks_model
        if change.reshaped:
            lst.reset()
        else:
            # the changed tasks' lines are built again wherever they are; rows that only shifted
            # (a row moved past them) keep theirs and are drawn at their new place
            lst.forget(model.index[t] for t in change.task_ids if t in model.index)
            rows = list(change.rows)
            if change.span is not None:
                seen = lst.visible_range()
                rows.extend(range(max(change.span.start, seen.start), min(change.span.stop, seen.stop)))
            lst.repaint(rows)
        if change.reshaped or change.span is not None:
            self._follow_selection()
            self.update_info()
        elif lst.cursor in change.rows:
            self.update_info()
        if change.analysis:  # alarms moved (a delta's own changes: _applied, once per delta)
            self.update_summary()

    def _applied(self, _p: Pending) -> None:
        self.update_summary()

    def _follow_selection(self) -> None:
        """Keep the cursor on the selected task when rows moved (if it is still shown)."""
        if self.selected is None:
            return
        pos = self.wapp.tasks_model.position_of_task(self.selected)
        if pos is not None and pos != self.row_list.cursor:
            self.row_list.cursor = pos

    def tick(self) -> None:
        super().tick()
        self.update_summary()  # agents whose lease ended, the spend rate's minute

    def update_summary(self) -> None:
        self.summary_line.update(self.list_model().summary_text())

    def action_sort(self) -> None:
        model = self.list_model()
        self.row_list.refilter(lambda: model.set_order("created" if model.order == "urgency" else "urgency"))
        bar = self.query_one(StatusBar)
        bar.title = safe_line("tasks by urgency" if model.order == "urgency" else self.header)
        bar.update_from_app()
        self.update_info()

    def tasks_on_screen(self) -> list[str]:
        model = self.list_model()
        rows = (model.row_at(pos) for pos in self.row_list.visible_range())
        return [r.view.task_id for r in rows if r is not None]

    def graph_on_screen(self) -> None:
        return None

    def selected_task(self) -> str | None:
        row = self.list_model().row_at(self.row_list.cursor)
        return row.view.task_id if row else None

    def action_open(self) -> None:
        task = self.selected_task()
        if task is not None:
            self.wapp.open_graph(task)

    @on(RowList.Highlighted)
    def _highlighted(self) -> None:
        self.update_info()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.row_list.refilter(lambda: self.list_model().set_filter(event.value))
        self.update_info()

    def row_ledger(self) -> Text:
        """What the line under the list says first of the selected row: nothing with one ledger."""
        return Text()

    def update_info(self) -> None:
        model = self.list_model()
        row = model.row_at(self.row_list.cursor)
        info = Text(no_wrap=True, overflow="ellipsis")
        if not model.any_tasks():
            info.append("no tasks yet: start an agent, or run `warden demo`" if self.wapp.loaded else "loading…",
                        style="dim")
        elif row is None:
            info.append(f"no task matches {safe_line(model.filter_text)!s}", style="dim")
        else:
            t = row.view
            self.selected = t.task_id
            info.append(self.row_ledger())
            info.append(safe_line(t.task_id), style="bold")
            info.append(f"  {task_status_label(t.status)}")
            if t.origin == "otel":  # warden otel receive: spans only, nothing here can stop the agent
                info.append("  via otel: watched only, a park cannot stop it", style="dim")
            elif t.origin != "python":
                info.append(f"  via {safe_line(t.origin, limit=32)}", style="dim")
            if t.status == "parked" and t.park_reason:
                info.append(f"  parked: {safe_line(t.park_reason, limit=60)}")
            b = budget_json(t)
            if t.status == "aborted" or b["gate"] == "stop":
                info.append("  o: report (what it leaves behind)", style="bold")
            pause = pause_label(b)
            if pause:
                info.append("  " + pause)
            if row.signals:
                info.append("  " + signal_text(row.signals[0]))
            elif t.title:
                info.append("  " + safe_line(t.title))
        if model.filter_text:
            info.append(f"   [/ {safe_line(model.filter_text)}]", style="dim")

        self.query_one("#info", InfoLine).update(info)

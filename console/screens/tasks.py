"""The first screen: every task with status, progress, P80, budget, signals, handoffs."""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Input

from store.report import budget_json

from ..glyphs import pause_label, task_status_label
from ..model import TASK_COLUMNS, signal_text
from ..text import safe_line
from ..widgets import InfoLine, RowList
from .base import ListScreen


class TaskListScreen(ListScreen):
    header = "tasks"
    list_id = "tasks"

    BINDINGS = [
        Binding("enter", "open", "Open", id="open"),
        Binding("slash", "filter", "Filter", id="filter"),
    ]

    def compose_body(self) -> Iterable[Widget]:
        yield RowList(self.wapp.tasks_model, TASK_COLUMNS, id="tasks")
        yield InfoLine(id="info")
        yield self._filter_input("filter tasks by id, title or status")

    def on_mount(self) -> None:
        self.row_list.reset()
        self.update_info()

    def selected_task(self) -> str | None:
        row = self.wapp.tasks_model.row_at(self.row_list.cursor)
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
        self.wapp.tasks_model.set_filter(event.value)
        self.row_list.reset()
        self.update_info()

    def update_info(self) -> None:
        model = self.wapp.tasks_model
        row = model.row_at(self.row_list.cursor)
        info = Text(no_wrap=True, overflow="ellipsis")
        if not model.rows:
            info.append("no tasks yet: start an agent, or run `warden demo`" if self.wapp.loaded else "loading…",
                        style="dim")
        elif row is None:
            info.append(f"no task matches {safe_line(model.filter_text)!s}", style="dim")
        else:
            t = row.view
            info.append(safe_line(t.task_id), style="bold")
            info.append(f"  {task_status_label(t.status)}")
            if t.origin != "python":
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

"""A task's report (``o``): what it leaves behind — the best result so far, what is unfinished,
the budget per gate, open handoffs, effects never confirmed or still to compensate. The same text
as ``warden report`` (console/report_view.py); read in a thread worker, refreshed when the task
changes. Meant above all for a task at the stop gate or aborted, where it is the deliverable;
available for any task.
"""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from store.errors import WardenError
from store.jsontypes import JsonMapping
from store.reading.task_report import task_report

from ..hub import TasksChanged
from ..report_view import report_text
from ..text import safe_line
from .base import WardenScreen


class ReportRead(Message):
    def __init__(self, task_id: str, data: JsonMapping | None, error: str | None = None) -> None:
        super().__init__()
        self.task_id, self.data, self.error = task_id, data, error


class TaskReportScreen(WardenScreen):
    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("o", "back", "Close", show=False),
    ]

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.header = f"report of task {safe_line(task_id)}"
        self.data: JsonMapping | None = None

    def compose_body(self) -> Iterable[Widget]:
        with VerticalScroll(id="report-scroll"):
            yield Static(Text("reading the report…", style="dim"), markup=False, id="report")

    def on_mount(self) -> None:
        self.query_one("#report-scroll").focus()
        hub = self.wapp.hub
        hub.subscribe(self, hub.tasks_changed, self._tasks_changed)
        self.reload()

    def _tasks_changed(self, change: TasksChanged) -> None:
        if self.task_id in change.task_ids and not change.analysis:
            self.reload()  # its task changed: what it leaves behind may have too

    def selected_task(self) -> str | None:
        return self.task_id

    def reload(self) -> None:
        self._read(self.task_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="report")
    def _read(self, task_id: str) -> None:
        try:
            data = self.wapp.feed.read(lambda ledger: task_report(ledger, task_id))
        except WardenError as e:
            self.post_message(ReportRead(task_id, None, error=str(e)))
        else:
            self.post_message(ReportRead(task_id, data))

    @on(ReportRead)
    def _report_read(self, msg: ReportRead) -> None:
        msg.stop()
        if msg.task_id != self.task_id:
            return
        out = self.query_one("#report", Static)
        if msg.data is None:
            out.update(Text("cannot read the report: " + safe_line(msg.error or "unknown error"), style="bold"))
            return
        self.data = msg.data
        out.update(report_text(msg.data))

    def action_back(self) -> None:
        self.wapp.pop_screen()


__all__ = ["TaskReportScreen"]

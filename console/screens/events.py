"""The event log: the journal's tail, follow mode, filter by layer and task."""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.widget import Widget

from store.views import EventView

from ..event_log import EVENT_COLUMNS, LAYERS
from ..hub import EventsChanged
from ..text import safe_line
from ..widgets import InfoLine, RowList
from .base import ListScreen


class EventLogScreen(ListScreen):
    list_id = "events"
    header = "event log"

    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("f", "follow", "Follow", id="follow"),
        Binding("l", "layer", "Layer", id="layer"),
        Binding("t", "task", "Task", id="task"),
        Binding("enter", "open", "Open", id="open"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.follow = True

    def compose_body(self) -> Iterable[Widget]:
        yield InfoLine(id="info")
        yield RowList(self.wapp.events_model, EVENT_COLUMNS, id="events")

    def on_mount(self) -> None:
        hub = self.wapp.hub
        hub.subscribe(self, hub.events_changed, self._events_changed)
        self.row_list.reset()
        self._to_end()
        self.update_info()

    def _events_changed(self, change: EventsChanged) -> None:
        if change.added or change.reshaped:
            self.data_changed([], change.reshaped)

    def _to_end(self) -> None:
        lst = self.row_list
        if lst.row_count:
            lst.cursor = lst.row_count - 1

    def data_changed(self, rows: list[int], reshaped: bool) -> None:
        """Events were added (or the tail reloaded): the list grows; follow mode keeps to its end."""
        self.row_list.reset()
        if self.follow:
            self._to_end()
        self.update_info()

    @on(RowList.Highlighted)
    def _moved(self, event: RowList.Highlighted) -> None:
        # Moving up pauses follow; `f` resumes. A highlight the list posted for a row that is no
        # longer the cursor is stale (follow moved on to the new last row while it was queued: on
        # a busy ledger, opening the log paused follow at once).
        lst = self.row_list
        if self.follow and event.index == lst.cursor and event.index < lst.row_count - 1:
            self.follow = False
            self.update_info()

    def action_back(self) -> None:
        self.wapp.pop_screen()

    def action_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self._to_end()
        self.update_info()

    def action_layer(self) -> None:
        m = self.wapp.events_model
        order = (None, *LAYERS)
        m.set_filter(layer=order[(order.index(m.layer) + 1) % len(order)])
        self.row_list.reset()
        self._to_end()
        self.update_info()

    def action_task(self) -> None:
        """Filter to the selected event's task; again to show every task."""
        m = self.wapp.events_model
        if m.task_id is not None:
            m.set_filter(task_id=None)
        else:
            e = self.selected_event()
            if e is None or e.task_id is None:
                return
            m.set_filter(task_id=e.task_id)
        self.row_list.reset()
        self._to_end()
        self.update_info()

    def selected_event(self) -> EventView | None:
        m = self.wapp.events_model
        c = self.row_list.cursor
        return m.rows[c] if 0 <= c < len(m.rows) else None

    def selected_task(self) -> str | None:
        e = self.selected_event()
        return e.task_id if e else None

    def selected_node(self) -> str | None:
        e = self.selected_event()
        return e.node if e else None

    def action_open(self) -> None:
        e = self.selected_event()
        if e is not None and e.task_id and e.node:
            self.wapp.open_node(e.task_id, e.node)

    def update_info(self) -> None:
        m = self.wapp.events_model
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append("follow: " + ("on" if self.follow else "paused (f)"), style="bold" if self.follow else "")
        out.append(f"   layer: {m.layer or 'all'} (l)   task: {safe_line(m.task_id) if m.task_id else 'all'} (t)")
        out.append(f"   {len(m.rows)} events", style="dim")
        self.query_one("#info", InfoLine).update(out)

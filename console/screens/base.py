"""What every console screen shares: the status bar, a filter input, the footer."""

from __future__ import annotations

from typing import Iterable

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input

from store.views import GraphRow

from ..host import ConsoleHost, host_of
from ..text import safe_line
from ..typeahead import TypeAhead, mark, redirect_key
from ..widgets import InfoLine, KeyFooter, RowList, StatusBar


class FilterInput(Input):
    """The `/` filter. Keys type into it; escape leaves it (the filter stays applied)."""

    BINDINGS = [Binding("escape", "leave", "Leave filter", id="leave-filter")]

    def action_leave(self) -> None:
        screen = self.screen
        if not self.value:
            self.display = False
        lst = screen.query(RowList).first(RowList) if screen.query(RowList) else None
        if lst is not None:
            lst.focus()
        else:
            screen.set_focus(None)


class WardenScreen(Screen[object]):
    """Status bar on top, the screen's body, the footer.

    A screen gets its data by subscribing to the app's feed hub on mount (``self.wapp.hub``,
    console/hub.py) and is forgotten there when unmounted (here, for every screen)."""

    header = ""

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name, id, classes)
        self.typeahead = TypeAhead(self)  # takes the keys while its `/` filter opens (console/typeahead.py)

    @property
    def wapp(self) -> ConsoleHost:
        """The app, as screens see it (console/host.py)."""
        return host_of(self)

    def compose(self) -> ComposeResult:
        yield StatusBar(self.header, id="status")
        yield from self.compose_body()
        yield KeyFooter()

    def compose_body(self) -> Iterable[Widget]:
        return ()

    def on_key(self, event: events.Key) -> None:
        """A key typed before a dialog on top of this screen (or this screen's filter) was ready is
        the dialog's (console/typeahead.py), never this screen's."""
        if not redirect_key(self, event):
            mark(self, event)  # the app redirects it if a dialog opens before it gets there

    def on_unmount(self) -> None:
        self.wapp.hub.forget(self)  # every subscription and watch this screen made

    def on_screen_resume(self) -> None:
        """Back on top: what the live widgets left undrawn while a full screen covered this one
        (console/widgets/covered.py)."""
        for lst in self.query(RowList):
            lst.catch_up()
        for line in self.query(InfoLine):
            line.catch_up()
        for bar in self.query(StatusBar):
            bar.catch_up()

    def refresh_status(self) -> None:
        for bar in self.query(StatusBar):
            bar.update_from_app()

    # Hooks the app calls: generic, never screen by screen.
    def tick(self) -> None:
        """Once a second, on the screen on top: time-based figures on screen."""

    def settled(self) -> bool:
        """Nothing this screen reads for itself is still on its way (tests, screenshots)."""
        return True

    def shown_node(self, task_id: str, key: str) -> GraphRow | None:
        """This node as the screen shows it now, if it shows it (no read)."""
        return None

    def selected_task(self) -> str | None:
        return None

    def selected_node(self) -> str | None:
        return None


class ListScreen(WardenScreen):
    """A screen whose body is one RowList, optionally with a `/` filter."""

    list_id = "list"

    @property
    def row_list(self) -> RowList:
        return self.query_one(f"#{self.list_id}", RowList)

    def tick(self) -> None:
        self.row_list.refresh_visible()

    def action_filter(self) -> None:
        """`/`: the filter, and the keys typed right after `/` in its input."""
        inp = self.query_one(FilterInput)
        before = self.focused or self
        inp.display = True
        inp.focus()
        self.typeahead.start(before)

    def _filter_input(self, placeholder: str) -> FilterInput:
        inp = FilterInput(placeholder=safe_line(placeholder), id="filter")
        inp.display = False
        return inp

    def on_show(self) -> None:
        if not isinstance(self.focused, Input):
            self.row_list.focus()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.row_list.focus()

    def data_changed(self, rows: list[int], reshaped: bool) -> None:
        """Repaint the rows a delta touched (all of them when the list's shape changed)."""
        if reshaped:
            self.row_list.reset()
        else:
            self.row_list.rows_changed(rows)
        if reshaped or self.row_list.cursor in rows:  # the line under the list is the selection's
            self.update_info()

    def update_info(self) -> None:
        """The line under the list, about the selected row (screens that have one override it)."""

"""The first screen with several ledgers open: every ledger's tasks in one list (console/merged_tasklist.py).

Each row is marked with its ledger (the LEDGER column; a ledger that is down is marked so on its
rows and named in the summary and the status bar, while the others keep moving). ``l`` shows one
ledger only, then the next, then all again. Opening a row, or any action key on it, opens the
graph or the dialog for that row's ledger: a screen pushed from here is bound to the ledger of the
selected row (``WardenApp.push_screen``; console/sides.py).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Iterable

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget

from ..glyphs import MARKS
from ..merged_tasklist import MergedTaskList, Side, ledger_columns
from ..follow import Pending
from ..hub import TasksChanged
from ..text import safe_line
from ..widgets import InfoLine, RowList, StatusBar
from .tasks import TaskListScreen, TaskRows

if TYPE_CHECKING:
    from ..hub import FeedHub

#: the attribute a pushed screen carries: the ledger side it is bound to (console/sides.py)
SIDE_ATTR = "ledger_side"


class _OnScreen:
    """One ledger's rows on screen, for that ledger's analysis scheduler (``FeedHub.show``)."""

    def __init__(self, screen: "AllTasksScreen", si: int) -> None:
        self.screen = screen
        self.si = si

    def tasks_on_screen(self) -> list[str]:
        return self.screen.tasks_of(self.si)

    def graph_on_screen(self) -> None:
        return None


class AllTasksScreen(TaskListScreen):
    header = "tasks"

    BINDINGS = [
        Binding("l", "switch_ledger", "Ledger", id="switch-ledger"),
    ]

    selected_si: int | None = None  # the selected row's ledger (a row is (ledger, task))

    def __init__(self) -> None:
        super().__init__()
        self.model: MergedTaskList | None = None
        self._shown: list[_OnScreen] = []

    def all_model(self) -> MergedTaskList:
        if self.model is None:
            self.model = MergedTaskList(self._sides())
        return self.model

    def _sides(self) -> list[Side]:
        return list(self.app.every_side())  # type: ignore[attr-defined]  # WardenApp

    def list_model(self) -> TaskRows:
        return self.all_model()

    def compose_body(self) -> Iterable[Widget]:
        self.summary_line = InfoLine(id="summary")
        yield self.summary_line
        model = self.all_model()
        yield RowList(model, ledger_columns(model.sides), id="tasks")
        yield InfoLine(id="info")
        yield self._filter_input("filter tasks by id, title, status or origin")

    def on_mount(self) -> None:
        for si, side in enumerate(self.all_model().sides):
            hub: FeedHub = side.hub
            hub.subscribe(self, hub.tasks_changed, partial(self._side_changed, si))
            hub.subscribe(self, hub.applied, self._applied)
            hub.subscribe(self, hub.status_changed, partial(self._side_status, si))
            shown = _OnScreen(self, si)
            self._shown.append(shown)
            hub.show(shown)
        self._retitle()
        self.row_list.reset()
        self.update_info()
        self.update_summary()

    def on_unmount(self) -> None:
        for si, side in enumerate(self.all_model().sides):
            side.hub.forget(self)
            side.hub.unshow(self._shown[si])

    # ------------------------------------------------------------------ a ledger's changes
    def _side_changed(self, si: int, change: TasksChanged) -> None:
        model = self.all_model()
        if si not in model.shown():  # that ledger is not shown now
            return
        lst = self.row_list
        side_model = model.sides[si].tasks_model
        rows: list[int] = []
        if change.reshaped:
            lst.reset()
        else:
            lst.forget((si, side_model.index[t]) for t in change.task_ids if t in side_model.index)
            if change.span is not None:  # a row moved: every row between shifted, whatever its ledger's
                rows.extend(lst.visible_range())
            rows.extend(p for p in (model.position(si, r) for r in change.rows) if p is not None)
            lst.repaint(rows)
        if change.reshaped or change.span is not None:
            self._follow_selection()
            self.update_info()
        elif lst.cursor in rows:
            self.update_info()
        if change.analysis:
            self.update_summary()

    def _tasks_changed(self, change: TasksChanged) -> None:  # (each ledger's: _side_changed)
        return None

    def _side_status(self, si: int, _: None) -> None:
        """A ledger went down or came back: its rows' mark, the summary, the status bar."""
        self.row_list.reset()
        self.update_summary()
        self.refresh_status()

    def _applied(self, _p: Pending) -> None:
        self.update_summary()

    # ------------------------------------------------------------------ selection
    def _follow_selection(self) -> None:
        if self.selected is None or self.selected_si is None:
            return
        pos = self.all_model().position_of_task(self.selected_si, self.selected)
        if pos is not None and pos != self.row_list.cursor:
            self.row_list.cursor = pos

    def update_info(self) -> None:
        super().update_info()
        model = self.all_model()
        if model.row_at(self.row_list.cursor) is not None:
            self.selected_si = model.side_at(self.row_list.cursor)

    def row_ledger(self) -> Text:
        """The selected row's ledger, first on the line under the list (``⚠`` when it is down)."""
        model = self.all_model()
        si = model.side_at(self.row_list.cursor)
        if si is None:
            return Text()
        side = model.sides[si]
        down = f" {MARKS['signal']}" if side.unavailable else ""
        return Text.assemble(f"{safe_line(side.ledger_name)}{down}", (" · ", "dim"))

    def selected_side(self) -> Side:
        """The ledger side of the selected row (what a screen pushed from here is bound to)."""
        model = self.all_model()
        si = model.side_at(self.row_list.cursor) if self.is_mounted else None
        return model.sides[si if si is not None else (model.only or 0)]

    def tasks_of(self, si: int) -> list[str]:
        """Ledger ``si``'s tasks on screen."""
        model = self.all_model()
        out = []
        for pos in self.row_list.visible_range():
            at = model.locate(pos)
            if at is not None and at[0] == si:
                row = model.sides[si].tasks_model.row_at(at[1])
                if row is not None:
                    out.append(row.view.task_id)
        return out

    def tasks_on_screen(self) -> list[str]:
        return []  # each ledger's scheduler asks its own (_OnScreen)

    # ------------------------------------------------------------------ l: one ledger, all
    def action_switch_ledger(self) -> None:
        """All ledgers → the first only → the next only … → all again."""
        model = self.all_model()
        n = len(model.sides)
        self._show(0 if model.only is None else (model.only + 1 if model.only + 1 < n else None))

    def show_ledger(self, name: str | None) -> bool:
        """Show one ledger (by name) or all (None); False when no ledger has that name."""
        model = self.all_model()
        if name is None:
            self._show(None)
            return True
        found = [i for i, s in enumerate(model.sides) if s.ledger_name == name]
        if found:
            self._show(found[0])
        return bool(found)

    def _show(self, only: int | None) -> None:
        """Show ledger ``only``'s rows (every ledger's: None); the cursor stays on its row if that
        is still shown, else on the row that took its place (``RowList.refilter``)."""
        model = self.all_model()

        def narrow(to: int | None) -> None:
            model.only = to

        if model.only is not None and only is not None:
            # one ledger to another: by way of every ledger's rows, so that the row taking the
            # selected one's place is its neighbour in the merged order
            self.row_list.refilter(partial(narrow, None))
        self.row_list.refilter(partial(narrow, only))
        self._retitle()
        self.update_info()
        self.update_summary()

    def action_sort(self) -> None:
        super().action_sort()
        self._retitle()

    def _retitle(self) -> None:
        model = self.all_model()
        bar = self.query_one(StatusBar)
        title = model.title()
        bar.title = safe_line(title + (" by urgency" if model.order == "urgency" else ""))
        bar.update_from_app()


__all__ = ["AllTasksScreen", "SIDE_ATTR"]

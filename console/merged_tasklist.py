"""The task list of several ledgers at once: every open ledger's task list model, shown as one.

Each ledger keeps its own :class:`~console.tasklist.TaskListModel` (its hub's: a change costs what it
costs with one ledger); :class:`MergedTaskList` shows their rows merged in one order, with a LEDGER
column in front: each ledger's rows keep their order (the order and the filter all share), and
between ledgers the sort keys decide — in urgency order the most urgent task of any ledger comes
first; in creation order the ledgers' rows alternate (each one's first task, then each one's
second…); equal keys go by ledger. Nothing is copied or re-sorted: a row's place is its place in
its own ledger plus, for each other ledger, a bisection of that ledger's sorted keys (finding the
row at a place, a binary search over those), a few microseconds a row drawn; the places found are
kept until a ledger's order moves (``keys_version``: in creation order, only a new task or a new
filter), so a row drawn again, the cursor and the once-a-second refresh look nothing up. A row's identity is
(ledger, task): task ids may be the same in two ledgers. ``only`` narrows the list to one ledger
(``l`` on the task list; the k9s "context").
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Hashable, Protocol, Sequence

from .glyphs import MARKS
from .model import TASK_COLUMNS
from .tasklist import TaskListModel, TaskRow
from .text import safe_line
from .widgets.rowlist import Cell, Column

if TYPE_CHECKING:
    from .hub import FeedHub


LOCATED_MAX = 4096  # places remembered at most (a long scroll forgets and finds again)


class Side(Protocol):
    """A ledger as the list reads it (the app for the first one, ``console.sides.LedgerSide``)."""

    ledger_name: str
    hub: "FeedHub"

    @property
    def tasks_model(self) -> TaskListModel: ...
    @property
    def unavailable(self) -> str | None: ...


def ledger_columns(sides: Sequence[Side]) -> list[Column]:
    width = max([6, *(len(s.ledger_name) + 2 for s in sides)])
    return [Column("LEDGER", width, shrink=4), *TASK_COLUMNS]


class MergedTaskList:
    """Every ledger's task rows as one list (see the module's docstring)."""

    def __init__(self, sides: Sequence[Side]) -> None:
        self.sides = list(sides)
        self.only: int | None = None  # one ledger's rows only (its index), or every ledger's
        self._located: dict[int, tuple[int, int] | None] = {}  # position → (ledger, its position)
        self._located_at: tuple[int | None, ...] = ()  # the orders they were found in (``only``, each model's)

    # ------------------------------------------------------------------ which rows
    def shown(self) -> list[int]:
        """The ledgers whose rows are shown, by index."""
        return list(range(len(self.sides))) if self.only is None else [self.only]

    def _rank(self, si: int, j: int) -> int:
        """The position, among every shown ledger's rows, of ledger ``si``'s row at its position ``j``."""
        key = self.sides[si].tasks_model.display_keys()[j]
        rank = j
        for t in self.shown():
            if t != si:
                keys = self.sides[t].tasks_model.display_keys()
                rank += bisect_right(keys, key) if t < si else bisect_left(keys, key)
        return rank

    def locate(self, pos: int) -> tuple[int, int] | None:
        """(ledger index, its position) of the row shown at ``pos``: the one whose rank is ``pos``
        (a binary search in each ledger's keys; a rank costs one bisection per other ledger),
        remembered until an order moves."""
        if pos < 0:
            return None
        at = (self.only, *(x for s in self.sides for x in (id(s.tasks_model), s.tasks_model.keys_version)))
        if at != self._located_at:
            self._located.clear()
            self._located_at = at
        if pos in self._located:
            return self._located[pos]
        found = self._search(pos)
        if len(self._located) >= LOCATED_MAX:
            self._located.clear()
        self._located[pos] = found
        return found

    def _search(self, pos: int) -> tuple[int, int] | None:
        for si in self.shown():
            n = len(self.sides[si].tasks_model.display_keys())
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi) // 2
                if self._rank(si, mid) < pos:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < n and self._rank(si, lo) == pos:
                return si, lo
        return None

    def row_count(self) -> int:
        return sum(self.sides[i].tasks_model.row_count() for i in self.shown())

    def row_at(self, pos: int) -> TaskRow | None:
        at = self.locate(pos)
        return None if at is None else self.sides[at[0]].tasks_model.row_at(at[1])

    def side_at(self, pos: int) -> int | None:
        at = self.locate(pos)
        return None if at is None else at[0]

    def row_key(self, pos: int) -> Hashable:
        """(ledger index, the row's number in its ledger): a line survives rows moving around it."""
        at = self.locate(pos)
        if at is None:
            return -1 - pos
        return at[0], self.sides[at[0]].tasks_model.row_key(at[1])

    def position(self, si: int, local: int) -> int | None:
        """Where ledger ``si``'s row at its position ``local`` is shown (None: that ledger is not)."""
        return self._rank(si, local) if si in self.shown() else None

    def position_of_key(self, key: Hashable) -> int | None:
        """Where the row ``row_key`` named is shown now (None: not shown, or its ledger is not)."""
        if not isinstance(key, tuple):
            return None
        si, row = key
        local = self.sides[si].tasks_model.position_of(row)
        return None if local is None else self.position(si, local)

    def position_of_task(self, si: int, task_id: str) -> int | None:
        local = self.sides[si].tasks_model.position_of_task(task_id)
        return None if local is None else self.position(si, local)

    def row_cells(self, pos: int) -> list[Cell]:
        at = self.locate(pos)
        if at is None:
            return []
        side = self.sides[at[0]]
        name = safe_line(side.ledger_name)
        mark: Cell = (f"{name} {MARKS['signal']}", "alarm") if side.unavailable else (name, "dim")
        return [mark, *side.tasks_model.row_cells(at[1])]

    # ------------------------------------------------------------------ order, filter, summary
    def set_order(self, order: str) -> None:
        for s in self.sides:
            s.tasks_model.set_order(order)

    def set_filter(self, text: str) -> None:
        for s in self.sides:
            s.tasks_model.set_filter(text)

    @property
    def order(self) -> str:
        return self.sides[0].tasks_model.order

    @property
    def filter_text(self) -> str:
        return self.sides[0].tasks_model.filter_text

    def any_tasks(self) -> bool:
        return any(s.tasks_model.any_tasks() for s in self.sides)

    def summary_text(self) -> str:
        """One line: the shown ledgers' agents, tasks active (and parked), alarms, open handoffs;
        then each ledger that is down."""
        now = self.sides[0].tasks_model.clock()
        alive = active = parked = alarms = handoffs = 0
        down = []
        for i in self.shown():
            side = self.sides[i]
            m = side.tasks_model
            alive += m.agents.count(now)
            active += m.summary.by_status.get("active", 0)
            parked += m.summary.by_status.get("parked", 0)
            alarms += m.summary.alarms
            handoffs += m.summary.handoffs
            if side.unavailable:
                down.append(side.ledger_name)
        parts = [f"{alive} agent{'s' if alive != 1 else ''}", f"{active} active"]
        if parked:
            parts.append(f"{parked} parked")
        parts.append(f"{MARKS['signal']} {alarms} alarm{'s' if alarms != 1 else ''}")
        parts.append(f"{MARKS['handoff']} {handoffs} open")
        if down:
            parts.append(f"down: {', '.join(down)}")
        return "  ".join(safe_line(p) for p in parts)

    def title(self) -> str:
        """Which ledgers the list shows, as the status bar names them."""
        if self.only is None:
            return f"tasks · {len(self.sides)} ledgers"
        return f"tasks · {self.sides[self.only].ledger_name} only"


__all__ = ["MergedTaskList", "Side", "ledger_columns"]

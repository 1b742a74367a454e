"""The merged task list of several ledgers (console/merged_tasklist.py): every position names the
row a from-scratch merge of the ledgers' orders puts there, after any sequence of changes, and a
row drawn again (the same frame's next paint, the cursor, the once-a-second refresh) looks nothing
up while no ledger's order moved."""

from __future__ import annotations

import random
from dataclasses import dataclass

from console.merged_tasklist import MergedTaskList
from console.tasklist import TaskListModel
from tests.console.test_tasklist import T0, random_analysis, random_view


@dataclass
class FakeSide:
    ledger_name: str
    tasks_model: TaskListModel
    hub: object = None
    unavailable: str | None = None


def merged_from_scratch(lst: MergedTaskList) -> list[tuple[int, str]]:
    """(ledger, task) at every position: every shown row sorted by its key, equal keys by ledger."""
    rows = [(key, si, s.tasks_model.rows[key[-1]].view.task_id)
            for si, s in enumerate(lst.sides) if si in lst.shown() for key in s.tasks_model.display_keys()]
    return [(si, tid) for _, si, tid in sorted(rows)]


def shown(lst: MergedTaskList) -> list[tuple[int, str]]:
    out = []
    for pos in range(lst.row_count()):
        at = lst.locate(pos)
        assert at is not None
        row = lst.sides[at[0]].tasks_model.row_at(at[1])
        assert row is not None
        out.append((at[0], row.view.task_id))
    return out


def counting_ranks(lst: MergedTaskList) -> list[int]:
    calls = [0]
    rank = lst._rank

    def counted(si: int, j: int) -> int:
        calls[0] += 1
        return rank(si, j)

    lst._rank = counted  # type: ignore[method-assign]
    return calls


def test_every_place_is_the_merge_from_scratch_and_found_once_until_an_order_moves():
    rng = random.Random(11)
    sides = []
    for name in ("a", "b", "c"):
        model = TaskListModel(clock=lambda: T0)
        model.load([random_view(rng, f"t{i:03d}") for i in range(rng.randint(40, 90))])
        sides.append(FakeSide(name, model))
    lst = MergedTaskList(sides)
    calls = counting_ranks(lst)
    for step in range(60):
        what = rng.random()
        side = rng.choice(sides).tasks_model
        if what < 0.5:  # rows changed (in urgency order some move)
            side.update([random_view(rng, rng.choice(list(side.index))) for _ in range(rng.randint(1, 4))])
        elif what < 0.65:
            side.set_analysis(rng.choice(list(side.index)), *random_analysis(rng))
        elif what < 0.75:  # a new task
            side.update([random_view(rng, f"n{step:03d}")])
        elif what < 0.85:
            lst.set_order(rng.choice(("created", "urgency")))
        elif what < 0.93:
            lst.set_filter(rng.choice(["", "report", "act", "mcp"]))
        else:
            lst.only = rng.choice([None, 0, 1, 2])
        assert shown(lst) == merged_from_scratch(lst), f"step {step}"
        calls[0] = 0
        assert shown(lst) == merged_from_scratch(lst)
        assert calls[0] == 0, "drawn again with no order moved: every place looked up again"


def test_a_changed_row_that_keeps_its_place_keeps_every_place_found():
    """Creation order (the fleet's list): a commit changes a row, never the order."""
    rng = random.Random(5)
    sides = []
    for name in ("a", "b"):
        model = TaskListModel(clock=lambda: T0)
        model.load([random_view(rng, f"t{i:04d}") for i in range(2000)])
        sides.append(FakeSide(name, model))
    lst = MergedTaskList(sides)
    calls = counting_ranks(lst)
    before = [lst.locate(pos) for pos in range(40)]
    calls[0] = 0
    for side in sides:
        side.tasks_model.update([random_view(rng, f"t{i:04d}") for i in range(0, 40, 3)])
    assert [lst.locate(pos) for pos in range(40)] == before
    assert calls[0] == 0

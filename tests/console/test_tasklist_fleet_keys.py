"""Sorting, filtering and opening work on 5,000 tasks as on 8.

A ledger of 5,000 tasks (tests/support/fleet.py, two or three nodes each); the last one made has
a node waiting on a person, so the urgency order puts it first. On the shipped console: ``s``
titles the list "tasks by urgency" and draws that task on the first row, the others below it; ``/``
and a task id narrow the list to it; ``enter`` opens its graph. Synchronised on the app's state.
"""

from __future__ import annotations

import re
from pathlib import Path

from console.screens import TaskGraphScreen, TaskListScreen
from store import Ledger
from tests.support import fleet

from tests.support.console_app import make_app, settle, wait_for
from tests.support.asks import ask

TASKS = 5000


def fleet_ledger(path: Path) -> str:
    fleet.build(str(path), TASKS, seed=7, sizes=(2, 3))
    with Ledger.open(str(path), create=False) as led:
        last = fleet.task_ids(TASKS)[-1]
        claim = led.claim(last, "w")
        assert claim is not None
        ask(led, claim, kind="confirm", question="go on?")
    return last


def drawn(app) -> list[str]:
    return [re.sub(r"&#160;|\s+", " ", line) for line in app.export_screenshot().split("\n")]


async def test_s_slash_and_enter_on_5000_tasks(tmp_path):
    urgent = fleet_ledger(tmp_path / "fleet.db")
    app = make_app(tmp_path / "fleet.db", analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TaskListScreen)
        model = app.tasks_model
        await wait_for(pilot, lambda: model.row_count() == TASKS, timeout=120, what="5,000 rows")
        first_created = model.row_at(0).view.task_id
        assert first_created != urgent

        await pilot.press("s")
        await wait_for(pilot, lambda: model.order == "urgency", what="the urgency order")
        await settle(pilot)
        assert model.row_count() == TASKS and model.row_at(0).view.task_id == urgent
        shown = app.export_screenshot()
        assert "tasks by urgency" in re.sub(r"&#160;", " ", shown)
        rows = [line for line in drawn(app) if re.search(r"\bt\d{4}\b", line)]
        assert len(rows) >= 10, "the rows are drawn"
        assert urgent in rows[0]
        assert screen.row_list.cursor is not None

        await pilot.press("slash", *"t0042", "enter")
        await wait_for(pilot, lambda: model.row_count() == 1, what="the filter")
        await settle(pilot)
        assert model.row_at(0).view.task_id == "t0042"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), timeout=60, what="the graph")
        await wait_for(pilot, lambda: getattr(app.screen, "task_id", None) == "t0042", what="t0042's graph")

"""The task list as live as the graph, on both backends: the real app follows a
random workload (tests/store/test_tally.py's ``Fleet``: tasks made and grown, claims, heartbeats,
commits, failures, handoffs, parks, rewinds, narrows, aborts, escalations, effects, leases left to
expire) and, whenever it has read to the end of the journal, every task row it holds equals what
``Ledger.tasks()`` says, and so does every line then drawn on screen (in creation order or by
urgency, filtered or not: a repaint missed leaves an old line). No change is missed, and none costs a recount: the console never calls
``Ledger.task``/``Ledger.tasks`` after its first load, and reads a task's nodes whole once (the
first time an event names it) plus once per event of a kind ``store.reading.tally`` does not know.
"""

from __future__ import annotations

import random
import threading

import pytest

from console.model import progress_text
from console.screens import TaskListScreen
from console.tasklist import TaskListModel
from store import Ledger, ManualClock
from store.errors import WardenError
from store.reading.tally import current
from store.storage.events import names_nodes
from tests.support.console_app import make_app, settle, wait_for
from tests.store.test_tally import T0, Fleet, without_time
from tests.support.tally_reads import TallyReads


def recounts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``Ledger.task``/``Ledger.tasks`` call made off the main thread (the console's workers;
    the test's writer runs on the main thread)."""
    calls: list[str] = []
    for name in ("task", "tasks"):
        real = getattr(Ledger, name)

        def spy(self, *a, _real=real, _name=name, **kw):
            if threading.current_thread() is not threading.main_thread():
                calls.append(_name)
            return _real(self, *a, **kw)

        monkeypatch.setattr(Ledger, name, spy)
    return calls


def drawn_lines(monkeypatch: pytest.MonkeyPatch) -> dict[int, str]:
    """The text of each line of the task list as last drawn (Textual asks ``render_line`` only for
    the lines a refresh made dirty: a missed repaint leaves the old text here)."""
    from console.widgets import RowList

    drawn: dict[int, str] = {}
    real = RowList.render_line

    def spy(self, y):
        strip = real(self, y)
        if self.id == "tasks":
            drawn[y] = strip.text
        return strip

    monkeypatch.setattr(RowList, "render_line", spy)
    return drawn


def screen_wrong(app, truth: dict, drawn: dict[int, str]) -> list[tuple[int, str]]:
    """Lines on screen that do not show their position's row as the ledger says it now."""
    model: TaskListModel = app.tasks_model
    lst = app.screen.row_list
    wrong = []
    for pos in lst.visible_range():
        row = model.row_at(pos)
        line = drawn.get(pos - int(lst.scroll_y) + 1, "")
        if not line.startswith(row.view.task_id) or progress_text(truth[row.view.task_id].counts) not in line:
            wrong.append((pos, line))
    return wrong


async def check_rows(pilot, writer: Ledger, drawn: dict[int, str]) -> None:
    app = pilot.app
    model: TaskListModel = app.tasks_model
    now = writer.now()
    truth = {t.task_id: without_time(t) for t in writer.tasks()}
    held = {r.view.task_id: without_time(current(r.view, now)) for r in model.rows}
    assert held == truth
    try:  # the next frames draw what the change made dirty
        await wait_for(pilot, lambda: not screen_wrong(app, truth, drawn), timeout=10.0, what="the lines drawn")
    except AssertionError:
        assert screen_wrong(app, truth, drawn) == []


@pytest.mark.parametrize("seed", range(3))
async def test_task_rows_follow_every_change_without_a_recount(new_target, backend, monkeypatch, seed):
    rng = random.Random(seed)
    clock = ManualClock(T0)
    target = new_target("fleet")
    writer = Ledger.open(target, clock=clock)
    fleet = Fleet(writer, clock, rng)
    try:
        for _ in range(6):
            fleet.step()
        calls = recounts(monkeypatch)
        drawn = drawn_lines(monkeypatch)
        # the once-a-second refresh of time figures rebuilds lines whose text changed: it would
        # mend a change's missed repaint a second later — off, so that the change's own counts
        monkeypatch.setattr(TaskListScreen, "tick", lambda self: None)
        app = make_app(target, clock=clock)
        counted = TallyReads(monkeypatch)
        async with app.run_test(size=(120, 60)) as pilot:
            await settle(pilot)
            assert calls == ["tasks"]  # the first load
            calls.clear()
            start = app.cursor
            whole = counted.whole_reads
            if seed % 3 == 1:
                await pilot.press("s")  # by urgency: rows move as alarms, handoffs and budgets do
            elif seed % 3 == 2:
                app.screen.action_filter()
                await pilot.press("t", "1", "enter")  # t1, t10…: rows come into and leave nothing
            steps = 0
            for _ in range(30 if backend == "sqlite" else 20):
                for _ in range(rng.randint(1, 6)):
                    try:
                        fleet.step()
                    except WardenError:
                        pass  # an operation that does not apply now
                    steps += 1
                last = writer.last_event_id()
                await wait_for(pilot, lambda: app.cursor >= last and app.follower.idle(), what=f"event {last}")
                await check_rows(pilot, writer, drawn)
            events = writer.events(start, limit=100_000)
            named = {e.task_id for e in events if e.task_id is not None}
            unknown = sum(1 for e in events if e.task_id is not None
                          and not names_nodes(e.kind))
            assert steps > 3 * len(named)  # far more changes than tasks: a recount per change would show
            assert counted.whole_reads - whole <= len(named) + unknown
            assert calls == []  # no task row read whole (Ledger.task counts every node of the task)
    finally:
        writer.close()


@pytest.mark.parametrize("keys", [("j",), ("j", "j", "k"), ("down", "down", "down", "up")])
async def test_a_cursor_move_redraws_the_two_rows_it_touches_not_the_list(tmp_path, monkeypatch, keys):
    """Each step of the cursor repaints the row it leaves and the row it lands on — not every line
    of the list (a whole-list redraw per key was 16 KB of output and doubled key → frame in a
    terminal: docs/performance.md)."""
    clock = ManualClock(T0)
    target = str(tmp_path / "l.db")
    with Ledger.open(target, clock=clock) as led:
        for i in range(30):
            led.create_task(f"t{i:02d}")
    monkeypatch.setattr(TaskListScreen, "tick", lambda self: None)  # no once-a-second refresh
    from console.widgets import RowList

    drawn: list[int] = []
    real = RowList.render_line

    def spy(self, y):
        if self.id == "tasks":
            drawn.append(y)
        return real(self, y)

    monkeypatch.setattr(RowList, "render_line", spy)
    app = make_app(target, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        lst = app.screen.row_list
        assert lst.row_count == 30
        for key in keys:
            before = lst.cursor
            drawn.clear()
            await pilot.press(key)
            await settle(pilot)
            after = lst.cursor
            assert after != before
            assert sorted(set(drawn)) == sorted({before + 1, after + 1}), (key, before, after, sorted(set(drawn)))

"""The live path goes first (console/liveturn.py): the analysis worker waits at its pause points
while a journal read, its application or a key is on its way to the screen, and goes on when the
frame is drawn — or when the turn's time is up, whatever became of its end."""

from __future__ import annotations

import sys
import threading

import pytest

from console.liveturn import LiveTurn
from store.estimation import estimates
from store.estimation.montecarlo import NodeDist, Plan, simulate_makespans
from tests.console.conftest import build_ledger, make_app, settle, wait_for
from tests.support.waiting import wait_until


class _Waiting(LiveTurn):
    """Counts the threads inside pause(), so a test can see one wait without sleeping on it."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.inside = 0

    def pause(self) -> None:
        self.inside += 1
        try:
            super().pause()
        finally:
            self.inside -= 1


def test_pause_returns_at_once_when_no_turn_is_under_way():
    turn = LiveTurn(clock=lambda: 5.0)
    turn.pause()
    turn.begin()
    turn.end()
    turn.pause()
    assert turn.waits == 0 and turn.waited_s == 0.0 and not turn.held


def test_a_pause_waits_for_the_turn_to_end_and_counts_the_wait():
    now = [100.0]
    turn = _Waiting(clock=lambda: now[0])  # a clock that stands still: only end() lets it go
    turn.begin()
    assert turn.held
    done = threading.Event()

    def analysis():
        turn.pause()
        done.set()

    t = threading.Thread(target=analysis)
    t.start()
    wait_until(lambda: turn.inside == 1, "the analysis to reach its pause point")
    assert not done.is_set(), "the analysis went on while the live path had its turn"
    now[0] += 0.03
    turn.end()
    t.join(30)
    assert done.is_set() and not turn.held
    assert turn.waits == 1 and turn.waited_s == pytest.approx(0.03)


def test_a_turn_whose_end_never_comes_lasts_hold_s_then_the_analysis_goes_on():
    now = [0.0]
    turn = LiveTurn(hold_s=0.1, clock=lambda: now[0])
    turn.begin()
    now[0] = 0.1000001  # past the turn's time: its end was lost (a screen that went away)
    turn.pause()  # returns at once
    assert not turn.held
    turn.pause()  # and the next pause takes no lock either (the turn is over)
    now[0] = 1.0
    turn.begin()  # a new turn holds again
    assert turn.held


def test_a_new_begin_extends_the_turn():
    now = [0.0]
    turn = LiveTurn(hold_s=0.1, clock=lambda: now[0])
    turn.begin()
    now[0] = 0.08
    turn.begin()
    now[0] = 0.15
    assert turn.held, "a second begin counts hold_s from itself"
    now[0] = 0.19
    assert not turn.held


def _plan(n: int, width: int) -> Plan:
    dists = [NodeDist(tuple(sorted(float(10 + (i * 7 + j * 5) % 13) for j in range(8))), 8, "medium", "history",
                      "kind" if i % 3 else None, 0.3 if i % 3 else 0.0)
             for i in range(n)]
    deps = [[j for j in range(max(0, i - width), i)] if i >= width else [] for i in range(n)]
    dependents: list[list[int]] = [[] for _ in range(n)]
    for i, ds in enumerate(deps):
        for j in ds:
            dependents[j].append(i)
    return Plan(dists, [], deps, dependents)


@pytest.mark.parametrize("n,width,workers,trials", [(1, 1, 1, 1), (12, 3, 2, 50), (40, 5, 8, 200), (25, 2, 100, 75)])
def test_the_monte_carlo_pauses_before_every_trial_and_its_result_does_not_move(n, width, workers, trials):
    plan = _plan(n, width)
    calls = []
    got = simulate_makespans(plan, workers, trials, 7, pause=lambda: calls.append(1))
    assert len(calls) == trials
    assert got == simulate_makespans(plan, workers, trials, 7)


def test_a_task_estimate_waits_at_its_pause_points_while_the_turn_is_held(tmp_path):
    """The estimate the console's analysis computes for a task (a Monte Carlo) stops at the turn
    and finishes, with the figure it gives without one, once the turn ends."""
    from store import Ledger

    path = build_ledger(tmp_path / "ledger.db")
    with Ledger.open(path, create=False, read_only=True) as led:
        task = led.task("report-001")
        plain = estimates.estimate_task(led, task, now=led.now())
        turn = _Waiting(clock=lambda: 0.0)
        turn.begin()
        got: list[estimates.Estimate] = []

        def analysis():
            got.append(estimates.estimate_task(led, task, now=led.now(), pause=turn.pause))

        t = threading.Thread(target=analysis)
        t.start()
        wait_until(lambda: turn.inside == 1, "the estimate to stop at the turn")
        assert not got
        turn.end()
        t.join(30)
    assert got == [plain]
    assert turn.waits == 1


def test_the_open_graphs_analysis_pauses_between_its_reads_and_before_every_node_and_its_figures_do_not_move(tmp_path):
    """A graph's analysis is built when it opens, beside its first live changes: its reads (the
    kinds' durations, the running nodes, their observations, the handoffs, the claims) and each
    node's distribution (the first of a kind builds the kind's model, ~16 ms) are separate pause
    points, not one stretch; the figures are those of a run without pauses."""
    from store import Ledger
    from store.reading.analysis import TaskAnalysis

    path = build_ledger(tmp_path / "ledger.db")
    with Ledger.open(path, create=False, read_only=True) as led:
        rows = [n for page in led.graph_pages("report-001", first=2, page=3) for n in page.nodes]
        task, cursor, now = led.task("report-001"), led.last_event_id(), led.now()
        plain = TaskAnalysis(led, "report-001", rows=rows, task=task, cursor=cursor).estimate(now)
        built: list[str] = []
        an = TaskAnalysis(led, "report-001", rows=rows, task=task, cursor=cursor, pause=lambda: built.append("init"))
        kinds = {n.kind for n in rows}
        assert len(built) >= len(kinds) + 4  # each kind's durations, then each read after the first
        unfinished = sum(1 for n in rows if n.status not in estimates.FINISHED)
        calls: list[str] = []
        got = an.estimate(now, pause=lambda: calls.append(sys._getframe(1).f_code.co_name))
        assert calls.count("simulate_makespans") > 0  # the trials' pauses, as before
        assert len(calls) - calls.count("simulate_makespans") >= unfinished  # and one before each node
        assert got == plain
        one_shot_calls: list[str] = []
        one_shot = estimates.estimate_task(led, task, now=now,
                                           pause=lambda: one_shot_calls.append(sys._getframe(1).f_code.co_name))
        assert len(one_shot_calls) - one_shot_calls.count("simulate_makespans") >= len(kinds) + unfinished
        assert one_shot == estimates.estimate_task(led, task, now=now)


async def test_the_follower_takes_the_turn_for_a_read_and_the_app_gives_it_back_once_drawn(tmp_path, monkeypatch):
    """A commit read by the console holds the analysis until the frame that shows it; a key does
    too; a quiet console holds nothing."""
    from store import Ledger

    path = build_ledger(tmp_path / "ledger.db")
    app = make_app(path, analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        turn = app.turn
        assert app.follower.turn is turn and app.analyst.turn is turn
        # A turn lasts at most hold_s (0.1 s) from its begin; a loaded machine may take longer than
        # that between the follower's begin and its read, and the expiry is not what this test is
        # about (test_a_turn_whose_end_never_comes… is): here a turn lasts until its end.
        turn.hold_s = 3600.0
        held_in_read = []
        real = app.follower.read_step

        def read_step(*a, **k):
            held_in_read.append(turn.held)
            return real(*a, **k)

        monkeypatch.setattr(app.follower, "read_step", read_step)
        with Ledger.open(path, create=False) as led:
            led.create_task("fresh-001", title="A new task")
        model = app.tasks_model
        await wait_for(pilot, lambda: any((r := model.row_at(i)) is not None and r.view.task_id == "fresh-001"
                                          for i in range(model.row_count())), what="the new task on the list")
        await settle(pilot)
        assert held_in_read and all(held_in_read), "a read ran without the live path's turn"
        await wait_for(pilot, lambda: not turn._held, what="the turn to end once drawn")
        begun = []
        real_begin = turn.begin
        monkeypatch.setattr(turn, "begin", lambda: (begun.append(1), real_begin()))
        await pilot.press("j")
        assert begun, "a key did not take the turn"
        await settle(pilot)
        await wait_for(pilot, lambda: not turn._held, what="the key's turn to end once drawn")


def _record_turns(app, monkeypatch) -> list[str]:
    """From now on, the name of the screen on top each time the app takes the live path's turn."""
    took: list[str] = []
    real = app.live_turn
    monkeypatch.setattr(app, "live_turn", lambda: (took.append(type(app.screen).__name__), real()))
    return took


async def test_a_graph_opening_and_each_of_its_pages_take_the_turn(tmp_path, monkeypatch):
    """The graph screen's mount and every page it is handed are UI work the analysis waits for
    (a busy graph's first node changes landed while it opened: bench_fleet.py's node rows)."""
    from tests.console.conftest import graph_of

    app = make_app(build_ledger(tmp_path / "ledger.db"), analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        took = _record_turns(app, monkeypatch)
        app.open_graph("report-001")
        await wait_for(pilot, lambda: graph_of(app) is not None and graph_of(app).complete, what="the graph")
        await settle(pilot)
        screens = [s for s in app.screen_stack if type(s).__name__ == "TaskGraphScreen"]
        assert screens and screens[-1].pages >= 1
        assert len(took) >= 1 + screens[-1].pages, took
        await wait_for(pilot, lambda: not app.turn._held, what="the turn to end once drawn")


async def test_any_screen_opening_takes_the_turn(tmp_path, monkeypatch):
    """WardenScreen's mount takes the turn for every screen (the event log here), besides the
    screen's own on_mount."""
    app = make_app(build_ledger(tmp_path / "ledger.db"), analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        took = _record_turns(app, monkeypatch)
        app.action_events()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "EventLogScreen", what="the event log")
        await settle(pilot)
        assert "EventLogScreen" in took
        assert app.screen.row_list.row_count > 0, "its own on_mount ran too"

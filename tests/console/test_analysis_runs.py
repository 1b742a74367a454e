"""When the console runs estimates and signals (console/analysis_runs.py): a full run after changes
at most every ANALYSIS_EVERY_S and every 1 / ANALYSIS_SHARE × its own duration, whatever the
changes; one asked for while another runs goes next. A bare app records the runs it would start;
the clock is the module's ``time.monotonic``, replaced."""

from __future__ import annotations

import time
import types

import pytest

from console import analysis_runs
from console.analysis_runs import ANALYSIS_EVERY_S, ANALYSIS_SHARE, TIME_SIGNALS_EVERY_S, AnalysisRuns

EPS = 1e-6


class App:
    """What AnalysisRuns needs of the app: a task list showing tasks a and b (``extra`` more tasks
    off screen), no graph open."""

    def __init__(self, extra: int = 0) -> None:
        self.started: list[tuple[str, list[str]]] = []
        self.requests: list[object] = []  # each run's graph request (None: no graph)
        self.after_refresh: list = []  # callbacks the app would call after its next frame
        self.analyst = types.SimpleNamespace(last_seconds={}, drop_graph=lambda: None)
        ids = ("a", "b") + tuple(f"x{i}" for i in range(extra))
        rows = [types.SimpleNamespace(view=types.SimpleNamespace(task_id=t, status="active")) for t in ids]
        self.on_screen = ["a", "b"]
        screen = types.SimpleNamespace(graph_on_screen=lambda: None, tasks_on_screen=lambda: list(self.on_screen))
        self.hub = types.SimpleNamespace(shown=lambda: [screen], tasks=types.SimpleNamespace(
            rows=rows, index={t: i for i, t in enumerate(ids)}))
        self.follower = types.SimpleNamespace(analysis_dirty=set())
        self.analysis_enabled = True
        self.loaded = True
        self.unavailable = None

    def later(self, delay, callback):
        return None

    def call_after_refresh(self, callback):
        self.after_refresh.append(callback)
        return True

    def start_analysis(self, req, task_ids, parts, kind, must_eta=None):
        self.started.append((kind, list(task_ids)))
        self.requests.append(req)
        self.must_eta = must_eta


class Runs:
    def __init__(self, clock: list[float], extra: int = 0) -> None:
        self.clock = clock
        self.app = App(extra)
        self.runs = AnalysisRuns(self.app)
        self.started = self.app.started

    def finish(self, took: float) -> None:
        """The run under way ends, having taken ``took`` seconds; then the app's next frame."""
        kind, ids = self.started[-1]
        self.app.analyst.last_seconds[kind] = took
        if kind == "full":  # as the app does with a full run's results (each with its figure)
            for tid in ids:
                self.runs.took(tid, eta=True)
        self.runs.done(kind)
        self.frame()

    def frame(self) -> None:
        """The app draws its next frame: what waited for it runs."""
        callbacks, self.app.after_refresh[:] = list(self.app.after_refresh), []
        for callback in callbacks:
            callback()

    def open_graph(self, monkeypatch, task_id: str = "a") -> object:
        """A screen now shows ``task_id``'s graph (its model and rows on screen)."""
        model = types.SimpleNamespace(task=types.SimpleNamespace(task_id=task_id), task_id=task_id, nodes=(),
                                      node_at=lambda p: types.SimpleNamespace(key="n1"))
        screen = types.SimpleNamespace(graph_on_screen=lambda: (model, range(0, 3)), tasks_on_screen=lambda: [])
        shown = self.app.hub.shown()
        self.app.hub.shown = lambda: [*shown, screen]
        monkeypatch.setattr(analysis_runs, "graph_request", lambda g, visible: types.SimpleNamespace(
            task_id=g.task_id, window=(types.SimpleNamespace(key="n1"),)))
        return model

    def tick(self, seconds: float) -> None:
        """``seconds`` pass, then the once-a-second timer fires."""
        self.clock[0] += seconds
        self.runs._timer()


@pytest.fixture
def host(monkeypatch) -> Runs:
    clock = [1000.0]
    monkeypatch.setattr(analysis_runs.time, "monotonic", lambda: clock[0])
    return Runs(clock)


@pytest.mark.parametrize("took", [0.05, 0.4, 2.0, 9.0])
def test_full_runs_after_changes_are_spaced_by_their_cost(host, took):
    host.runs.run_analysis()  # the first load
    assert [k for k, _ in host.started] == ["full"]
    gap = max(ANALYSIS_EVERY_S, took / ANALYSIS_SHARE)
    host.clock[0] += took
    host.finish(took)
    starts = []
    for _ in range(int(3 * gap) + 3):  # changes arrive every second
        host.app.follower.analysis_dirty.add("a")
        host.tick(1.0)
        if len(host.started) > 1 + len(starts):
            starts.append(host.clock[0])
            host.clock[0] += took
            host.finish(took)
    assert len(starts) >= 2
    assert gap - EPS <= starts[0] - (1000.0 + took) <= gap + 1.0 + EPS
    for a, b in zip(starts, starts[1:]):
        assert gap + took - EPS <= b - a <= gap + took + 1.0 + EPS


def test_a_full_run_asked_for_while_another_runs_goes_next(host):
    host.app.follower.analysis_dirty.add("a")
    host.tick(1.0)  # a full run starts (nothing ran yet)
    assert [k for k, _ in host.started] == ["full"]
    host.runs.run_analysis()  # asked for again meanwhile
    assert len(host.started) == 1  # one run at a time
    host.app.follower.analysis_dirty.add("b")
    host.clock[0] += 3.0
    host.finish(3.0)
    host.tick(1.0)  # not 30 s later: it was asked for
    assert [k for k, _ in host.started] == ["full", "full"] and host.started[1][1] == ["b"]


def test_without_changes_only_time_signals_run_and_not_more_often_than_their_spacing(host):
    host.runs.run_analysis()
    host.finish(0.1)
    for _ in range(int(TIME_SIGNALS_EVERY_S) * 3):
        host.tick(1.0)
        if host.runs.busy:
            host.finish(0.01)
    kinds = [k for k, _ in host.started]
    assert kinds[0] == "full" and set(kinds[1:]) == {"signals"}
    assert 2 <= kinds.count("signals") <= 3
    assert all(ids == ["a", "b"] for _, ids in host.started[1:])  # the tasks on screen


def test_tasks_on_screen_come_first_then_the_oldest_figures_and_a_skipped_figure_comes_next_run(monkeypatch):
    """In a fleet every task is touched between runs: a run computes the figures of the tasks on
    screen, then of the others while its budget lasts, oldest figure first — none waits for ever."""
    clock = [1000.0]
    monkeypatch.setattr(analysis_runs.time, "monotonic", lambda: clock[0])
    host = Runs(clock, extra=6)
    rows = [r.view.task_id for r in host.app.hub.tasks.rows]
    host.app.on_screen = ["x3", "a"]
    host.runs.run_analysis()
    order = host.started[-1][1]
    assert order[:2] == ["a", "x3"] and host.app.must_eta == 2 and sorted(order) == sorted(rows)
    # the run had budget for a, x3 and x0 only
    for tid in order:
        clock[0] += 0.01
        host.runs.took(tid, eta=tid in ("a", "x3", "x0"))
    host.runs.done("full")
    assert host.app.follower.analysis_dirty == set(rows) - {"a", "x3", "x0"}
    host.app.follower.analysis_dirty.update(rows)  # everything touched again
    host.app.on_screen = ["a"]
    host.tick(ANALYSIS_EVERY_S + 1)
    order = host.started[-1][1]
    assert order[0] == "a" and host.app.must_eta == 1
    never = [t for t in order[1:] if t not in ("x3", "x0")]
    assert never == ["b", "x1", "x2", "x4", "x5"]  # never computed: first, in list order
    assert order[1:] == never + ["x3", "x0"]  # then the oldest figure first (x3 was computed before x0)


def test_a_run_past_its_budget_leaves_figures_for_later_but_computes_every_signal(ledger_path, monkeypatch):
    from console import analysis
    from console.analysis import Analyst, RunRequest
    from store import Ledger
    from store.reading.feed import Feed

    monkeypatch.setattr(analysis, "ETA_BUDGET_S", 0.0)
    with Ledger.open(ledger_path, create=False) as led:
        ids = [t.task_id for t in led.tasks()]
    assert len(ids) >= 3
    feed = Feed(ledger_path, read_only=True)
    try:
        an = Analyst(feed)
        now = time.time()
        msg = an.run(RunRequest(now, None, tuple(ids), must_eta=1))
        assert msg.tasks[ids[0]][0] is not None
        assert [msg.tasks[t][0] for t in ids[1:]] == [None] * (len(ids) - 1)
        assert all(msg.tasks[t][1] is not None for t in ids)
        msg = an.run(RunRequest(now, None, tuple(ids)))  # no budget asked for: every figure
        assert all(msg.tasks[t][0] is not None for t in ids)
    finally:
        feed.close()


def test_a_graph_that_finished_loading_gets_a_run_of_its_own_and_the_full_runs_keep_their_spacing(host, monkeypatch):
    host.runs.run_analysis()  # the first load
    host.clock[0] += 2.0
    host.finish(2.0)  # the next full run: 20 s on (10 × its cost)
    host.app.follower.analysis_dirty.update({"a", "b"})
    model = host.open_graph(monkeypatch)
    host.runs.graph_loaded(model, first=True, last=True)
    host.frame()  # the first rows drawn (their P80s come with the graph's run)
    assert host.started[-1] == ("graph", [])  # the graph alone, at once: not the 400 others' Monte Carlos
    assert host.app.requests[-1].task_id == "a"
    assert host.app.follower.analysis_dirty == {"a", "b"}  # the others wait for the next full run
    host.clock[0] += 0.05
    host.finish(0.05)
    for _ in range(15):
        host.tick(1.0)
        if host.runs.busy:
            host.finish(0.01)
    assert [k for k, _ in host.started] == ["full", "graph"]  # no full run before its time
    host.tick(5.0)
    assert [k for k, _ in host.started] == ["full", "graph", "full"]
    assert sorted(host.started[-1][1]) == ["a", "b"]


def test_a_graph_that_finished_loading_during_a_run_gets_its_run_right_after_it(host, monkeypatch):
    host.app.follower.analysis_dirty.add("b")
    host.tick(1.0)  # a full run starts
    model = host.open_graph(monkeypatch)
    host.runs.graph_loaded(model, first=True, last=True)
    host.frame()
    assert [k for k, _ in host.started] == ["full"]  # one run at a time
    host.clock[0] += 3.0
    host.finish(3.0)  # its end, then the next frame: the graph's run, not 30 s later
    assert [k for k, _ in host.started] == ["full", "graph"]
    assert host.app.requests[-1].task_id == "a"
    host.finish(0.05)
    assert [k for k, _ in host.started] == ["full", "graph"]  # asked for once, run once

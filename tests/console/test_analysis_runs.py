"""When the console runs estimates and signals (console/analysis_runs.py): a full run after changes
at most every ANALYSIS_EVERY_S and every 1 / ANALYSIS_SHARE × its own duration, whatever the
changes; one asked for while another runs goes next. A bare app records the runs it would start;
the clock is the module's ``time.monotonic``, replaced."""

from __future__ import annotations

import types

import pytest

from console import analysis_runs
from console.analysis_runs import ANALYSIS_EVERY_S, ANALYSIS_SHARE, TIME_SIGNALS_EVERY_S, AnalysisRuns

EPS = 1e-6


class App:
    """What AnalysisRuns needs of the app: a task list showing tasks a and b, no graph open."""

    def __init__(self) -> None:
        self.started: list[tuple[str, list[str]]] = []
        self.analyst = types.SimpleNamespace(last_seconds={}, graph=types.SimpleNamespace(
            drop=lambda: None, follows=lambda task_id: False))
        rows = [types.SimpleNamespace(view=types.SimpleNamespace(task_id=t, status="active")) for t in ("a", "b")]
        screen = types.SimpleNamespace(graph_on_screen=lambda: None, tasks_on_screen=lambda: ["a", "b"])
        self.hub = types.SimpleNamespace(shown=lambda: [screen], tasks=types.SimpleNamespace(
            rows=rows, index={"a": 0, "b": 1}))
        self.follower = types.SimpleNamespace(analysis_dirty=set())
        self.analysis_enabled = True
        self.loaded = True
        self.unavailable = None

    def set_timer(self, delay, callback):
        return None

    def call_after_refresh(self, callback):
        return True

    def start_analysis(self, req, task_ids, parts, kind):
        self.started.append((kind, list(task_ids)))


class Runs:
    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.app = App()
        self.runs = AnalysisRuns(self.app)
        self.started = self.app.started

    def finish(self, took: float) -> None:
        """The run under way ends, having taken ``took`` seconds."""
        kind, ids = self.started[-1]
        self.app.analyst.last_seconds[kind] = took
        self.runs.analysed_once.update(ids)
        self.runs.done(kind)

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
    host.runs.run_analysis()  # a graph finished loading meanwhile
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

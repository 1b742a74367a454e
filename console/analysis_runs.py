"""When the console computes estimates and signals (the UI-thread side of ``console/analysis.py``).

A mixin of :class:`console.app.WardenApp`: at most one analysis run at a time, started from a
once-a-second timer and spaced by what the last run of its kind cost; what a run computes is bounded
by what is on screen (the rows of the open graph around the screen, its running and parked rows,
the tasks on screen). The run itself is the app's ``_analyse`` thread worker; its result comes back
as ``AnalysisReady``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from .analysis import Analyst, GraphRequest, graph_request, window_covers
from .screens import TaskGraphScreen, TaskListScreen

ANALYSIS_EVERY_S = 5.0  # estimates and signals: recomputed off the UI thread at most this often
ANALYSIS_SHARE = 0.1  # after changes: a full run at most every 10 × its own duration (≤ 10 % of a core)
# With nothing changing, time-based signals (stale heartbeat, orphaned lease, overdue) run at most
# every TIME_SIGNALS_EVERY_S and every 1 / TIME_SIGNALS_SHARE × their last duration. The whole idle
# budget is 1 % of a core, and a run costs more than its own duration (the thread, the UI's repaint
# of what it changed) beside Textual's own idle cost (~0.4 %): so the signals get a fifth of it. With
# 3,000 live leases on 100k nodes a pass is ~50 ms (every ~25 s); a small ledger's, every 15 s.
# (Every 10 s measured 0.9–1.2 % of a core end to end at 3,000 leases: py-spy put half in signals.)
TIME_SIGNALS_SHARE = 0.002
TIME_SIGNALS_EVERY_S = 15.0


class AnalysisRuns:
    """The scheduling state and the ways to start a run (see the module's docstring). Uses the
    app's ``_screens``, ``set_timer`` and ``_analyse`` (its thread worker)."""

    analyst: Analyst
    graph_model: Any
    tasks_model: Any
    follower: Any
    loaded: bool
    unavailable: str | None
    _analysed_once: set[str]

    def init_analysis_runs(self) -> None:
        self._analysis_busy = False  # one analysis run at a time
        self._next_full_at = 0.0  # monotonic: the next full run after changes, not sooner
        self._next_signals_at = 0.0  # monotonic: the next time-based signal run, not sooner
        self._window: tuple[Any, frozenset[str]] = (None, frozenset())  # (model, keys) whose P80s were asked for

    def _analysis_timer(self) -> None:
        """Once a second, at most one analysis run (off the UI thread), bounded in cost:

        * after events, a full run (task figures, the P80s around the screen, signals) for what they
          touched — at most every ``ANALYSIS_EVERY_S`` and every 10 × its own last duration;
        * without events, the time-based signals (stale heartbeat, orphaned lease, overdue change as
          the clock moves) — at most every ``TIME_SIGNALS_EVERY_S`` and every 500 × their last duration;
        * the graph scrolled or filtered to rows whose P80s were not asked for yet: those rows."""
        if self.graph_model is None:
            self.analyst.graph.drop()  # no graph open: its analysis is freed
        if self.loaded and not self.unavailable and not self._analysis_busy:
            now = time.monotonic()
            if self.follower.analysis_dirty and now >= self._next_full_at:
                self.run_analysis()
            elif not self.follower.analysis_dirty and now >= self._next_signals_at:
                self.run_time_signals()
            elif self._window_moved():
                self.run_node_window()
        self.set_timer(1.0, self._analysis_timer)

    def _graph_request(self, *, live: bool = True) -> GraphRequest | None:
        """What the open graph needs computed (``console.analysis.graph_request``)."""
        g = self.graph_model
        if g is None:
            return None
        screens = [s for s in self._screens(TaskGraphScreen) if s.task_id == g.task_id]
        # The loaded graph's incremental analysis knows its running and parked nodes: no scan of
        # the model's rows on the UI thread (18 ms at 100k nodes) to list them.
        live = live and not self.analyst.graph.follows(g.task_id)
        req = graph_request(g, screens[-1].row_list.visible_range() if screens else range(0), live=live)
        self._window = (g, frozenset(n.key for n in req.window))
        return req

    def _window_moved(self) -> bool:
        """Rows on screen in the open graph whose P80 was not asked for (scrolled, filtered)."""
        g = self.graph_model
        model, keys = self._window
        return g is not None and any(
            not window_covers(g, s.row_list.visible_range(), keys if model is g else frozenset())
            for s in self._screens(TaskGraphScreen) if s.task_id == g.task_id)

    def run_time_signals(self) -> None:
        """Signals only, for the tasks on screen and the open graph's running and parked rows."""
        if self._analysis_busy:
            self._next_signals_at = 0.0  # as soon as the run under way ends
            return
        visible: list[str] = []
        for s in self._screens(TaskListScreen):
            for pos in s.row_list.visible_range():
                row = self.tasks_model.row_at(pos)
                if row is not None and row.view.status in ("active", "parked"):
                    visible.append(row.view.task_id)
        req = self._graph_request()
        if req is not None:
            req = replace(req, window=())
        if req is not None or visible:
            self._start_analysis(req, sorted(set(visible)), frozenset({"signals"}), "signals")
        else:
            self._next_signals_at = time.monotonic() + TIME_SIGNALS_EVERY_S

    def run_node_window(self) -> None:
        """P80s of the graph rows around the screen (after a scroll or a filter)."""
        if self._analysis_busy:
            return  # the timer looks again in a second
        req = self._graph_request(live=False)
        if req is not None and req.window:
            self._start_analysis(req, [], frozenset({"nodes"}), "nodes")

    def run_analysis(self) -> None:
        """A full run now (or as soon as the one under way ends): task figures, the graph's P80s
        around the screen, signals — for the open graph and the tasks events touched."""
        if self._analysis_busy:
            self._next_full_at = 0.0
            return
        small = [r.view.task_id for r in self.tasks_model.rows
                 if r.view.task_id in self.follower.analysis_dirty or r.view.task_id not in self._analysed_once]
        self.follower.analysis_dirty.clear()
        self._start_analysis(self._graph_request(), small, frozenset({"eta", "nodes", "signals"}), "full")

    def _start_analysis(self, req: GraphRequest | None, task_ids: list[str], parts: frozenset[str],
                        kind: str) -> None:
        self._analysis_busy = True
        self._analyse(req, task_ids, parts, kind)

    def _analysis_done(self, kind: str) -> None:
        """A run ended: space the next ones by what this one cost."""
        self._analysis_busy = False
        took = self.analyst.last_seconds.get(kind, 0.0)
        now = time.monotonic()
        if kind == "full":
            if self._next_full_at != 0.0:  # 0.0: asked for again while it ran, so the next tick runs it
                self._next_full_at = now + max(ANALYSIS_EVERY_S, took / ANALYSIS_SHARE)
            self._next_signals_at = now + TIME_SIGNALS_EVERY_S
        elif kind == "signals":
            self._next_signals_at = now + max(TIME_SIGNALS_EVERY_S, took / TIME_SIGNALS_SHARE)


__all__ = ["ANALYSIS_EVERY_S", "ANALYSIS_SHARE", "AnalysisRuns", "TIME_SIGNALS_EVERY_S", "TIME_SIGNALS_SHARE"]

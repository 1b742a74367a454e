"""When the console computes estimates and signals (the UI-thread side of ``console/analysis.py``).

:class:`AnalysisRuns` (``app.analysis``): at most one analysis run at a time, started from a
once-a-second timer and spaced by what the last run of its kind cost; what a run computes is bounded
by what is on screen — what the screens registered with the feed hub show (``FeedHub.show``: the
rows of the open graph around the screen, the tasks on screen). The run itself goes to the analysis
worker, a process of its own (``console/analysis_client.py``); its result comes back as
``AnalysisReady``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Protocol

from .analysis import GraphRequest, graph_request, window_covers
from .follow import LedgerFollower
from .hub import FeedHub

if TYPE_CHECKING:
    from .model import GraphModel

ANALYSIS_EVERY_S = 5.0  # estimates and signals: recomputed at most this often
ANALYSIS_SHARE = 0.1  # after changes: a full run at most every 10 × its own duration (≤ 10 % of a core)
# With nothing changing, time-based signals (stale heartbeat, orphaned lease, overdue) run at most
# every TIME_SIGNALS_EVERY_S and every 1 / TIME_SIGNALS_SHARE × their last duration. The whole idle
# budget is 1 % of a core, and a run costs more than its own duration (the worker's journal read, the
# UI's repaint of what it changed) beside Textual's own idle cost (~0.4 %): so the signals get a fifth of it. With
# 3,000 live leases on 100k nodes a pass is ~50 ms (every ~25 s); a small ledger's, every 15 s.
# (Every 10 s measured 0.9–1.2 % of a core end to end at 3,000 leases: py-spy put half in signals.)
TIME_SIGNALS_SHARE = 0.002
TIME_SIGNALS_EVERY_S = 15.0


class Analyst(Protocol):
    """What the scheduler needs of the analysis worker (``console.analysis_client.AnalysisWorker``)."""

    last_seconds: dict[str, float]

    def drop_graph(self) -> None: ...


class AnalysisHost(Protocol):
    """What the scheduler needs of the app."""

    hub: FeedHub
    follower: LedgerFollower
    analysis_enabled: bool

    @property
    def analyst(self) -> Analyst: ...
    @property
    def loaded(self) -> bool: ...
    @property
    def unavailable(self) -> str | None: ...
    def later(self, delay: float, callback: Callable[[], object]) -> None: ...
    def call_after_refresh(self, callback: Callable[[], object]) -> bool: ...
    def start_analysis(self, req: GraphRequest | None, task_ids: list[str], parts: frozenset[str],
                       kind: str, must_eta: int | None = None) -> object: ...


class AnalysisRuns:
    """The scheduling state and the ways to start a run (see the module's docstring)."""

    def __init__(self, app: AnalysisHost) -> None:
        self.app = app
        self.busy = False  # one analysis run at a time
        self.eta_at: dict[str, float] = {}  # monotonic: when each task's figure was last computed
        self._next_full_at = 0.0  # monotonic: the next full run after changes, not sooner
        self._full_asked = False  # a full run was asked for while another ran: the next tick runs it
        self._graph_asked = False  # a graph loaded while another run ran: its own run follows at once
        self._next_signals_at = 0.0  # monotonic: the next time-based signal run, not sooner
        self._window: tuple[object, frozenset[str]] = (None, frozenset())  # (model, keys) whose P80s were asked for

    def start(self) -> None:
        self.app.later(1.0, self._timer)

    def _graph(self) -> tuple[GraphModel, range] | None:
        """The graph a screen shows (the last one shown) and its rows on screen."""
        for s in reversed(self.app.hub.shown()):
            g = s.graph_on_screen()
            if g is not None:
                return g
        return None

    def _timer(self) -> None:
        """Once a second, at most one analysis run (off the UI thread), bounded in cost:

        * after events, a full run (task figures, the P80s around the screen, signals) for what they
          touched — at most every ``ANALYSIS_EVERY_S`` and every 10 × its own last duration;
        * without events, the time-based signals (stale heartbeat, orphaned lease, overdue change as
          the clock moves) — at most every ``TIME_SIGNALS_EVERY_S`` and every 500 × their last duration;
        * the graph scrolled or filtered to rows whose P80s were not asked for yet: those rows."""
        app = self.app
        if self._graph() is None:
            app.analyst.drop_graph()  # no graph open: the worker frees its analysis
        if app.loaded and not app.unavailable and not self.busy:
            now = time.monotonic()
            dirty = app.follower.analysis_dirty
            if dirty and now >= self._next_full_at:
                self.run_analysis()
            elif not dirty and now >= self._next_signals_at:
                self.run_time_signals()
            elif self._window_moved():
                self.run_node_window()
        app.later(1.0, self._timer)

    def graph_loaded(self, model: GraphModel, *, first: bool, last: bool) -> None:
        """A screen's graph got its first page (the P80s of the rows on screen, at once) or its last
        (a run of that graph alone: the worker reads it and keeps its incremental analysis)."""
        app = self.app
        if not app.analysis_enabled:
            return
        if first and not self.busy:
            app.call_after_refresh(self.run_node_window)
        if last and model.task is not None:
            self.run_graph()

    def run_graph(self) -> None:
        """The open graph's figures alone (its task's figure, the P80s around the screen, its
        signals) now, or as soon as the run under way ends. Not a full run: the other tasks' figures
        (a Monte Carlo each; a second for a 400-task fleet) wait for the full runs' own spacing
        rather than arriving with the graph, which they kept waiting, on the interpreter, while it
        opened and its first changes came in (docs/console.md)."""
        if self.busy:
            self._graph_asked = True
            return
        req = self._graph_request()
        if req is not None:
            self._start(req, [], frozenset({"eta", "nodes", "signals"}), "graph")

    def _graph_request(self) -> GraphRequest | None:
        """What the open graph needs computed (``console.analysis.graph_request``)."""
        shown = self._graph()
        if shown is None:
            return None
        g, visible = shown
        req = graph_request(g, visible)
        self._window = (g, frozenset(n.key for n in req.window))
        return req

    def _window_moved(self) -> bool:
        """Rows on screen in the open graph whose P80 was not asked for (scrolled, filtered)."""
        shown = self._graph()
        if shown is None:
            return False
        g, visible = shown
        model, keys = self._window
        return not window_covers(g, visible, keys if model is g else frozenset())

    def run_time_signals(self) -> None:
        """Signals only, for the tasks on screen and the open graph (its running and parked rows)."""
        if self.busy:
            self._next_signals_at = 0.0  # as soon as the run under way ends
            return
        tasks = self.app.hub.tasks
        visible: set[str] = set()
        for s in self.app.hub.shown():
            for tid in s.tasks_on_screen():
                i = tasks.index.get(tid)
                if i is not None and tasks.rows[i].view.status in ("active", "parked"):
                    visible.add(tid)
        req = self._graph_request()
        if req is not None:
            req = replace(req, window=())
        if req is not None or visible:
            self._start(req, sorted(visible), frozenset({"signals"}), "signals")
        else:
            self._next_signals_at = time.monotonic() + TIME_SIGNALS_EVERY_S

    def run_node_window(self) -> None:
        """P80s of the graph rows around the screen (after a scroll or a filter)."""
        if self.busy:
            return  # the timer looks again in a second
        req = self._graph_request()
        if req is not None and req.window:
            self._start(req, [], frozenset({"nodes"}), "nodes")

    def run_analysis(self) -> None:
        """A full run now (or as soon as the one under way ends): task figures, the graph's P80s
        around the screen, signals — for the open graph and the tasks events touched."""
        if self.busy:
            self._full_asked = True
            return
        dirty = self.app.follower.analysis_dirty
        small = [r.view.task_id for r in self.app.hub.tasks.rows
                 if r.view.task_id in dirty or r.view.task_id not in self.eta_at]
        dirty.clear()
        # The tasks on screen get their figures every run; the others as the run's budget allows
        # (console.analysis.ETA_BUDGET_S), the oldest figure first, so that none waits for ever.
        on_screen: set[str] = set()
        for s in self.app.hub.shown():
            on_screen.update(s.tasks_on_screen())
        first = [t for t in small if t in on_screen]
        rest = sorted((t for t in small if t not in on_screen), key=lambda t: self.eta_at.get(t, float("-inf")))
        self._start(self._graph_request(), first + rest, frozenset({"eta", "nodes", "signals"}), "full",
                    must_eta=len(first))

    def took(self, task_id: str, eta: bool) -> None:
        """A full run's result for ``task_id``: with its figure (``eta``), or without one — the
        run's budget was spent — so that the next full run computes it."""
        if eta:
            self.eta_at[task_id] = time.monotonic()
        else:
            self.app.follower.analysis_dirty.add(task_id)

    def _start(self, req: GraphRequest | None, task_ids: list[str], parts: frozenset[str], kind: str,
               must_eta: int | None = None) -> None:
        self.busy = True
        self.app.start_analysis(req, task_ids, parts, kind, must_eta)

    def done(self, kind: str) -> None:
        """A run ended: space the next ones by what this one cost."""
        self.busy = False
        took = self.app.analyst.last_seconds.get(kind, 0.0)
        now = time.monotonic()
        if kind == "full":
            self._next_full_at = now + max(ANALYSIS_EVERY_S, took / ANALYSIS_SHARE)
            self._next_signals_at = now + TIME_SIGNALS_EVERY_S
        elif kind == "signals":
            self._next_signals_at = now + max(TIME_SIGNALS_EVERY_S, took / TIME_SIGNALS_SHARE)
        if self._full_asked:  # asked for while this one ran (the first load): at the next tick
            self._full_asked = False
            self._next_full_at = 0.0
        if self._graph_asked:
            self._graph_asked = False
            self.app.call_after_refresh(self.run_graph)


__all__ = ["ANALYSIS_EVERY_S", "ANALYSIS_SHARE", "AnalysisHost", "AnalysisRuns", "TIME_SIGNALS_EVERY_S",
           "TIME_SIGNALS_SHARE"]

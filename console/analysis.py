"""Estimates and signals for what the console shows, computed in a worker thread.

The figures come from ``store.estimation.estimates`` and ``store.reading.signals`` (never computed here). What is
computed is bounded by what is on screen, never by the size of a task (a pass over a
100k-node graph held the GIL for seconds and stalled painting and keys):

* the open graph's figures from its incremental ``store.reading.analysis.TaskAnalysis`` (:class:`OpenGraph`:
  built from the model's own rows once the graph has loaded, fed the feed's deltas): the **task
  figure** (the same as ``warden status``), **per-node P80s only for the rows on screen** and a
  screen either side (a few dozen nodes, not 100k), **signals** of the running and parked nodes and
  the task's own — nothing re-read per run but what changed;
* while the graph is still loading, the same figures from the ledger (``estimate_task``, the window
  with ``estimate_graph``, the running and parked nodes' signals ``SIGNAL_CHUNK`` at a time);
* the other tasks of the task list with ``estimate_task`` / ``signals_for_task``.

:class:`Analyst` is the worker's memory between runs: the duration history (re-read after a node
somewhere succeeded, or after a minute) and how long each kind of run took, which the app uses to
space runs out so that estimates and signals never take more than a bounded share of a core.
The result goes back to the UI thread as one ``AnalysisReady`` message.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from store import Ledger
from store.estimation import estimates
from store.reading import signals
from store.reading.analysis import TaskAnalysis
from store.errors import NotFound
from store.reading.feed import Feed, changed_nodes
from store.reading.cli_json import empty_eta, signal_json
from store.reading.tally import current
from store.reading.signals import Signal
from store.views import EventView, GraphRow, GraphView, NodeView, TaskView

from .liveturn import LiveTurn
from .messages import AnalysisReady
from .model import EtaJson, GraphModel, SignalJson

HISTORY_TTL_S = 60.0  # the duration history is re-read at least this often while in use
PARTS = frozenset({"eta", "nodes", "signals"})
# A full run's task figures beyond the tasks on screen: computed while the run is under this long,
# the rest left for the next run (oldest figure first; console/analysis_runs.py). In a fleet of
# thousands of active tasks every task is touched between runs, and a Monte Carlo each made a run
# last a minute — so its signals (alarms) waited that long too, and the spacing rule (a run at most
# every 10 × its duration) would put ten minutes between them.
ETA_BUDGET_S = 0.5


@dataclass(frozen=True)
class GraphRequest:
    """What the open graph needs: its task row, the rows on screen (and a screen either side) whose
    P80 is shown, and its running and parked rows (whose signals are shown)."""

    task: TaskView
    window: tuple[GraphRow, ...] = ()
    live: tuple[GraphRow, ...] = ()


def graph_request(g: GraphModel, visible: range, *, live: bool = True) -> GraphRequest:
    """For the open graph's model ``g`` (``console.model.GraphModel``): its task row, the rows on
    screen (``visible`` positions) and a screen either side, and (``live``) its running and parked
    rows — a scan of the model, a few ms at 100k nodes."""
    h = max(1, len(visible))
    lo, hi = max(0, visible.start - h), min(g.row_count(), visible.stop + h)
    window = tuple(n for n in (g.node_at(p) for p in range(lo, hi)) if n is not None) if len(visible) else ()
    rows = tuple(n for n in g.nodes if n.status in ("running", "parked")) if live else ()
    assert g.task is not None, "the graph's first page has not arrived"  # a screen shows a started model only
    return GraphRequest(task=g.task, window=window, live=rows)


def window_covers(g: GraphModel, visible: range, keys: frozenset[str]) -> bool:
    """Every row on screen is among ``keys`` (their P80s were asked for)."""
    for p in visible:
        n = g.node_at(p)
        if n is not None and n.key not in keys:
            return False
    return True


SIGNAL_CHUNK = 500  # running nodes whose signals are read and judged at a time


def graph_signals(ledger: Ledger, req: GraphRequest, history: estimates.DurationHistory, now: float,
                  pause: Callable[[], object] = lambda: None) -> list[Signal]:
    """``signals_for_graph`` of the running and parked rows, read as whole nodes (the rows carry what
    estimates read; signals read more) ``SIGNAL_CHUNK`` running nodes at a time: the same signals —
    a node's own depend on it, its kind and the task only — with a tenth of the memory at its peak
    (thousands of running nodes: their observations and heartbeats) and the interpreter handed to
    the UI thread between chunks. Task-level signals come from the first chunk only."""
    running = [n for n in req.live if n.status == "running"]
    parked = [n for n in req.live if n.status != "running"]
    task = req.task
    out: list[Signal] = []
    for i, start in enumerate(range(0, max(1, len(running)), SIGNAL_CHUNK)):
        part = running[start:start + SIGNAL_CHUNK]
        keys = [n.key for n in (parked if i == 0 else []) + part]
        full = GraphView(task=task, nodes=tuple(ledger.nodes(task.task_id, keys)))
        got = signals.signals_for_graph(ledger, full, history=history, now=now)
        if i:
            mine = {n.key for n in part}
            got = [s for s in got if s.node in mine]
        out.extend(got)
        pause()
    return signals.sort_signals(out)


_TRIM: Callable[[int], object] | None = None
_TRIM_LOOKED = False  # _TRIM was looked for (once)


def release_memory() -> None:
    """Give freed memory back to the system (glibc's ``malloc_trim``; nothing elsewhere). A run
    reads thousands of rows and frees them; glibc kept ~15 MB of that per run at 100k nodes."""
    global _TRIM, _TRIM_LOOKED
    if not _TRIM_LOOKED:
        _TRIM_LOOKED = True
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
            except (OSError, AttributeError):
                _TRIM = None
    if _TRIM is not None:
        _TRIM(0)


class OpenGraph:
    """The open graph's incremental analysis (``store.reading.analysis.TaskAnalysis``), fed the feed's
    deltas. The UI thread hands over the loaded rows (:meth:`seed`) and each delta (:meth:`delta`:
    two references appended to a list, nothing computed); the analysis worker builds the
    ``TaskAnalysis`` from the rows (no second read of the graph: it shares the model's row
    tuples) and applies the deltas at the start of each run (:meth:`current`)."""

    def __init__(self, pause: Callable[[], object] = lambda: None) -> None:
        self._lock = threading.Lock()
        self.pause = pause  # the analysis worker's pause point (the Analyst's LiveTurn)
        self.task_id: str | None = None
        self._seed: tuple[TaskView, tuple[GraphRow, ...]] | None = None
        self._inbox: list[tuple[Sequence[EventView], Mapping[tuple[str, str], NodeView]]] = []
        self._generation = 0
        self.analysis: TaskAnalysis | None = None
        self.seen = 0  # the last journal id handed over by the UI (the rows' cursor at seed time)

    def seed(self, task: TaskView, rows: Sequence[GraphRow]) -> None:
        """UI thread: the graph of ``task`` finished loading; ``rows`` as the model holds them."""
        with self._lock:
            self._generation += 1
            self.task_id = task.task_id
            self._seed = (task, tuple(rows))
            self._inbox = []
            self.analysis = None

    def follows(self, task_id: str) -> bool:
        """The loaded graph of ``task_id`` was handed over (its analysis is or will be built)."""
        return self.task_id == task_id

    def drop(self) -> None:
        """UI thread: no graph open any more (its analysis is freed)."""
        if self.task_id is None and self.analysis is None:
            return
        with self._lock:
            self._generation += 1
            self.task_id = None
            self._seed = None
            self._inbox = []
            self.analysis = None

    def delta(self, events: Sequence[EventView], nodes: Mapping[tuple[str, str], NodeView]) -> None:
        """UI thread: one applied delta (events in id order, the node views read for them)."""
        if events:
            self.seen = max(self.seen, events[-1].id)
        if self.task_id is not None and (events or nodes):
            with self._lock:
                self._inbox.append((events, nodes))

    def current(self, ledger: Ledger, task: TaskView) -> TaskAnalysis | None:
        """Worker thread: the analysis of ``task`` (its latest view) with every delta handed over
        so far applied; None when that task's graph is not (fully) loaded."""
        with self._lock:
            if self.task_id != task.task_id:
                return None
            generation, seed, an = self._generation, self._seed, self.analysis
            inbox, self._inbox = self._inbox, []
            self._seed = None
            cursor = self.seen
        if seed is not None:
            try:
                an = TaskAnalysis(ledger, task.task_id, rows=seed[1], task=seed[0], cursor=cursor, pause=self.pause)
            except BaseException:
                with self._lock:  # tried again on the next run, the deltas with it
                    if generation == self._generation and self._seed is None:
                        self._seed = seed
                        self._inbox[:0] = inbox
                raise
            gc.freeze()  # its 100k-entry dict out of the collector's walk, like the model's rows
        if an is None:
            return None
        an.ledger = ledger  # the feed's (a PostgreSQL reconnect replaces its connection)
        tid = task.task_id
        for i, (events, nodes) in enumerate(inbox):
            for e in events:
                if e.task_id == tid:
                    # every node the event names: an operator's abort or narrow lists them in its
                    # payload (event.node is None), and a node left "running" here kept its alarms
                    views = [v for k in sorted(changed_nodes([e], tid)) if (v := nodes.get((tid, k))) is not None]
                    an.apply_event(e, views, task=an.task)
            if i % 20 == 19:
                self.pause()
        an.task = task  # the console's latest task row (counts, budget)
        with self._lock:
            if generation == self._generation:
                self.analysis = an
        return an


class Analyst:
    """The analysis worker's state between runs. One run at a time (the app never starts a run
    while one is going); ``forget_history`` may be called from any thread."""

    def __init__(self, feed: Feed, rows: Callable[[str], TaskView | None] | None = None,
                 turn: LiveTurn | None = None) -> None:
        self.feed = feed
        #: the live path's turn (console/liveturn.py): a run waits at its pause points while a
        #: change or a key is on its way to the screen
        self.turn = turn or LiveTurn()
        #: the task rows the console holds (``store.reading.tally``), so that a run does not count a task's
        #: nodes again (``Ledger.task``: 50 ms at 100k nodes) for a row it already has
        self.rows = rows or (lambda task_id: None)
        self._history: estimates.DurationHistory | None = None
        self._history_at = 0.0
        self._stale = False
        self.lock = threading.Lock()
        # the wall time of the last run of each kind, less what it waited for the live path (the
        # runs are spaced by what they cost, not by how busy the screen was)
        self.last_seconds: dict[str, float] = {}
        self.graph = OpenGraph(self.turn.pause)

    def forget_history(self) -> None:
        """A node succeeded somewhere: durations moved, re-read them on the next run."""
        self._stale = True

    def history(self) -> estimates.DurationHistory:
        if self._history is None or self._stale or time.monotonic() - self._history_at > HISTORY_TTL_S:
            self._history = estimates.DurationHistory()
            self._history_at = time.monotonic()
            self._stale = False
        return self._history

    def run(self, now: float, graph: GraphRequest | None, task_ids: Sequence[str], *,
            parts: frozenset[str] = PARTS, kind: str = "full", must_eta: int | None = None) -> AnalysisReady:
        """The parts asked for (``eta``: task figures, ``nodes``: the window's node figures,
        ``signals``) for the open graph and the tasks ``task_ids``. With ``must_eta``, the task
        figures (a Monte Carlo each: most of a run's cost) of the tasks after the first ``must_eta``
        are computed only while the run is under ``ETA_BUDGET_S``; the others come back without
        one (None: what is shown stays) — their signals are always computed."""
        with self.lock:
            t0 = time.monotonic()
            waited0 = self.turn.waited_s
            # No cyclic collection during the run: its reads make tens of thousands of short-lived
            # objects that reference counting frees anyway, and a full collection that walked them
            # held the interpreter for 100-300 ms, stalling the UI (bench_console.py --stall-trace).
            collecting = gc.isenabled()
            gc.disable()
            try:
                return self._run(now, graph, task_ids, parts, must_eta, kind)
            finally:
                if collecting:
                    gc.enable()
                if kind != "nodes":
                    release_memory()
                self.last_seconds[kind] = max(0.0, time.monotonic() - t0 - (self.turn.waited_s - waited0))

    def _run(self, now: float, graph: GraphRequest | None, task_ids: Sequence[str],
             parts: frozenset[str], must_eta: int | None = None, kind: str = "full") -> AnalysisReady:
        t0 = time.monotonic()
        history = self.history()
        pause = self.turn.pause
        tasks: dict[str, tuple[EtaJson | None, Sequence[SignalJson] | None]] = {}
        graph_result = None

        def graph_analysis(ledger: Ledger, req: GraphRequest) -> tuple[EtaJson | None, dict[str, EtaJson] | None,
                                                                       Sequence[SignalJson] | None]:
            task = req.task
            eta: EtaJson | None = None
            node_etas: dict[str, EtaJson] | None = None
            sigs: list[SignalJson] | None = None
            an = self.graph.current(ledger, task)
            if an is not None:  # the incremental analysis of the loaded graph
                if "eta" in parts:
                    eta = an.task_estimate(now, pause=pause).to_json()
                if "nodes" in parts and req.window:
                    keys = [n.key for n in req.window]
                    got = an.node_estimates(keys, now)
                    none = empty_eta()  # a finished node: no figure (one shared dict)
                    node_etas = {k: got[k].to_json() if k in got else none for k in keys}
                if "signals" in parts:
                    sigs = [signal_json(s) for s in an.signals(now, pause=pause)]
                return eta, node_etas, sigs
            # the graph is still loading: the same figures from the ledger, bounded by the screen
            if "eta" in parts:
                eta = estimates.estimate_task(ledger, task, history=history, now=now, pause=pause).to_json()
            if "nodes" in parts and req.window:
                # estimate_graph of the window alone, its task marked finished so that it skips the
                # task figure (computed above from the whole task, not from these rows)
                # (GraphView.nodes says NodeView; the window's rows are mostly NodeRows, which carry what
                # the estimates read — store/views.py is to say so, then this Any goes)
                rows: tuple[Any, ...] = req.window
                done = GraphView(task=replace(task, status="completed"), nodes=rows)
                est = estimates.estimate_graph(ledger, done, history=history, now=now)
                node_etas = {k: e.to_json() for k, e in est.nodes.items()}
            if "signals" in parts:
                sigs = [signal_json(s) for s in graph_signals(ledger, req, history, now, pause)]
            return eta, node_etas, sigs

        def task_analysis(ledger: Ledger, tid: str, want_eta: bool) -> tuple[EtaJson | None, Sequence[SignalJson] | None]:
            held = self.rows(tid)
            task = current(held, now) if held is not None else ledger.task(tid)
            eta = (estimates.estimate_task(ledger, task, history=history, now=now, pause=pause).to_json()
                   if want_eta else None)
            sigs = ([signal_json(s) for s in signals.signals_for_task(ledger, task, history=history, now=now)]
                    if "signals" in parts else None)
            return eta, sigs

        if graph is not None:
            eta, node_etas, sigs = self.feed.read(lambda ledger: graph_analysis(ledger, graph))
            graph_result = (graph.task.task_id, eta, node_etas, sigs)
            if parts != {"nodes"}:
                tasks[graph.task.task_id] = (eta, sigs)
        for i, tid in enumerate(task_ids):
            if tid in tasks or parts == {"nodes"}:
                continue
            pause()  # between tasks
            want_eta = "eta" in parts and (must_eta is None or i < must_eta or time.monotonic() - t0 < ETA_BUDGET_S)
            try:
                tasks[tid] = self.feed.read(lambda ledger: task_analysis(ledger, tid, want_eta))
            except NotFound:
                continue
        return AnalysisReady(tasks, graph_result, parts=parts, kind=kind)


@dataclass(frozen=True)
class NodeExplanation:
    """What the node detail explains (computed in its worker): the node's signals as ``warden graph
    --json`` gives them (SIGNAL dicts), its estimate (ETA dict with ``why``), and the time they are for."""

    task_id: str
    key: str
    signals: tuple[SignalJson, ...]
    eta: EtaJson
    at: float


def explain_node(ledger: Ledger, task_id: str, key: str, now: float, *, task: TaskView | None = None,
                 history: estimates.DurationHistory | None = None) -> NodeExplanation:
    """The node's signals (``store.reading.signals.signals_for_node``: the same as ``signals_for_graph`` gives it)
    and its estimate (``estimate_graph`` of the node alone, as the graph's rows get theirs). ``task``:
    the task row the console already holds (reading it again counts its nodes: 175 ms at 100k)."""
    if task is None or task.task_id != task_id:
        task = ledger.task(task_id)
    node = ledger.node(task_id, key)
    history = history if history is not None else estimates.DurationHistory()
    sigs = signals.signals_for_node(ledger, task, node, history=history, now=now)
    alone = GraphView(task=replace(task, status="completed"), nodes=(node,))
    est = estimates.estimate_graph(ledger, alone, history=history, now=now).nodes.get(key, estimates.NO_ESTIMATE)
    return NodeExplanation(task_id, key, tuple(signal_json(s) for s in sigs), est.to_json(), now)


__all__ = ["Analyst", "GraphRequest", "HISTORY_TTL_S", "NodeExplanation", "OpenGraph", "PARTS", "SIGNAL_CHUNK", "explain_node",
           "graph_request", "graph_signals", "window_covers"]

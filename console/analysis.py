"""Estimates and signals for what the console shows: what a run asks for, and how it is computed.

The figures come from the store's public functions (``store.estimation.estimates``,
``store.reading.signals``, ``store.reading.analysis.TaskAnalysis``); nothing is computed here but which of them to call, for what. A
run is computed in the console's analysis worker, a process of its own
(``console/analysis_worker.py``), never on the interpreter the UI draws with: the console sends a
:class:`RunRequest` and gets a :class:`RunResult` back. What is computed is bounded by what is on
screen, never by the size of a task:

* the open graph's figures from its incremental ``TaskAnalysis`` (:class:`OpenGraph`: read once
  in the worker, then fed the journal's events): the **task figure** (the same as ``warden
  status``), **per-node P80s only for the rows on screen** and a screen either side (a few dozen
  nodes, not 100k), **signals** of the running and parked nodes and the task's own;
* while the console is still loading the graph, the same figures from the ledger, without reading
  the graph (``estimate_task``, ``estimate_graph`` of the rows on screen, ``signals_for_task``): the
  worker reads it once the console has (two reads of a 100k-node graph at once, on a machine of two
  cores, kept both waiting);
* the other tasks of the task list with ``estimate_task`` / ``signals_for_task``.

:class:`Analyst` is the worker's memory between runs. It follows the journal itself (the same
journal the console's feed reads: its own read-only connection, read at the start of each run):
every task's row (``store.reading.tally.TaskTally``), the open graph's analysis, and the duration history
(re-read after a node somewhere succeeded, or after a minute).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from store import Ledger
from store.errors import NotFound
from store.storage.events import NodeCommitted
from store.estimation import estimates
from store.reading import signals
from store.reading.analysis import TaskAnalysis
from store.reading.cli_json import empty_eta, signal_json
from store.reading.feed import Feed, changed_nodes, tail_at
from store.reading.tally import TaskTally, current
from store.views import EventView, GraphRow, GraphView, NodeView, TaskView

if TYPE_CHECKING:  # (the worker process never loads the console's view models, nor Textual)
    from .model import EtaJson, GraphModel, SignalJson

HISTORY_TTL_S = 60.0  # the duration history is re-read at least this often while in use
PARTS = frozenset({"eta", "nodes", "signals"})
# A full run's task figures beyond the tasks on screen: computed while the run is under this long,
# the rest left for the next run (oldest figure first; console/analysis_runs.py). In a fleet of
# thousands of active tasks every task is touched between runs, and a Monte Carlo each made a run
# last a minute — so its signals (alarms) waited that long too, and the spacing rule (a run at most
# every 10 × its duration) would put ten minutes between them.
ETA_BUDGET_S = 0.5
NODE_READ_CHUNK = 500  # the open graph's changed nodes read at a time

TaskFigures = tuple["EtaJson | None", "Sequence[SignalJson] | None"]
GraphFigures = tuple[str, "EtaJson | None", "Mapping[str, EtaJson] | None", "Sequence[SignalJson] | None"]


@dataclass(frozen=True)
class GraphRequest:
    """What the open graph needs: its task, and the rows on screen (and a screen either side)
    whose P80 is shown; ``loaded``: the console has the whole graph (the worker may read it too)."""

    task_id: str
    window: tuple[GraphRow, ...] = ()
    loaded: bool = True


@dataclass(frozen=True)
class RunRequest:
    """One run (console → worker). ``parts``: ``eta`` (task figures), ``nodes`` (the window's P80s),
    ``signals``. With ``must_eta``, the task figures of the tasks after the first ``must_eta`` are
    computed only while the run is under ``ETA_BUDGET_S``. ``kind``: the scheduler's name for it
    (console/analysis_runs.py), carried back with the result."""

    now: float
    graph: GraphRequest | None
    task_ids: tuple[str, ...]
    parts: frozenset[str] = PARTS
    kind: str = "full"
    must_eta: int | None = None


@dataclass(frozen=True)
class RunResult:
    """A run's figures (worker → console): task id → (eta, signals), None where a part was not
    computed (what is shown stays); the open graph's (task id, eta, the window's etas, signals).
    ``took_s``: the run's wall time in the worker; ``error``: why it failed (one line), or None;
    ``lost``: the worker stopped during the run (the operator was told already)."""

    kind: str
    parts: frozenset[str]
    tasks: dict[str, TaskFigures] = field(default_factory=dict)
    graph: GraphFigures | None = None
    took_s: float = 0.0
    error: str | None = None
    lost: bool = False


def graph_request(g: GraphModel, visible: range) -> GraphRequest:
    """For the open graph's model ``g`` (``console.model.GraphModel``): the rows on screen
    (``visible`` positions) and a screen either side."""
    h = max(1, len(visible))
    lo, hi = max(0, visible.start - h), min(g.row_count(), visible.stop + h)
    window = tuple(n for n in (g.node_at(p) for p in range(lo, hi)) if n is not None) if len(visible) else ()
    return GraphRequest(task_id=g.task_id, window=window, loaded=g.complete)


def window_covers(g: GraphModel, visible: range, keys: frozenset[str]) -> bool:
    """Every row on screen is among ``keys`` (their P80s were asked for)."""
    for p in visible:
        n = g.node_at(p)
        if n is not None and n.key not in keys:
            return False
    return True


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
    """The open graph's incremental analysis (``store.reading.analysis.TaskAnalysis``): read once, from one
    snapshot of the graph's lean rows, then fed the journal's events of its task."""

    def __init__(self) -> None:
        self.analysis: TaskAnalysis | None = None
        self.builds = 0  # graphs read whole (tests: once per graph opened)

    @property
    def task_id(self) -> str | None:
        return self.analysis.task_id if self.analysis is not None else None

    def drop(self) -> None:
        """No graph open any more: its analysis is freed."""
        self.analysis = None

    def build(self, feed: Feed, task: TaskView) -> TaskAnalysis:
        """Read the graph of ``task`` (``Ledger.graph_pages``: lean rows and the journal id they are
        as of) and build its analysis; the events after that id come with :meth:`take`."""
        self.analysis = None
        rows: list[GraphRow] = []
        at = 0
        seen = task
        for page in feed.read(lambda ledger: list(ledger.graph_pages(task.task_id))):
            if page.start == 0:
                rows = []  # (a stream that starts again from the top: positions moved)
            rows.extend(page.nodes)
            at, seen = page.at, page.task
        an = feed.read(lambda ledger: TaskAnalysis(ledger, task.task_id, rows=rows, task=seen, cursor=at))
        self.analysis = an
        self.builds += 1
        return an

    def take(self, feed: Feed, events: Sequence[EventView], task: TaskView | None) -> None:
        """The journal's next events (id order): those of the followed task it has not seen, with
        the fresh views of the nodes they name (read after the events, as the console's are)."""
        an = self.analysis
        if an is None:
            return
        tid = an.task_id
        mine = [e for e in events if e.task_id == tid and e.id > an.cursor]
        if not mine:
            return
        keys = sorted(changed_nodes(mine, tid))
        views: dict[str, NodeView] = {}
        for i in range(0, len(keys), NODE_READ_CHUNK):
            chunk = keys[i:i + NODE_READ_CHUNK]
            views.update((v.key, v) for v in feed.read(lambda ledger: ledger.nodes(tid, chunk)))
        for e in mine:
            named = changed_nodes([e], tid)
            fresh = [views[k] for k in sorted(named) if k in views]
            feed.read(lambda ledger: an.apply_event(e, fresh, task=task))
        if task is not None:
            an.task = task


class Analyst:
    """The worker's state between runs (see the module's docstring). One run at a time."""

    def __init__(self, feed: Feed, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.feed = feed
        self.monotonic = monotonic
        self.tally = TaskTally()
        self.cursor: int | None = None  # the last journal id followed (None: start from a snapshot)
        self.graph = OpenGraph()
        self._history: estimates.DurationHistory | None = None
        self._history_at = 0.0
        self._stale = False

    # ------------------------------------------------------------------ following the journal
    def follow(self) -> None:
        """Read the journal to its end: every task's row, the open graph's analysis, whether a
        duration was added. A ledger file replaced, or no start yet: everything from a snapshot."""
        feed = self.feed
        if feed.check() or self.cursor is None:
            tasks, _, self.cursor = tail_at(feed, 0)
            self.tally.start(tasks)
            self.graph.drop()
            self._stale = True
        while True:
            delta = feed.since(self.cursor)
            events = list(delta.events)
            if events:
                feed.read(lambda ledger: self.tally.apply(ledger, events))
                if any(e.kind == NodeCommitted.KIND for e in events):
                    self._stale = True  # a duration was added: the estimates re-read them
                tid = self.graph.task_id
                self.graph.take(feed, events, self.tally.view(tid) if tid is not None else None)
            self.cursor = delta.cursor
            if not delta.more:
                return

    def history(self) -> estimates.DurationHistory:
        if self._history is None or self._stale or self.monotonic() - self._history_at > HISTORY_TTL_S:
            self._history = estimates.DurationHistory()
            self._history_at = self.monotonic()
            self._stale = False
        return self._history

    def task_row(self, task_id: str, now: float) -> TaskView:
        """The task's row as the journal left it, its clock figures as of ``now``."""
        held = self.tally.view(task_id)
        return current(held, now) if held is not None else self.feed.read(lambda ledger: ledger.task(task_id))

    # ------------------------------------------------------------------ a run
    def run(self, req: RunRequest) -> RunResult:
        t0 = self.monotonic()
        self.follow()
        tasks, graph = self._run(req, t0)
        release_memory()
        return RunResult(req.kind, req.parts, tasks, graph, took_s=max(0.0, self.monotonic() - t0))

    def _run(self, req: RunRequest, t0: float) -> tuple[dict[str, TaskFigures], GraphFigures | None]:
        now, parts = req.now, req.parts
        history = self.history()
        tasks: dict[str, TaskFigures] = {}
        graph_result = None
        if req.graph is None:
            self.graph.drop()
        else:
            try:
                graph_result = self._graph(req.graph, now, parts, history)
            except NotFound:
                graph_result = None
            if graph_result is not None and parts != {"nodes"}:
                tasks[req.graph.task_id] = (graph_result[1], graph_result[3])

        def task_analysis(ledger: Ledger, task: TaskView, want_eta: bool) -> TaskFigures:
            eta = estimates.estimate_task(ledger, task, history=history, now=now).to_json() if want_eta else None
            sigs = ([signal_json(s) for s in signals.signals_for_task(ledger, task, history=history, now=now)]
                    if "signals" in parts else None)
            return eta, sigs

        if parts != {"nodes"}:
            for i, tid in enumerate(req.task_ids):
                if tid in tasks:
                    continue
                want_eta = "eta" in parts and (req.must_eta is None or i < req.must_eta
                                               or self.monotonic() - t0 < ETA_BUDGET_S)
                try:
                    task = self.task_row(tid, now)
                    tasks[tid] = self.feed.read(lambda ledger: task_analysis(ledger, task, want_eta))
                except NotFound:
                    continue
        return tasks, graph_result

    def _graph(self, req: GraphRequest, now: float, parts: frozenset[str],
               history: estimates.DurationHistory) -> GraphFigures:
        task = self.task_row(req.task_id, now)
        an = self.graph.analysis if self.graph.task_id == req.task_id else None
        if an is None and (parts == {"nodes"} or not req.loaded):
            return self._graph_from_ledger(req, task, now, parts, history)
        if an is None:
            an = self.graph.build(self.feed, task)
        an.task = task
        eta: EtaJson | None = None
        node_etas = None
        sigs: list[SignalJson] | None = None
        if "eta" in parts:
            eta = self.feed.read(lambda ledger: an.task_estimate(now)).to_json()
        if "nodes" in parts and req.window:
            keys = [n.key for n in req.window]
            got = self.feed.read(lambda ledger: an.node_estimates(keys, now))
            none = empty_eta()  # a finished node: no figure (one shared dict)
            node_etas = {k: got[k].to_json() if k in got else none for k in keys}
        if "signals" in parts:
            sigs = [signal_json(s) for s in self.feed.read(lambda ledger: an.signals(now))]
        return req.task_id, eta, node_etas, sigs

    def _graph_from_ledger(self, req: GraphRequest, task: TaskView, now: float, parts: frozenset[str],
                           history: estimates.DurationHistory) -> GraphFigures:
        """The open graph's figures without its incremental analysis (not read yet): the task's
        figure and signals as ``warden status`` gives them, and the rows on screen alone through
        ``estimate_graph``, their task marked finished so that it skips the task figure."""
        eta: EtaJson | None = None
        node_etas: dict[str, EtaJson] | None = None
        sigs: list[SignalJson] | None = None
        if "eta" in parts:
            eta = self.feed.read(lambda ledger: estimates.estimate_task(ledger, task, history=history, now=now)).to_json()
        if "nodes" in parts and req.window:
            rows: tuple[Any, ...] = tuple(req.window)  # NodeRows carry what the estimates read
            done = GraphView(task=replace(task, status="completed"), nodes=rows)
            est = self.feed.read(lambda ledger: estimates.estimate_graph(ledger, done, history=history, now=now))
            node_etas = {k: e.to_json() for k, e in est.nodes.items()}
        if "signals" in parts:
            sigs = [signal_json(s) for s in self.feed.read(
                lambda ledger: signals.signals_for_task(ledger, task, history=history, now=now))]
        return req.task_id, eta, node_etas, sigs


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
    """The node's signals (``store.signals.signals_for_node``: the same as ``signals_for_graph`` gives it)
    and its estimate (``estimate_graph`` of the node alone, as the graph's rows get theirs). ``task``:
    the task row the console already holds (reading it again counts its nodes: 175 ms at 100k).
    One node: computed in the node detail's own worker thread, not sent to the analysis worker."""
    if task is None or task.task_id != task_id:
        task = ledger.task(task_id)
    node = ledger.node(task_id, key)
    history = history if history is not None else estimates.DurationHistory()
    sigs = signals.signals_for_node(ledger, task, node, history=history, now=now)
    alone = GraphView(task=replace(task, status="completed"), nodes=(node,))
    est = estimates.estimate_graph(ledger, alone, history=history, now=now).nodes.get(key, estimates.NO_ESTIMATE)
    return NodeExplanation(task_id, key, tuple(signal_json(s) for s in sigs), est.to_json(), now)


__all__ = ["Analyst", "ETA_BUDGET_S", "GraphRequest", "HISTORY_TTL_S", "NodeExplanation", "OpenGraph",
           "PARTS", "RunRequest", "RunResult", "explain_node", "graph_request", "release_memory", "window_covers"]

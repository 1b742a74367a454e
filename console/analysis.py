"""Estimates and signals for what the console shows, computed in a worker thread.

The figures come from ``store.estimates`` and ``store.signals`` (never computed here): the open
graph from the view model's snapshot (no re-query of its rows), other tasks without loading their
graphs. The result goes back to the UI thread as one ``AnalysisReady`` message.
"""

from __future__ import annotations

from typing import Any

from store import estimates, signals
from store.errors import NotFound
from store.feed import Feed
from store.report import signal_json
from store.views import GraphView

from .messages import AnalysisReady


def analyse(feed: Feed, now: float, snapshot: GraphView | None, task_ids: list[str], *,
            signals_only: bool = False) -> AnalysisReady:
    """The open graph (``snapshot``) and the tasks ``task_ids``: estimates and signals, or only the
    signals (the time-based recompute: the estimates stay as they were)."""
    history = estimates.DurationHistory()
    graph_result = None
    tasks: dict[str, tuple[Any, list]] = {}

    def graph_analysis(ledger: Any, graph: GraphView) -> tuple[Any, Any, list]:
        est = None if signals_only else estimates.estimate_graph(ledger, graph, history=history, now=now)
        # the model's rows carry what estimates read; signals read whole nodes, and only the
        # running and parked ones (a few), so those are read here as NodeViews
        live = [n.key for n in graph.nodes if n.status in ("running", "parked")]
        full = GraphView(task=graph.task, nodes=tuple(ledger.nodes(graph.task.task_id, live)))
        sigs = [signal_json(s) for s in signals.signals_for_graph(ledger, full, history=history, now=now)]
        if est is None:
            return None, None, sigs
        return est.task.to_json(), {k: e.to_json() for k, e in est.nodes.items()}, sigs

    def task_analysis(ledger: Any, tid: str) -> tuple[Any, list]:
        task = ledger.task(tid)
        eta = None if signals_only else estimates.estimate_task(ledger, task, history=history, now=now).to_json()
        sigs = [signal_json(s) for s in signals.signals_for_task(ledger, task, history=history, now=now)]
        return eta, sigs

    if snapshot is not None:
        eta, node_etas, sigs = feed.read(lambda ledger: graph_analysis(ledger, snapshot))
        graph_result = (snapshot.task.task_id, eta, node_etas, sigs)
        tasks[snapshot.task.task_id] = (eta, sigs)
    for tid in task_ids:
        if tid in tasks:
            continue
        try:
            tasks[tid] = feed.read(lambda ledger: task_analysis(ledger, tid))
        except NotFound:
            continue
    return AnalysisReady(tasks, graph_result, signals_only=signals_only)


__all__ = ["analyse"]

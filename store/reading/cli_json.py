"""The JSON shapes of `warden status`, `warden graph` and `warden events` (docs/contracts.md "JSON shapes").

One place builds them; the CLI prints them and the console's tests compare against them.
Estimates and signals come from ``estimates.py`` and ``signals.py``.
"""

from __future__ import annotations


from store.ledger import norms
from store.judges import budget as budget_mod
from store.estimation import estimates
from store.reading import signals
from store.parks import conditions as wake_conditions
from store.clock import iso
from store.facade import Ledger
from store.mind.shapes import state_json
from store.storage.schema import SCHEMA_VERSION
from store.jsontypes import JsonObject
from store.reading.signals import Signal, wait_json
from store.views import EffectView, EventView, GraphView, NodeView, TaskView


def empty_eta() -> JsonObject:
    return {"p50_s": None, "p80_s": None, "samples": 0, "confidence": "none", "why": []}


def budget_json(task: TaskView) -> JsonObject:
    """The budget: used against the caps, the gate, and the wall clock's stops (waiting is not work:
    ``paused_since`` while it stands still now, ``paused_for`` why, ``waited_s`` all its stops)."""
    ratio = budget_mod.usage_ratio(task.tokens_used, task.token_cap, task.wall_used_s, task.wall_cap_s)
    why = task.paused_for
    return {
        "tokens_used": task.tokens_used,
        "token_cap": task.token_cap,
        "wall_used_s": round(task.wall_used_s, 3),
        "wall_cap_s": task.wall_cap_s,
        "gate": budget_mod.gate(ratio, task.soft_ratio),
        "ratio": round(ratio, 4),
        "paused_since": iso(task.paused_since) if why else None,
        "paused_for": why,
        "waited_s": round(task.waited_s, 3),
    }


def task_json(task: TaskView, eta: JsonObject | None = None, signals: list[JsonObject] | None = None) -> JsonObject:
    return {
        "task_id": task.task_id,
        "title": task.title,
        "status": task.status,
        "revision": task.revision,
        "counts": dict(task.counts),
        "eta": eta or empty_eta(),
        "budget": budget_json(task),
        "signals": signals or [],
        "handoffs_open": task.handoffs_open,
        "workflow": task.workflow,
        "workflow_version": task.workflow_version,
        "origin": task.origin,
        "preconditions": dict(task.preconditions),
        "constraints": list(task.constraints),
        "park": ({"at": iso(task.parked_at), "reason": task.park_reason, "until": iso(task.park_until),
                  "wake_on": task.wake_on, **wake_json(task, None)} if task.status == "parked" else None),
        "created_at": iso(task.created_at),
        "finished_at": iso(task.finished_at),
        "mind": state_json(task.mind),  # the task's mind counters (store/mind/shapes.py)
    }



def wake_json(task: TaskView, node: str | None) -> JsonObject:
    """The wake conditions of the task's park (``node`` None) or of a node's: each with whether
    (and when) it was met, and whether a met one resumes the park."""
    for key, entry in wake_conditions.targets(task.wake_state):
        if key == node:
            return {"auto_resume": bool(entry.get("auto_resume")),
                    "wake_conditions": [{"condition": c.get("text"), "met_at": iso(c.get("met_at")),
                                         "evidence": c.get("evidence")} for c in entry.get("conditions", ())]}
    return {"auto_resume": False, "wake_conditions": []}


def effect_json(e: EffectView) -> JsonObject:
    return {"node": e.node, "effect_key": e.effect_key, "status": e.status, "external_id": e.external_id,
            "compensation": e.compensation, "compensation_node": e.compensation_node,
            "intended_at": iso(e.intended_at), "confirmed_at": iso(e.confirmed_at),
            "compensated_at": iso(e.compensated_at), "compensated_by": e.compensated_by,
            "compensation_note": e.compensation_note}


def node_json(n: NodeView, eta: JsonObject | None = None, signals: list[JsonObject] | None = None,
              now: float | None = None) -> JsonObject:
    wait = wait_json(n, now)
    return {
        "key": n.key,
        "kind": n.kind,
        "title": n.title,
        "status": n.status,
        "deps": list(n.deps),
        "attempt": n.attempt,
        "lease": {"owner": n.lease_owner, "until": iso(n.lease_until)} if n.has_lease else None,
        "eta": eta or empty_eta(),
        "signals": signals or [],
        "version": n.version,
        "preconditions": dict(n.preconditions),
        "units_done": n.units_done,
        "units_total": n.units_total,
        "tokens_used": n.tokens_used,
        "failure_class": n.failure_class,
        "error": n.error,
        "output_ref": n.output_ref,
        "next_retry_at": iso(n.next_retry_at),
        "heartbeat_at": iso(n.heartbeat_at),
        "wait": wait,  # a declared wait: {"on", "since", "until", "left_s", "text"} or null
        "serves": list(n.serves),  # the task's requirement ids it serves
        "removed_in": n.removed_in,  # the plan version that removed it while it ran (with removed_mode)
    }


def signal_json(s: Signal) -> JsonObject:
    return {"kind": s.kind, "task_id": s.task_id, "node": s.node, "since": iso(s.since), "severity": s.severity,
            "evidence": s.evidence}


def _analyse(ledger: Ledger, graph: GraphView) -> tuple[JsonObject, dict[str, JsonObject], list[Signal]]:
    """(task ETA, node ETAs by key, signals) for one task graph."""
    now = ledger.now()
    history = estimates.DurationHistory()  # the estimator's memory, loaded per kind on first use
    est = estimates.estimate_graph(ledger, graph, history=history, now=now)
    sigs = signals.signals_for_graph(ledger, graph, history=history, now=now)
    return est.task.to_json(), {k: e.to_json() for k, e in est.nodes.items()}, sigs


def status_json(ledger: Ledger) -> JsonObject:
    tasks = []
    now = ledger.now()
    history = estimates.DurationHistory()  # the estimator's memory, loaded per kind on first use
    for t in ledger.tasks():
        # Without loading the graph: a 100,000-node task must stay within 300 ms (docs/estimates.md).
        eta = estimates.estimate_task(ledger, t, history=history, now=now).to_json()
        sigs = signals.signals_for_task(ledger, t, history=history, now=now)
        tasks.append(task_json(t, eta, [signal_json(s) for s in sigs]))
    # the kinds whose loop alarms operators marked healthy (the ``healthy`` action): what they taught
    taught = [{"kind": kind, "marked": n, "finished": done} for kind, n, done in norms.marked(ledger)]
    return {"schema_version": SCHEMA_VERSION, "tasks": tasks, "marked_healthy": taught}


def graph_json(ledger: Ledger, task_id: str) -> JsonObject:
    graph = ledger.graph(task_id)
    now = ledger.now()
    eta, node_etas, sigs = _analyse(ledger, graph)
    by_node: dict[str, list[JsonObject]] = {}
    for s in sigs:
        if s.node is not None:
            by_node.setdefault(s.node, []).append(signal_json(s))
    return {
        "task": task_json(graph.task, eta, [signal_json(s) for s in sigs]),
        "nodes": [node_json(n, node_etas.get(n.key), by_node.get(n.key, []), now) for n in graph.nodes],
        "effects": [effect_json(e) for e in ledger.effects(task_id)],
    }


def event_json(e: EventView) -> JsonObject:
    return {"id": e.id, "at": iso(e.at), "task_id": e.task_id, "node": e.node, "layer": e.layer, "kind": e.kind,
            "actor": e.actor, "summary": e.summary, "payload": dict(e.payload)}

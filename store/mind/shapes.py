"""The JSON shapes of ``warden mind``, ``warden plans`` and ``warden memory`` (docs/console.md
"JSON shapes"). One place builds them; the CLI prints them and the tests compare against them.
Times are ISO-8601 UTC strings. Everything agent-written is given as written (a reader escapes
it when it shows it)."""

from __future__ import annotations

from store.clock import iso
from store.jsontypes import JsonObject
from store.views import TaskView
from store.mind.signals import signals as mind_signals
from store.mind.views import MemoryView, MindEntry, MindState, MindView, PlanVersionView


def entry_json(e: MindEntry) -> JsonObject:
    return {"id": e.id, "node": e.node, "attempt": e.attempt, "kind": e.kind, "text": e.text, "source": e.source,
            "reason": e.reason, "origin": e.origin, "actor": e.actor, "at": iso(e.at)}


def plan_json(p: PlanVersionView) -> JsonObject:
    return {"version": p.version, "at": iso(p.at), "actor": p.actor, "trigger": p.trigger,
            "in_flight": p.in_flight, "reason": p.reason, "added": list(p.added), "removed": list(p.removed),
            "reordered": list(p.reordered), "narrowed": dict(p.narrowed) if p.narrowed else None,
            "in_flight_nodes": [dict(f) for f in p.in_flight_nodes], "dependents_kept": list(p.dependents_kept),
            "revision": p.revision}


def memory_json(m: MemoryView) -> JsonObject:
    return {"id": m.id, "scope": m.scope, "workflow": m.workflow, "kind": m.kind, "text": m.text,
            "status": m.status, "task_id": m.task_id, "node": m.node, "attempt": m.attempt,
            "proposed_by": m.proposed_by, "proposed_at": iso(m.proposed_at), "decided_by": m.decided_by,
            "decided_at": iso(m.decided_at), "reason": m.decision_reason, "source": m.source}


def state_json(s: MindState) -> JsonObject:
    """The mind's counters (also under ``"mind"`` in ``warden status`` / ``graph`` task JSON)."""
    return {"requirements": s.requirements, "plan_version": s.plan_version,
            "drift": {"after": s.drift_after, "run": s.run, "since": iso(s.run_since), "nodes": list(s.run_keys)},
            "alignment": {"every": s.alignment_every, "by": s.alignment_by, "since_check": s.since_check,
                          "last": iso(s.checked_at), "verdict": s.verdict, "open": s.check, "asked": iso(s.due_at)}}


def mind_json(m: MindView, task: TaskView, now: float) -> JsonObject:
    """``warden mind TASK --json``; ``task`` is the TaskView (for the drift and alignment signals)."""
    sigs = [{"kind": k, "task_id": t, "node": n, "since": iso(since), "severity": sev, "evidence": ev}
            for k, t, n, since, sev, ev in mind_signals(task, now)]
    return {
        "task": {"task_id": m.task_id, "title": m.title, "status": m.status, "created_at": iso(m.created_at),
                 "counts": dict(m.counts)},
        "state": state_json(m.state),
        "signals": sigs,
        "requirements": [{"id": u.requirement.id, "text": u.requirement.text, "status": u.requirement.status,
                          "dropped_in": u.requirement.dropped_in, "total": u.total, "done": u.done,
                          "nodes": [{"key": k, "status": st} for k, st in u.nodes]} for u in m.requirements],
        "unserving": {"total": m.unserving_total, "nodes": [{"key": k, "status": st} for k, st in m.unserving]},
        "constraints": list(m.constraints),
        "conclusions": [entry_json(e) for e in m.conclusions],
        "rejected": [entry_json(e) for e in m.rejected],
        "plans": [plan_json(p) for p in m.plans],
        "memories": [memory_json(x) for x in m.memories],
    }


def plans_json(task_id: str, plans: list[PlanVersionView]) -> JsonObject:
    return {"task_id": task_id, "current": plans[-1].version if plans else 1, "versions": [plan_json(p) for p in plans]}


def memories_json(found: list[MemoryView]) -> JsonObject:
    return {"memories": [memory_json(m) for m in found]}

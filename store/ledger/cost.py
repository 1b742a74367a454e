"""Cost density acted on by the ledger (whether a step should continue; the rule is
``store/judges/density.py``). Judged on the node's own writes — every heartbeat and the commit — from
its ``tokens_used`` and ``units_done`` against the task's ``Budget(density_limit=)`` (without one
nothing is judged):

* **hold** (it has spent a unit's worth with no progress): the node runs on, but no other node of
  the task is claimed while it holds (:func:`holding`, asked by every claim); the hold ends when it
  reports progress, commits, fails or loses its lease.
* **finish_no_successor** (over the limit): the node may finish; when it commits, its successors
  (the pending nodes that depend on it, those its commit adds included) are **parked** with the
  reason, so nothing after it runs until an operator resumes them (``warden resume T --node K``).
  A commit whose final figures are over the limit (or still show no progress) does the same.
* **abort** (over 3 × the limit): the heartbeat that shows it stops the node — ``failed``, class
  ``conclusion``, its lease released, what it made kept (tokens, observations, notes, effects) —
  and answers ``Pulse(density="abort")``; the step's next write raises ``LeaseLost`` saying why.

Every change of verdict is journalled once (``node.cost_density``, system layer) with the
figures, and the ``cost_density`` signal names the verdict while the node runs.
"""

from __future__ import annotations

from store.judges import density as rule
from store.storage import sql
from store.storage.sql import Inc
from store.storage.tables import NodeRecord, TaskRecord
from store.storage.core import LedgerCore
from store.storage.events import NodeCostDensity



def holding(core: LedgerCore, task_id: str, now: float) -> bool:
    """Whether a node of the task is on cost-density hold (running under a live lease)."""
    return sql.scalar(core.db, "SELECT 1 FROM node WHERE task_id = ? AND status = 'running' AND density = ? "
                               "AND lease_token IS NOT NULL AND lease_until > ? LIMIT 1",
                      [task_id, rule.HOLD, now]) is not None


def judge(core: LedgerCore, task_id: str, tokens: float, units_done: float | None,
          units_total: float | None, task: TaskRecord | None = None) -> rule.Judgement:
    """The verdict on a node's figures; reads the task's limit only for a node that measures
    progress, and not at all when given the task's row (read in this write transaction)."""
    if units_done is None and units_total is None:
        return rule.judge(tokens, units_done, units_total, None)
    if task is not None:
        assert task.task_id == task_id, (task.task_id, task_id)
        limit = task.density_limit
    else:
        limit = sql.scalar(core.db, "SELECT density_limit FROM task WHERE task_id = ?", [task_id])
    return rule.judge(tokens, units_done, units_total, rule.limit_for(limit))


def after_beat(row: NodeRecord, tokens_added: int, units_done: float | None,
               units_total: float | None) -> tuple[float, float | None, float | None]:
    """A node's (tokens, units_done, units_total) once this write's figures are in."""
    return (float(row.tokens_used or 0) + tokens_added,
            float(units_done) if units_done is not None else row.units_done,
            float(units_total) if units_total is not None else row.units_total)


def journal_change(core: LedgerCore, row: NodeRecord, j: rule.Judgement, worker: str, now: float,
                   parked: list[str] | None = None) -> None:
    """Journal a verdict that differs from the one on the node (once per change); ``parked``: the
    successors a hold parked (then journalled even when the verdict stays)."""
    before = row.density or rule.CONTINUE
    if j.verdict == before and parked is None:
        return
    summary = j.evidence(row.key) if j.verdict != rule.CONTINUE else (
        f"{row.key}: cost density back within the limit ({before} lifted)")
    core.journal(row.task_id, row.key, "warden", summary, NodeCostDensity(
        verdict=j.verdict, before=before, tokens=j.tokens, units=j.units, density=j.density, worker=worker,
        limit=None if j.limit is None else j.limit.tokens_per_unit,
        nodes=None if parked is None else [row.key, *parked], parked=parked), at=now)


def abort_fields(row: NodeRecord, j: rule.Judgement, now: float) -> dict[str, object]:
    """The node update that stops it: failed, class conclusion, its lease released."""
    return dict(status="failed", failure_class="conclusion", density=rule.ABORT, lease_token=None, lease_until=None,
                step_deadline=None, finished_at=now, version=Inc(1),
                wall_used_s=Inc(now - (row.claimed_at or now)),
                error=f"stopped by the ledger: {j.evidence(row.key)}")


def park_successors(core: LedgerCore, row: NodeRecord, j: rule.Judgement, now: float) -> list[str]:
    """Park the pending nodes that depend on ``row`` (its successors are not dispatched); returns
    their keys."""
    found = sql.fetch_all(core.db, "SELECT n.id, n.key FROM edge e JOIN node n ON n.id = e.dst_id WHERE e.src_id = ? "
                                   "AND n.status = 'pending' ORDER BY n.position", [row.id])
    if found:
        reason = f"cost density: {j.evidence(row.key)}; resume to run it"
        sets, values = sql.set_clause(dict(status="parked", parked_at=now, park_reason=reason[:2000], park_until=None,
                                           wake_on=None, version=Inc(1)))
        seed, param = sql.id_array(core.db, [i for i, _k in found])
        sql.execute(core.db, f"UPDATE node SET {sets} WHERE id IN ({seed})", [*values, param])
    return [k for _i, k in found]

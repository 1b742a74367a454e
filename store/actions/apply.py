"""Applying a Plan: exactly the previewed change in one write transaction, or nothing.

Under the task row's lock (FOR UPDATE on PostgreSQL; BEGIN IMMEDIATE on SQLite) the task
``revision`` and every planned node ``version`` are checked; when one moved, only a refused
Action row is written and :class:`StaleRevision` raised. Otherwise the action's own apply
(``plan.params.apply``: each action's params class carries it) makes its changes, and this module adds what
every action shares: open handoffs withdrawn, one revision bump, the Action audit row, the
operator-layer journal event, and the completion check where the graph decides.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from store.storage import sql
from store.storage.db import register_result, retry_write, write_tx
from store.errors import Refused, StaleRevision
from store.jsontypes import JsonMapping, JsonObject
from store.storage import budget_clock
from store.storage.core import LedgerCore
from store.storage.models import Action as ActionRow
from store.storage.models import Handoff
from store.actions.action import Action
from store.actions.changes import ApplyTx
from store.actions.plan import Plan
from store.actions.planning import TaskState, read_task, require_reason
from store.actions.registry import is_registered


@retry_write
def apply(core: LedgerCore, plan: Plan, *, operator: str) -> Plan:
    """Apply exactly ``plan`` in one write transaction, or raise ``StaleRevision`` (writing only a
    refused Action row) when the ledger changed since the plan was computed."""
    if not isinstance(plan, Plan):
        raise Refused("apply needs a Plan from ledger.plan_*")
    if plan.applied:
        raise Refused(f"this plan was already applied (action {plan.action_id})")
    _registered(plan)
    operator = (operator or "").strip()
    if not operator:
        raise Refused("an operator name is required (who acts)")
    if plan.params.reason_required:
        require_reason(plan.reason, plan.action)
    with write_tx(core.db):
        now = core.now()
        # FOR UPDATE on PostgreSQL: the task row first (the one lock order), excluding claims (KEY
        # SHARE) and agent writes (NO KEY UPDATE) while the revision is checked and the plan applied.
        task = read_task(core, plan.task_id, lock="exclusive")
        ids = _ids(core, plan)
        stale = _stale(core, plan, task, ids)
        if stale is None:
            return _apply(ApplyTx(core, plan, task, ids, operator, now))
        # Refused: only the audit row, committed with this transaction, then StaleRevision.
        core.bind(ActionRow.insert(
            at=now, operator=operator, action=plan.action, task_id=plan.task_id, target=plan.target,
            reason=plan.reason, plan=plan.to_json(), result="refused", refused_why=stale,
            revision_before=plan.revision, revision_after=int(task.revision),
        )).execute()
    raise StaleRevision(stale)


def _registered(plan: Plan) -> Action:
    """The plan's params, when they are those of a registered action (else nothing applies them)."""
    if not isinstance(plan.params, Action) or not is_registered(plan.params) or plan.params.action != plan.action:
        raise Refused(f"cannot apply a {plan.action!r} plan")
    return plan.params


def _applied(plan: Plan) -> JsonObject:
    return {"action_id": plan.action_id, "revision_after": plan.revision_after}


def _replayed(data: JsonMapping, args: tuple[object, ...], kwargs: Mapping[str, object]) -> Plan:
    """An apply whose answer was lost with the connection, read back from its request record:
    the plan it was given, applied (its params as previewed)."""
    plan = args[1] if len(args) > 1 else kwargs["plan"]
    if not isinstance(plan, Plan):
        raise TypeError(f"apply was given {type(plan).__name__}, not a Plan")
    return replace(plan, applied=True, action_id=data["action_id"], revision_after=data["revision_after"])


register_result("plan", Plan, _applied, _replayed)


def _ids(core: LedgerCore, plan: Plan) -> dict[str, int]:
    """Node ids by key for every node the plan names (its own map, else looked up)."""
    ids = dict(plan.node_ids)
    need = [k for k in list(plan.versions) + list(plan.changes) if k not in ids]
    if need:
        ids.update(core.ids_for_keys(plan.task_id, need))
    return ids


def apply_within(core: LedgerCore, plan: Plan, *, operator: str) -> Plan:
    """Apply ``plan`` inside the caller's write transaction, which already holds the task row's
    lock: a system action decided in that transaction (an auto-resume on a wake condition,
    store/parks/wake.py). The revision check still runs; stale raises without an audit row (the caller
    decides). Not for operators: they use :func:`apply`."""
    _registered(plan)
    task = read_task(core, plan.task_id)
    ids = _ids(core, plan)
    stale = _stale(core, plan, task, ids)
    if stale is not None:
        raise StaleRevision(stale)
    return _apply(ApplyTx(core, plan, task, ids, operator, core.now()))


def _stale(core: LedgerCore, plan: Plan, task: TaskState, ids: Mapping[str, int]) -> str | None:
    """Why the plan no longer describes the ledger, or None: the action's own reasons first, then
    a task aborted meanwhile, then the task revision and the planned node versions."""
    params = _registered(plan)
    own = params.stale(core, plan, task)
    if own is not None or not params.revision_checked:
        return own
    if task.status == "aborted" and plan.task_status[0] != "aborted":
        return f"task {plan.task_id} was aborted since the preview; nothing changed"
    rev = int(task.revision)
    keys = list(plan.versions)
    id_list = [ids[k] for k in keys if k in ids]
    missing = [k for k in keys if k not in ids]
    current: dict[int, int] = {}
    for chunk in sql.chunks(id_list):
        for i, v in sql.fetch_all(core.db, f"SELECT id, version FROM node WHERE id IN ({sql.marks(len(chunk))})",
                                  chunk):
            current[i] = int(v)
    key_of = {i: k for k, i in ids.items()}
    moved = [(key_of[i], plan.versions[key_of[i]], current.get(i)) for i in id_list
             if current.get(i) != plan.versions[key_of[i]]]
    if rev == plan.revision and not moved and not missing:
        return None
    detail = ""
    if moved:
        k, a, b = moved[0]
        detail = f"; node {k} version {a} → {b}" + (f" and {len(moved) - 1} more" if len(moved) > 1 else "")
    return f"the ledger changed since the preview (revision {plan.revision} → {rev}{detail}); review again"


def _apply(tx: ApplyTx) -> Plan:
    core, plan, now, operator = tx.core, tx.plan, tx.now, tx.operator
    outcome = _registered(plan).apply(tx)
    if plan.handoffs_withdrawn:
        for chunk in sql.chunks([int(h) for h in plan.handoffs_withdrawn]):
            core.bind(Handoff.update(status="withdrawn", resolved_by=operator, resolved_at=now)
                      .where(Handoff.id.in_(list(chunk)) & (Handoff.status == "open"))).execute()
    # the task row: one revision bump for the action itself
    core.bump_task(plan.task_id, {"updated_at": now, **outcome.task_fields})
    budget_clock.settle(core.db, plan.task_id, now)  # what the task waits on changed: its budget clock follows
    rev_after = int(tx.task.revision) + 1
    action_id = int(core.bind(ActionRow.insert(
        at=now, operator=operator, action=plan.action, task_id=plan.task_id, target=plan.target, reason=plan.reason,
        plan=plan.to_json(), result="applied", revision_before=plan.revision, revision_after=rev_after,
    )).execute())
    payload: JsonObject = {
        "nodes": list(plan.changes), "action_id": action_id, "reason": plan.reason,
        "revoked_leases": [dict(r) for r in plan.revoked_leases],
        "handoffs_withdrawn": list(plan.handoffs_withdrawn),
        "task_status": list(plan.task_status), "revision": rev_after,
        **outcome.payload,
    }
    core.journal(plan.task_id, plan.node_target, "operator", f"operator.{plan.action}", operator,
                 _event_summary(plan), payload, at=now)
    if outcome.settle:
        # Consequences the action itself does not choose: the task completes or fails as the graph says.
        core.maybe_complete_task(plan.task_id, now)
        core.maybe_fail_task(plan.task_id, now)
        final = int(sql.scalar(core.db, "SELECT revision FROM task WHERE task_id = ?", [plan.task_id]))
        if final != rev_after:
            rev_after = final
            core.bind(ActionRow.update(revision_after=final).where(ActionRow.id == action_id)).execute()
    done = plan if outcome.params is None else replace(plan, params=outcome.params)
    return replace(done, applied=True, action_id=action_id, revision_after=rev_after)


def _event_summary(plan: Plan) -> str:
    s = plan.summary()
    if plan.reason:
        s += f" — {plan.reason}"
    return s[:500]

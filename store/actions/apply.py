"""Applying a Plan: what the preview promised, in one write transaction, or nothing.

Under the task row's lock (FOR UPDATE on PostgreSQL; BEGIN IMMEDIATE on SQLite) the action's own
stale check runs first (a handoff answered meanwhile, an effect confirmed meanwhile). When the task
revision and every planned node version are as previewed, the plan applies exactly. When they moved,
the action is planned again on the current state and the two plans compared by the action's rule
(store/actions/promise.py): a current plan that keeps the preview's promise is applied, with what
differed; otherwise only a refused Action row is written and :class:`StaleRevision` raised, naming
the change. The action's own apply (``plan.params.apply``: each action's params class carries it)
makes its changes, and this module adds what every action shares: open handoffs withdrawn, one
revision bump, the Action audit row (the plan as applied, what differed), the operator-layer
journal event, and the completion check where the graph decides.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from store.storage import sql
from store.storage.db import register_result, retry_write, write_tx
from store.errors import NotFound, Refused, StaleRevision
from store.jsontypes import JsonMapping, JsonObject
from store.storage import budget_clock
from store.storage.core import LedgerCore
from store.storage.models import Action as ActionRow
from store.actions.action import Action
from store.actions.changes import ApplyTx
from store.actions.plan import Differed, Plan
from store.actions.planning import TaskState, read_task, require_reason
from store.actions.registry import is_registered
from store.actions.promise import actions_since, differences, nodes_touched, noted, refused, task_moved
from store.storage.events import OperatorActed, RevokedLease


@retry_write
def apply(core: LedgerCore, plan: Plan, *, operator: str) -> Plan:
    """Apply ``plan`` in one write transaction — exactly, or as planned again now when what changed
    since the preview keeps its promise (the result's ``differed`` says what differed) — or raise
    ``StaleRevision`` (writing only a refused Action row) naming the change that broke it."""
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
        not_yours = _registered(plan).refuse_operator(core, plan, operator)
        current, stale = (plan, not_yours) if not_yours else _settle(core, plan, task)
        if stale is None:
            return _apply(ApplyTx(core, current, task, _ids(core, current), operator, now))
        # Refused: only the audit row, committed with this transaction, then the refusal.
        core.bind(ActionRow.insert(
            at=now, operator=operator, action=plan.action, task_id=plan.task_id, target=plan.target,
            reason=plan.reason, plan=plan.to_json(), result="refused", refused_why=stale,
            revision_before=plan.revision, revision_after=int(task.revision),
        )).execute()
    if not_yours is not None:
        raise Refused(not_yours)
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
    store/parks/wake.py). The same checks run; stale raises without an audit row (the caller decides).
    Not for operators: they use :func:`apply`."""
    _registered(plan)
    task = read_task(core, plan.task_id)
    current, stale = _settle(core, plan, task)
    if stale is not None:
        raise StaleRevision(stale)
    return _apply(ApplyTx(core, current, task, _ids(core, current), operator, core.now()))


def _settle(core: LedgerCore, plan: Plan, task: TaskState) -> tuple[Plan, str | None]:
    """The plan to apply now and None, or the approved plan and why it no longer holds: the action's
    own reasons first, then — when the task revision or a planned node version moved — the task
    aborted meanwhile, then the action planned again and compared with the approved plan by its rule."""
    params = _registered(plan)
    own = params.stale(core, plan, task)
    if own is not None or not params.revision_checked:
        return plan, own
    if _unmoved(core, plan, task):
        return plan, None
    since = actions_since(core, plan)
    if task.status == "aborted" and plan.task_status[0] != "aborted":
        by = next((s for s in since if s.action == "abort"), None)
        return plan, refused(f"task {plan.task_id} was " + (by.done() if by else "aborted"))
    try:
        current = replace(params.replan(core, plan), reason=plan.reason)
    except (Refused, NotFound) as e:
        # said by the operator action that caused it when there is one, else by what the plan met
        named = task_moved(since, plan.task_id) or nodes_touched(since, plan.changes)
        return plan, named or f"the ledger changed since the preview: {e}; review again"
    why = params.keeps(plan, current, since)
    if why is not None:
        return plan, why
    return replace(current, differed=differences(core, plan, current)), None


def _unmoved(core: LedgerCore, plan: Plan, task: TaskState) -> bool:
    """Whether the task revision and every planned node version are as when the plan was computed
    (then the plan is exactly what applies). A heartbeat moves neither."""
    if int(task.revision) != plan.revision:
        return False
    ids = _ids(core, plan)
    keys = list(plan.versions)
    if any(k not in ids for k in keys):
        return False
    current: dict[int, int] = {}
    for chunk in sql.chunks([ids[k] for k in keys]):
        for i, v in sql.fetch_all(core.db, f"SELECT id, version FROM node WHERE id IN ({sql.marks(len(chunk))})",
                                  chunk):
            current[i] = int(v)
    return all(current.get(ids[k]) == plan.versions[k] for k in keys)


def _apply(tx: ApplyTx) -> Plan:
    core, plan, now, operator = tx.core, tx.plan, tx.now, tx.operator
    outcome = _registered(plan).apply(tx)
    differed = noted(plan, plan.differed or Differed(), outcome.notes)
    if plan.handoffs_withdrawn:
        for chunk in sql.chunks([int(h) for h in plan.handoffs_withdrawn]):
            sql.execute(core.db, "UPDATE handoff SET status = 'withdrawn', resolved_by = ?, resolved_at = ? "
                                 f"WHERE id IN ({sql.marks(len(chunk))}) AND status = 'open'", [operator, now, *chunk])
    # the task row: one revision bump for the action itself
    core.bump_task(plan.task_id, {"updated_at": now, **outcome.task_fields})
    budget_clock.settle(core.db, plan.task_id, now)  # what the task waits on changed: its budget clock follows
    rev_after = int(tx.task.revision) + 1
    action_id = int(core.bind(ActionRow.insert(
        at=now, operator=operator, action=plan.action, task_id=plan.task_id, target=plan.target, reason=plan.reason,
        plan={**plan.to_json(), "differed": differed.to_json()}, result="applied",
        revision_before=plan.revision, revision_after=rev_after,
    )).execute())
    extra = dict(outcome.payload)
    nodes = extra.pop("nodes", None)  # an action that changes more than it planned (abort's compensations)
    core.journal(plan.task_id, plan.node_target, operator, _event_summary(plan), OperatorActed(
        action=plan.action, nodes=list(plan.changes) if nodes is None else list(nodes), action_id=action_id,
        reason=plan.reason, revoked_leases=[RevokedLease(node=r["node"], owner=r["owner"]) for r in plan.revoked_leases],
        handoffs_withdrawn=list(plan.handoffs_withdrawn), task_status=list(plan.task_status), revision=rev_after,
        extra=extra), at=now)
    if outcome.settle:
        # Consequences the action itself does not choose: the task completes or fails as the graph says.
        core.maybe_complete_task(plan.task_id, now)
        core.maybe_fail_task(plan.task_id, now)
        final = int(sql.scalar(core.db, "SELECT revision FROM task WHERE task_id = ?", [plan.task_id]))
        if final != rev_after:
            rev_after = final
            sql.execute(core.db, "UPDATE action SET revision_after = ? WHERE id = ?", [final, action_id])
    done = plan if outcome.params is None else replace(plan, params=outcome.params)
    return replace(done, applied=True, action_id=action_id, revision_after=rev_after, differed=differed)


def _event_summary(plan: Plan) -> str:
    s = plan.summary()
    if plan.reason:
        s += f" — {plan.reason}"
    return s[:500]

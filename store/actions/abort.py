"""abort: task → aborted; every unfinished node (not succeeded / abandoned) → abandoned; leases
revoked; open handoffs withdrawn; confirmed effects listed newest first with their compensations.
Kept for audit; nothing further can be claimed — except the compensations: each confirmed effect
with a compensation becomes a node of kind ``compensation`` (``compensate:<effect_key>``), chained
newest first (store/ledger/compensation.py). The plan lists them (``compensations``).

The promise (store/actions/promise.py): the task ends here — everything unfinished is abandoned,
nothing further runs but the compensations the preview listed. Agents' work meanwhile keeps it: a
node claimed, added, failed or asking a human since is abandoned too (its lease revoked, its
handoff withdrawn), one that finished is left as it is, whatever other operators did to single
nodes. Refused: the task aborted since the preview, or an effect with a compensation confirmed
since (the abort would run a compensation the preview did not list)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from store.storage import sql
from store.storage.db import read_tx
from store.jsontypes import JsonObject
from store.ledger import compensation
from store.storage.core import LedgerCore
from store.ledger.rules import ID, TEXT_OPT
from store.actions import planning as pl
from store.actions.action import TASK_FLAG, Action, Command, Flag, Key
from store.actions.changes import BUMP, REVOKE, ApplyTx, Outcome, set_nodes
from store.actions.plan import Plan
from store.actions.promise import Since


@dataclass(frozen=True)
class AbortParams(Action):
    action = "abort"
    title = "Abort"
    key = Key("a", "Abort", "abort the selected task")
    confirm_task_id = True
    arguments = {"task_id": ID, "reason": TEXT_OPT}
    cli = Command("abort a task (asks for the task id)", (
        TASK_FLAG,
        Flag("--reason", "reason", required=True, metavar="R", help="why (required)"),
    ), examples=("warden abort nightly --reason 'wrong data set'  # asks you to type the task id",))

    def to_json(self) -> JsonObject:
        return {}

    def stale(self, core: LedgerCore, plan: Plan, task: pl.TaskState) -> str | None:
        """The compensations previewed are no longer the ones to add (an effect was confirmed since).
        A task aborted since the preview is said by the shared check."""
        if task.status == "aborted":
            return None
        return stale_compensations(core, plan)

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        return _plan(core, pl.open_task(core, plan.task_id), plan.reason)

    def keeps(self, approved: Plan, current: Plan, since: Sequence[Since]) -> str | None:
        """Everything stops whatever happened meanwhile: the stale check (the compensations) and
        the shared one (the task aborted) are all that refuse."""
        return None

    def apply(self, tx: ApplyTx) -> Outcome:
        set_nodes(tx, tx.changed_to("abandoned"), {"status": "abandoned", "finished_at": tx.now,
                                                   "next_retry_at": None, **REVOKE, **BUMP})
        keys = compensation.create(tx.core, tx.plan.task_id, tx.plan.compensations)
        payload: JsonObject = {}
        if keys:
            payload = {"nodes": list(tx.plan.changes) + keys, "compensations": keys}
        return Outcome(task_fields={"status": "aborted", "finished_at": tx.now, "wake_state": None},
                       payload=payload)


def plan_abort(core: LedgerCore, task_id: str, *, reason: str) -> Plan:
    """Abort a task: every unfinished node abandoned, leases revoked, open handoffs withdrawn,
    confirmed effects with a compensation turned into compensation nodes."""
    with read_tx(core.db):
        task = pl.open_task(core, task_id)
        return _plan(core, task, pl.require_reason(reason, "abort"))


def _plan(core: LedgerCore, task: pl.TaskState, reason: str) -> Plan:
    """The abort's plan on the task as it is."""
    task_id = task.task_id
    nodes = pl.all_nodes(core, task_id)
    changes = {n.key: (n.status, "abandoned") for n in nodes if n.status not in pl.FINISHED}
    kept = [n.key for n in nodes if n.key not in changes]
    handoffs = [str(r[0]) for r in sql.fetch_all(core.db, "SELECT id FROM handoff WHERE task_id = ? "
                                                          "AND status = 'open' ORDER BY id", [task_id])]
    effects, warnings = pl.effects(core, task_id, None)
    comps = compensation.planned(core, task_id)
    if task.status == "completed":
        warnings.insert(0, f"task {task_id} is completed: aborting only marks it aborted")
    bare = [e for e in effects if not (e.get("compensation") or "").strip()]
    if comps:
        warnings.insert(0, f"{len(comps)} confirmed effect(s) become compensation nodes, run newest first: "
                           f"{pl.names([c['node'] for c in comps])}")
    if bare:
        warnings.insert(0, f"{len(bare)} confirmed effect(s) have no compensation: undo them by hand, then "
                           f"`warden compensated {task_id} EFFECT --reason …`")
    plan = pl.make_plan(core, AbortParams(), task, task_id, reason, nodes, changes, kept=kept,
                        status_after="aborted", handoffs=handoffs, effects=effects, warnings=warnings)
    return replace(plan, compensations=tuple(comps))


def stale_compensations(core: LedgerCore, plan: Plan) -> str | None:
    """At apply: why the compensations previewed are no longer the ones to add, or None."""
    now = [c["effect_key"] for c in compensation.planned(core, plan.task_id)]
    was = [c["effect_key"] for c in plan.compensations]
    if now == was:
        return None
    new = [k for k in now if k not in was]
    if new:
        return (f"effect {new[0]} was confirmed since the preview: the abort would also run its compensation, "
                "which the preview did not list; review again")
    return "the confirmed effects changed since the preview: the compensations differ from the ones listed; review again"


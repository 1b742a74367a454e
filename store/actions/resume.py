"""resume: undo a park. A reason is optional.

Task: → active; nodes parked at or after the task's park (by ``--now`` or while it was parked) →
pending (→ blocked when they still have an open handoff). Nodes parked on their own before the
task park stay parked: resume them with ``node=``.
Node: parked → pending (→ blocked with an open handoff).

The promise (store/actions/promise.py): the parked work the preview showed goes back to work. A
parked node's handoff answered meanwhile only changes whether it resumes as pending or blocked.
Refused: another action since the preview changed the task's status (resumed, parked again,
aborted) or one of the nodes it resumes.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.parks import conditions as wc
from store.storage.db import read_tx
from store.errors import Refused
from store.jsontypes import JsonObject
from store.storage.core import LedgerCore
from store.ledger.observe import pause_clocks
from store.ledger.rules import ID, ID_OPT, TEXT_OPT
from store.actions import planning as pl
from store.actions.action import TASK_FLAG, Action, Command, Flag, Key
from store.actions.changes import BUMP, REVOKE, UNPARK, ApplyTx, Outcome, set_nodes
from store.actions.plan import Plan


@dataclass(frozen=True)
class ResumeParams(Action):
    action = "resume"
    reason_required = False
    title = "Resume"
    key = Key("u", "Resume", "resume the selected task or node")
    arguments = {"task_id": ID, "node": ID_OPT, "reason": TEXT_OPT}
    cli = Command("undo a park", (
        TASK_FLAG,
        Flag("--node", "node", metavar="KEY", help="resume only this node"),
        Flag("--reason", "reason", metavar="R", default="", help="why (optional)"),
    ), examples=("warden resume nightly", "warden resume nightly --node fetch"))

    node: str | None

    def to_json(self) -> JsonObject:
        return {"node": self.node}

    def node_target(self, target: str) -> str | None:
        return target if self.node else None

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        return _plan(core, self, pl.open_task(core, plan.task_id), plan.reason)

    def apply(self, tx: ApplyTx) -> Outcome:
        for status in ("pending", "blocked"):
            set_nodes(tx, tx.changed_to(status), {"status": status, **UNPARK, **REVOKE, **BUMP})
        if self.node:
            return Outcome(task_fields={"wake_state": wc.with_target(tx.task.wake_state, self.node, None)})
        pause_clocks(tx.core.db, tx.task.task_id, tx.task.parked_at, tx.now)  # parked time is not running time
        state = wc.with_target(tx.task.wake_state, None, None)
        for key in tx.plan.changes:  # nodes the task park had parked are resumed with it: stop watching them
            state = wc.with_target(state, key, None)
        return Outcome(task_fields={"status": "active", "parked_at": None, "park_reason": None,
                                    "park_until": None, "wake_on": None, "wake_state": state})


def plan_resume(core: LedgerCore, task_id: str, *, node: str | None = None, reason: str | None = None) -> Plan:
    """Undo a park (of the task, or of one node with ``node=``)."""
    reason = "" if reason is None else str(reason).strip()
    with read_tx(core.db):
        return _plan(core, ResumeParams(node=node), pl.open_task(core, task_id), reason)


def _plan(core: LedgerCore, params: ResumeParams, task: pl.TaskState, reason: str) -> Plan:
    """The resume's plan on the task as it is."""
    task_id, node = task.task_id, params.node
    if node is not None:
        n = pl.node_one(core, task_id, node)
        if n.status != "parked":
            raise Refused(f"node {node} is not parked (it is {n.status})")
        to = "blocked" if pl.open_handoffs(core, task_id, {n.id}) else "pending"
        warnings = []
        if task.status == "parked":
            warnings.append(f"task {task_id} is still parked: nothing is claimed until it is resumed")
        return pl.make_plan(core, params, task, node, reason, [n], {n.key: ("parked", to)}, warnings=warnings)
    if task.status != "parked":
        raise Refused(f"task {task_id} is not parked (it is {task.status})")
    nodes = pl.lean(core, f"SELECT {pl.LEAN}, n.parked_at FROM node n WHERE n.task_id = ? "
                          "AND n.status = 'parked' ORDER BY n.position", [task_id])
    since = task.parked_at if task.parked_at is not None else float("-inf")
    ours = [n for n in nodes if isinstance(n.extra, (int, float)) and n.extra >= since]
    our_ids = {n.id for n in ours}
    kept = [n.key for n in nodes if n.id not in our_ids]
    with_handoff = pl.nodes_with_open_handoffs(core, task_id)
    changes = {n.key: ("parked", "blocked" if n.id in with_handoff else "pending") for n in ours}
    warnings = []
    if kept:
        warnings.append(f"{len(kept)} node(s) parked on their own before the task stay parked: {pl.names(kept)} "
                        "(resume each with --node KEY)")
    return pl.make_plan(core, params, task, task_id, reason, nodes, changes, kept=kept, status_after="active",
                        warnings=warnings)


"""escalate: raise a needs_human handoff on a node from the operator's side (e.g. the recovery
wizard found a run linked to it whose evidence is incomplete): the node → blocked, a running lease
is revoked, and an ``exception`` handoff asks what should happen. Resolving it makes the node
pending again, with the resolution in its next claim's inputs.

The promise (store/actions/promise.py): this node stops and waits for the question. Claimed
meanwhile, its lease is revoked all the same. Refused: the node asked a human itself, finished or
was parked since the preview; another action since changed the task's status or the node."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from store.storage import sql
from store.storage.db import read_tx
from store.errors import Refused
from store.jsontypes import JsonMapping, JsonObject
from store.storage.core import LedgerCore
from store.mind import record as mind_record
from store.storage.models import Handoff, dumps
from store.ledger.rules import ID, JSON_OBJ_OPT, TEXT_OPT
from store.actions import planning as pl
from store.actions.action import Action, NoCommand, NoKey
from store.actions.changes import BUMP, REVOKE, UNPARK, ApplyTx, Outcome, set_nodes
from store.actions.plan import Plan

ESCALATE_OPTIONS = (
    {"id": "replay", "label": "Replay as a new attempt",
     "consequence": "the node runs again from its inputs under a new attempt; nothing of the earlier run is reused"},
    {"id": "continue", "label": "Continue with my answer",
     "consequence": "the node runs again and its agent reads the answer (e.g. what was fixed or done by hand)"},
)


@dataclass(frozen=True)
class EscalateParams(Action):
    action = "escalate"
    title = "Ask a human about"
    key = NoKey("offered by the recovery wizard and by a node's signals (node detail)")
    cli = NoCommand("the console's recovery wizard and node detail ask it; an agent asks with request_human")
    needs_node = True
    arguments = {"task_id": ID, "node": ID, "reason": TEXT_OPT, "question": TEXT_OPT, "context": JSON_OBJ_OPT}

    node: str
    question: str
    context: JsonMapping
    kind: str
    options: Sequence[JsonMapping]
    recommendation: str | None
    handoff: str | None = None  # the handoff opened, once applied

    def to_json(self) -> JsonObject:
        out = {"node": self.node, "question": self.question, "context": self.context, "kind": self.kind,
               "options": self.options, "recommendation": self.recommendation}
        if self.handoff is not None:
            out["handoff"] = self.handoff
        return out

    def node_target(self, target: str) -> str | None:
        return target

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        return _plan(core, pl.open_task(core, plan.task_id), self.node, plan.reason, self.question,
                     self.context)

    def apply(self, tx: ApplyTx) -> Outcome:
        # What the node was doing is a rejected path, with the operator's reason (store/mind/record.py).
        mind_record.rejected_for_nodes(tx.core, tx.plan.task_id, [tx.ids[tx.plan.target]], tx.plan.reason,
                                       origin="escalate", actor=tx.operator, now=tx.now,
                                       source=f"operator {tx.operator} (escalate)")
        set_nodes(tx, tx.changed_to("blocked"), {"status": "blocked", **UNPARK, **REVOKE, **BUMP})
        ctx = dict(self.context or {})
        ctx.setdefault("why", tx.plan.reason)
        node_id = tx.ids[tx.plan.target]
        attempt = sql.scalar(tx.core.db, "SELECT attempt FROM node WHERE id = ?", [node_id])
        handoff_id = str(tx.core.bind(Handoff.insert(
            task=tx.plan.task_id, node=node_id, kind=self.kind, question=self.question, context=ctx,
            options=list(self.options or []), recommendation=self.recommendation, status="open",
            opened_at=tx.now, opened_by=tx.operator, attempt=attempt)).execute())
        return Outcome(payload={"handoff": handoff_id, "question": self.question},
                       params=replace(self, handoff=handoff_id))


def plan_escalate(core: LedgerCore, task_id: str, node: str, *, reason: str, question: str | None = None,
                  context: JsonMapping | None = None) -> Plan:
    """Ask a human what should happen to ``node`` (it becomes blocked on an ``exception`` handoff)."""
    with read_tx(core.db):
        task = pl.open_task(core, task_id)
        reason = pl.require_reason(reason, "escalate")
        q = (question or "").strip() or f"What should happen to node {node}?"
        ctx = dict(context or {})
        dumps(ctx)
        return _plan(core, task, node, reason, q, ctx)


def _plan(core: LedgerCore, task: pl.TaskState, node: str, reason: str, q: str, ctx: JsonMapping) -> Plan:
    """The escalation's plan on the task as it is."""
    task_id = task.task_id
    n = pl.node_one(core, task_id, node)
    if n.status == "blocked" or (n.status == "failed" and n.id in pl.nodes_with_open_handoffs(core, task_id)):
        raise Refused(f"node {node} is already waiting for a human (see `warden handoffs`)")
    if n.status in ("succeeded", "abandoned", "parked"):
        raise Refused(f"node {node} is {n.status}: "
                      + ("rewind it first if its result is in doubt" if n.status == "succeeded"
                         else "there is nothing to ask about"))
    warnings = []
    if n.status == "running":
        warnings.append(f"node {node} is running: its lease ({n.owner or 'unknown'}) is revoked; "
                        "the agent's next write is refused")
    params = EscalateParams(node=node, question=q, context=ctx, kind="exception",
                            options=[dict(o) for o in ESCALATE_OPTIONS], recommendation="replay")
    return pl.make_plan(core, params, task, node, reason, [n], {n.key: (n.status, "blocked")}, versions_of=[n],
                        warnings=warnings)


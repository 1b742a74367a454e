"""rewind: a node and its downstream closure → pending.

Running ones are revoked, blocked → pending with the handoff withdrawn; the reason is written once,
as the rewound node's rejected path, and each reset node's ``rejections`` names it (so the agent
is handed it and does not repeat the rejected path); their
``claim_count`` restarts (a fresh ``max_claims`` allowance); abandoned and parked nodes in the
closure are kept as they are; upstream is untouched; a completed or failed task reopens. A failed
node rewound is a retry.

The promise (store/actions/promise.py): this node and the downstream closure the preview showed
start again. Agents' work meanwhile keeps it: a node of the closure claimed, finished, failed or
asking a human since is reset as well (its lease revoked, its new handoff withdrawn); the node
itself gone back to pending (its step failed and waits for a retry) is still rewound. Refused:
another action since the preview changed the task's status or a node the rewind resets (rewound,
narrowed, parked, resumed or answered by someone else); the closure changed (a node added below it
or moved out of it); the node parked or abandoned since.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.storage.db import read_tx
from store.errors import Refused
from store.jsontypes import JsonObject
from store.storage.core import LedgerCore
from store.mind import record as mind_record
from store.ledger.rules import ID, TEXT_OPT
from store.actions import planning as pl
from store.actions.action import TASK_FLAG, Action, Command, Flag, Key
from store.actions.changes import FRESH, ApplyTx, Outcome, append_rejections
from store.actions.plan import Plan
from typing import Sequence
from store.actions.promise import Since, refused


@dataclass(frozen=True)
class RewindParams(Action):
    action = "rewind"
    title = "Rewind"
    key = Key("r", "Rewind", "rewind the selected node")
    needs_node = True
    arguments = {"task_id": ID, "node": ID, "reason": TEXT_OPT}
    cli = Command("a node and everything downstream → pending", (
        TASK_FLAG,
        Flag("key", "node", metavar="KEY", help="the node to run again (warden graph TASK lists them)"),
        Flag("--reason", "reason", required=True, metavar="R", help="why (required; fed back to the agent)"),
    ), examples=("warden rewind nightly summarise --reason 'use the 2024 figures'",
                 "warden rewind nightly summarise --reason 'retry' --dry-run  # only the preview"))

    node: str

    def to_json(self) -> JsonObject:
        return {"node": self.node}

    def node_target(self, target: str) -> str | None:
        return target

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        return _plan(core, pl.open_task(core, plan.task_id), self.node, plan.reason, approved=plan)

    def keeps(self, approved: Plan, current: Plan, since: Sequence[Since]) -> str | None:
        """The shared rule, and the closure the preview showed."""
        why = super().keeps(approved, current, since)
        if why is None and set(current.versions) != set(approved.versions):
            added = sorted(set(current.versions) - set(approved.versions))
            where = (f"node {added[0]} was added below {self.node}" if added else
                     f"node {sorted(set(approved.versions) - set(current.versions))[0]} is no longer below {self.node}")
            why = refused(where)
        return why

    def apply(self, tx: ApplyTx) -> Outcome:
        # The rewound node's path is rejected, with the operator's reason (store/mind/record.py): the
        # reason's one place; every node the rewind resets names it.
        rejected = mind_record.rewound(tx.core, tx.plan.task_id, tx.ids[self.node], tx.plan.reason,
                                       actor=tx.operator, now=tx.now)
        append_rejections(tx, tx.changed_to("pending"), rejected, FRESH)
        return Outcome(task_fields=tx.reopens(), settle=True)


def plan_rewind(core: LedgerCore, task_id: str, node: str, *, reason: str) -> Plan:
    """Rewind a node: it and everything downstream → pending, the reason fed back to the agent."""
    with read_tx(core.db):
        task = pl.open_task(core, task_id)
        return _plan(core, task, node, pl.require_reason(reason, "rewind"))


def _plan(core: LedgerCore, task: pl.TaskState, node: str, reason: str, *, approved: Plan | None = None) -> Plan:
    """The rewind's plan on the task as it is. ``approved``: the plan the operator approved, when
    planning again at its apply — then the node gone back to pending since is rewound still."""
    task_id = task.task_id
    n = pl.node_one(core, task_id, node)
    again = approved is not None and n.status == "pending" and approved.statuses.get(node) not in (None, "pending")
    if n.status == "pending" and not again:
        raise Refused(f"node {node} is pending: nothing to rewind")
    if n.status == "parked":
        raise Refused(f"node {node} is parked and has nothing to rewind: resume it instead")
    if n.status == "abandoned":
        raise Refused(f"node {node} is abandoned (out of scope): it cannot be rewound")
    closure = pl.closure_nodes(core, [n.id])
    changes: dict[str, tuple[str, str]] = {}
    kept, parked = [], []
    for c in closure:
        if c.status in ("succeeded", "failed", "running", "blocked") or (again and c.id == n.id):
            changes[c.key] = (c.status, "pending")
        else:
            kept.append(c.key)
            if c.status == "parked":
                parked.append(c.key)
    ids = {c.id for c in closure if c.key in changes}
    # blocked nodes, and failed ones asking a human (store/ledger/unsafe.py), have open handoffs
    blocked_ids = {c.id for c in closure if changes.get(c.key, ("",))[0] in ("blocked", "failed")}
    effects, ewarn = pl.effects(core, task_id, ids)
    warnings = []
    if parked:
        warnings.append(f"parked node(s) downstream stay parked: {pl.names(parked)}")
    warnings += ewarn
    warnings += pl.asked_again(core, task_id, ids, {c.id: c.key for c in closure})
    after = pl.reopened_status(core, task, changes)
    return pl.make_plan(core, RewindParams(node=node), task, node, reason, closure, changes, kept=kept,
                        status_after=after, versions_of=closure,
                        handoffs=pl.open_handoffs(core, task_id, blocked_ids),
                        reapplied=pl.resolved_latest(core, task_id, ids), effects=effects, warnings=warnings)


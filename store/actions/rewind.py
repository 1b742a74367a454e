"""rewind: a node and its downstream closure → pending.

Running ones are revoked, blocked → pending with the handoff withdrawn; the reason is appended
to each reset node's ``rejections`` (so the agent does not repeat the rejected path) and their
``claim_count`` restarts (a fresh ``max_claims`` allowance); abandoned and parked nodes in the
closure are kept as they are; upstream is untouched; a completed or failed task reopens. A failed
node rewound is a retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..db import read_tx
from ..errors import Refused
from ..ledger.core import LedgerCore
from . import planning as pl
from .changes import FRESH, ApplyTx, Outcome, append_rejections
from .plan import ActionParams, Plan


@dataclass(frozen=True)
class RewindParams(ActionParams):
    action = "rewind"

    node: str

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node}

    def node_target(self, target: str) -> str | None:
        return target


def plan_rewind(core: LedgerCore, task_id: str, node: str, *, reason: str) -> Plan:
    """Rewind a node: it and everything downstream → pending, the reason fed back to the agent."""
    with read_tx(core.db):
        task = pl.open_task(core, task_id)
        reason = pl.require_reason(reason, "rewind")
        n = pl.node_one(core, task_id, node)
        if n.status == "pending":
            raise Refused(f"node {node} is pending: nothing to rewind")
        if n.status == "parked":
            raise Refused(f"node {node} is parked and has nothing to rewind: resume it instead")
        if n.status == "abandoned":
            raise Refused(f"node {node} is abandoned (out of scope): it cannot be rewound")
        closure = pl.closure_nodes(core, [n.id])
        changes: dict[str, tuple[str, str]] = {}
        kept, parked = [], []
        for c in closure:
            if c.status in ("succeeded", "failed", "running", "blocked"):
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


def apply_rewind(tx: ApplyTx, p: RewindParams) -> Outcome:
    append_rejections(tx, tx.changed_to("pending"), tx.plan.reason, FRESH)
    return Outcome(task_fields=tx.reopens(), settle=True)

"""park: a task (or one node) waits for an outside signal.

Task: → parked (+ parked_at, reason, until, wake_on). Without ``now`` running nodes keep their
leases and may commit their current step (a heartbeat answers ``parked=True``); nothing new is
claimed. With ``now`` running nodes → parked and their leases are revoked. Either way the plan
records the version of every unfinished node, so a node claimed (or otherwise changed) after the
preview makes the apply stale: the park applies exactly what was previewed.
Node: pending/blocked → parked; a running node needs ``now`` (its lease is revoked).

``wake_on``: wake conditions (store/wake_conditions.py), checked when planned; when one is met a
``wake`` signal says so, and with ``auto_resume`` the park is resumed by the system (store/wake.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .. import wake_conditions as wc
from ..clock import iso
from ..db import read_tx
from ..errors import Refused
from ..ledger.core import LedgerCore
from . import planning as pl
from .changes import BUMP, REVOKE, ApplyTx, Outcome, set_nodes
from .plan import ActionParams, Plan


@dataclass(frozen=True)
class ParkParams(ActionParams):
    action = "park"

    node: str | None
    until_ts: float | None
    wake_on: str | None
    now: bool
    wake_conditions: tuple[Mapping[str, Any], ...] = ()
    auto_resume: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "until": iso(self.until_ts), "until_ts": self.until_ts, "wake_on": self.wake_on,
                "now": self.now, "wake_conditions": [dict(c) for c in self.wake_conditions],
                "auto_resume": self.auto_resume}

    def node_target(self, target: str) -> str | None:
        return target if self.node else None


def plan_park(core: LedgerCore, task_id: str, *, reason: str, node: str | None = None, until: Any = None,
              wake_on: str | Sequence[str] | None = None, now: bool = False, auto_resume: bool = False) -> Plan:
    """Park a task (or one node with ``node=``) until an outside signal."""
    with read_tx(core.db):
        task = pl.open_task(core, task_id)
        reason = pl.require_reason(reason, "park")
        until_ts = pl.parse_until(core, until)
        conditions, wake_warnings = wc.parse(core, task_id, wake_on)
        if auto_resume and not conditions:
            raise Refused("--auto-resume needs a wake condition (--wake-on)")
        params = ParkParams(node=node, until_ts=until_ts, wake_on=wc.texts(conditions) or None, now=bool(now),
                            wake_conditions=tuple(conditions), auto_resume=bool(auto_resume))
        if node is not None:
            n = pl.node_one(core, task_id, node)
            if task["status"] == "completed":
                raise Refused(f"task {task_id} is completed: nothing to park")
            if n.status == "running" and not now:
                raise Refused(f"node {node} is running: use --now to stop it (its lease is revoked)")
            if n.status == "parked":
                raise Refused(f"node {node} is already parked")
            if n.status not in ("pending", "blocked", "running"):
                raise Refused(f"node {node} is {n.status}: nothing to park")
            warnings = list(wake_warnings)
            if n.status == "blocked":
                warnings.append(f"node {node} has an open handoff; it stays open while the node is parked")
            return pl.make_plan(core, params, task, node, reason, [n], {n.key: (n.status, "parked")},
                                warnings=warnings)
        if task["status"] == "parked":
            raise Refused(f"task {task_id} is already parked (to stop a running node: park it with --node KEY --now)")
        if task["status"] in ("completed", "failed"):
            raise Refused(f"task {task_id} is {task['status']}: nothing runs, nothing to park")
        nodes = pl.all_nodes(core, task_id)
        running = [n for n in nodes if n.status == "running"]
        changes: dict[str, tuple[str, str]] = {}
        warnings = list(wake_warnings)
        if now:
            changes = {n.key: ("running", "parked") for n in running}
        elif running:
            warnings.append(f"{len(running)} running node(s) keep their leases and may finish their current step: "
                            f"{pl.names([n.key for n in running])} (use --now to stop them)")
        kept = [n.key for n in nodes if n.key not in changes]
        # Every unfinished node's version: a claim (or any change) after the preview makes it stale.
        unfinished = [n for n in nodes if n.status not in pl.FINISHED]
        return pl.make_plan(core, params, task, task_id, reason, nodes, changes, kept=kept, status_after="parked",
                            versions_of=unfinished, warnings=warnings)


def apply_park(tx: ApplyTx, p: ParkParams) -> Outcome:
    park = {"parked_at": tx.now, "park_reason": tx.plan.reason, "park_until": p.until_ts, "wake_on": p.wake_on}
    set_nodes(tx, tx.changed_to("parked"), {"status": "parked", **park, **REVOKE, **BUMP})
    watch = wc.entry(p.wake_conditions, p.auto_resume, tx.now) if p.wake_conditions else None
    state = wc.with_target(tx.task["wake_state"], p.node, watch)
    if p.node:
        return Outcome(task_fields={"wake_state": state})
    return Outcome(task_fields={"status": "parked", "wake_state": state, **park})

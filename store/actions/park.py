"""park: a task (or one node) waits for an outside signal.

Task: → parked (+ parked_at, reason, until, wake_on). Without ``now`` running nodes keep their
leases and may commit their current step (a heartbeat answers ``parked=True``); nothing new is
claimed. With ``now`` running nodes → parked and their leases are revoked. Either way the plan
records the version of every unfinished node, so a node claimed (or otherwise changed) after the
preview makes the apply stale: the park applies exactly what was previewed.
Node: pending/blocked → parked; a running node needs ``now`` (its lease is revoked).

``wake_on``: wake conditions (store/parks/conditions.py), checked when planned; when one is met a
``wake`` signal says so, and with ``auto_resume`` the park is resumed by the system (store/parks/wake.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from store.parks import conditions as wc
from store.clock import iso
from store.storage.db import read_tx
from store.errors import Refused
from store.jsontypes import JsonMapping, JsonObject
from store.storage.core import LedgerCore
from store.ledger.rules import FLAG, ID, ID_OPT, TEXT_OPT, UNTIL, WAKE_ON_OPT
from store.actions import planning as pl
from store.actions.action import Action, Command, Flag, Key
from store.actions.changes import BUMP, REVOKE, ApplyTx, Outcome, set_nodes
from store.actions.plan import Plan

# How a refusal or warning names the way out, in the CLI's words; the park dialog says the same with
# its checkboxes (console/dialogs/park.py dialog_words replaces exactly these).
USE_NOW = "use --now"
PARK_NODE_NOW = "park it with --node KEY --now"


@dataclass(frozen=True)
class ParkParams(Action):
    action = "park"
    title = "Park"
    key = Key("p", "Park", "park the selected task or node")
    arguments = {"task_id": ID, "reason": TEXT_OPT, "node": ID_OPT, "until": UNTIL, "wake_on": WAKE_ON_OPT,
                 "now": FLAG, "auto_resume": FLAG}
    cli = Command("park a task (or one node) until an outside signal", (
        Flag("task", "task_id", metavar="TASK", help="the task's id (warden status lists them)"),
        Flag("--node", "node", metavar="KEY", help="park only this node"),
        Flag("--reason", "reason", required=True, metavar="R", help="why (required; recorded and shown)"),
        Flag("--until", "until", metavar="T", help="when to look again: 15m, 2h, 1d or an ISO time"),
        Flag("--wake-on", "wake_on", metavar="C", repeat=True,
             help="what wakes it: handoff:<id>, node:<key>, effect:<key>, file:<path> or at:<time> "
                  "(repeatable: any one wakes it)"),
        Flag("--auto-resume", "auto_resume", switch=True, help="resume on its own when a wake condition is met"),
        Flag("--now", "now", switch=True, help="revoke running leases now (running nodes → parked)"),
    ), examples=('warden park nightly --reason "vendor API down" --wake-on at:2h --auto-resume',
                 'warden park nightly --node fetch --reason "quota" --now  # stop its running work now'))

    node: str | None
    until_ts: float | None
    wake_on: str | None
    now: bool
    wake_conditions: tuple[JsonMapping, ...] = ()
    auto_resume: bool = False

    def to_json(self) -> JsonObject:
        return {"node": self.node, "until": iso(self.until_ts), "until_ts": self.until_ts, "wake_on": self.wake_on,
                "now": self.now, "wake_conditions": [dict(c) for c in self.wake_conditions],
                "auto_resume": self.auto_resume}

    def node_target(self, target: str) -> str | None:
        return target if self.node else None

    def apply(self, tx: ApplyTx) -> Outcome:
        park = {"parked_at": tx.now, "park_reason": tx.plan.reason, "park_until": self.until_ts,
                "wake_on": self.wake_on}
        set_nodes(tx, tx.changed_to("parked"), {"status": "parked", **park, **REVOKE, **BUMP})
        watch = wc.entry(self.wake_conditions, self.auto_resume, tx.now) if self.wake_conditions else None
        state = wc.with_target(tx.task.wake_state, self.node, watch)
        if self.node:
            return Outcome(task_fields={"wake_state": state})
        return Outcome(task_fields={"status": "parked", "wake_state": state, **park})


def plan_park(core: LedgerCore, task_id: str, *, reason: str, node: str | None = None, until: object = None,
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
            if task.status == "completed":
                raise Refused(f"task {task_id} is completed: nothing to park")
            if n.status == "running" and not now:
                raise Refused(f"node {node} is running: {USE_NOW} to stop it (its lease is revoked)")
            if n.status == "parked":
                raise Refused(f"node {node} is already parked")
            if n.status not in ("pending", "blocked", "running"):
                raise Refused(f"node {node} is {n.status}: nothing to park")
            warnings = list(wake_warnings)
            if n.status == "blocked":
                warnings.append(f"node {node} has an open handoff; it stays open while the node is parked")
            return pl.make_plan(core, params, task, node, reason, [n], {n.key: (n.status, "parked")},
                                warnings=warnings)
        if task.status == "parked":
            raise Refused(f"task {task_id} is already parked (to stop a running node: {PARK_NODE_NOW})")
        if task.status in ("completed", "failed"):
            raise Refused(f"task {task_id} is {task.status}: nothing runs, nothing to park")
        nodes = pl.all_nodes(core, task_id)
        running = [n for n in nodes if n.status == "running"]
        changes: dict[str, tuple[str, str]] = {}
        warnings = list(wake_warnings)
        if now:
            changes = {n.key: ("running", "parked") for n in running}
        elif running:
            warnings.append(f"{len(running)} running node(s) keep their leases and may finish their current step: "
                            f"{pl.names([n.key for n in running])} ({USE_NOW} to stop them)")
        kept = [n.key for n in nodes if n.key not in changes]
        # Every unfinished node's version: a claim (or any change) after the preview makes it stale.
        unfinished = [n for n in nodes if n.status not in pl.FINISHED]
        return pl.make_plan(core, params, task, task_id, reason, nodes, changes, kept=kept, status_after="parked",
                            versions_of=unfinished, warnings=warnings)


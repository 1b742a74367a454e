"""park: a task (or one node) waits for an outside signal.

Task: → parked (+ parked_at, reason, until, wake_on). Without ``now`` running nodes keep their
leases and may commit their current step (a heartbeat answers ``parked=True``); nothing new is
claimed. With ``now`` running nodes → parked and their leases are revoked.
Node: pending/blocked → parked; a running node needs ``now`` (its lease is revoked).

The promise (store/actions/promise.py): the task stops — what ran at the preview finishes its
step (or is parked with ``now``), nothing else runs. Agents' work meanwhile keeps it: a node
claimed since the preview is parked too (its lease revoked, with ``now`` or without: it started
after the operator said stop), one that finished or failed is left as it is, one added waits
with the rest. A node park parks its node whatever it is doing now (claimed meanwhile: its lease
is revoked). Refused: the task's status changed by another action (parked, resumed, aborted),
the task or node has nothing left to park.

``wake_on``: wake conditions (store/parks/conditions.py), checked when planned; when one is met a
``wake`` signal says so, and with ``auto_resume`` the park is resumed by the system (store/parks/wake.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from store.parks import conditions as wc
from store.clock import iso
from store.storage import sql
from store.storage.db import read_tx
from store.errors import Refused
from store.jsontypes import JsonMapping, JsonObject
from store.storage.core import LedgerCore
from store.ledger.rules import FLAG, ID, ID_OPT, TEXT_OPT, UNTIL, WAKE_ON_OPT
from store.actions import planning as pl
from store.actions.action import TASK_FLAG, Action, Command, Flag, Key
from store.actions.changes import BUMP, REVOKE, ApplyTx, Outcome, refund_claims, set_nodes
from store.actions.plan import Plan
from store.actions.promise import Since, task_moved

# What a park without ``now`` does to a running node, by the integration that drives it (the task's
# origin; docs/agents.md "the operator's park / abort / rewind reach it as").
STOPPED_AT_ONCE = ("run",)
_FATE = {
    "run": "keep their leases; warden run stops the command's processes at once (never inside a ledger "
           "write) and continues them on resume",
    "mcp": "keep their leases; the agent's next warden mcp call answers parked (it saves its state and "
           "stops), what it is doing now may finish",
    "claude": "keep their leases; Claude Code's next tool call waits until the task is resumed (a tool "
              "running now may finish)",
    "codex": "keep their leases; Codex's next tool call waits until the task is resumed (a tool running "
             "now may finish)",
}


def running_fate(origin: str | None) -> str:
    """What happens to the task's running nodes when it is parked without ``now``."""
    return _FATE.get(origin or "", "keep their leases and may finish their current step")


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
        TASK_FLAG,
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

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        return _plan(core, self, pl.open_task(core, plan.task_id), plan.reason, (), approved=plan)

    def keeps(self, approved: Plan, current: Plan, since: Sequence[Since]) -> str | None:
        """A task park: only another action that changed the task's status refuses (a node park
        refuses as every action does)."""
        if self.node:
            return super().keeps(approved, current, since)
        return task_moved(since, approved.task_id)

    def apply(self, tx: ApplyTx) -> Outcome:
        park = {"parked_at": tx.now, "park_reason": tx.plan.reason, "park_until": self.until_ts,
                "wake_on": self.wake_on}
        set_nodes(tx, tx.changed_to("parked"), {"status": "parked", **park, **REVOKE, **BUMP})
        # The claim an operator stopped is given back: max_claims counts an agent failing to
        # finish, not a person stopping it (each resume's claim would spend one: five park/resume
        # cycles failed the node).
        refund_claims(tx, [tx.ids[k] for k, (was, to) in tx.plan.changes.items() if was == "running" and to == "parked"])
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
        return _plan(core, params, task, reason, wake_warnings)


WATCHED_ONLY = ("this agent is only watched through its spans (warden otel receive): the park is recorded, but "
                "nothing here can stop it; parking it needs a controlling integration (warden run, warden hook, "
                "the Python API)")


def _plan(core: LedgerCore, params: ParkParams, task: pl.TaskState, reason: str, wake_warnings: Sequence[str],
          *, approved: Plan | None = None) -> Plan:
    """The park's plan on the task as it is. ``approved``: the plan the operator approved, when
    planning again at its apply — then a node claimed since is parked too, ``now`` or not."""
    task_id, node = task.task_id, params.node
    if sql.scalar(core.db, "SELECT origin FROM task WHERE task_id = ?", [task_id]) == "otel":
        wake_warnings = [*wake_warnings, WATCHED_ONLY]
    if node is not None:
        n = pl.node_one(core, task_id, node)
        if task.status == "completed":
            raise Refused(f"task {task_id} is completed: nothing to park")
        if n.status == "running" and not params.now and approved is None:
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
    if params.now:
        stopped = running
    elif approved is None:
        stopped = []
    else:  # running under the claim the preview showed: finishes its step; claimed since: parked
        stopped = [n for n in running if not (approved.statuses.get(n.key) == "running"
                                               and approved.versions.get(n.key) == n.version)]
    changes = {n.key: ("running", "parked") for n in stopped}
    warnings = list(wake_warnings)
    left = [n.key for n in running if n.key not in changes]
    if left:
        warnings.append(f"{len(left)} running node(s) {running_fate(task.origin)}: {pl.names(left)}"
                        + ("" if task.origin in STOPPED_AT_ONCE else f" ({USE_NOW} to stop them)"))
    kept = [n.key for n in nodes if n.key not in changes]
    # Every unfinished node's version and status: what the promise is checked against at apply.
    unfinished = [n for n in nodes if n.status not in pl.FINISHED]
    return pl.make_plan(core, params, task, task_id, reason, nodes, changes, kept=kept, status_after="parked",
                        versions_of=unfinished, warnings=warnings)

"""healthy: an operator marks a running node's loop alarm (``no_new_info`` / ``repeating``) healthy.

The node's loops are judged afresh from the mark (``node.healthy_at``; its next claim clears it),
and the alarm's stretch is folded into its kind's norm as a healthy one (``store/ledger/norms.py``):
a kind whose healthy nodes go that long without news (or repeating) learns that it is its normal,
and once ``judges/norms.MIN_NODES`` finished nodes or marks speak for it, its alarms come only past
it (``store/judges/norms.py``). ``warden status`` counts the marks by kind.

The promise (store/actions/promise.py): this node's loop alarm cleared, its kind taught the stretch
the preview showed. The agent's work meanwhile keeps it: the node beating on (its stretch longer,
its alarm another loop kind, or gone with news) or taken back by its own holder (a renewal: the same
attempt) — the previewed stretch is what is taught, and the apply says what differed. Refused: the
node no longer runs, or raises no loop alarm; at the apply, the node stopped running or was claimed
again (another attempt: what the operator judged is not what runs) since the preview.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.actions import planning as pl
from store.actions.action import TASK_FLAG, Action, Command, Flag, Key
from store.actions.changes import ApplyTx, Outcome
from store.actions.plan import Plan
from store.actions.planning import TaskState
from store.actions.promise import refused
from store.errors import Refused
from store.jsontypes import JsonObject
from store.judges.loops import Activity, Obs, Signal, loop_start
from store.judges.norms import Folded, fold
from store.ledger.norms import fold_mark
from store.ledger.rules import ID, TEXT_OPT
from store.ledger.stall import judge_stall
from store.estimation import evidence
from store.storage import sql
from store.storage.core import LedgerCore
from store.storage.tables import NodeRecord
from store.storage.db import read_tx


@dataclass(frozen=True)
class HealthyParams(Action):
    action = "healthy"
    title = "Mark healthy"
    verb = "mark healthy"
    reason_to_agent = False  # recorded and audited; the agent is not told
    key = Key("H", "Healthy", "mark the selected node's loop alarm healthy (its kind learns it is normal)",
              palette="Mark alarm healthy", palette_help="the selected node's no_new_info / repeating alarm is "
                                                        "normal work: clear it and teach its kind (H)")
    needs_node = True
    arguments = {"task_id": ID, "node": ID, "reason": TEXT_OPT}
    cli = Command("mark a running node's loop alarm healthy: judged afresh, and its kind learns this is normal", (
        TASK_FLAG,
        Flag("key", "node", metavar="KEY", help="the running node raising no_new_info or repeating"),
        Flag("--reason", "reason", required=True, metavar="R", help="why this is healthy work (required; recorded)"),
    ), examples=("warden healthy nightly watch-ci --reason 'polls CI every minute by design'",))

    node: str
    alarm: str  # no_new_info | repeating
    evidence: str
    kind: str
    worker: str | None
    attempt: int  # the attempt the operator judged: another one at the apply is stale
    quiet: int  # the node's longest stretch without news since it last moved on (folded in)
    repeat: int  # … and its longest run of one observation

    def to_json(self) -> JsonObject:
        return {"node": self.node, "alarm": self.alarm, "evidence": self.evidence, "kind": self.kind,
                "worker": self.worker, "attempt": self.attempt, "quiet": self.quiet, "repeat": self.repeat}

    def node_target(self, target: str) -> str | None:
        return target

    def stale(self, core: LedgerCore, plan: Plan, task: TaskState) -> str | None:
        """The node stopped running, or was claimed again (another attempt), since the preview."""
        row = core.node_record(plan.task_id, self.node)
        if row.status != "running":
            return refused(f"node {self.node} stopped running ({row.status})")
        if row.attempt != self.attempt:
            return refused(f"node {self.node} was claimed again (attempt {row.attempt}, by {row.lease_owner})")
        return None

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        """The same attempt runs on (``stale`` checked it; a take-back renewal moves the node's
        version): the approved mark, as previewed — what differed is said by ``apply``."""
        return plan

    def apply(self, tx: ApplyTx) -> Outcome:
        row = tx.core.node_record(tx.plan.task_id, self.node)
        loop, now = _stretch(tx.core, row)
        sql.execute(tx.core.db, "UPDATE node SET healthy_at = ? WHERE id = ? AND status = 'running'", [tx.now, row.id])
        fold_mark(tx.core, self.kind, self.worker, self.quiet, self.repeat)
        return Outcome(payload={"node": self.node, "alarm": self.alarm, "kind": self.kind,
                                "quiet": self.quiet, "repeat": self.repeat}, notes=self._meanwhile(loop, now))

    def _meanwhile(self, loop: Signal | None, now: Folded) -> tuple[str, ...]:
        """What the node did between the preview and the apply, when it differs from the preview."""
        if loop is None:
            went = "its alarm cleared meanwhile (news came)"
        elif (loop.kind, now.quiet, now.repeat) != (self.alarm, self.quiet, self.repeat):
            went = (f"it went on meanwhile ({loop.kind} now: {now.quiet} observations without news, "
                    f"{now.repeat} alike in a row)")
        else:
            return ()
        return (f"node {self.node}: {went}; its kind is taught the stretch the preview showed "
                f"({self.quiet} without news, {self.repeat} alike in a row)",)


def plan_healthy(core: LedgerCore, task_id: str, node: str, *, reason: str) -> Plan:
    """Mark ``node``'s current loop alarm healthy (module doc)."""
    with read_tx(core.db):
        task = pl.open_task(core, task_id)
        reason = pl.require_reason(reason, "healthy")
        n = pl.node_one(core, task_id, node)
        if n.status != "running":
            raise Refused(f"node {node} is {n.status}: only a running node raises a loop alarm")
        row = core.node_record(task_id, node)
        loop, f = _stretch(core, row)
        if loop is None:
            raise Refused(f"node {node} raises no loop alarm (no_new_info or repeating) now: nothing to mark healthy")
        params = HealthyParams(node=node, alarm=loop.kind, evidence=loop.evidence, kind=row.kind,
                               worker=row.lease_owner, attempt=row.attempt, quiet=f.quiet, repeat=f.repeat)
        warnings = [f"{loop.kind}: {loop.evidence}",
                    f"kind {row.kind}: {f.quiet} observations without news and {f.repeat} alike in a row are counted "
                    "as healthy from now on (its alarms move once 5 healthy nodes or marks speak for it)"]
        return pl.make_plan(core, params, task, node, reason, [n], {}, versions_of=[n], warnings=warnings)


def _stretch(core: LedgerCore, row: NodeRecord) -> tuple[Signal | None, Folded]:
    """The node's loop alarm now (None: none), and its stretch since it last moved on (or since
    its last mark): the longest run without news and of one observation."""
    loop = judge_stall(core, row, row.lease_owner)
    obs = [Obs.seen(o.seen, o.at, o.attempt) for o in evidence.last_observations(core, [row.id], 200)]
    since = max(loop_start(row, Activity.of(row), obs), row.healthy_at if row.healthy_at is not None else float("-inf"))
    return loop, fold((o.new_units, o.flags, o.digest) for o in obs if o.attempt == row.attempt and o.at > since)


__all__ = ["HealthyParams", "plan_healthy"]

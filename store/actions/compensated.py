"""compensated: an operator records that a confirmed effect was undone by hand.

The effect → ``compensated`` (when, by whom, the reason as its note); if abort gave it a
compensation node that has not finished, that node → abandoned (its lease revoked), so the
compensations after it in the chain can run. Works on any task, aborted ones included (that is
where compensations run). Revision-checked like every action: the effect's status and the
compensation node's version are those previewed, or the apply is stale.

The promise (store/actions/promise.py): this effect marked undone, its compensation node (if it has
not finished) abandoned. That node claimed meanwhile is abandoned all the same (its lease revoked).
Refused: the effect marked compensated (or changed) since the preview; another action since changed
the task's status or the compensation node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from store.storage import sql
from store.clock import iso
from store.storage.db import read_tx
from store.errors import NotFound, Refused
from store.jsontypes import JsonObject
from store.storage.core import LedgerCore
from store.ledger.rules import ID, TEXT_OPT
from store.actions import planning as pl
from store.actions.action import TASK_FLAG, Action, Command, Flag, Key
from store.actions.changes import BUMP, REVOKE, ApplyTx, Outcome, set_nodes
from store.actions.plan import Plan


@dataclass(frozen=True)
class CompensatedParams(Action):
    action = "compensated"
    title = "Mark compensated"
    verb = "mark compensated"
    key = Key("c", "Compensated", "mark an effect of the selected task compensated (undone by hand)",
              palette="Mark effect compensated", palette_help="an effect of the selected task was undone by hand (c)")
    arguments = {"task_id": ID, "effect_key": ID, "reason": TEXT_OPT}
    cli = Command("record that a confirmed effect was undone by hand (its compensation node is dropped)", (
        TASK_FLAG,
        Flag("effect", "effect_key", metavar="EFFECT_KEY", help="the effect's key (warden graph TASK lists effects)"),
        Flag("--reason", "reason", required=True, metavar="R", help="what was done, by whom (required; recorded)"),
    ), examples=("warden compensated nightly pr:42 --reason 'closed the PR by hand (alice)'",))

    effect_key: str
    node: str  # the node that made the effect
    external_id: str | None
    compensation: str | None
    compensation_node: str | None  # the compensation node abort made for it, if any

    def to_json(self) -> JsonObject:
        return {"effect_key": self.effect_key, "node": self.node, "external_id": self.external_id,
                "compensation": self.compensation, "compensation_node": self.compensation_node}

    def stale(self, core: LedgerCore, plan: Plan, task: pl.TaskState) -> str | None:
        """The effect was marked compensated (or changed) since the preview."""
        return still_confirmed(core, plan)

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        return plan_compensated(core, plan.task_id, self.effect_key, reason=plan.reason)

    def apply(self, tx: ApplyTx) -> Outcome:
        set_nodes(tx, tx.changed_to("abandoned"), {"status": "abandoned", "finished_at": tx.now,
                                                   "next_retry_at": None, **REVOKE, **BUMP})
        sql.execute(tx.core.db, "UPDATE effect SET status = 'compensated', compensated_at = ?, compensated_by = ?, "
                                "compensation_note = ? WHERE task_id = ? AND effect_key = ? AND status = 'confirmed'",
                    [tx.now, tx.operator, tx.plan.reason, tx.plan.task_id, self.effect_key])
        return Outcome(payload={"effect_key": self.effect_key, "compensation_node": self.compensation_node})


class EffectRow(NamedTuple):
    """What marking an effect compensated reads of it (``node``: the key of the node that made it)."""

    id: int
    status: str
    external_id: str | None
    compensation: str | None
    compensated_by: str | None
    compensated_at: float | None
    compensation_node_id: int | None
    node: str


def _effect(core: LedgerCore, task_id: str, effect_key: str) -> EffectRow:
    row = sql.fetch_row(core.db, EffectRow, "SELECT e.id, e.status, e.external_id, e.compensation, e.compensated_by, "
                                            "e.compensated_at, e.compensation_node_id, n.key AS node FROM effect e "
                                            "JOIN node n ON n.id = e.node_id WHERE e.task_id = ? AND e.effect_key = ?",
                        [task_id, effect_key])
    if row is None:
        raise NotFound(f"unknown effect {effect_key!r} in task {task_id!r}")
    return row


def plan_compensated(core: LedgerCore, task_id: str, effect_key: str, *, reason: str) -> Plan:
    """Mark a confirmed effect compensated by hand (with the reason: what was done, by whom)."""
    with read_tx(core.db):
        if not isinstance(task_id, str) or not task_id:
            raise NotFound(f"unknown task {task_id!r}")
        task = pl.read_task(core, task_id)
        reason = pl.require_reason(reason, "compensated")
        e = _effect(core, task_id, str(effect_key))
        if e.status == "compensated":
            raise Refused(f"effect {effect_key} was already marked compensated by {e.compensated_by} "
                          f"at {iso(e.compensated_at)}")
        if e.status != "confirmed":
            raise Refused(f"effect {effect_key} was never confirmed (it is {e.status}): check whether it "
                          "happened; only a confirmed effect can be marked compensated")
        nodes: list[pl.LeanNode] = []
        changes: dict[str, tuple[str, str]] = {}
        warnings: list[str] = []
        comp_key = None
        if e.compensation_node_id is not None:
            n = pl.node_by_id(core, int(e.compensation_node_id))
            comp_key = n.key
            nodes = [n]
            if n.status not in pl.FINISHED:
                changes[n.key] = (n.status, "abandoned")
                warnings.append(f"compensation node {n.key} is {n.status}: it is abandoned"
                                + (f" (its lease, held by {n.owner or 'unknown'}, is revoked)" if n.leased else ""))
        params = CompensatedParams(effect_key=str(effect_key), node=e.node, external_id=e.external_id,
                                   compensation=e.compensation, compensation_node=comp_key)
        return pl.make_plan(core, params, task, str(effect_key), reason, nodes, changes, versions_of=nodes,
                            warnings=warnings)


class EffectState(NamedTuple):
    status: str
    compensated_by: str | None
    compensated_at: float | None


def still_confirmed(core: LedgerCore, plan: Plan) -> str | None:
    """At apply, under the task's lock: why the effect can no longer be marked, or None."""
    row = sql.fetch_row(core.db, EffectState, f"SELECT {sql.columns(EffectState)} FROM effect WHERE task_id = ? "
                                              "AND effect_key = ?", [plan.task_id, plan.target])
    if row is None:
        return f"effect {plan.target} no longer exists"
    if row.status == "compensated":
        return (f"effect {plan.target} was marked compensated by {row.compensated_by} at "
                f"{iso(row.compensated_at)} since the preview; nothing changed")
    return None if row.status == "confirmed" else f"effect {plan.target} is {row.status}"


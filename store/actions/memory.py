"""memory-confirm / memory-reject: a person decides a memory an agent proposed
(``Ledger.propose_memory``). Semantic memory enters later tasks' claims only once confirmed (seed
004: unconfirmed knowledge is the shortest way to fix a mistake for good). ``memory-confirm``
takes a pending memory; ``memory-reject`` a pending one, or retracts a confirmed one (later claims
stop getting it). A reason is required.

The plan changes no node: it is checked at apply against the memory's status (another operator may
have decided it since the preview) — not against the proposing task's revision: what that task's
agents do meanwhile does not change what the person decides (``revision_checked = False``).
Applied, the proposing task's revision is bumped and the decision audited like every action.
The operator may not be the worker that proposed the memory nor any worker of its task
(``store/actions/identity.py``): refused, the attempt is audited.
Opened from the memory inbox (``M``: ``y`` / ``x``) and ``warden memory confirm|reject ID``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from store.storage import sql
from store.clock import iso
from store.storage.db import read_tx
from store.errors import NotFound, Refused
from store.jsontypes import JsonObject
from store.storage.core import LedgerCore
from store.mind.read import MEMORY_SELECT, MemoryRow
from store.ledger.rules import MEMORY_ID, TEXT_OPT
from store.validate import show
from store.actions import planning as pl
from store.actions.action import Action, Command, Flag, NoKey
from store.actions.changes import ApplyTx, Outcome
from store.actions.identity import agent_refusal
from store.actions.plan import Plan

_AFTER = {"confirm": "confirmed", "reject": "rejected"}
_REASON = Flag("--reason", "reason", required=True, metavar="R", help="why (required; recorded)")


def memory_row(core: LedgerCore, memory_id: object) -> MemoryRow:
    if not str(memory_id).isdigit() or len(str(memory_id)) > 18:
        raise NotFound(f"unknown memory {show(memory_id)}")
    row = sql.fetch_row(core.db, MemoryRow, f"SELECT {MEMORY_SELECT} FROM memory WHERE id = ?",
                        [int(str(memory_id))])
    if row is None:
        raise NotFound(f"unknown memory {show(memory_id)}")
    return row


def decided(row: MemoryRow) -> str:
    return f"memory {row.id} was already {row.status} by {row.decided_by or '?'} at {iso(row.decided_at)}"


@dataclass(frozen=True)
class MemoryDecision(Action):
    """A person's decision on a proposed memory (the params of both actions)."""

    decision: ClassVar[str]
    key = NoKey("opened from the memory inbox (M): y confirms, x rejects")
    arguments = {"memory_id": MEMORY_ID, "reason": TEXT_OPT}
    revision_checked = False

    memory: str
    status_before: str
    text: str
    scope: str
    workflow: str
    kind: str | None

    def to_json(self) -> JsonObject:
        return {"memory": self.memory, "decision": self.decision, "status_before": self.status_before,
                "status_after": _AFTER[self.decision], "text": self.text, "scope": self.scope,
                "workflow": self.workflow, "kind": self.kind}

    def summary_parts(self) -> list[str]:
        return [f"memory {self.status_before} → {_AFTER[self.decision]}"]

    def stale(self, core: LedgerCore, plan: Plan, task: pl.TaskState) -> str | None:
        """Another operator decided the memory since the preview (one wins, the other is told who)."""
        try:
            row = memory_row(core, self.memory)
        except NotFound:
            return f"memory {self.memory} no longer exists"
        return None if row.status == self.status_before else f"{decided(row)} since the preview; review again"

    def refuse_operator(self, core: LedgerCore, plan: Plan, operator: str) -> str | None:
        """A memory is decided by a person: not the worker that proposed it, nor any worker of
        its task (store/actions/identity.py)."""
        row = memory_row(core, self.memory)
        return agent_refusal(core, row.task_id, operator, f"{self.decision}ing memory {self.memory}",
                             also=[row.proposed_by])

    def apply(self, tx: ApplyTx) -> Outcome:
        n = sql.execute_count(tx.core.db, "UPDATE memory SET status = ?, decided_by = ?, decided_at = ?, "
                                          "decision_reason = ? WHERE id = ? AND status = ?",
                              [_AFTER[self.decision], tx.operator, tx.now, tx.plan.reason, int(self.memory),
                               self.status_before])
        if n != 1:  # cannot happen under the write lock after the check; refuse rather than decide twice
            raise RuntimeError("memory changed under the write lock")
        return Outcome(payload={"memory": self.memory, "decision": self.decision, "status": _AFTER[self.decision]})


@dataclass(frozen=True)
class ConfirmMemoryParams(MemoryDecision):
    action = "memory-confirm"
    decision = "confirm"
    title = "Confirm memory"
    verb = "confirm memory"
    cli = Command("confirm a memory an agent proposed: later claims of its kind / workflow are handed it", (
        Flag("memory", "memory_id", metavar="ID", help="the memory's id (warden memory --pending lists them)"),
        _REASON,
    ), name="confirm", parent="memory", examples=("warden memory confirm 3 --reason 'matches the runbook'",))


@dataclass(frozen=True)
class RejectMemoryParams(MemoryDecision):
    action = "memory-reject"
    decision = "reject"
    title = "Reject memory"
    verb = "reject memory"
    cli = Command("reject a proposed memory, or retract a confirmed one", (
        Flag("memory", "memory_id", metavar="ID", help="the memory's id (warden memory lists them)"),
        _REASON,
    ), name="reject", parent="memory", examples=("warden memory reject 3 --reason 'true only for the old API'",))


def _plan(core: LedgerCore, memory_id: str, reason: str, cls: type[MemoryDecision]) -> Plan:
    decision = cls.decision
    with read_tx(core.db):
        row = memory_row(core, memory_id)
        reason = pl.require_reason(reason, f"{decision} memory")
        if decision == "confirm" and row.status != "pending":
            raise Refused(decided(row) if row.status == "confirmed" else
                          f"memory {row.id} was rejected: a rejected memory is not asked again")
        if decision == "reject" and row.status == "rejected":
            raise Refused(decided(row))
        task = pl.read_task(core, row.task_id)
        workflow = row.workflow or ""
        where = (f"a node of kind {row.kind} in a task of workflow {workflow or '(none)'}" if row.scope == "kind"
                 else f"any node in a task of workflow {workflow or '(none)'}")
        if decision == "confirm":
            warnings = [f"from now on every claim of {where} is handed this memory"]
        elif row.status == "confirmed":
            warnings = [f"retracts a confirmed memory: claims of {where} stop getting it"]
        else:
            warnings = ["no claim will be handed it; the same proposal is not asked again"]
        params = cls(memory=str(row.id), status_before=row.status, text=row.text, scope=row.scope,
                     workflow=workflow, kind=row.kind)
        return pl.make_plan(core, params, task, str(row.id), reason, [], {}, versions_of=[], warnings=warnings)


def plan_memory_confirm(core: LedgerCore, memory_id: str, *, reason: str) -> Plan:
    """Confirm a pending memory: later claims of its kind / workflow are handed it."""
    return _plan(core, memory_id, reason, ConfirmMemoryParams)


def plan_memory_reject(core: LedgerCore, memory_id: str, *, reason: str) -> Plan:
    """Reject a pending memory, or retract a confirmed one."""
    return _plan(core, memory_id, reason, RejectMemoryParams)


__all__ = ["ConfirmMemoryParams", "MemoryDecision", "RejectMemoryParams", "plan_memory_confirm",
           "plan_memory_reject"]

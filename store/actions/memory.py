"""memory: a person confirms or rejects a memory an agent proposed (``Ledger.propose_memory``).
Semantic memory enters later tasks' claims only once confirmed (seed 004: unconfirmed knowledge is
the shortest way to fix a mistake for good). ``confirm`` takes a pending memory; ``reject`` a
pending one, or retracts a confirmed one (later claims stop getting it). A reason is required.

The plan changes no node: it is checked at apply against the memory's status (another operator may
have decided it since the preview), not against the proposing task's revision — what that task's
agents do meanwhile does not change what the person is deciding. Applied, the proposing task's
revision is bumped and the decision audited like every action.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import sql
from ..clock import iso
from ..db import read_tx
from ..errors import NotFound, Refused
from ..ledger.core import LedgerCore
from ..validate import show
from . import planning as pl
from .changes import ApplyTx, Outcome
from .plan import ActionParams, Plan

DECISIONS = ("confirm", "reject")
_AFTER = {"confirm": "confirmed", "reject": "rejected"}


@dataclass(frozen=True)
class MemoryParams(ActionParams):
    action = "memory"

    memory: str
    decision: str  # confirm | reject
    status_before: str
    text: str
    scope: str
    workflow: str
    kind: str | None

    def to_json(self) -> dict[str, Any]:
        return {"memory": self.memory, "decision": self.decision, "status_before": self.status_before,
                "status_after": _AFTER[self.decision], "text": self.text, "scope": self.scope,
                "workflow": self.workflow, "kind": self.kind}

    def summary_parts(self) -> list[str]:
        return [f"{self.status_before} → {_AFTER[self.decision]}"]


def memory_row(core: LedgerCore, memory_id: str) -> dict[str, Any]:
    if not str(memory_id).isdigit() or len(str(memory_id)) > 18:
        raise NotFound(f"unknown memory {show(memory_id)}")
    row = sql.fetch_one(core.db, "SELECT * FROM memory WHERE id = ?", [int(memory_id)])
    if row is None:
        raise NotFound(f"unknown memory {show(memory_id)}")
    return row


def decided(row: dict[str, Any]) -> str:
    return (f"memory {row['id']} was already {row['status']} by {row['decided_by'] or '?'} at "
            f"{iso(row['decided_at'])}")


def plan_memory(core: LedgerCore, memory_id: str, *, decision: str, reason: str) -> Plan:
    """Confirm or reject a proposed memory."""
    if decision not in DECISIONS:
        raise Refused(f"unknown memory decision {decision!r}: one of {', '.join(DECISIONS)}")
    with read_tx(core.db):
        row = memory_row(core, memory_id)
        reason = pl.require_reason(reason, f"{decision} memory")
        status = row["status"]
        if decision == "confirm" and status != "pending":
            raise Refused(decided(row) if status == "confirmed" else
                          f"memory {row['id']} was rejected: a rejected memory is not asked again")
        if decision == "reject" and status == "rejected":
            raise Refused(decided(row))
        task = core.task_row(row["task_id"])
        where = (f"a node of kind {row['kind']} in a task of workflow {row['workflow'] or '(none)'}"
                 if row["scope"] == "kind" else f"any node in a task of workflow {row['workflow'] or '(none)'}")
        if decision == "confirm":
            warnings = [f"from now on every claim of {where} is handed this memory"]
        elif status == "confirmed":
            warnings = [f"retracts a confirmed memory: claims of {where} stop getting it"]
        else:
            warnings = ["no claim will be handed it; the same proposal is not asked again"]
        params = MemoryParams(memory=str(row["id"]), decision=decision, status_before=status, text=row["text"],
                              scope=row["scope"], workflow=row["workflow"] or "", kind=row["kind"])
        return pl.make_plan(core, params, task, str(row["id"]), reason, [], {}, versions_of=[], warnings=warnings)


def still_undecided(core: LedgerCore, plan: Plan) -> str | None:
    """At apply: why the decision no longer applies (decided by someone else since), or None."""
    p = plan.params
    assert isinstance(p, MemoryParams)
    row = sql.fetch_one(core.db, "SELECT * FROM memory WHERE id = ?", [int(p.memory)])
    if row is None:
        return f"memory {p.memory} no longer exists"
    if row["status"] != p.status_before:
        return f"{decided(row)} since the preview; review again"
    return None


def apply_memory(tx: ApplyTx, p: MemoryParams) -> Outcome:
    n = sql.execute_count(tx.core.db, "UPDATE memory SET status = ?, decided_by = ?, decided_at = ?, "
                                      "decision_reason = ? WHERE id = ? AND status = ?",
                          [_AFTER[p.decision], tx.operator, tx.now, tx.plan.reason, int(p.memory), p.status_before])
    if n != 1:  # cannot happen under the write lock after the check; refuse rather than decide twice
        raise RuntimeError("memory changed under the write lock")
    return Outcome(payload={"memory": p.memory, "decision": p.decision, "status": _AFTER[p.decision]})

"""What an action's apply function works with: the open write transaction (:class:`ApplyTx`),
set-based node updates, and what it hands back to the shared apply (:class:`Outcome`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from store.storage import sql
from store.jsontypes import JsonMapping
from store.storage.core import LedgerCore
from store.storage.sql import Inc
from store.actions.plan import ActionParams, Plan
from store.actions.planning import TaskState

# Field sets of the node updates actions make.
REVOKE: Mapping[str, object] = {"lease_token": None, "lease_until": None}
UNPARK: Mapping[str, object] = {"parked_at": None, "park_reason": None, "park_until": None, "wake_on": None}
BUMP: Mapping[str, object] = {"version": Inc(1)}
# rewind and narrow: a fresh start (a new max_claims allowance, no pending retry)
FRESH: Mapping[str, object] = {"status": "pending", "finished_at": None, "next_retry_at": None, "claim_count": 0,
                            **REVOKE, **BUMP}


@dataclass(frozen=True)
class ApplyTx:
    """An action being applied: inside its write transaction, after the revision check."""

    core: LedgerCore
    plan: Plan
    task: TaskState  # the task row, locked
    ids: Mapping[str, int]  # node id by key, for every node the plan names
    operator: str
    now: float

    def changed_to(self, status: str) -> list[int]:
        """Ids of the nodes the plan moves to ``status``."""
        return [self.ids[k] for k, (_, to) in self.plan.changes.items() if to == status]

    def reopens(self) -> dict[str, object]:
        """Task fields reopening a completed or failed task that the plan makes active."""
        if self.task.status in ("completed", "failed") and self.plan.task_status[1] == "active":
            return {"status": "active", "finished_at": None}
        return {}


@dataclass(frozen=True)
class Outcome:
    """What an action's apply did beyond its node updates, for the shared apply to finish."""

    task_fields: Mapping[str, object] = field(default_factory=dict)  # task row changes (+ the revision bump)
    payload: JsonMapping = field(default_factory=dict)  # extra keys of the operator event
    settle: bool = False  # the graph decides afterwards whether the task completes or fails
    params: ActionParams | None = None  # the params as applied, when applying added to them
    # What the action's own state did since the preview that the apply kept its promise through
    # (one line each, said with what differed): "node a went on meanwhile (…)".
    notes: tuple[str, ...] = ()


def set_nodes(tx: ApplyTx, ids: Sequence[int], fields: Mapping[str, object]) -> None:
    """One raw ``UPDATE node SET … WHERE id IN (…)`` per chunk (a set-based update; building the
    same query with Peewee costs more than running it at 10,000 ids)."""
    if not ids:
        return
    sets, values = sql.set_clause(fields)
    for chunk in sql.chunks(list(ids)):
        sql.execute(tx.core.db, f"UPDATE node SET {sets} WHERE id IN ({sql.marks(len(chunk))})", [*values, *chunk])


def refund_claims(tx: ApplyTx, ids: Sequence[int]) -> None:
    """Give back the claim of each node whose lease the operator revoked (park ``--now``): the
    claim after the resume does not spend the agent's ``max_claims`` (a rewind starts a fresh
    allowance, ``FRESH``)."""
    for chunk in sql.chunks(list(ids)):
        sql.execute(tx.core.db, f"UPDATE node SET claim_count = claim_count - 1 WHERE id IN ({sql.marks(len(chunk))}) "
                                "AND claim_count > 0", list(chunk))


def append_rejections(tx: ApplyTx, ids: Sequence[int], rejected: int, fields: Mapping[str, object]) -> None:
    """Set ``fields`` and append the rejected path ``rejected`` (a conclusion's id: the rewind's
    reason is stored there) to each node's rejections: one UPDATE per distinct current list."""
    groups: dict[str, list[int]] = {}
    for chunk in sql.chunks(list(ids)):
        for i, rej in sql.fetch_all(tx.core.db, f"SELECT id, rejections FROM node WHERE id IN "
                                                f"({sql.marks(len(chunk))})", chunk):
            groups.setdefault(rej or "[]", []).append(i)
    for rej, members in groups.items():
        set_nodes(tx, members, {**fields, "rejections": list(sql.json_value(rej) or []) + [rejected]})

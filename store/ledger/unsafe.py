"""Work that cannot safely run twice is never reclaimed blindly.

A running node whose lease has expired is normally reclaimed: the next claim takes it as a new
attempt. Not when its work cannot safely run twice — the node was added with ``retryable=False``,
or it logged an effect (``intend_effect``) it never confirmed, so the outside system may already
have done it. Such a node goes to ``failed`` (class ``irreversible_write``) and asks a human: an
``exception`` handoff whose context carries the evidence (the unconfirmed effect keys, the worker,
its last heartbeat, when the lease expired, what recovery advises). Until the handoff is answered
the node waits on a person like a blocked node: the task does not fail over it and its budget
clock stands still (``budget_clock.FAILED_ASKING_SQL``). The answer decides: ``rerun`` makes it pending
(a new attempt, the answer in ``Claim.inputs["resolution"]``), ``leave_failed`` leaves it failed.

Who judges. Whoever writes first after the expiry: a claim that would have reclaimed it (any
worker's, any claim of the task) and ``Ledger.check_expired`` — run by ``warden check-wakes`` and
by the console's periodic wake check — so an expired node is judged even when no worker is left
to claim anything. The judgement is one write transaction holding the node's row (PostgreSQL:
the task row, then ``FOR NO KEY UPDATE`` on the node; SQLite: BEGIN IMMEDIATE) that re-checks
"running, expired, unsafe" before it writes, so two noticers judge it once: the second finds it
failed and writes nothing. Reads never judge (``warden status`` shows the ``orphaned`` signal and
``warden recover --task T --node K`` advises ``needs_human``).
"""

from __future__ import annotations

from typing import Sequence

from store.storage import sql
from store.clock import iso
from store.storage.db import retry_write, write_tx
from store.jsontypes import JsonMapping, JsonObject
from store.storage.models import Handoff
from store.storage.sql import Inc
from store.storage.tables import NodeRecord
from store.storage import budget_clock
from store.storage.core import LedgerCore
from store.storage.events import HandoffOpened, NodeFailed

RERUN = "rerun"
LEAVE_FAILED = "leave_failed"
OPTIONS = (
    {"id": RERUN, "label": "Run it again",
     "consequence": "you checked the outside system: the effect did not happen (or repeating it is safe); the "
                    "node runs again as a new attempt and its agent reads your answer"},
    {"id": LEAVE_FAILED, "label": "Leave it failed",
     "consequence": "the node stays failed (the effect happened, or must not be repeated); the task fails "
                    "unless other work can still move; rewind, narrow or abort from there"},
)
# What recovery advises for such a node (store/recovery/advice.py uses the same words).
ADVICE_UNCONFIRMED = ("needs_human", "effect_unconfirmed")
ADVICE_NOT_RETRYABLE = ("needs_human", "not_retryable")
FAILURE_CLASS = "irreversible_write"
JUDGE_LIMIT = 1000  # expired nodes one check_expired judges at most (it runs again on the next check)


def unconfirmed_effects(core: LedgerCore, node_id: int) -> list[JsonObject]:
    """The node's effects intended and never confirmed, oldest first."""
    return [{"effect_key": k, "intended_at": iso(at), "attempt": attempt, "payload_digest": digest}
            for k, at, attempt, digest in sql.fetch_all(
                core.db, "SELECT effect_key, intended_at, attempt, payload_digest FROM effect WHERE node_id = ? "
                         "AND status = 'intended' ORDER BY intended_at, id", [node_id])]


def unsafe_to_reclaim(core: LedgerCore, row: NodeRecord) -> bool:
    """Whether a running node's work cannot safely run twice: not retryable, or an effect it
    intended is unconfirmed."""
    if not row.retryable:
        return True
    return sql.scalar(core.db, "SELECT 1 FROM effect WHERE node_id = ? AND status = 'intended' LIMIT 1",
                      [row.id]) is not None


def advice(retryable: bool, effects: Sequence[JsonMapping]) -> dict[str, str]:
    """What recovery advises for an expired unsafe node (agrees with ``store.recovery.advise``)."""
    if effects:
        rec, reason = ADVICE_UNCONFIRMED
        lead = ("may have happened: check the outside system for "
                + ", ".join(str(e["effect_key"]) for e in effects) + " before anything runs again")
    else:
        rec, reason = ADVICE_NOT_RETRYABLE
        lead = "its worker was lost and its work cannot safely run twice: a person checks what happened first"
    return {"recommendation": rec, "reason": reason, "lead": lead}


@retry_write
def fail_unsafe(core: LedgerCore, task_id: str, node_id: int, noticed_by: str) -> tuple[str, str, str] | None:
    """Fail an expired node whose work cannot safely run twice and ask a human, in its own write
    transaction (task row, then the node row); returns what it asked: (node key, handoff id, why).
    None when it no longer applies (taken, finished, renewed, or judged by somebody else first):
    nothing is written then."""
    with write_tx(core.db):
        now = core.now()
        task = core.task_record(task_id, lock="update")
        row = core.node_record_by_id(node_id, lock=" FOR NO KEY UPDATE")
        if row is None or row.status != "running" or row.lease_until is None or row.lease_until > now:
            return None
        effects = unconfirmed_effects(core, node_id)
        if row.retryable and not effects:
            return None
        key = row.key
        owner = row.lease_owner or "(unknown)"
        said = advice(bool(row.retryable), effects)
        if effects:
            why = ("effect " + ", ".join(e["effect_key"] for e in effects)
                   + (" was" if len(effects) == 1 else " were") + " intended and never confirmed")
        else:
            why = "the node was added with retryable=False"
        error = (f"worker {owner} was lost (lease expired at {iso(row.lease_until)}, last heartbeat "
                 f"{iso(row.heartbeat_at) if row.heartbeat_at is not None else 'never'}) and {why}: "
                 "not re-run blindly; a person decides")
        core.update_node(node_id, dict(
            status="failed", failure_class=FAILURE_CLASS, error=error, lease_token=None, lease_until=None,
            step_deadline=None, density=None, finished_at=now, version=Inc(1),
        ))
        context = {
            "why": why, "worker": owner, "attempt": row.attempt, "claimed_at": iso(row.claimed_at),
            "last_heartbeat": iso(row.heartbeat_at) if row.heartbeat_at is not None else None,
            "lease_expired_at": iso(row.lease_until), "effects_unconfirmed": effects,
            "retryable": bool(row.retryable), "advice": said, "noticed_by": noticed_by,
        }
        question = (f"{key}'s worker {owner} was lost and its work cannot safely run twice ({why}). "
                    "Check what happened, then: run it again, or leave it failed?")
        hid = core.bind(Handoff.insert(task=task_id, node=node_id, kind="exception", question=question,
                                       context=context, options=[dict(o) for o in OPTIONS], recommendation=None,
                                       status="open", opened_at=now, opened_by="warden",
                                       attempt=row.attempt)).execute()
        budget_clock.settle(core.db, task_id, now, agent_write=True, task=task)
        core.journal(task_id, key, "warden",
                     f"{key} failed: its worker {owner} was lost and it cannot safely run twice ({why}); "
                     f"asking a human (handoff {hid})",
                     NodeFailed(error=error, failure_class=FAILURE_CLASS, retry=False, unsafe_rerun=True,
                                retryable=bool(row.retryable), attempt=row.attempt, worker=owner,
                                effects_unconfirmed=[e["effect_key"] for e in effects], handoff=str(hid),
                                noticed_by=noticed_by, advice=said), at=now, layer="system")
        core.journal(task_id, key, "warden", f"{key} asks a human (exception): {question[:120]}",
                     HandoffOpened(handoff=str(hid), kind="exception", options=[RERUN, LEAVE_FAILED],
                                   recommendation=None), at=now)
        core.maybe_fail_task(task_id, now)
        return key, str(hid), why


def expired_unsafe(core: LedgerCore, task_ids: Sequence[str] | None, now: float) -> list[tuple[str, int]]:
    """(task id, node id) of running nodes whose lease expired by ``now`` and whose work cannot
    safely run twice, in active (or parked) tasks; at most ``JUDGE_LIMIT``."""
    where, params = "", []
    if task_ids is not None:
        if not task_ids:
            return []
        where = f" AND n.task_id IN ({sql.marks(len(task_ids))})"
        params = list(task_ids)
    return [(t, i) for t, i in sql.fetch_all(
        core.db, "SELECT n.task_id, n.id FROM node n JOIN task t ON t.task_id = n.task_id WHERE n.status = 'running' "
                 f"AND n.lease_until <= ? AND t.status IN ('active', 'parked'){where} AND (NOT n.retryable = "
                 f"{sql.true(core.db)} OR EXISTS (SELECT 1 FROM effect e WHERE e.node_id = n.id AND "
                 "e.status = 'intended')) ORDER BY n.task_id, n.position LIMIT ?", [now, *params, JUDGE_LIMIT])]


def check_expired(core: LedgerCore, task_ids: Sequence[str] | None, actor: str) -> list[JsonObject]:
    """Judge every expired node whose work cannot safely run twice (see the module docstring);
    returns what was judged now: ``{"task_id", "node", "handoff", "why"}`` each."""
    if core.read_only:
        return []
    out = []
    for task_id, node_id in expired_unsafe(core, task_ids, core.now()):
        asked = fail_unsafe(core, task_id, node_id, actor)
        if asked is not None:
            key, handoff, why = asked
            out.append({"task_id": task_id, "node": key, "handoff": handoff, "why": why})
    return out

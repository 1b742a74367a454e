"""Why a lease was lost, in words an agent author can act on.

The node row says only where the node is now; the journal says what happened to *this* claim: the
first event after the claim's own ``node.claimed`` that ended its lease —

* another worker's ``node.claimed`` → "reclaimed by <worker> after it expired (attempt N)";
* an operator action that revoked it → "revoked by operator action N (<action> by <operator>:
  <reason>)";
* a ``node.failed`` → "the node failed (...)" (by this claim, or by Warden: max claims);
* this claim's own ``node.committed`` → "already committed by this claim".

Nothing found (a lease that simply ran out, nobody took it yet): "expired Ns ago". Only read
when a write is refused, inside the refused write's transaction (which is rolled back).
"""

from __future__ import annotations

import json
from typing import NamedTuple

from store.storage import sql
from store.jsontypes import JsonObject, JsonValue
from store.text import safe_line
from store.storage.tables import NodeRecord
from store.views import Claim
from store.ledger import compensation as compensations
from store.storage.core import LedgerCore
from store.storage.events import (OPERATOR, HandoffOpened, NodeClaimed, NodeCommitted, NodeFailed, NodeRepair, OperatorActed,
                      decode)
from store.storage.payloads import Payload

SCAN = 500  # events of the task read after the claim, at most (the cause is nearly always the next few)


def reason(core: LedgerCore, row: NodeRecord, claim: Claim, task_status: str | None, now: float) -> str:
    """Why ``claim`` no longer holds ``row`` (the node now), as one line."""
    since = None
    for event_id, payload in sql.fetch_all(
            core.db, "SELECT id, payload FROM event WHERE task_id = ? AND node = ? AND kind = ? "
                     "AND actor = ? ORDER BY id DESC LIMIT 50",
            [claim.task_id, claim.node_key, NodeClaimed.KIND, claim.worker]):
        claimed = decode(NodeClaimed.KIND, _payload(payload))
        if isinstance(claimed, NodeClaimed) and claimed.attempt == claim.attempt:  # this claim's own event
            since = int(event_id)
            break
    cause = _first_cause(core, claim, since) if since is not None else None
    if cause is not None:
        return cause + _now(row, claim, task_status)
    return _fallback(row, claim, task_status, now)


def _payload(value: JsonValue) -> JsonObject:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value:
        return {}
    try:
        out = json.loads(value)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _names(payload: Payload, key: str) -> bool:
    """Does an event's payload name the node ``key`` (its changes, an operator's revoked leases)?"""
    if key in payload.node_keys():
        return True
    return isinstance(payload, OperatorActed) and any(r.get("node") == key for r in payload.revoked_leases)


class _Event(NamedTuple):
    node: str | None
    layer: str
    kind: str
    actor: str
    payload: JsonValue


def _first_cause(core: LedgerCore, claim: Claim, since: int) -> str | None:
    key = claim.node_key
    for r in sql.fetch_rows(core.db, _Event, f"SELECT {sql.columns(_Event)} FROM event WHERE task_id = ? "
                                             f"AND id > ? ORDER BY id LIMIT {SCAN}", [claim.task_id, since]):
        p = decode(r.kind, _payload(r.payload))
        actor = safe_line(str(r.actor or "?"), limit=80)
        if r.node == key and r.kind == NodeClaimed.KIND:
            return f"reclaimed by {actor} after it expired (attempt {p.attempt if isinstance(p, NodeClaimed) else '?'})"
        if r.layer == "operator" and (r.node == key or _names(p, key)):
            action = str(r.kind).removeprefix(OPERATOR)
            acted = p if isinstance(p, OperatorActed) else None
            why = safe_line(acted.reason if acted else "", limit=120)
            return (f"revoked by operator action {acted.action_id if acted else '?'} ({action} by {actor}"
                    + (f": {why})" if why else ")"))
        if r.node == key and r.kind == NodeFailed.KIND:
            err = safe_line(str(p.error or "") if isinstance(p, NodeFailed) else "", limit=120)
            who = "this claim" if r.actor == claim.worker else actor
            return f"the node failed ({who}{': ' + err if err else ''})"
        if r.node == key and r.kind == NodeCommitted.KIND and r.actor == claim.worker:
            return "already committed by this claim"
        if r.kind == NodeRepair.KIND and (r.node == key or _names(p, key)):  # store/ledger/repair.py
            if r.node == key and r.actor == claim.worker:
                return "already committed by this claim (a repair: it runs again)"
            return (f"revoked by the repair round {p.repair if isinstance(p, NodeRepair) else '?'} of "
                    f"{safe_line(str(r.node), limit=80)}")
        if r.node == key and r.kind == HandoffOpened.KIND and r.actor == claim.worker:
            return "this claim handed the node to a human (blocked)"
    return None


def _now(row: NodeRecord, claim: Claim, task_status: str | None) -> str:
    status = str(row.status)
    if task_status == "aborted" and row.kind != compensations.KIND:  # compensations run on after abort
        return f"; the task was aborted (the node is {status})"
    if status == "running" and row.lease_owner is not None and row.lease_token != claim.token:
        return f"; now running (attempt {row.attempt} by {safe_line(str(row.lease_owner), limit=80)})"
    return f"; the node is {status}"


def _fallback(row: NodeRecord, claim: Claim, task_status: str | None, now: float) -> str:
    """From the node row alone (the claim's own event not found)."""
    if task_status == "aborted" and row.kind != compensations.KIND:  # compensations run on after abort
        return "the task was aborted"
    status = str(row.status)
    if status == "running" and row.lease_token == claim.token:
        return f"expired {now - (row.lease_until or now):.1f}s ago; the node may be reclaimed"
    if status == "running" and row.lease_token is not None:
        return f"reclaimed by {safe_line(str(row.lease_owner), limit=80)} (attempt {row.attempt})"
    if status == "parked":
        return "the node was parked by an operator"
    if status == "abandoned":
        return "the node was abandoned by an operator (out of scope)"
    return (f"revoked: the node is {status} and no longer holds this claim's lease (no claim, failure or "
            "operator action in the journal explains it)")

"""Recovery advice for a ledger node (``advise``): failed, orphaned or blocked, what to do and
the evidence behind it (docs/recovery.md). Reads only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol, Sequence

from store.clock import iso
from store.errors import Refused
from store.jsontypes import JsonObject, JsonValue
from store.ledger import unsafe
from store.recovery.model import NEEDS_HUMAN, short_digest
from store.text import safe_line
from store.views import NodeDetail, NodeView, TaskView

RETRY = "retry"
REWIND = "rewind"
ABANDON = "abandon"
RECOMMENDATIONS = (RETRY, REWIND, NEEDS_HUMAN, ABANDON)

ADVICE_TABLE: tuple[tuple[str, str, str], ...] = (
    # (when, recommendation, reason) — the first row that applies decides (docs/recovery.md)
    ("an effect was intended but never confirmed", NEEDS_HUMAN, "effect_unconfirmed"),
    ("its worker was lost and it was added with retryable=False (it cannot safely run twice)", NEEDS_HUMAN,
     "not_retryable"),
    ("the node is blocked on a handoff (or failed and asking a human)", NEEDS_HUMAN, "awaiting_human"),
    ("the node is outside the task's current preconditions", ABANDON, "out_of_scope"),
    ("failed with failure_class irreversible_write", NEEDS_HUMAN, "irreversible_write"),
    ("failed with failure_class spec", NEEDS_HUMAN, "spec_problem"),
    ("its inputs changed since it ran", REWIND, "inputs_changed"),
    ("failed with failure_class conclusion", REWIND, "conclusion_rejected"),
    ("failed with failure_class transient or idempotent_write", RETRY, "safe_to_retry"),
    ("orphaned: running, lease expired, nothing above applies", RETRY, "orphaned"),
    ("failed with no known failure_class", NEEDS_HUMAN, "failure_unclassified"),
)


@dataclass(frozen=True)
class Advice:
    """Recovery advice for one ledger node: a recommendation with the evidence behind it.
    ``target`` is the node an operator action would start from (for rewind: the divergence
    point, here the node itself)."""

    task_id: str
    node_key: str
    status: str
    situation: str
    recommendation: str
    reason: str
    evidence: tuple[str, ...]
    target: str

    def to_json(self) -> JsonObject:
        return {
            "task_id": self.task_id,
            "node": self.node_key,
            "status": self.status,
            "situation": self.situation,
            "recommendation": self.recommendation,
            "reason": self.reason,
            "evidence": list(self.evidence),
            "target": self.target,
        }


class LedgerReads(Protocol):
    """The ledger reads ``advise`` needs (``store.ledger.Ledger`` provides them)."""

    def node_detail(self, task_id: str, key: str, *, events_limit: int = ...,
                    observations_limit: int = ...) -> NodeDetail: ...

    def task(self, task_id: str) -> TaskView: ...

    def nodes(self, task_id: str, keys: Sequence[str]) -> list[NodeView]: ...

    def now(self) -> float: ...


def current_input_digest(task_inputs: JsonValue, dep_digests: dict[str, str | None]) -> str:
    """The digest a claim of the node would record now (the ledger's formula at claim time:
    the task's inputs and each dependency's current output digest)."""
    from store.storage.core import digest_json

    return digest_json({"task": task_inputs, "deps": dep_digests})


def _out_of_scope(task_pre: object, node_pre: object) -> list[str]:
    """Keys on which the node's preconditions exclude the task's current value (docs/contracts.md
    narrow: a different value, or a list without it)."""
    if not isinstance(task_pre, dict) or not isinstance(node_pre, dict):
        return []
    out = []
    for key, want in task_pre.items():
        if key not in node_pre:
            continue
        have = node_pre[key]
        if (want not in have) if isinstance(have, list) else (have != want):
            out.append(f"{key}: node needs {json.dumps(have)[:60]}, task now {json.dumps(want)[:60]}")
    return out


def advise(ledger: LedgerReads, task_id: str, node_key: str) -> Advice:
    """Advice for a failed, orphaned (running, lease expired) or blocked node.

    Reads only; changes nothing. Raises ``NotFound`` for an unknown task or node and
    ``Refused`` for a node in any other state (nothing to recover).
    """
    detail = ledger.node_detail(task_id, node_key, events_limit=20, observations_limit=1)
    node = detail.node
    task = ledger.task(task_id)
    now = ledger.now()
    status = node.status
    orphaned = status == "running" and node.lease_until is not None and node.lease_until <= now
    if status == "running" and not orphaned:
        left = (node.lease_until - now) if node.lease_until is not None else None
        raise Refused(f"{safe_line(task_id)}/{safe_line(node_key)} is running under a live lease "
                      f"held by {safe_line(node.lease_owner)}"
                      + (f" for {left:.0f}s more" if left is not None else "")
                      + "; nothing to recover yet")
    if status not in ("failed", "blocked") and not orphaned:
        raise Refused(f"{safe_line(task_id)}/{safe_line(node_key)} is {safe_line(status)}; "
                      "advice is for failed, orphaned or blocked nodes")
    situation = "orphaned" if orphaned else status

    evidence: list[str] = [f"status {situation}; attempt {node.attempt}, claims {node.claim_count}"
                           + (f" of {node.max_claims}" if node.max_claims is not None else "")]
    if orphaned and node.lease_until is not None:  # (orphaned implies a lease end)
        evidence.append(f"lease held by {node.lease_owner} expired at {iso(node.lease_until)} "
                        f"({now - node.lease_until:.0f}s ago); nobody reclaimed it")
    else:
        evidence.append("no live lease")
    if node.failure_class or node.error:
        evidence.append(f"failure_class {node.failure_class or '(none)'}"
                        + (f"; error: {node.error[:200]}" if node.error else "")
                        + ("" if node.retryable else "; marked not retryable"))
    unconfirmed = [e for e in detail.effects if e.status == "intended"]
    for e in detail.effects:
        evidence.append(f"effect {e.effect_key}: {e.status}"
                        + (f" ({e.external_id})" if e.external_id else "")
                        + (f"; compensation: {e.compensation}" if e.compensation else ""))
    open_handoffs = [h for h in detail.handoffs if h.status == "open"]
    for h in open_handoffs:
        evidence.append(f"handoff {h.id} open ({h.kind}): {h.question[:200]}")

    deps = ledger.nodes(task_id, list(node.deps)) if node.deps else []
    dep_digests = {d.key: d.output_digest for d in deps}
    now_digest = current_input_digest(task.inputs, dep_digests)
    inputs_changed = node.input_digest is not None and node.input_digest != now_digest
    if node.input_digest is None:
        evidence.append("input digest: never recorded (the node was never claimed)")
    elif inputs_changed:
        moved = [f"{d.key} ({d.status})" for d in deps if d.status not in ("succeeded", "abandoned")]
        evidence.append(f"inputs changed since it ran: input digest {short_digest(node.input_digest)} "
                        f"at claim, {short_digest(now_digest)} now"
                        + (f"; dependencies not finished: {', '.join(moved)}" if moved else ""))
    else:
        evidence.append(f"inputs unchanged since it ran (input digest {short_digest(now_digest)})")
    for a in detail.artifacts[-3:]:
        evidence.append(f"artifact {a.name}: sha256 {short_digest(a.sha256)}, {a.size} bytes "
                        f"(attempt {a.attempt})")
    if node.output_digest:
        evidence.append(f"output digest {short_digest(node.output_digest)}")
    scope = _out_of_scope(task.preconditions, node.preconditions)
    if scope:
        evidence.append("outside the task's preconditions: " + "; ".join(scope))

    fc = node.failure_class if status == "failed" else None
    lost_unsafe = not node.retryable and (orphaned or (status == "failed" and bool(open_handoffs)))
    rows = (
        bool(unconfirmed),
        lost_unsafe,
        status == "blocked" or bool(open_handoffs),
        bool(scope),
        fc == "irreversible_write",
        fc == "spec",
        inputs_changed,
        fc == "conclusion",
        fc in ("transient", "idempotent_write"),
        orphaned,
        status == "failed",
    )
    index = rows.index(True)  # the last row always applies to a failed node
    _, recommendation, reason = ADVICE_TABLE[index]
    # the words the ledger itself puts in the handoff of such a node (store/ledger/unsafe.py)
    lost = unsafe.advice(node.retryable, [{"effect_key": e.effect_key} for e in unconfirmed])["lead"]
    lead = {
        "effect_unconfirmed": lost,
        "not_retryable": lost,
        "awaiting_human": "a person must answer the open handoff",
        "out_of_scope": "the task no longer wants this node",
        "irreversible_write": "an irreversible write failed: a person decides what happened",
        "spec_problem": "the task's specification is at fault: a person fixes it first",
        "inputs_changed": "its inputs changed since it ran: rerun it and what depends on it",
        "conclusion_rejected": "its conclusion was rejected: rewind to where it diverged",
        "safe_to_retry": f"a {fc} failure is safe to try again",
        "orphaned": "its worker vanished with nothing left unconfirmed: reclaiming is safe",
        "failure_unclassified": "the failure was not classified: a person decides",
    }[reason]
    return Advice(task_id, node_key, status, situation, recommendation, reason,
                  tuple(safe_line(e) for e in (lead, *evidence)), node_key)

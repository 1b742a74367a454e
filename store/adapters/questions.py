"""Questions an integration asks a person while the agent's step goes on: each its own node.

A Claude Code session may hold twenty permission dialogs at once (parallel tool calls,
subagents), and an MCP client may call ``ask_human`` from several threads. The ledger blocks the
node a handoff is asked from until it is answered, and a blocked node has no claim to ask again
from: one question per node. So each question gets a small node of its own — ``<step>.ask-N``,
no dependencies, ``always_admit`` (a question reaches a person even past the budget's hard gate)
— claimed, asked from (the handoff blocks only it), and, once answered, claimed again and
committed with the answer. The agent's own step keeps its claim throughout: a question never
costs it its lease, never counts as another attempt, never blocks the next question.

:func:`settle` answers a question on the session's behalf through the ordinary resolve action
(recorded as done by the session's worker): a permission answered at the agent's own terminal,
one whose waiting hook died, one nobody answered in time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from store.errors import LeaseLost, NotFound, Refused, StaleRevision
from store.facade import Ledger
from store.ledger import checkpoint
from store.jsontypes import JsonMapping, JsonObject
from store.storage.models import HANDOFF_KINDS
from store.validate import show
from store.views import Claim

__all__ = ["Asked", "ask", "close", "settle"]


@dataclass(frozen=True)
class Asked:
    handoff: str
    node: str


def check(kind: str, question: str, options: Sequence[JsonMapping], recommendation: str | None,
          context: JsonMapping) -> None:
    """What the ledger would refuse in the question, refused before anything is written (a refused
    call changes nothing: not even the question's node)."""
    if kind not in HANDOFF_KINDS:
        raise Refused(f"unknown handoff kind {show(kind)}: one of {', '.join(HANDOFF_KINDS)}")
    if not str(question).strip():
        raise Refused("a handoff needs a question")
    ids = []
    for o in options:
        if "id" not in o:
            raise Refused("every handoff option needs an id")
        ids.append(str(o["id"]))
    if len(set(ids)) != len(ids):
        raise Refused("handoff option ids must be distinct")
    if recommendation is not None and recommendation not in ids:
        raise Refused(f"recommendation {show(recommendation)} is not one of the options")
    checkpoint.check(kind, options, recommendation, context)


def ask(ledger: Ledger, task: str, key: str, *, worker: str, kind: str, node_kind: str, title: str,
        question: str, options: Sequence[JsonMapping], context: JsonMapping, lease_s: float = 60.0,
        recommendation: str | None = None) -> Asked:
    """Add the question's node, claim it and open the handoff on it. Raises ``Refused`` when the
    question is not one the ledger takes (nothing written) or the node cannot be claimed (the task
    parked or aborted meanwhile)."""
    check(kind, question, options, recommendation, context)
    try:
        ledger.node(task, key)
    except NotFound:
        ledger.add_node(task, key, kind=node_kind, title=title[:200], always_admit=True, actor=worker)
    claim = ledger.claim(task, worker, lease_s=lease_s, key=key)
    if claim is None:
        raise Refused(f"the question's node {key} cannot be claimed now (task {ledger.task(task).status})")
    try:
        hid = ledger.request_human(claim, kind=kind, question=question, options=options, context=context,
                                   recommendation=recommendation)
    except Refused as e:  # a bad kind or option: the question's node closes with why, nothing is left open
        ledger.commit(claim, output={"refused": str(e)})
        raise
    return Asked(hid, key)


def close(ledger: Ledger, task: str, key: str, *, worker: str, output: JsonObject) -> bool:
    """Commit an answered question's node with ``output``; False when it cannot be now (still
    blocked, parked, or already closed) — a later call closes it."""
    try:
        node = ledger.node(task, key)
    except NotFound:
        return True
    if node.status in ("succeeded", "abandoned", "failed"):
        return True
    claim: Claim | None = ledger.claim(task, worker, lease_s=60.0, key=key)
    if claim is None:
        return False
    try:
        ledger.commit(claim, output=output)
    except LeaseLost:
        return False
    return True


def settle(ledger: Ledger, handoff: str, *, option: str, answer: str, by: str) -> bool:
    """Resolve a question still open, as ``by``; False when someone answered (or withdrew) it first."""
    try:
        if ledger.handoff(handoff).status != "open":
            return False
        ledger.apply(ledger.plan_resolve(handoff, option=option, answer=answer), operator=by)
    except (NotFound, Refused, StaleRevision):
        return False
    return True

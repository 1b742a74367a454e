"""The journal's events declared once (store/storage/events.py): what the ledger writes decodes
back into its kind's class, key for key; what does not fit its declaration reads as ``Unknown``;
the flags followers rely on come from the declarations."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from store import Ledger, NodeSpec
from store.storage.events import (
    EVENTS,
    Commit,
    HandoffOpened,
    NodeCommitted,
    NodeFailed,
    NodeHeartbeat,
    Observed,
    OperatorActed,
    Unknown,
    decode,
    kind_of,
    names_nodes,
    payload_of,
    status_neutral,
    task_wide,
)
from store.storage.payloads import Maybe, Payload, Undecodable
from tests.support.asks import ask


def _workload(ledger: Ledger, clock) -> None:
    """Most kinds, through the public API."""
    ledger.create_task("t", workflow="wf", workflow_version="1",
                       requirements=[{"id": "r1", "text": "works"}])
    ledger.add_nodes("t", [NodeSpec("a", serves=("r1",)), NodeSpec("b", deps=("a",)), NodeSpec("c"),
                           NodeSpec("d", retryable=False)])
    assert ledger.claim("t", "w", workflow_version="2") is None  # claim.version_mismatch
    a = ledger.claim("t", "w", lease_s=60, workflow_version="1", key="a")
    assert a is not None
    clock.advance(2)
    ledger.heartbeat(a, units_done=1, units_total=4, tokens=10, observation="step one\nline two")
    clock.advance(2)
    ledger.heartbeat(a, action="pytest -q", result="3 passed", waiting_on="ci", wait_s=60)
    ledger.note(a, "switching approach", layer="execution")
    ledger.conclude(a, "the cache is cold", source="notes.md")
    ledger.conclude(a, "tried the old API", kind="rejected", reason="deprecated", source="docs")
    ledger.propose_memory(a, "run the linter first", source="ci log")
    ledger.intend_effect(a, "pr:1", payload={"n": 1}, compensation="close it")
    ledger.confirm_effect(a, "pr:1", external_id="#1")
    ledger.commit(a, output={"ok": 1}, output_ref="out/a", tokens=5, artifact=("a.txt", b"hello"))
    c = ledger.claim("t", "w", lease_s=60, workflow_version="1", key="c")
    assert c is not None
    ledger.fail(c, error="flaky", retryable=True)
    b = ledger.claim("t", "w", lease_s=60, workflow_version="1", key="b")
    assert b is not None
    hid = ask(ledger, b, kind="confirm", question="go?", options=[{"id": "yes"}, {"id": "no"}])
    ledger.apply(ledger.plan_resolve(hid, option="yes"), operator="op")
    ledger.apply(ledger.plan_rewind("t", "a", reason="wrong file"), operator="op")
    ledger.apply(ledger.plan_park("t", reason="lunch"), operator="op")
    ledger.apply(ledger.plan_resume("t"), operator="op")
    ledger.replan("t", add=[NodeSpec("e")], remove=["c"], trigger="operator", reason="narrower", actor="op")
    d = ledger.claim("t", "w", lease_s=60, workflow_version="1", key="d")
    assert d is not None
    ledger.fail(d, error="broken for good", failure_class="spec")
    ledger.apply(ledger.plan_abort("t", reason="enough"), operator="op")


def test_every_event_the_ledger_writes_reads_back_as_its_kind_key_for_key(ledger, clock):
    _workload(ledger, clock)
    events = ledger.events(0, limit=10_000)
    kinds = {e.kind for e in events}
    assert {"task.created", "graph.nodes_added", "claim.version_mismatch", "node.claimed", "node.heartbeat",
            "node.note", "mind.concluded", "mind.rejected", "memory.proposed", "effect.intended",
            "effect.confirmed", "node.committed", "node.failed", "handoff.opened", "operator.resolve",
            "operator.rewind", "operator.park", "operator.resume", "graph.replanned", "operator.abort"} <= kinds
    for e in events:
        p = payload_of(e)
        assert not isinstance(p, Unknown), (e.kind, e.payload)
        assert e.layer in p.LAYERS
        assert p.event_kind() == e.kind
        shown = {**p.to_json(), **(e.observation.to_json() if e.observation is not None else {})}
        assert shown == dict(e.payload), e.kind  # the same keys and values (1 == 1.0: a float key reads as float)
    beats = [p for p in map(payload_of, events) if isinstance(p, NodeHeartbeat)]
    assert beats[0].units_done == 1.0 and beats[0].tokens == 10 and beats[0].observation is not None
    assert beats[1].wait is not None and beats[1].wait["on"] == "ci"
    assert beats[1].observation is not None and beats[1].observation.action == "pytest -q"
    assert beats[1].observation.result == "3 passed"
    [done] = [p for p in map(payload_of, events) if isinstance(p, NodeCommitted)]
    assert done.commit.artifact == {"name": "a.txt", "sha256": done.commit.artifact["sha256"], "bytes": 5}
    acted = [p for p in map(payload_of, events) if isinstance(p, OperatorActed)]
    assert [p.action for p in acted] == ["resolve", "rewind", "park", "resume", "abort"]
    assert all(isinstance(p.action_id, int) for p in acted) and acted[1].reason == "wrong file"


def test_a_payload_that_does_not_fit_its_kind_reads_as_unknown_and_keeps_what_was_stored():
    assert isinstance(decode("node.heartbeat", {"lease_until": "soon"}), Unknown)  # the wrong JSON type
    assert isinstance(decode("node.claimed", {"worker": "w"}), Unknown)  # a required key missing
    assert isinstance(decode("node.heartbeat", "not an object"), Unknown)
    odd = decode("budget.overdrawn", {"nodes": ["a", 1, "b"]})  # a kind this Warden does not write
    assert isinstance(odd, Unknown) and odd.event_kind() == "budget.overdrawn"
    assert odd.to_json() == {"nodes": ["a", 1, "b"]} and odd.node_keys() == ("a", "b")
    assert decode("x.y", {"nodes": {"reset": ["a"], "kept": ["b"]}}).node_keys() == ("a", "b")
    # a kind nobody declared: a follower assumes the worst (reads the task's nodes whole)
    assert not names_nodes("budget.overdrawn") and task_wide("budget.overdrawn")


def test_older_payloads_read_with_the_keys_they_have():
    """Keys added to a kind later read as None in events written before them."""
    old = decode("node.failed", {"error": "boom", "failure_class": "transient", "retry": False, "attempt": 2})
    assert isinstance(old, NodeFailed) and old.retryable is None and old.attempt == 2 and old.commit is None
    legacy = decode("node.claimed", {"worker": "w", "attempt": 1, "lease_until": 5})
    assert legacy.lease_until == 5.0 and isinstance(legacy.lease_until, float)  # a float key made float


def test_the_flags_followers_rely_on_come_from_the_declarations():
    assert names_nodes("node.heartbeat") and status_neutral("node.heartbeat") and not task_wide("node.heartbeat")
    assert names_nodes("operator.rewind") and task_wide("operator.rewind") and kind_of("operator.x") is OperatorActed
    assert not names_nodes("graph.replanned") and task_wide("graph.replanned")
    for kind, cls in EVENTS.items():
        assert cls.KIND == kind and cls.LAYERS, kind


def test_a_part_stands_beside_the_payloads_keys_and_maybe_keys_are_left_out():
    c = Commit(output_digest="d", wall_s=1.5)
    assert NodeCommitted(attempt=1, commit=c).to_json() == {"attempt": 1, "output_digest": "d", "wall_s": 1.5}
    failed = NodeFailed(attempt=1, commit=c, repair_refused=True, failure_class="conclusion", retry=False)
    assert decode("node.failed", failed.to_json()) == failed
    beat = NodeHeartbeat(lease_until=9.0, observation=Observed(new_units=2, digest="x", lines=3, flags=1))
    assert beat.to_json() == {"lease_until": 9.0}  # the observation is its row's: the event names it
    assert decode("node.heartbeat", beat.to_json()) == NodeHeartbeat(lease_until=9.0)
    assert json.loads(json.dumps(HandoffOpened(handoff="1", kind="confirm", options=[], recommendation=None)
                                 .to_json())) == {"handoff": "1", "kind": "confirm", "options": [],
                                                  "recommendation": None}


def test_a_new_kind_is_one_declaration():
    @dataclass(frozen=True, kw_only=True)
    class QuotaWarned(Payload, kind="test.quota_warned", layer="system", names_nodes=True):
        quota: str
        used: float
        note: Maybe[str] = None

    assert QuotaWarned(quota="q", used=3).to_json() == {"quota": "q", "used": 3}
    assert QuotaWarned.from_json({"quota": "q", "used": 3}) == QuotaWarned(quota="q", used=3.0)
    assert QuotaWarned.LAYERS == ("system",) and QuotaWarned.NAMES_NODES
    with pytest.raises(Undecodable):
        QuotaWarned.from_json({"quota": 1, "used": 3})

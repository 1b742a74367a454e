"""Semantic memory across tasks: an agent proposes, a person confirms or rejects (an
audited operator action, plan → preview → revision-checked apply), and only a confirmed memory is
handed to later claims — of the same workflow, and of the same kind for ``scope="kind"``. Both
backends (the ``ledger`` fixture)."""

from __future__ import annotations

import pytest

from store import Ledger, NodeSpec, NotFound, Refused, StaleRevision
from store.mind import rules

LONG = 10**7


def first_claim(ledger, task, key, kind="tool"):
    ledger.create_task(task, workflow="repo-fix", exist_ok=True)
    ledger.add_node(task, key, kind=kind)
    c = ledger.claim(task, "w", lease_s=LONG, key=key)
    assert c is not None
    return c


def memories_of(ledger, task, key, kind="tool", workflow="repo-fix"):
    ledger.create_task(task, workflow=workflow, exist_ok=True)
    ledger.add_node(task, key, kind=kind)
    c = ledger.claim(task, "w", lease_s=LONG, key=key)
    assert c is not None
    return [m["text"] for m in c.inputs["memory"]["memories"]]


def test_only_a_confirmed_memory_reaches_the_next_tasks_claims(ledger, clock):
    c = first_claim(ledger, "t1", "build")
    kind_id = ledger.propose_memory(c, "the tests need `make build` first", source="tests")
    wf_id = ledger.propose_memory(c, "CI takes 20 minutes on this repository", scope="workflow", source="tests")
    never = ledger.propose_memory(c, "the flaky test is test_net", source="tests")
    ledger.commit(c, output={})
    assert {m.id: m.status for m in ledger.memories()} == {kind_id: "pending", wf_id: "pending", never: "pending"}
    assert memories_of(ledger, "t2", "n1") == []  # pending: never handed out

    plan = ledger.plan_memory(kind_id, decision="confirm", reason="seen on three runs")
    assert plan.action == "memory-confirm" and plan.target == kind_id and plan.changes == {}
    assert "kind tool" in plan.warnings[0] and ledger.memory(kind_id).status == "pending"  # a plan is a read
    done = ledger.apply(plan, operator="alice")
    ledger.apply(ledger.plan_memory(wf_id, decision="confirm", reason="true"), operator="alice")
    ledger.apply(ledger.plan_memory(never, decision="reject", reason="it was a one-off"), operator="bob")
    m = ledger.memory(kind_id)
    assert (m.status, m.decided_by, m.decision_reason) == ("confirmed", "alice", "seen on three runs")
    audit = ledger.actions(limit=3)
    assert [(a.action, a.target, a.result) for a in audit][-1] == ("memory-confirm", kind_id, "applied")
    assert done.action_id == audit[-1].id

    clock.advance(10)
    assert memories_of(ledger, "t3", "n1") == ["CI takes 20 minutes on this repository",
                                               "the tests need `make build` first"]
    # another kind gets only the workflow-wide one; another workflow gets none
    assert memories_of(ledger, "t4", "n1", kind="llm_call") == ["CI takes 20 minutes on this repository"]
    assert memories_of(ledger, "t5", "n1", workflow="other") == []
    got = ledger.claim("t3", "w", lease_s=LONG)
    assert got is None
    c3 = ledger.node_mind("t3", "n1").memory["memories"]
    assert all(x["source"].startswith("tests; proposed by task t1 node build, confirmed by alice") for x in c3)

    # retracting a confirmed memory: later claims stop getting it
    ledger.apply(ledger.plan_memory(kind_id, decision="reject", reason="fixed upstream"), operator="alice")
    assert memories_of(ledger, "t6", "n1") == ["CI takes 20 minutes on this repository"]


def test_proposals_are_idempotent_and_a_rejected_one_is_not_asked_again(ledger):
    c = first_claim(ledger, "t1", "a")
    a = ledger.propose_memory(c, "same words", source="tests")
    assert ledger.propose_memory(c, "same words", source="tests") == a
    assert ledger.propose_memory(c, "same words", scope="workflow", source="tests") != a  # another scope: another memory
    ledger.apply(ledger.plan_memory(a, decision="reject", reason="no"), operator="op")
    assert ledger.propose_memory(c, "same words", source="tests") == a and ledger.memory(a).status == "rejected"
    with pytest.raises(Refused, match="not asked again"):
        ledger.plan_memory(a, decision="confirm", reason="changed my mind")
    with pytest.raises(Refused, match="already rejected"):
        ledger.plan_memory(a, decision="reject", reason="again")
    events = [e.kind for e in ledger.events(task_id="t1") if e.kind == "memory.proposed"]
    assert len(events) == 2


def test_a_decision_needs_a_reason_and_an_existing_memory(ledger):
    c = first_claim(ledger, "t1", "a")
    mid = ledger.propose_memory(c, "m", source="tests")
    with pytest.raises(Refused, match="needs a reason"):
        ledger.plan_memory(mid, decision="confirm", reason="  ")
    for bad in ("999", "abc", "1; DROP TABLE memory", 0):
        with pytest.raises(NotFound):
            ledger.plan_memory(bad, decision="confirm", reason="x")
    with pytest.raises(Refused, match="memory decision|unknown action"):
        ledger.plan_memory(mid, decision="maybe", reason="x")
    with pytest.raises(Refused, match="not an argument"):
        ledger.plan("memory-confirm", {"memory_id": mid, "reason": "x", "task_id": "t1"})
    with pytest.raises(Refused, match="memory scope"):
        ledger.propose_memory(c, "m", scope="global", source="tests")
    with pytest.raises(Refused, match="longer than"):
        ledger.propose_memory(c, "x" * (rules.MEMORY_TEXT_MAX + 1), source="tests")
    assert ledger.memory(mid).status == "pending" and ledger.actions() == []


def test_two_operators_deciding_the_same_memory_one_is_told_who_won(ledger_path, clock):
    with Ledger.open(ledger_path, clock=clock) as a, Ledger.open(ledger_path, clock=clock) as b:
        c = first_claim(a, "t1", "n")
        mid = a.propose_memory(c, "shared", source="tests")
        pa = a.plan_memory(mid, decision="confirm", reason="yes")
        pb = b.plan_memory(mid, decision="reject", reason="no")
        a.apply(pa, operator="alice")
        with pytest.raises(StaleRevision, match="already confirmed by alice"):
            b.apply(pb, operator="bob")
        assert b.memory(mid).status == "confirmed"
        refused = [x for x in b.actions() if x.result == "refused"]
        assert len(refused) == 1 and refused[0].operator == "bob"


def test_a_memory_decision_is_not_stale_because_the_proposing_task_moved_on(ledger):
    """The person decides about the memory, not the task's graph: agents adding nodes meanwhile do
    not make the preview stale (an action on the graph would be)."""
    c = first_claim(ledger, "t1", "n")
    mid = ledger.propose_memory(c, "x", source="tests")
    plan = ledger.plan_memory(mid, decision="confirm", reason="ok")
    ledger.commit(c, output={}, next_nodes=[NodeSpec("more")])
    assert ledger.task("t1").revision > plan.revision
    done = ledger.apply(plan, operator="op")
    assert done.applied and ledger.memory(mid).status == "confirmed"


def test_a_task_may_not_flood_the_inbox(ledger):
    c = first_claim(ledger, "t1", "n")
    for i in range(rules.PENDING_PER_TASK):
        ledger.propose_memory(c, f"memory {i}", source="tests")
    with pytest.raises(Refused, match="waiting for a person"):
        ledger.propose_memory(c, "one more", source="tests")
    assert len(ledger.memories(status="pending")) == rules.PENDING_PER_TASK

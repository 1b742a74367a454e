"""The operator raises a needs_human handoff on a node (the recovery wizard's escalation)."""

from __future__ import annotations

import pytest

from store import LeaseLost, Refused


@pytest.fixture
def two(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="export")
    ledger.add_node("t", "b", deps=["a"])
    return ledger


def test_escalating_a_running_node_revokes_its_lease_and_opens_a_handoff(two):
    claim = two.claim("t", "w1")
    plan = two.plan_escalate("t", "a", reason="run r-1 has a partial artifact",
                             question="The export was interrupted mid-write: what now?",
                             context={"run": "r-1", "decision": "needs_human"})
    assert plan.changes == {"a": ("running", "blocked")}
    assert plan.to_json()["revoked_leases"] == [{"node": "a", "owner": "w1"}]
    before = two.task("t").revision
    done = two.apply(plan, operator="op")
    assert done.applied and done.params.to_json()["handoff"]
    n = two.node("t", "a")
    assert n.status == "blocked" and n.lease_owner is None
    h = two.handoff(done.params.to_json()["handoff"])
    assert (h.status, h.kind, h.question, h.opened_by) == ("open", "exception",
                                                           "The export was interrupted mid-write: what now?", "op")
    assert h.context["run"] == "r-1" and h.context["why"] == "run r-1 has a partial artifact"
    assert [o["id"] for o in h.options] == ["replay", "continue"] and h.recommendation == "replay"
    assert two.task("t").revision == before + 1
    with pytest.raises(LeaseLost):
        two.commit(claim, output=1)
    ev = two.events(0, task_id="t")[-1]
    assert ev.kind == "operator.escalate" and ev.payload["nodes"] == ["a"] and ev.node == "a"
    assert two.actions("t")[0].action == "escalate"
    # Resolving it hands the node back to the agents with the answer in its inputs.
    two.apply(two.plan_resolve(h.id, option="replay", answer="start over"), operator="op2")
    again = two.claim("t", "w2")
    assert again.node_key == "a" and again.inputs["resolution"]["option"] == "replay"


def test_escalate_refusals_change_nothing(two, clock):
    with pytest.raises(Refused, match="reason"):
        two.plan_escalate("t", "a", reason=" ")
    c = two.claim("t", "w")
    two.commit(c, output=1)
    with pytest.raises(Refused, match="succeeded"):
        two.plan_escalate("t", "a", reason="x")
    two.apply(two.plan_escalate("t", "b", reason="look"), operator="op")
    with pytest.raises(Refused, match="already waiting"):
        two.plan_escalate("t", "b", reason="again")
    assert len(two.handoffs()) == 1


def test_escalate_goes_through_a_claim_made_since_the_preview(two):
    """The node claimed while the operator read: its lease is revoked all the same (the promise:
    this node stops and waits for the question)."""
    plan = two.plan_escalate("t", "a", reason="x")
    claim = two.claim("t", "w")
    done = two.apply(plan, operator="op")
    assert two.node("t", "a").status == "blocked" and len(two.handoffs()) == 1
    assert done.differed.summary == "1 node was claimed meanwhile and is blocked too: a"
    with pytest.raises(LeaseLost):
        two.heartbeat(claim)

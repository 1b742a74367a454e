"""A take-back of one's own lapsed lease is a renewal, not a new attempt.

A worker whose lease ran out while nobody took the node (a loaded machine kept its heartbeat from
running in time, a suspended laptop) takes the node back by key with ``renew=`` its old token: the
same attempt goes on under a new lease, no claim spent from ``max_claims``. The token is the
compare-and-set: when anybody claimed the node meanwhile, the take-back is an ordinary claim. On
both backends (the ``ledger`` fixture).
"""

from __future__ import annotations

import threading

import pytest

from store import Ledger, LeaseLost, NodeSpec, Refused
from store.adapters.steering import reclaim


def lapsed(ledger, clock, *, max_claims=None, lease_s=10.0, **node):
    ledger.create_task("t")
    ledger.add_node("t", "main", max_claims=max_claims, **node)
    c = ledger.claim("t", "run:1", lease_s=lease_s)
    ledger.heartbeat(c, units_done=1, units_total=4, observation="step one")
    clock.advance(lease_s + 5)  # the heartbeat did not run in time: lapsed, nobody took it
    return c


def test_the_holder_takes_back_its_lapsed_lease_as_the_same_attempt_without_spending_a_claim(ledger, clock):
    c = lapsed(ledger, clock, max_claims=1)  # one claim allowed: a take-back counted as one fails it
    with pytest.raises(LeaseLost):
        ledger.heartbeat(c, observation="late")
    again = ledger.claim("t", "run:1", lease_s=10, key="main", renew=c.token)
    assert again is not None and again.attempt == 1 and again.token != c.token
    assert again.lease_until == ledger.now() + 10 and again.inputs["attempt"] == 1
    n = ledger.node("t", "main")
    assert (n.status, n.attempt, n.claim_count, n.units_done) == ("running", 1, 1, 1)  # figures kept
    with pytest.raises(LeaseLost):
        ledger.heartbeat(c, observation="the old token")  # the old lease stays dead
    ledger.heartbeat(again, observation="step two")
    ledger.commit(again, output={"ok": True})
    assert ledger.node("t", "main").status == "succeeded"
    kinds = [(e.kind, e.payload.get("lapsed_s")) for e in ledger.events(task_id="t") if e.node == "main"]
    assert ("node.heartbeat", 5.0) in kinds
    assert [k for k, _ in kinds].count("node.claimed") == 1  # one attempt in the journal
    took = [e for e in ledger.events(task_id="t") if e.payload.get("lapsed_s") is not None]
    assert took[0].summary == "main taken back by run:1 5.0s after its lease lapsed (attempt 1 goes on)"


def test_through_the_integrations_reclaim_the_take_back_is_a_renewal(ledger, clock):
    c = lapsed(ledger, clock, max_claims=1)
    again = reclaim(ledger, c, lease_s=10)
    assert again is not None and again.attempt == 1 and ledger.node("t", "main").claim_count == 1


def test_a_claim_in_between_makes_the_take_back_an_ordinary_claim(ledger, clock):
    c = lapsed(ledger, clock)
    other = ledger.claim("t", "run:2", lease_s=10)  # somebody took it meanwhile (attempt 2)
    assert other is not None and other.attempt == 2
    assert ledger.claim("t", "run:1", lease_s=10, key="main", renew=c.token) is None  # held, live
    clock.advance(15)  # run:2's lease lapses too; run:1's old token is not the node's any more
    third = ledger.claim("t", "run:1", lease_s=10, key="main", renew=c.token)
    assert third is not None and third.attempt == 3 and ledger.node("t", "main").claim_count == 3


def test_another_workers_token_or_a_stranger_renews_nothing(ledger, clock):
    c = lapsed(ledger, clock, max_claims=2)
    took = ledger.claim("t", "run:2", lease_s=10, key="main", renew=c.token)  # not the holder
    assert took is not None and took.attempt == 2 and ledger.node("t", "main").claim_count == 2
    clock.advance(15)
    with pytest.raises(Refused):
        ledger.claim("t", "run:2", lease_s=10, renew=took.token)  # renew needs the key
    # run:2 spent the last claim: a wrong token is an ordinary claim, over max_claims → failed
    assert ledger.claim("t", "run:2", lease_s=10, key="main", renew="0" * 32) is None
    assert ledger.node("t", "main").status == "failed"


def test_a_take_back_keeps_the_step_deadline_and_none_past_it(ledger, clock):
    ledger.create_task("t")
    ledger.add_node("t", "main")
    c = ledger.claim("t", "run:1", lease_s=10, max_step_s=30)
    clock.advance(15)
    again = ledger.claim("t", "run:1", lease_s=100, key="main", renew=c.token)
    assert again is not None and again.attempt == 1 and again.step_deadline == c.step_deadline
    assert again.lease_until == c.step_deadline  # the lease never reaches past the step's deadline
    clock.advance(20)  # past the deadline: no renewal (an ordinary claim, a new attempt)
    late = ledger.claim("t", "run:1", lease_s=10, key="main", renew=again.token)
    assert late is not None and late.attempt == 2


def test_a_take_back_keeps_its_quota_unit_and_nobody_else_gets_it(ledger, clock):
    ledger.declare_quota("gpu", 1)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", quotas=("gpu",)), NodeSpec("b", quotas=("gpu",))])
    c = ledger.claim("t", "run:1", lease_s=10)
    clock.advance(15)
    again = ledger.claim("t", "run:1", lease_s=10, key="a", renew=c.token)
    assert again is not None and again.attempt == 1
    assert ledger.claim("t", "run:2", lease_s=10, key="b") is None  # the quota's one unit is a's
    assert ledger.quotas()[0].in_use == 1
    ledger.commit(again, output={})
    assert ledger.claim("t", "run:2", lease_s=10, key="b") is not None


def test_a_lapsed_quota_unit_given_to_another_node_is_not_renewed(ledger, clock):
    ledger.declare_quota("gpu", 1)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", quotas=("gpu",)), NodeSpec("b", quotas=("gpu",))])
    c = ledger.claim("t", "run:1", lease_s=10, key="a")
    clock.advance(15)
    b = ledger.claim("t", "run:2", lease_s=10, key="b")  # a's unit lapsed: b drew it
    assert b is not None
    assert ledger.claim("t", "run:1", lease_s=10, key="a", renew=c.token) is None  # the quota is full


@pytest.mark.parametrize("rival", ["the same holder twice", "another worker"])
def test_a_take_back_racing_a_claim_hands_the_node_out_once(ledger_path, clock, rival):
    """Two handles on one ledger (two connections), started together: exactly one of them gets the
    node, and the claim count says what happened (1: the renewal won; 2: the other claim did)."""
    with Ledger.open(ledger_path, clock=clock) as setup:
        c = lapsed(setup, clock)
    got: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def go(name, worker, renew):
        with Ledger.open(ledger_path, clock=clock) as led:
            barrier.wait(60)
            got[name] = led.claim("t", worker, lease_s=10, key="main", renew=renew)

    second = ("run:1", c.token) if rival == "the same holder twice" else ("run:2", None)
    threads = [threading.Thread(target=go, args=("one", "run:1", c.token)),
               threading.Thread(target=go, args=("two", *second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    won = [v for v in got.values() if v is not None]
    assert len(got) == 2 and len(won) == 1, got
    with Ledger.open(ledger_path, clock=clock) as led:
        n = led.node("t", "main")
    assert n.attempt == won[0].attempt and n.claim_count == won[0].attempt  # type: ignore[attr-defined]
    assert n.lease_owner == won[0].worker  # type: ignore[attr-defined]

"""``LeaseLost`` says what actually happened to the lease — reclaimed by whom after
it expired, the node failed, or revoked by which operator action — read from the journal, not
guessed from the node row ("revoked (rewound or reset by an operator)" when no operator acted)."""

from __future__ import annotations

import re

import pytest

from store import LeaseLost


@pytest.fixture
def two(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="work")
    ledger.add_node("t", "b", kind="work", deps=["a"])
    return ledger


def _lost(call) -> str:
    with pytest.raises(LeaseLost) as e:
        call()
    return str(e.value)


def test_reclaimed_by_another_worker_after_it_expired(two, clock):
    mine = two.claim("t", "slow-agent", lease_s=10)
    clock.advance(11)
    theirs = two.claim("t", "fast-agent", lease_s=10)
    assert theirs.node_key == "a"
    msg = _lost(lambda: two.heartbeat(mine))
    assert "reclaimed by fast-agent after it expired (attempt 2)" in msg
    assert "now running (attempt 2 by fast-agent)" in msg
    two.commit(theirs, output={})
    msg = _lost(lambda: two.commit(mine, output={}))
    assert "reclaimed by fast-agent after it expired (attempt 2); the node is succeeded" in msg
    assert "operator" not in msg and "rewound" not in msg


def test_the_same_worker_name_reclaiming_is_named_too(two, clock):
    first = two.claim("t", "w", lease_s=10)
    clock.advance(10)  # lease_until <= now: expired
    second = two.claim("t", "w", lease_s=10)
    assert second.token != first.token
    assert "reclaimed by w after it expired (attempt 2)" in _lost(lambda: two.commit(first, output={}))


def test_expired_and_not_yet_reclaimed(two, clock):
    mine = two.claim("t", "w", lease_s=10)
    clock.advance(15)
    assert re.search(r"expired 5\.0s ago; the node may be reclaimed", _lost(lambda: two.commit(mine, output={})))


@pytest.mark.parametrize("action", ["rewind", "park-now", "abort"])
def test_revoked_by_an_operator_action_names_it(two, action):
    mine = two.claim("t", "w", lease_s=60)
    if action == "rewind":
        plan = two.plan_rewind("t", "a", reason="wrong input")
    elif action == "park-now":
        plan = two.plan_park("t", reason="waiting on CI", now=True)
    else:
        plan = two.plan_abort("t", reason="not needed")
    applied = two.apply(plan, operator="alice")
    msg = _lost(lambda: two.commit(mine, output={}))
    name = {"rewind": "rewind", "park-now": "park", "abort": "abort"}[action]
    assert f"revoked by operator action {applied.action_id} ({name} by alice: {plan.reason})" in msg, msg
    tail = {"rewind": "the node is pending", "park-now": "the node is parked",
            "abort": "the task was aborted"}[action]
    assert tail in msg


def test_the_node_failed_by_this_claim(two):
    mine = two.claim("t", "w", lease_s=60)
    two.fail(mine, error="tool crashed", retryable=True, retry_after_s=0)
    msg = _lost(lambda: two.heartbeat(mine))
    assert "the node failed (this claim: tool crashed)" in msg and "operator" not in msg


def test_committed_already_by_this_claim(two):
    mine = two.claim("t", "w", lease_s=60)
    two.commit(mine, output={})
    assert "already committed by this claim" in _lost(lambda: two.commit(mine, output={}))


def test_a_worker_name_is_quoted_escaped(two, clock):
    mine = two.claim("t", "w", lease_s=10)
    clock.advance(11)
    two.claim("t", "evil\u202e\x1b[31m", lease_s=10)
    msg = _lost(lambda: two.commit(mine, output={}))
    assert "\u202e" not in msg and "\x1b" not in msg
    assert "evil\\u202e\\x1b[31m" in msg

"""A step has its own time limit, independent of its lease (default 120 s). At the limit
the lease is no longer renewed and the late result is refused — by the ledger, however diligently
the step heartbeats (even by hand, bypassing the keeper). On a manual clock, both backends."""

from __future__ import annotations

import pytest

from store import LeaseLost, NodeSpec, Refused
from store.worker import DEFAULT_MAX_STEP_S, LeaseKeeper, StepResult, work_once


def _task(ledger, n: int = 1) -> None:
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec(f"n{i}") for i in range(n)])


@pytest.mark.parametrize("limit,lease,beat", [(120, 30, 10), (120, 30, 29.9), (45, 60, 5), (7.5, 2, 1)])
def test_heartbeats_never_carry_a_step_past_its_limit(ledger, clock, limit, lease, beat):
    _task(ledger)
    t0 = clock.now
    c = ledger.claim("t", "w", lease_s=lease, max_step_s=limit)
    assert c.step_deadline == t0 + limit and c.lease_until == t0 + min(lease, limit)
    beats = 0
    while clock.now + beat < t0 + limit:
        clock.advance(beat)
        pulse = ledger.heartbeat(c, tokens=1, observation=f"beat {beats}")
        beats += 1
        assert pulse.lease_until <= t0 + limit  # never past the step's deadline
        assert ledger.node("t", "n0").lease_until == pulse.lease_until
    clock.set(t0 + limit)  # the limit: a write at it is late
    with pytest.raises(LeaseLost, match=f"time limit of {limit:.0f}s"):
        ledger.heartbeat(c)
    with pytest.raises(LeaseLost, match="its result is refused"):
        ledger.commit(c, output={"late": True})
    with pytest.raises(LeaseLost, match="time limit"):
        ledger.fail(c, error="too slow")
    assert ledger.node("t", "n0").status == "running" and ledger.node("t", "n0").output is None
    again = ledger.claim("t", "w2", lease_s=lease)  # the lease ended at the limit: reclaimed
    assert again.node_key == "n0" and again.attempt == 2 and again.step_deadline is None
    with pytest.raises(LeaseLost, match="reclaimed by w2 after it expired"):
        ledger.commit(c, output={"late": True})
    ledger.commit(again, output={"on time": True})
    assert ledger.node("t", "n0").output == {"on time": True}


def test_a_step_that_heartbeats_by_hand_through_work_once_is_refused(ledger, clock):
    """The keeper's goodwill is not what refuses it: the step bypasses the keeper and heartbeats
    itself every 20 s for 200 s; work_once's default limit (120 s) is recorded by the claim."""
    _task(ledger)
    seen: list[str] = []

    def step(inputs, keeper):
        for i in range(10):
            clock.advance(20)
            try:
                keeper.ledger.heartbeat(keeper.claim, observation=f"still going {i}")
            except LeaseLost as e:
                seen.append(str(e))
                break
        return StepResult(output={"done": True})

    out = work_once(ledger, "t", "w", step, lease_s=30, background=False)
    assert out.status == "lost" and "time limit of 120s" in out.detail
    assert seen and "time limit of 120s" in seen[0]
    assert ledger.node("t", "n0").status == "running" and ledger.node("t", "n0").output is None
    assert DEFAULT_MAX_STEP_S == 120.0
    events = [e for e in ledger.events(0, task_id="t") if e.kind == "node.claimed"]
    assert events[0].payload["max_step_s"] == 120.0


def test_a_step_within_its_limit_commits_and_none_turns_it_off(ledger, clock):
    _task(ledger, 2)

    def quick(inputs, keeper):
        clock.advance(119)
        return {"ok": True}

    assert work_once(ledger, "t", "w", quick, lease_s=300, background=False).status == "committed"

    def slow(inputs, keeper):
        clock.advance(500)
        keeper.progress(observation="half way", now=True)
        clock.advance(500)
        return {"ok": True}

    out = work_once(ledger, "t", "w", slow, lease_s=600, max_step_s=None, background=False)
    assert out.status == "committed" and ledger.task("t").status == "completed"


def test_the_keeper_stops_renewing_at_its_own_limit(ledger, clock):
    _task(ledger)
    c = ledger.claim("t", "w", lease_s=30)  # a claim without a ledger limit: the keeper's own
    mono = [0.0]
    k = LeaseKeeper(ledger, c, clock=lambda: mono[0])
    assert k.max_step_s == DEFAULT_MAX_STEP_S
    mono[0] = 100.0
    assert k.beat() and k.lost is None
    mono[0] = 121.0
    assert k.beat() is False and "maximum of 120s" in k.lost
    assert k.progress(units_done=1, now=True) is False
    # … and the ledger holds the keeper's limit too: a heartbeat sent by hand past it is refused
    assert ledger.node("t", "n0").lease_until <= c.lease_until - 30 + 120  # its heartbeats told the ledger
    for _ in range(5):  # 110 s of diligent hand heartbeats
        clock.advance(22)
        ledger.heartbeat(c)
    clock.advance(10)
    with pytest.raises(LeaseLost, match="time limit of 120s"):
        ledger.heartbeat(c)
    with pytest.raises(LeaseLost, match="time limit of 120s"):
        ledger.commit(c, output={"late": True})


def test_a_limit_given_by_heartbeat_only_shortens(ledger, clock):
    _task(ledger)
    c = ledger.claim("t", "w", lease_s=30, max_step_s=60)
    assert ledger.heartbeat(c, max_step_s=300).lease_until == clock.now + 30  # the earlier deadline stays
    clock.advance(5)
    assert ledger.heartbeat(c, max_step_s=10).lease_until == c.step_deadline - 50  # claimed + 10
    assert ledger.node("t", "n0").version == 2  # like any heartbeat: no version moved (previews stay valid)
    clock.advance(5)
    with pytest.raises(LeaseLost, match="time limit of 10s"):
        ledger.heartbeat(c, max_step_s=10)
    with pytest.raises(Refused):
        ledger.heartbeat(c, max_step_s=0)

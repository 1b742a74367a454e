"""Admission by estimate and the workflow version check at claim.

Under a token (or wall) cap a pending node whose ``est_tokens`` × 1.2 (or ``est_wall_s`` × 1.5)
exceeds what is left is not claimed and a ``budget_insufficient`` signal names it and the
shortfall; ``always_admit`` nodes are admitted on the gate alone. ``claim(..., workflow_version=V)``
gives None for a task of another version and journals it once per (task, worker, version).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import Budget, Ledger, NodeSpec
from store.judges.budget import TOKEN_MARGIN, WALL_MARGIN, shortfall
from store.reading.signals import signals_for_task

LONG = 10**7


def _insufficient(ledger: Ledger, task: str):
    return [s for s in signals_for_task(ledger, ledger.task(task)) if s.kind == "budget_insufficient"]


def _spend(ledger: Ledger, task: str, tokens: int) -> None:
    ledger.add_node(task, f"spend{tokens}", kind="spend")
    c = ledger.claim(task, "w", lease_s=LONG, kinds=["spend"])
    ledger.commit(c, output={}, tokens=tokens)


def test_a_node_whose_token_estimate_does_not_fit_is_passed_over(ledger, clock):
    ledger.create_task("t", budget=Budget(tokens=10_000))
    _spend(ledger, "t", 2_000)  # 8,000 left
    ledger.add_nodes("t", [NodeSpec("big", "x", est_tokens=7_000), NodeSpec("small", "x", est_tokens=6_000),
                           NodeSpec("close", "x", est_tokens=50_000, always_admit=True)])
    [s] = _insufficient(ledger, "t")
    assert s.node == "big" and s.severity == "warn"
    assert "needs 8,400 tokens (est 7,000 × 1.2), 8,000 left: short 400 tokens" in s.evidence
    c = ledger.claim("t", "w", lease_s=LONG)
    assert c.node_key == "small"  # big is passed over, the next that fits is taken
    c2 = ledger.claim("t", "w", lease_s=LONG)
    assert c2.node_key == "close"  # always_admit: the closing step runs on the gate alone
    assert ledger.claim("t", "w") is None
    ledger.commit(c, output={}, tokens=500)  # 7,500 left: still short
    assert [s.node for s in _insufficient(ledger, "t")] == ["big"]


def test_a_node_whose_wall_estimate_does_not_fit_is_passed_over(ledger, clock):
    ledger.create_task("t", budget=Budget(wall_s=600))
    ledger.add_nodes("t", [NodeSpec("first", "x"), NodeSpec("long", "x", ("first",), est_wall_s=300),
                           NodeSpec("short", "x", ("first",), est_wall_s=100)])
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(200)  # 400 s left: long needs 450
    ledger.commit(c, output={})
    [s] = _insufficient(ledger, "t")
    assert s.node == "long" and "needs 7m30s of wall clock (est 5m × 1.5), 6m40s left: short 50s" in s.evidence
    assert ledger.claim("t", "w", lease_s=LONG).node_key == "short"


def test_a_node_not_ready_yet_raises_no_signal_and_no_caps_means_no_check(ledger, clock):
    ledger.create_task("t", budget=Budget(tokens=100))
    ledger.add_nodes("t", [NodeSpec("a", "x"), NodeSpec("b", "x", ("a",), est_tokens=10**6)])
    assert _insufficient(ledger, "t") == []
    ledger.create_task("u")  # no caps: estimates are not a limit
    ledger.add_node("u", "huge", est_tokens=10**12, est_wall_s=10**9)
    assert ledger.claim("u", "w") is not None and _insufficient(ledger, "u") == []


def test_more_than_twenty_are_summarised(ledger, clock):
    ledger.create_task("t", budget=Budget(tokens=100))
    ledger.add_nodes("t", [NodeSpec(f"n{i:02d}", "x", est_tokens=1000) for i in range(25)])
    sigs = _insufficient(ledger, "t")
    summary = [s for s in sigs if s.node is None]
    assert len(sigs) == 21 and len(summary) == 1 and "more than 20" in summary[0].evidence
    assert ledger.claim("t", "w") is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.integers(1, 10**6), spent=st.integers(0, 10**6), est=st.one_of(st.none(), st.integers(0, 10**6)),
       wall_cap=st.one_of(st.none(), st.floats(10, 10**5)), elapsed=st.floats(0, 10**5),
       est_wall=st.one_of(st.none(), st.floats(0, 10**5)), admit=st.booleans())
def test_admission_agrees_with_the_rule(ledger, clock, cap, spent, est, wall_cap, elapsed, est_wall, admit):
    _N["n"] = _N.get("n", 0) + 1
    tid = f"g{_N['n']}"
    ledger.create_task(tid, budget=Budget(tokens=cap, wall_s=wall_cap))
    ledger.add_node(tid, "s", kind="spend")
    c = ledger.claim(tid, "w", lease_s=LONG)
    clock.advance(elapsed)
    ledger.commit(c, output={}, tokens=spent)
    ledger.add_node(tid, "n", est_tokens=est, est_wall_s=est_wall, always_admit=admit)
    t = ledger.task(tid)
    gate = ledger.admit(tid, "n")
    short = shortfall(est, est_wall, cap - spent, None if wall_cap is None else wall_cap - t.wall_used_s)
    got = ledger.claim(tid, "w", lease_s=LONG)
    fits = not short
    if gate == "deny_hard":
        assert got is None  # the gate decides first
    elif admit:
        assert got is not None  # always_admit: the gate alone
    else:
        assert (got is not None) == fits, (short, gate)
        assert (len([s for s in signals_for_task(ledger, t) if s.kind == "budget_insufficient"]) == 1) == (not fits)
    if short.get("tokens"):
        assert short["tokens"] == pytest.approx(est * TOKEN_MARGIN - max(cap - spent, 0))
    if short.get("wall_s"):
        assert short["wall_s"] == pytest.approx(est_wall * WALL_MARGIN - max(wall_cap - t.wall_used_s, 0))


_N: dict[str, int] = {}


# ---------------------------------------------------------------------- workflow_version
def test_a_worker_of_another_version_claims_nothing_and_it_is_journalled_once(ledger, clock):
    ledger.create_task("t", workflow="report", workflow_version="2")
    ledger.add_node("t", "a")
    for _ in range(50):  # polling
        assert ledger.claim("t", "old", workflow_version="1") is None
    ev = [e for e in ledger.events(0, task_id="t") if e.kind == "claim.version_mismatch"]
    assert len(ev) == 1 and ev[0].actor == "old" and ev[0].layer == "system"
    assert ev[0].payload == {"worker": "old", "workflow_version": "1", "task_workflow_version": "2"}
    assert "runs workflow version 1, task t is version 2" in ev[0].summary
    assert ledger.claim("t", "other", workflow_version="1") is None  # another worker: journalled too
    assert ledger.claim("t", "old", workflow_version="3") is None  # another version: too
    assert len([e for e in ledger.events(0, task_id="t") if e.kind == "claim.version_mismatch"]) == 3
    assert ledger.node("t", "a").status == "pending"
    c = ledger.claim("t", "new", workflow_version="2")
    assert c is not None and c.node_key == "a"
    ledger.commit(c, output={})


def test_a_claim_without_a_version_knows_none_and_one_across_tasks_filters(ledger, clock):
    ledger.create_task("v1", workflow_version="1")
    ledger.add_node("v1", "a")
    ledger.create_task("v2", workflow_version="2")
    ledger.add_node("v2", "b")
    c = ledger.claim(None, "w", workflow_version="2")
    assert (c.task_id, c.node_key) == ("v2", "b")
    assert ledger.claim(None, "w", workflow_version="2") is None
    assert not [e for e in ledger.events(0) if e.kind == "claim.version_mismatch"]  # no spam across tasks
    assert ledger.claim(None, "w") is None  # no version given: it knows none, so no versioned task
    assert ledger.claim("v1", "w") is None  # a worker that does not know the version is refused
    ev = [e for e in ledger.events(0, task_id="v1") if e.kind == "claim.version_mismatch"]
    assert len(ev) == 1 and ev[0].payload["workflow_version"] == "" and "(none)" in ev[0].summary
    assert ledger.claim("v1", "w", workflow_version="1").node_key == "a"


def test_a_new_process_journals_again_once(ledger_path, ledger, clock):
    ledger.create_task("t", workflow_version="2")
    ledger.add_node("t", "a")
    assert ledger.claim("t", "old", workflow_version="1") is None
    with Ledger.open(ledger_path, clock=clock) as other:
        assert other.claim("t", "old", workflow_version="1") is None
        assert other.claim("t", "old", workflow_version="1") is None
    assert len([e for e in ledger.events(0, task_id="t") if e.kind == "claim.version_mismatch"]) == 2

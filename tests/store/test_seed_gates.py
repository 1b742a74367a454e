"""Seed rules at the claim: the workflow version a worker knows (002), the closing whitelist past
every budget gate (004) and cost density per node — hold, abort, finish without successor (004).
Through the public API on a manual clock, both backends."""

from __future__ import annotations

import pytest

from store import Budget, LeaseLost, NodeSpec
from store.judges.density import ABORT, CONTINUE, FINISH_NO_SUCCESSOR, HOLD, Limit, judge
from store.reading.signals import signals_for_task
from store.worker import StepResult, work_once


# ---------------------------------------------------------------------- workflow version (002)
def test_a_worker_that_does_not_know_the_version_is_refused(ledger):
    ledger.create_task("v2", workflow="report", workflow_version="2")
    ledger.add_node("v2", "draft")
    ledger.create_task("plain")
    ledger.add_node("plain", "x")
    assert ledger.claim("v2", "w") is None  # no version: it knows none
    assert ledger.claim("v2", "w", workflow_version="1") is None
    assert ledger.claim(None, "w").task_id == "plain"  # across tasks: only the unversioned one
    assert ledger.claim(None, "w") is None
    calls: list[str] = []
    step = lambda inputs, keeper: calls.append(keeper.claim.node_key) or {"ok": True}  # noqa: E731
    assert work_once(ledger, "v2", "w", step, background=False) is None
    assert work_once(ledger, "v2", "w", step, background=False, workflow_version="1") is None
    out = work_once(ledger, "v2", "w", step, background=False, workflow_version="2")
    assert out.status == "committed" and calls == ["draft"]
    refusals = [e for e in ledger.events(0, task_id="v2") if e.kind == "claim.version_mismatch"]
    assert [e.payload["workflow_version"] for e in refusals] == ["", "1"]  # once per (worker, version)


# ---------------------------------------------------------------------- the closing whitelist (004)
@pytest.mark.parametrize("used", [1.0, 1.21, 1.5, 3.0])
def test_always_admit_nodes_are_claimed_whatever_the_budget(ledger, clock, used):
    ledger.create_task("t", budget=Budget(wall_s=100))
    ledger.add_nodes("t", [NodeSpec("work"), NodeSpec("more", deps=("work",)),
                           NodeSpec("close", kind="report", deps=("work",), always_admit=True, est_wall_s=500),
                           NodeSpec("notify", deps=("work",), always_admit=True)])
    c = ledger.claim("t", "w", lease_s=10**6)
    clock.advance(100 * used)
    ledger.commit(c, output={})
    gate = "stop" if used >= 1.2 else "hard"
    assert [s.kind for s in signals_for_task(ledger, ledger.task("t")) if s.kind.startswith("budget_")] == [
        f"budget_{gate}"]
    assert ledger.admit("t", "more") == "deny_hard" and ledger.admit("t", "close") == "admit_degraded"
    got = {ledger.claim("t", "w").node_key, ledger.claim("t", "w").node_key}
    assert got == {"close", "notify"}  # the closing steps, even past stop (and an estimate that does not fit)
    assert ledger.claim("t", "w") is None  # nothing else
    assert ledger.node("t", "more").status == "pending"


# ---------------------------------------------------------------------- cost density (004)
def test_the_seed_rule_itself():
    lim = Limit(100.0)
    assert judge(50, 0, 10, lim).verdict == CONTINUE  # spent less than one unit's worth yet
    assert judge(100, 0, 10, lim).verdict == HOLD
    assert judge(100, None, 10, lim).verdict == HOLD  # declared units, none done
    assert judge(10_000, None, None, lim).verdict == CONTINUE  # measures no progress: not judged
    assert judge(200, 2, None, lim).verdict == CONTINUE  # exactly the limit
    assert judge(201, 2, None, lim).verdict == FINISH_NO_SUCCESSOR
    assert judge(600, 2, None, lim).verdict == FINISH_NO_SUCCESSOR  # exactly 3 ×
    assert judge(601, 2, None, lim).verdict == ABORT
    assert judge(10**9, 1, 1, None).verdict == CONTINUE  # no limit: nothing judged


def _dense(ledger, limit: float = 100.0) -> None:
    ledger.create_task("t", budget=Budget(density_limit=limit))
    ledger.add_nodes("t", [NodeSpec("a", units_total=10), NodeSpec("b"), NodeSpec("after", deps=("a",)),
                           NodeSpec("also", deps=("a",))])


def test_hold_dispatches_nothing_new_until_progress(ledger, clock):
    _dense(ledger)
    a = ledger.claim("t", "w", key="a", lease_s=60)
    assert ledger.heartbeat(a, tokens=99).density == CONTINUE
    p = ledger.heartbeat(a, tokens=51, observation="thinking")
    assert p.density == HOLD
    assert ledger.claim("t", "w2") is None and ledger.claim("t", "w2", key="b") is None  # b is ready, held back
    [ev] = [e for e in ledger.events(0, task_id="t") if e.kind == "node.cost_density"]
    assert ev.payload["verdict"] == HOLD and "no progress reported" in ev.summary and "hold" in ev.summary
    [sig] = [s for s in signals_for_task(ledger, ledger.task("t")) if s.kind == "cost_density"]
    assert sig.node == "a" and "hold" in sig.evidence
    assert ledger.heartbeat(a, tokens=0, units_done=2).density == CONTINUE  # 75 tokens/unit: lifted
    assert ledger.claim("t", "w2").node_key == "b"
    ledger.heartbeat(a, units_done=0)  # no progress again: holds again
    clock.advance(61)  # … until its lease ends: an expired node holds nothing up
    assert ledger.claim("t", "w3").node_key == "a"


def test_finish_without_successor_parks_its_successors(ledger, clock):
    _dense(ledger)
    a = ledger.claim("t", "w", key="a")
    assert ledger.heartbeat(a, tokens=500, units_done=2).density == FINISH_NO_SUCCESSOR  # 250/unit
    assert ledger.claim("t", "w2").node_key == "b"  # it may finish; other work goes on
    ledger.commit(a, output={"partial": True}, next_nodes=[NodeSpec("grown", deps=("a",))])
    status = {n.key: n.status for n in ledger.graph("t").nodes}
    assert status == {"a": "succeeded", "b": "running", "after": "parked", "also": "parked", "grown": "parked"}
    after = ledger.node("t", "after")
    assert "cost density" in after.park_reason and "2.5× the limit" in after.park_reason
    assert ledger.claim("t", "w3") is None
    ev = [e for e in ledger.events(0, task_id="t") if e.kind == "node.cost_density"][-1]
    assert ev.payload["parked"] == ["after", "also", "grown"] and set(ev.payload["nodes"]) >= {"after", "grown"}
    ledger.apply(ledger.plan_resume("t", node="after"), operator="op")  # the operator lets one run
    assert ledger.claim("t", "w3").node_key == "after"


def test_a_commit_over_the_limit_parks_successors_even_without_heartbeats(ledger):
    _dense(ledger)
    a = ledger.claim("t", "w", key="a")
    ledger.commit(a, output={}, tokens=1000, units_done=1)  # 1000/unit at commit: over even 3 ×
    assert ledger.node("t", "a").status == "succeeded"  # what it made is kept
    assert ledger.node("t", "after").status == "parked"


def test_abort_stops_the_node_and_keeps_what_it_made(ledger):
    _dense(ledger)
    a = ledger.claim("t", "w", key="a")
    ledger.intend_effect(a, "e:1")
    ledger.confirm_effect(a, "e:1", external_id="#1")
    p = ledger.heartbeat(a, tokens=700, units_done=2, observation="expensive")  # 350/unit > 3 × 100
    assert p.density == ABORT
    node = ledger.node("t", "a")
    assert (node.status, node.failure_class, node.tokens_used, node.units_done) == ("failed", "conclusion", 700, 2)
    assert "stopped by the ledger" in node.error and "3.5× the limit" in node.error
    with pytest.raises(LeaseLost, match="cost density"):
        ledger.commit(a, output={"late": True})
    assert ledger.effects("t")[0].status == "confirmed" and len(ledger.observations("t", "a")) == 1
    assert ledger.claim("t", "w", key="after") is None  # its successors never run on it
    assert ledger.claim("t", "w").node_key == "b"  # other work goes on; the task fails only when nothing can


def test_work_once_drops_a_step_the_ledger_stopped(ledger):
    _dense(ledger)

    def step(inputs, keeper):
        keeper.progress(tokens=900, units_done=1, now=True)
        assert keeper.lost and "cost density" in keeper.lost
        return StepResult(output={"never": "committed"})

    out = work_once(ledger, "t", "w", step, background=False)
    assert out.status == "lost" and out.claim.node_key == "a"
    assert ledger.node("t", "a").output is None


def test_without_a_limit_nothing_is_judged(ledger):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", units_total=1), NodeSpec("b", deps=("a",)), NodeSpec("c")])
    a = ledger.claim("t", "w", key="a")
    assert ledger.heartbeat(a, tokens=10**6, units_done=0).density == CONTINUE
    assert ledger.claim("t", "w").node_key == "c"
    ledger.commit(a, output={}, units_done=1)
    assert ledger.claim("t", "w").node_key == "b"


def test_the_ledgers_density_verdict_stands_in_for_the_norm_warning(ledger, clock):
    """A node the ledger holds for its cost density would also be past the task's norm: it shows
    one cost_density signal (the ledger's), in ``warden status`` and in the console's analysis."""
    from store.reading.analysis import TaskAnalysis

    ledger.create_task("t", budget=Budget(density_limit=100.0))
    ledger.add_nodes("t", [NodeSpec(f"n{i}") for i in range(5)] + [NodeSpec("x", units_total=10)])
    for i in range(5):  # the task's norm: 10 tokens a unit
        c = ledger.claim("t", "w", key=f"n{i}")
        ledger.heartbeat(c, tokens=20, units_done=2)
        ledger.commit(c, output={})
    x = ledger.claim("t", "w", key="x")
    assert ledger.heartbeat(x, tokens=6000).density == HOLD  # and 6000 tokens for no unit: 600× the norm
    for sigs in (signals_for_task(ledger, ledger.task("t")), TaskAnalysis(ledger, "t").signals()):
        [sig] = [s for s in sigs if s.kind == "cost_density"]
        assert sig.node == "x" and "hold" in sig.evidence and "norm" not in sig.evidence

"""P80 estimates: quantiles, confidence, fallback, running nodes, the task's Monte Carlo."""

from __future__ import annotations

import math
import random
from statistics import NormalDist

import pytest

from store import Budget, NodeSpec
from store import estimates as E
from store.analysis import TaskAnalysis


# ---------------------------------------------------------------------- helpers
def finish(ledger, clock, task, key, seconds, worker="w1"):
    """Run exactly the node ``key`` for ``seconds`` and commit it."""
    claim = ledger.claim(task, worker, lease_s=max(60.0, seconds * 2))
    assert claim is not None and claim.node_key == key, claim
    clock.advance(seconds)
    ledger.commit(claim, output={"k": key})


def history_task(ledger, clock, kind, durations, task="hist"):
    ledger.create_task(task, exist_ok=True)
    for i, d in enumerate(durations):
        ledger.add_node(task, f"{kind}-{i}", kind=kind)
        finish(ledger, clock, task, f"{kind}-{i}", d)


# ---------------------------------------------------------------------- pure
@pytest.mark.parametrize("values,q,want", [
    ([1, 2, 3, 4], 0.5, 2.5),
    ([1, 2, 3, 4], 0.8, 3.4),
    ([1, 2, 3, 4, 5], 0.8, 4.2),
    ([10, 20, 30, 40], 0.8, 34.0),
    ([7], 0.8, 7.0),
    ([3, 9], 0.5, 6.0),
])
def test_quantile_is_type7_linear(values, q, want):
    assert E.quantile(values, q) == pytest.approx(want)


def test_quantile_of_nothing_is_none():
    assert E.quantile([], 0.8) is None


@pytest.mark.parametrize("n,want", [(0, "none"), (1, "low"), (4, "low"), (5, "medium"), (19, "medium"),
                                    (20, "high"), (500, "high")])
def test_confidence_by_sample_count(n, want):
    assert E.confidence(n) == want


def test_history_keeps_the_newest_cap_sorted():
    h = E.DurationHistory(cap=3)
    for d in (50, 10, 40, 20):
        h.add("k", d)
    assert h.samples("k") == [10, 20, 40]  # 50 (the oldest) dropped
    v = h.version("k")
    h.add("k", 5)
    assert h.samples("k") == [5, 20, 40] and h.version("k") == v + 1


# ---------------------------------------------------------------------- nodes, from the ledger
def test_pending_node_learns_from_finished_nodes_of_its_kind(ledger, clock):
    history_task(ledger, clock, "llm_call", [10, 20, 30, 40])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call", est_wall_s=999)
    g = E.estimate_graph(ledger, ledger.graph("t"))
    assert g.nodes["a"] == E.Estimate(pytest.approx(25.0), pytest.approx(34.0), 4, "low")
    assert g.nodes["a"].to_json() == {"p50_s": 25.0, "p80_s": 34.0, "samples": 4, "confidence": "low"}


def test_other_kinds_do_not_count(ledger, clock):
    history_task(ledger, clock, "tool", [5, 5, 5])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call", est_wall_s=100)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    assert est.samples == 0 and est.confidence == "none"
    assert est.p50_s == pytest.approx(100.0)


def test_fallback_to_est_wall_s_is_a_lognormal_around_it(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="fresh", est_wall_s=60)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    # 21 quantile points of a log-normal with median 60 and sigma 0.5; type-7 picks points 10 and 16.
    want80 = 60 * math.exp(0.5 * NormalDist().inv_cdf(16.5 / 21))
    assert est == E.Estimate(pytest.approx(60.0), pytest.approx(want80), 0, "none")
    assert 1.4 * 60 < est.p80_s < 1.6 * 60


def test_nothing_known_gives_no_estimate(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="mystery")
    g = E.estimate_graph(ledger, ledger.graph("t"))
    assert g.nodes["a"] == E.NO_ESTIMATE and g.task == E.NO_ESTIMATE


def test_unknown_kind_borrows_the_pooled_history(ledger, clock):
    history_task(ledger, clock, "tool", [10, 20, 30])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="mystery")
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    assert (est.p50_s, est.samples, est.confidence) == (20.0, 0, "none")


def test_running_node_conditions_on_elapsed_time(ledger, clock):
    history_task(ledger, clock, "llm_call", [60, 80, 100, 120, 140])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    claim = ledger.claim("t", "w1", lease_s=300)
    clock.advance(70)
    ledger.heartbeat(claim)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    # remaining points: 80-70, 100-70, 120-70, 140-70 = 10, 30, 50, 70
    assert est == E.Estimate(pytest.approx(40.0), pytest.approx(58.0), 5, "medium")


def test_running_node_with_progress_blends_its_own_rate(ledger, clock):
    history_task(ledger, clock, "llm_call", [60, 80, 100, 120, 140])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    claim = ledger.claim("t", "w1", lease_s=300)
    clock.advance(70)
    ledger.heartbeat(claim, units_done=1, units_total=2)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    # f = 0.5, own rate says 70 s more: points 0.5·c + 0.5·70 = 40, 50, 60, 70
    assert est == E.Estimate(pytest.approx(55.0), pytest.approx(64.0), 5, "medium")


def test_running_past_all_history_still_has_a_positive_estimate(ledger, clock):
    history_task(ledger, clock, "llm_call", [10, 12])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    claim = ledger.claim("t", "w1", lease_s=600)
    clock.advance(100)
    ledger.heartbeat(claim)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    assert est.p50_s == pytest.approx(30.0)  # past_history_factor × elapsed
    assert est.p80_s > est.p50_s and est.samples == 2


def test_pending_retry_waits_for_its_back_off(ledger, clock):
    history_task(ledger, clock, "llm_call", [10, 20, 30, 40])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    claim = ledger.claim("t", "w1")
    ledger.fail(claim, error="rate limited", retry_after_s=100)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    assert est.p50_s == pytest.approx(125.0) and est.p80_s == pytest.approx(134.0)


# ---------------------------------------------------------------------- the task
def constant_history(ledger, clock, kind, seconds, n=20, workers=("w1",)):
    ledger.create_task("hist", exist_ok=True)
    for i in range(n):
        ledger.add_node("hist", f"{kind}-{i}", kind=kind)
        finish(ledger, clock, "hist", f"{kind}-{i}", seconds, worker=workers[i % len(workers)])


def test_task_estimate_follows_the_dependency_chain(ledger, clock):
    constant_history(ledger, clock, "step", 10)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", "step"), NodeSpec("b", "step", deps=("a",)), NodeSpec("c", "step", deps=("b",))])
    g = E.estimate_graph(ledger, ledger.graph("t"))
    assert g.task == E.Estimate(pytest.approx(30.0), pytest.approx(30.0), 20, "high")


def test_task_estimate_counts_recently_active_workers(ledger, clock):
    constant_history(ledger, clock, "step", 10)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec(f"n{i}", "step") for i in range(6)])
    claims = [ledger.claim("t", w, lease_s=60) for w in ("w1", "w2", "w3")]
    clock.advance(10)
    for c in claims:
        ledger.commit(c, output={})
    assert E.estimate_graph(ledger, ledger.graph("t")).task.p80_s == pytest.approx(10.0)  # 3 nodes on 3 workers
    clock.advance(E.DEFAULT_PARAMS.worker_window_s + 1)  # the workers went quiet: one worker assumed
    assert E.estimate_graph(ledger, ledger.graph("t")).task.p80_s == pytest.approx(30.0)


def test_task_p80_is_not_the_sum_of_node_p80s(ledger, clock):
    rng = random.Random(4)
    history_task(ledger, clock, "llm_call", [rng.lognormvariate(4, 0.4) for _ in range(30)])
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec(f"n{i}", "llm_call") for i in range(20)])
    g = E.estimate_graph(ledger, ledger.graph("t"))
    node_sum_p80 = sum(e.p80_s for e in g.nodes.values())
    node_sum_p50 = sum(e.p50_s for e in g.nodes.values())
    assert g.task.p80_s < node_sum_p80  # one worker: the sum of 20 draws, whose spread partly cancels
    assert g.task.p80_s > node_sum_p50 * 0.9
    assert g.task.samples == 30 and g.task.confidence == "high"


def test_task_estimate_is_deterministic(ledger, clock):
    rng = random.Random(5)
    history_task(ledger, clock, "llm_call", [rng.lognormvariate(4, 0.8) for _ in range(12)])
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec(f"n{i}", "llm_call", deps=(f"n{i-1}",) if i % 3 else ()) for i in range(9)])
    a = E.estimate_graph(ledger, ledger.graph("t")).task
    b = E.estimate_graph(ledger, ledger.graph("t")).task
    assert a == b and a.p80_s > a.p50_s > 0


def test_status_path_matches_graph_path(ledger, clock):
    rng = random.Random(6)
    history_task(ledger, clock, "llm_call", [rng.lognormvariate(4, 0.5) for _ in range(10)])
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec(f"n{i}", "llm_call", deps=(f"n{i-2}",) if i >= 2 else (), est_wall_s=40)
                           for i in range(7)] + [NodeSpec("x", "tool", est_wall_s=15, deps=("n6",))])
    claim = ledger.claim("t", "w9", lease_s=600)
    clock.advance(20)
    ledger.heartbeat(claim, units_done=1, units_total=3)
    task = next(t for t in ledger.tasks() if t.task_id == "t")
    assert E.estimate_task(ledger, task) == E.estimate_graph(ledger, ledger.graph("t")).task


def test_finished_task_has_no_eta(ledger, clock):
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="step", est_wall_s=5)
    finish(ledger, clock, "t", "a", 5)
    g = E.estimate_graph(ledger, ledger.graph("t"))
    assert g.task == E.NO_ESTIMATE and "a" not in g.nodes
    assert E.estimate_task(ledger, ledger.task("t")) == E.NO_ESTIMATE


def test_large_graph_approximation_is_close_to_the_monte_carlo(ledger, clock):
    rng = random.Random(7)
    history_task(ledger, clock, "llm_call", [rng.lognormvariate(3, 0.7) for _ in range(40)])
    h = E.DurationHistory.load(ledger, ["llm_call"])
    nodes = [E.NodeState(f"n{i}", "llm_call", "pending", i) for i in range(300)]
    dists = E._dists_for(nodes, clock(), h, E.DEFAULT_PARAMS)
    mc = E.task_estimate(nodes, dists, 4, E.DEFAULT_PARAMS)
    approx = E.task_estimate(nodes, dists, 4, E.EstimateParams(mc_max_nodes=100))
    assert approx.p80_s == pytest.approx(mc.p80_s, rel=0.05)
    assert approx.p50_s == pytest.approx(mc.p50_s, rel=0.05)


def test_status_on_a_large_task_uses_the_approximation(ledger, clock):
    constant_history(ledger, clock, "step", 10)
    ledger.create_task("big")
    ledger.add_nodes("big", [NodeSpec(f"n{i}", "step") for i in range(40)])
    params = E.EstimateParams(mc_max_nodes=10)
    est = E.estimate_task(ledger, ledger.task("big"), params=params)
    assert est == E.Estimate(pytest.approx(400.0), pytest.approx(400.0), 20, "high")  # 40 × 10 s on one worker
    assert E.estimate_graph(ledger, ledger.graph("big"), params=params).task == est


# ---------------------------------------------------------------------- incremental
def test_task_analysis_matches_the_one_shot_path_after_events(ledger, clock):
    rng = random.Random(8)
    history_task(ledger, clock, "llm_call", [rng.lognormvariate(3, 0.5) for _ in range(8)])
    ledger.create_task("t", budget=Budget(tokens=10_000))
    ledger.add_nodes("t", [NodeSpec(f"n{i}", "llm_call", deps=(f"n{i-1}",) if i % 2 else ()) for i in range(6)])
    an = TaskAnalysis(ledger, "t")
    cursor = ledger.last_event_id()

    def pump():
        nonlocal cursor
        for ev in ledger.events(cursor, task_id="t"):
            cursor = ev.id
            an.apply_event(ev, ledger.nodes("t", [ev.node]) if ev.node else [])

    c1 = ledger.claim("t", "w1", lease_s=300)
    clock.advance(15)
    ledger.heartbeat(c1, units_done=1, units_total=4, tokens=300, observation="a\nb")
    ledger.commit(c1, output={})
    c2 = ledger.claim("t", "w2", lease_s=300)
    clock.advance(9)
    ledger.heartbeat(c2, units_done=2, units_total=4, observation="c")
    pump()
    one = E.estimate_graph(ledger, ledger.graph("t"))
    inc = an.estimate()
    assert inc.task == one.task and dict(inc.nodes) == dict(one.nodes)
    assert an.history.count("llm_call") == 9  # the commit joined the memory without a query
    assert an.task_estimate() == one.task

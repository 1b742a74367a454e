"""P80 estimates: quantiles, confidence, fallback, running nodes, the task's Monte Carlo."""

from __future__ import annotations

import math
import random
from statistics import NormalDist

import pytest

from store import Budget, NodeSpec
from store.estimation import durations, estimates as E
from store.reading.analysis import TaskAnalysis


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


def test_history_keeps_the_newest_cap_sorted():
    h = E.DurationHistory(cap=3)
    for d in (50, 10, 40, 20):
        h.add("k", d)
    assert h.samples("k") == [10, 20, 40]  # 50 (the oldest) dropped
    v = h.version("k")
    h.add("k", 5)
    assert h.samples("k") == [5, 20, 40] and h.version("k") == v + 1


# ---------------------------------------------------------------------- nodes, from the ledger
def base(ledger, kind, est=None):
    h = E.DurationHistory.load(ledger, None)
    return E.base_dist(kind, est, h, pooled=h.pooled_model())


def test_pending_node_learns_from_finished_nodes_of_its_kind(ledger, clock):
    history_task(ledger, clock, "llm_call", [10, 20, 30, 40])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    assert 18 < est.p50_s < 32 and est.p80_s > 36  # four samples: wider than their own P80 (34)
    assert (est.samples, est.confidence) == (4, "low")  # too few checks to say more
    assert est.why[0] == "4 samples of llm_call"
    j = est.to_json()
    assert set(j) == {"p50_s", "p80_s", "samples", "confidence", "why"} and j["why"] == list(est.why)


def test_est_wall_s_is_blended_with_few_samples_not_dropped(ledger, clock):
    history_task(ledger, clock, "llm_call", [10, 12, 11])
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("plain", "llm_call"), NodeSpec("guessed", "llm_call", est_wall_s=100)])
    nodes = E.estimate_graph(ledger, ledger.graph("t")).nodes
    assert nodes["plain"].p50_s < nodes["guessed"].p50_s < 100  # pulled up by the guess, not replaced by it
    assert "3 samples of llm_call + est_wall_s" in nodes["guessed"].why
    history_task(ledger, clock, "llm_call", [11] * 60, task="more")
    nodes = E.estimate_graph(ledger, ledger.graph("t")).nodes
    assert nodes["guessed"].p50_s < 1.2 * nodes["plain"].p50_s  # with many samples the guess weighs little


def test_other_kinds_do_not_count(ledger, clock):
    history_task(ledger, clock, "tool", [5, 5, 5])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call", est_wall_s=100)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    assert est.samples == 0 and est.confidence == "none"
    assert est.p50_s == pytest.approx(100.0, rel=0.02)
    assert est.why == ("no history of llm_call: est_wall_s 100s only",)


def test_fallback_to_est_wall_s_is_a_lognormal_around_it(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="fresh", est_wall_s=60)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    # spread 0.5 around the truth, and est_wall_s itself off by 0.5: log σ √0.5 ≈ 0.71
    assert est.p50_s == pytest.approx(60.0, rel=0.03)
    assert est.p80_s == pytest.approx(60 * math.exp(NormalDist().inv_cdf(0.8) * math.sqrt(0.5)), rel=0.06)
    assert (est.samples, est.confidence) == (0, "none")


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
    assert 12 < est.p50_s < 30 and (est.samples, est.confidence) == (0, "none")
    assert "every kind's durations" in est.why[0]


def test_running_node_conditions_on_elapsed_time(ledger, clock):
    history_task(ledger, clock, "llm_call", [60, 80, 100, 120, 140])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    points = base(ledger, "llm_call").values
    claim = ledger.claim("t", "w1", lease_s=300)
    clock.advance(70)
    ledger.heartbeat(claim)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    left = sorted(v - 70 for v in points if v > 70)  # the points above the elapsed time, minus it
    assert est.p50_s == pytest.approx(E.quantile(left, 0.5)) and est.p80_s == pytest.approx(E.quantile(left, 0.8))
    assert est.samples == 5


def test_running_node_with_progress_blends_its_own_rate(ledger, clock):
    history_task(ledger, clock, "llm_call", [60, 80, 100, 120, 140])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    points = base(ledger, "llm_call").values
    claim = ledger.claim("t", "w1", lease_s=300)
    clock.advance(70)
    ledger.heartbeat(claim, units_done=1, units_total=2)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    # f = 0.5, its own rate says 70 s more: each point c becomes 0.5·c + 0.5·70
    left = sorted(0.5 * (v - 70) + 35 for v in points if v > 70)
    assert est.p50_s == pytest.approx(E.quantile(left, 0.5)) and est.p80_s == pytest.approx(E.quantile(left, 0.8))


def test_running_past_all_history_still_has_a_positive_estimate(ledger, clock):
    history_task(ledger, clock, "llm_call", [10, 12])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    far = max(base(ledger, "llm_call").values) + 100
    claim = ledger.claim("t", "w1", lease_s=2 * far)
    clock.advance(far)
    ledger.heartbeat(claim)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    assert est.p50_s == pytest.approx(0.3 * far)  # past_history_factor × elapsed
    assert est.p80_s > est.p50_s and est.samples == 2
    assert any("past what its kind usually takes" in w for w in est.why)


def test_pending_retry_waits_for_its_back_off(ledger, clock):
    history_task(ledger, clock, "llm_call", [10, 20, 30, 40])
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    fresh = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    claim = ledger.claim("t", "w1")
    ledger.fail(claim, error="rate limited", retry_after_s=100)
    est = E.estimate_graph(ledger, ledger.graph("t")).nodes["a"]
    assert est.p50_s == pytest.approx(fresh.p50_s + 100) and est.p80_s == pytest.approx(fresh.p80_s + 100)


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
    # three 10 s steps one after the other; 20 identical samples leave a little doubt, no more
    assert 30 <= g.task.p50_s <= g.task.p80_s < 36
    assert g.task.samples == 20 and g.task.confidence in ("medium", "high")
    assert "1 worker" in g.task.why


def test_task_estimate_counts_recently_active_workers(ledger, clock):
    constant_history(ledger, clock, "step", 10)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec(f"n{i}", "step") for i in range(6)])
    claims = [ledger.claim("t", w, lease_s=60) for w in ("w1", "w2", "w3")]
    clock.advance(10)
    for c in claims:
        ledger.commit(c, output={})
    three = E.estimate_graph(ledger, ledger.graph("t")).task  # 3 nodes on 3 workers
    assert 10 <= three.p80_s < 13 and "3 workers" in three.why
    clock.advance(E.DEFAULT_PARAMS.worker_window_s + 1)  # the workers went quiet: one worker assumed
    one = E.estimate_graph(ledger, ledger.graph("t")).task
    assert 30 <= one.p80_s < 36 and "1 worker" in one.why


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
    assert g.task.samples == 30 and g.task.confidence in ("medium", "high")


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
    dists = E.dists_for(nodes, clock(), h, E.DEFAULT_PARAMS)
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
    assert 400 <= est.p50_s <= est.p80_s < 440 and est.samples == 20  # 40 × 10 s on one worker
    assert "weighs most: 40 step nodes" in est.why
    assert E.estimate_graph(ledger, ledger.graph("big"), params=params).task == est


def test_running_nodes_that_have_just_started_say_nothing_of_a_task_s_speed():
    """A running node counts as a censored run worth its share of a finished run's information:
    one that has just started, none (eight of them once lifted a task's three runs from low to the
    kind's high and narrowed its P80, by their number alone); one long past the kind's runs, most."""
    rng = random.Random(4)
    h = E.DurationHistory(500, E.DEFAULT_PARAMS)
    for i in range(200):
        h.add("k", rng.lognormvariate(math.log(60), 0.7), f"t{i // 8}")
    for d in (55, 70, 62):
        h.add("k", d, "me")
    p80 = lambda d: E.quantile(d.values, 0.8)  # noqa: E731
    alone = E.base_dist("k", None, h, task_id="me")
    assert alone is not None and alone.label == "low"  # three runs of a σ 0.7 kind cannot tell its speed
    for n in (2, 8, 20):
        started = E.base_dist("k", None, h, task_id="me", running=(0.0,) * n)
        assert started is not None and started.label == alone.label, (n, started.label)
        assert p80(started) == pytest.approx(p80(alone), rel=1e-6), n
    late = E.base_dist("k", None, h, task_id="me", running=(600.0,) * 3)  # 10× the kind's median
    assert late is not None and p80(late) > 1.3 * p80(alone)


def test_status_reads_a_task_s_speed_once_for_all_its_running_nodes(ledger, clock, monkeypatch):
    """Above ``mc_max_nodes``, every running row's figure rests on the task's level of its kind,
    which reads each running node as a censored run: one reading for them all (once per row made
    hundreds of running nodes quadratic — 400 took ~0.4 s of CPU)."""
    rng = random.Random(3)
    history_task(ledger, clock, "step", [rng.lognormvariate(3, 0.4) for _ in range(30)])
    ledger.create_task("big")
    ledger.add_nodes("big", [NodeSpec(f"n{i}", "step") for i in range(60)])
    for i in range(4):  # the task's own runs: slower than its history
        finish(ledger, clock, "big", f"n{i}", 60 + 10 * i)
    for i in range(30):
        assert ledger.claim("big", f"w{i}", lease_s=3600) is not None
        clock.advance(1)
    clock.advance(40)  # past the kind's median: censored runs that say something
    reads = []
    real = durations.task_level
    monkeypatch.setattr(durations, "task_level", lambda *a, **k: reads.append(a) or real(*a, **k))
    est = E.estimate_task(ledger, ledger.task("big"), params=E.EstimateParams(mc_max_nodes=10))
    assert est.p80_s is not None and any("slower than its history" in w for w in est.why), est
    assert len(reads) == 1, len(reads)


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


# ---------------------------------------------------------------------- degenerate histories
EXTREME = [0.0, 1e-4, 1e-3, 0.5, 1.0, 30.0, 1e4, 1e6, 1e8]


@pytest.mark.parametrize("seed", range(60))
def test_degenerate_histories_give_finite_figures(seed):
    """Zero-length runs (a commit at its claim's instant), durations ten decades apart, one or two
    samples: every figure is finite (two runs of 0 s and 1 s once made the pooled model's level
    variance 2,700 and ``warden graph`` died with OverflowError)."""
    rng = random.Random(seed)
    h = E.DurationHistory()
    for kind in ("a", "b")[: rng.choice([1, 2])]:
        for _ in range(rng.choice([1, 2, 3, 6, 25])):
            d = rng.choice(EXTREME) if rng.random() < 0.7 else rng.lognormvariate(0, rng.choice([0.5, 3, 6]))
            h.add(kind, d, rng.choice(["t", "u", None]), rng.randrange(40))
    pooled = h.pooled_model()
    nodes, dists = [], {}
    for i in range(rng.choice([1, 3, 12])):
        kind = rng.choice(["a", "b", "unseen"])
        est = rng.choice([None, None, 1e-6, 2.0, 1e7])
        n = E.NodeState(f"n{i}", kind, rng.choice(["pending", "pending", "running"]), i,
                        (f"n{i - 1}",) if i and rng.random() < 0.5 else (), claimed_at=0.0, est_wall_s=est)
        nodes.append(n)
        d = E.base_dist(kind, est, h, E.DEFAULT_PARAMS, pooled, "t", i)
        if d is not None:
            assert all(math.isfinite(v) and v >= 0 for v in d.values), (kind, est)
        dists[n.key] = E.node_dist(n, 50.0, h, E.DEFAULT_PARAMS, pooled, d, "t")
    est = E.task_estimate(nodes, dists, rng.choice([1, 3]))
    for v in (est.p50_s, est.p80_s):
        assert v is None or (math.isfinite(v) and v >= 0)


def test_a_zero_and_a_one_second_run_still_give_a_graph(ledger, clock):
    ledger.create_task("h")
    ledger.add_nodes("h", [NodeSpec("x", "k0"), NodeSpec("y", "k1")])
    finish(ledger, clock, "h", "x", 1.0)
    finish(ledger, clock, "h", "y", 0.0)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("p", "new"), NodeSpec("q", "new", ("p",))])
    g = E.estimate_graph(ledger, ledger.graph("t"))
    assert g.task.p80_s is not None and math.isfinite(g.task.p80_s) and g.task.confidence == "none"

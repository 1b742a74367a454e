"""Stall and budget signals: each fires on its case and stays quiet on the near miss."""

from __future__ import annotations

import pytest

from store import Budget, NodeSpec
from store.reading import signals as S
from store.reading.analysis import TaskAnalysis
from store.reading.cli_json import signal_json
from tests.support.asks import ask


def sigs(ledger, task="t", kind=None):
    out = S.signals_for_graph(ledger, ledger.graph(task))
    return [s for s in out if kind is None or s.kind == kind]


def kinds(ledger, task="t"):
    return sorted(s.kind for s in sigs(ledger, task))


@pytest.fixture
def running(ledger, clock):
    """Task t with one running node a (lease 60 s, heartbeats every 10 s by the tests)."""
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", "llm_call"), NodeSpec("b", "llm_call", deps=("a",))])
    return ledger.claim("t", "w1", lease_s=60)


def beat(ledger, clock, claim, text=None, step=10.0, **kw):
    clock.advance(step)
    return ledger.heartbeat(claim, observation=text, **kw)


# ---------------------------------------------------------------------- no_new_info / repeating
def test_no_new_info_fires_after_five_empty_observations(ledger, clock, running):
    beat(ledger, clock, running, "found a\nfound b\nfound c")
    loop = ["found b\nfound a", "found c", "FOUND A", "found   b\nfound c", "found a"]  # old lines, new shapes
    for i, text in enumerate(loop):
        assert not sigs(ledger, kind="no_new_info"), i
        beat(ledger, clock, running, text)
    (s,) = sigs(ledger, kind="no_new_info")
    assert s.severity == "alarm" and s.node == "a" and s.task_id == "t"
    assert s.evidence == "last 5 observations added 0 new lines"
    assert s.since == clock() - 40  # the first of the five
    assert not sigs(ledger, kind="repeating")  # never the same digest twice in a row


def test_slow_node_whose_observations_add_new_lines_is_quiet(ledger, clock, running):
    words = ["parser", "lexer", "planner", "cache", "router", "schema", "indexer", "logger", "mailer", "billing"]
    for i in range(30):
        module = f"{words[i % 10]}_{words[i // 10]}"  # 30 different modules
        beat(ledger, clock, running, f"checked module {module} ({i} of 30)\nsummary so far", units_done=i // 3,
             units_total=100)
    assert not [s for s in sigs(ledger) if s.kind in ("no_new_info", "repeating")]


def test_a_counter_alone_is_not_new_information(ledger, clock, running):
    for i in range(3):  # what only a counter changes is the same observation: "retry #n" is a loop
        beat(ledger, clock, running, f"checked module {i}\nsummary so far")
    (s,) = sigs(ledger, kind="repeating")
    assert s.evidence.startswith("the same observation 3 times in a row")


def test_repeating_fires_on_three_identical_observations(ledger, clock, running):
    beat(ledger, clock, running, "new thing")
    beat(ledger, clock, running, "waiting for CI")
    beat(ledger, clock, running, "waiting for CI")
    assert not sigs(ledger, kind="repeating")  # two in a row: the near miss
    beat(ledger, clock, running, "Waiting  for CI")  # same after normalisation
    (s,) = sigs(ledger, kind="repeating")
    assert s.severity == "alarm" and s.evidence.startswith("the same observation 3 times in a row")
    assert s.since == clock() - 20


def test_a_run_longer_than_what_is_read_is_counted_as_a_floor(ledger, clock, running):
    """The judge reads a node's last ``observations_per_node`` observations: a run that fills them
    began earlier, so its count is said as a floor, not as the run's length."""
    bound = S.DEFAULT_THRESHOLDS.observations_per_node
    beat(ledger, clock, running, "new thing")
    for _ in range(bound - 2):
        beat(ledger, clock, running, "waiting for CI")
    (s,) = sigs(ledger, kind="repeating")
    assert s.evidence.startswith(f"the same observation {bound - 2} times in a row")  # all of it was read
    for _ in range(6):
        beat(ledger, clock, running, "waiting for CI")
    (s,) = sigs(ledger, kind="repeating")
    assert s.evidence.startswith(f"the same observation at least {bound} times in a row")


def test_observations_of_an_earlier_attempt_do_not_count(ledger, clock, running):
    for _ in range(6):  # the first "same" is new; the next five add nothing
        beat(ledger, clock, running, "same")
    assert sigs(ledger, kind="no_new_info")
    ledger.fail(running, error="gave up", retry_after_s=0)
    claim = ledger.claim("t", "w2", lease_s=60)
    beat(ledger, clock, claim, "same")
    assert not [s for s in sigs(ledger) if s.kind in ("no_new_info", "repeating")]


# ---------------------------------------------------------------------- heartbeats and leases
def test_heartbeat_stale_just_inside_and_just_past_the_limit(ledger, clock, running):
    for _ in range(9):  # 8 gaps: the rhythm is learned
        beat(ledger, clock, running)  # every 10 s, lease 60 s → limit max(2 × 10, 10, 60 / 2) = 30 s
    clock.advance(30)
    assert not sigs(ledger, kind="heartbeat_stale")
    clock.advance(0.5)
    (s,) = sigs(ledger, kind="heartbeat_stale")
    assert s.severity == "warn" and s.since == clock() - 30.5
    assert s.evidence == "no heartbeat for 30s (its long gaps ~10s); lease ends in 30s"


def test_orphaned_when_the_lease_expires(ledger, clock, running):
    beat(ledger, clock, running)
    clock.advance(59.9)
    assert not sigs(ledger, kind="orphaned")
    clock.advance(0.1)  # lease_until <= now is expired
    assert kinds(ledger) == ["orphaned"]  # stale gives way to orphaned
    (s,) = sigs(ledger)
    assert s.severity == "alarm" and "lease of w1 expired 0s ago; nobody reclaimed it" == s.evidence


# ---------------------------------------------------------------------- progress, time, cost
def test_no_progress_after_five_minutes_and_eight_intervals(ledger, clock, running):
    beat(ledger, clock, running, units_done=2, units_total=10)
    beat(ledger, clock, running, step=45, units_done=3, units_total=10)  # units move here
    for _ in range(7):  # 7 × 45 = 315 s: past 5 minutes, not yet 8 intervals (360 s)
        beat(ledger, clock, running, step=45, units_done=3, units_total=10)
    assert not sigs(ledger, kind="no_progress")
    beat(ledger, clock, running, step=45, units_done=3, units_total=10)
    (s,) = sigs(ledger, kind="no_progress")
    assert s.severity == "warn" and s.since == clock() - 360
    assert s.evidence == "units_done 3/10 unchanged for 6m, heartbeats every 45s"


def finished_history(ledger, clock, durations, kind="llm_call", tokens=0, units=None):
    ledger.create_task("hist", exist_ok=True)
    for i, d in enumerate(durations):
        ledger.add_node("hist", f"{kind}-{i}", kind=kind)
        c = ledger.claim("hist", "h", lease_s=max(60, 2 * d))
        clock.advance(d)
        if units is not None:
            ledger.heartbeat(c, units_done=units, units_total=units, tokens=tokens)
        ledger.commit(c, output={})


def test_overdue_past_one_and_a_half_p80(ledger, clock):
    from store.estimation.estimates import DurationHistory, kind_p80

    finished_history(ledger, clock, [10, 20, 30, 40, 50])
    p80, n = kind_p80(DurationHistory.load(ledger, ["llm_call"]), "llm_call")
    assert n == 5 and 40 < p80 < 90
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="llm_call")
    c = ledger.claim("t", "w1", lease_s=600)
    clock.advance(1.5 * p80 - 0.01)
    ledger.heartbeat(c)
    assert not sigs(ledger, kind="overdue")  # just inside 1.5 × P80
    clock.advance(1)
    (s,) = sigs(ledger, kind="overdue")
    assert s.severity == "warn" and s.since == pytest.approx(c.lease_until - 600 + 1.5 * p80)
    assert s.evidence.endswith(f"past 1.5 × its kind's P80 ({S.dur(p80)}, 5 samples)")


def test_overdue_without_history_uses_est_wall_s_as_info(ledger, clock):
    ledger.create_task("t")
    ledger.add_node("t", "a", kind="fresh", est_wall_s=30)
    c = ledger.claim("t", "w1", lease_s=600)
    clock.advance(60)
    ledger.heartbeat(c)
    assert not sigs(ledger, kind="overdue")
    clock.advance(1)
    (s,) = sigs(ledger, kind="overdue")
    assert s.severity == "info" and "no history" in s.evidence


def cost_setup(ledger, clock):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec(f"done{i}", "llm_call") for i in range(5)] + [NodeSpec("a", "llm_call")])
    for i in range(5):  # the task's norm: 1,000 tokens per unit
        c = ledger.claim("t", "h", lease_s=60)
        clock.advance(5)
        ledger.heartbeat(c, units_done=2, units_total=2, tokens=2000)  # 1,000 tokens per unit
        ledger.commit(c, output={})
    return ledger.claim("t", "w1", lease_s=60)


def test_cost_density_far_above_the_task_norm(ledger, clock):
    c = cost_setup(ledger, clock)
    beat(ledger, clock, c, units_done=2, units_total=4, tokens=10_000)
    assert not sigs(ledger, kind="cost_density")  # 5× the norm: not above it
    beat(ledger, clock, c, units_done=2, units_total=4, tokens=200)
    (s,) = sigs(ledger, kind="cost_density")
    assert s.severity == "warn" and s.evidence == "10,200 tokens for 2 units: 5.1× the task's norm (1,000 tokens/unit)"


def test_cost_density_needs_a_minimum_spend(ledger, clock):
    c = cost_setup(ledger, clock)
    beat(ledger, clock, c, units_done=0, units_total=4, tokens=4_999)  # 5× the norm per unit, but a small spend
    assert not sigs(ledger, kind="cost_density")
    beat(ledger, clock, c, units_done=0, units_total=4, tokens=2)
    assert sigs(ledger, kind="cost_density")


# ---------------------------------------------------------------------- task level
@pytest.mark.parametrize("spent,kind,severity", [(699, None, None), (700, "budget_soft", "info"),
                                                  (1000, "budget_hard", "warn"), (1200, "budget_stop", "alarm")])
def test_budget_gates(ledger, clock, spent, kind, severity):
    ledger.create_task("t", budget=Budget(tokens=1000))
    ledger.add_node("t", "a")
    c = ledger.claim("t", "w1", lease_s=60)
    clock.advance(1)
    ledger.heartbeat(c, tokens=spent)
    got = [s for s in sigs(ledger) if s.kind.startswith("budget_")]
    if kind is None:
        assert got == []
    else:
        (s,) = got
        assert (s.kind, s.severity, s.node) == (kind, severity, None)
        assert s.evidence.startswith(f"tokens {spent:,} of 1,000")


def test_budget_by_wall_clock_says_when_it_crossed(ledger, clock):
    ledger.create_task("t", budget=Budget(wall_s=100))
    ledger.add_node("t", "a")
    c = ledger.claim("t", "w1", lease_s=600)
    start = clock()
    clock.advance(80)
    ledger.heartbeat(c)
    (s,) = [s for s in sigs(ledger) if s.kind.startswith("budget_")]
    assert s.kind == "budget_soft" and s.since == pytest.approx(start + 70)


def test_handoff_waiting_with_its_age(ledger, clock, running):
    ask(ledger, running, kind="confirm", question="Open the PR?", options=[{"id": "yes"}, {"id": "no"}])
    clock.advance(600)
    (s,) = sigs(ledger, kind="handoff_waiting")
    assert (s.node, s.severity) == ("a", "info") and s.evidence.startswith("confirm handoff 1 open for 10m: Open the PR?")
    clock.advance(3001)
    (s,) = sigs(ledger, kind="handoff_waiting")
    assert s.severity == "warn"


def test_human_blocked_node_raises_no_stall_signal(ledger, clock, running):
    for _ in range(6):  # the first "same" is new; the next five add nothing
        beat(ledger, clock, running, "same")
    assert sigs(ledger, kind="no_new_info")
    ask(ledger, running, kind="direction", question="Which module first?")
    clock.advance(10_000)  # a long wait: no heartbeat, no progress, past every limit
    assert kinds(ledger) == ["handoff_waiting"]


def test_park_suppresses_stall_signals_and_resume_restores_them(ledger, clock, running):
    for _ in range(6):  # the first "same" is new; the next five add nothing
        beat(ledger, clock, running, "same")
    before = kinds(ledger)
    assert before == ["no_new_info", "repeating"]
    ledger.apply(ledger.plan_park("t", reason="waiting for CI", until="1h"), operator="op")
    assert kinds(ledger) == []
    clock.advance(120)  # lease expired while parked: still nothing
    assert kinds(ledger) == []
    clock.advance(3600)
    (s,) = sigs(ledger)
    assert (s.kind, s.node, s.severity) == ("park_expired", None, "warn")
    node = ledger.node("t", "a")
    left = node.lease_until - node.heartbeat_at  # the whole lease was left at the park (it beat just before)
    ledger.apply(ledger.plan_resume("t"), operator="op")
    assert set(kinds(ledger)) == {"no_new_info", "repeating"}  # the lease's clock stood still while parked
    clock.advance(left + 0.5)
    assert set(kinds(ledger)) >= {"no_new_info", "repeating", "orphaned"}


def test_parked_node_past_its_until(ledger, clock, running):
    ledger.apply(ledger.plan_park("t", node="b", reason="wait for the vendor", until="10m"), operator="op")
    clock.advance(599)
    assert not sigs(ledger, kind="park_expired")
    clock.advance(1)
    (s,) = sigs(ledger, kind="park_expired")
    assert s.node == "b" and s.evidence.startswith("node parked past its until")


# ---------------------------------------------------------------------- readers and shapes
def test_status_path_matches_graph_path(ledger, clock, running):
    for _ in range(6):
        beat(ledger, clock, running, "same", units_done=1, units_total=3)
    one = S.signals_for_task(ledger, ledger.task("t"))
    assert one == S.signals_for_graph(ledger, ledger.graph("t")) and one


def test_signal_json_shape(ledger, clock, running):
    for _ in range(6):  # the first "same" is new; the next five add nothing
        beat(ledger, clock, running, "same")
    js = [signal_json(s) for s in sigs(ledger)]
    assert js[0] == {"kind": "no_new_info", "task_id": "t", "node": "a", "since": "2027-01-15T08:00:20.000Z",
                     "severity": "alarm", "evidence": "last 5 observations added 0 new lines"}


def test_observation_reads_are_bounded_per_node(ledger, clock, running):
    for i in range(40):
        beat(ledger, clock, running, f"line {i}", step=1)
    node_id = ledger.node("t", "a").id
    got = S.read_observations(ledger, [node_id], 10)[node_id]
    assert len(got) == 10 and got[0].at == clock() - 9 and got[-1].at == clock()


def test_task_analysis_signals_match_the_one_shot_path(ledger, clock, running):
    an = TaskAnalysis(ledger, "t")
    cursor = ledger.last_event_id()
    for i in range(7):
        beat(ledger, clock, running, "same" if i else "first", units_done=1, units_total=4)
    for ev in ledger.events(cursor, task_id="t"):  # heartbeats: the payload is enough, no re-read
        an.apply_event(ev, ledger.nodes("t", [ev.node]) if ev.node and ev.kind != "node.heartbeat" else [])
    assert an.nodes["a"] == ledger.node("t", "a")
    clock.advance(25)
    assert an.signals() == S.signals_for_graph(ledger, ledger.graph("t"))
    assert {s.kind for s in an.signals()} == {"no_new_info", "repeating"}


def test_units_are_counted_in_words():
    """"12,000 tokens for 1 unit", not "1 units": a count is said in words that agree with it."""
    from store.reading.signals import _plural

    assert [_plural(v, "unit") for v in (0, 1, 1.0, 2, 0.5, None)] == ["units", "unit", "unit", "units", "units",
                                                                          "units"]

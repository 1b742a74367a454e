"""Waiting is not work: the budget wall clock stands still while a task is parked, and while a node
waits (blocked on a human, or parked on its own) with nothing of its task running.

Exercised through the public API on a manual clock: a short task parked long (10 s of work, 150 s
parked, ``wall_s=100`` → used 10, gate ok, claimable after resume) in many sizes, the same for a
human handoff, the clock running while another node runs, finished and reopened tasks, and a
Hypothesis state machine that checks ``wall_used_s`` against a reference model after every step
of random agent and operator moves. The race between a claim and a write that would stop the
clock is in test_waiting_races.py.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from store import Budget, LeaseLost, Ledger, ManualClock, NodeSpec, Refused, StaleRevision
from store.judges.budget import clock_stopped
from store.judges.budget import gate as budget_gate
from store.reading.cli_json import status_json
from tests.support.asks import ask

LONG = 10**7  # leases that never expire in these tests


def _park(ledger: Ledger, task: str, **kw) -> None:
    ledger.apply(ledger.plan_park(task, reason="wait for the data", **kw), operator="op")


def _resume(ledger: Ledger, task: str, **kw) -> None:
    ledger.apply(ledger.plan_resume(task, **kw), operator="op")


@pytest.mark.parametrize("work,parked,cap", [(10, 150, 100), (1, 10_000, 5), (30, 31, 60), (0.5, 86_400, 1),
                                             (99, 3600, 100)])
@pytest.mark.parametrize("now", [False, True], ids=["park", "park-now"])
def test_parked_time_is_not_work(ledger, clock, work, parked, cap, now):
    ledger.create_task("t", budget=Budget(wall_s=cap))
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(work)
    if now:  # the step is stopped by the park: its time up to the park was work
        _park(ledger, "t", now=True)
    else:
        ledger.commit(c, output={})
        _park(ledger, "t")
    clock.advance(parked)
    t = ledger.task("t")
    assert t.wall_used_s == pytest.approx(work) and t.waited_s == pytest.approx(parked)
    assert t.paused_for == "parked" and t.paused_since == pytest.approx(clock.now - parked)
    budget = status_json(ledger)["tasks"][0]["budget"]
    gate = budget_gate(work / cap)  # the work alone: 160 s of "wall" used would have been `stop`
    assert budget["wall_used_s"] == pytest.approx(work) and budget["gate"] == gate
    assert budget["paused_for"] == "parked" and budget["paused_since"] is not None
    _resume(ledger, "t")
    assert ledger.task("t").paused_since is None and ledger.task("t").paused_for is None
    c = ledger.claim("t", "w", lease_s=LONG)
    assert c is not None and c.node_key == ("a" if now else "b")
    assert c.admission == ("admit" if gate == "ok" else "admit_degraded")
    clock.advance(5)  # the clock runs again
    assert ledger.task("t").wall_used_s == pytest.approx(work + 5)


def test_the_issue_example_before_would_have_denied(ledger, clock):
    """10 s of work, 150 s parked, wall_s=100: before, wall used was 160 and the gate deny_hard."""
    ledger.create_task("t", budget=Budget(wall_s=100))
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(10)
    ledger.commit(c, output={})
    _park(ledger, "t")
    clock.advance(150)
    _resume(ledger, "t")
    assert ledger.admit("t", "b") == "admit"
    assert ledger.task("t").wall_used_s == pytest.approx(10.0)
    assert ledger.claim("t", "w") is not None


@pytest.mark.parametrize("wait", [1, 150, 7200, 3 * 86_400])
def test_waiting_on_a_human_is_not_work(ledger, clock, wait):
    ledger.create_task("t", budget=Budget(wall_s=100))
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(10)
    hid = ask(ledger, c, kind="confirm", question="go?", options=[{"id": "yes"}])
    clock.advance(wait)
    t = ledger.task("t")
    assert t.wall_used_s == pytest.approx(10) and t.paused_for == "handoff"
    assert status_json(ledger)["tasks"][0]["budget"]["gate"] == "ok"
    ledger.apply(ledger.plan_resolve(hid, option="yes"), operator="op")
    assert ledger.task("t").paused_since is None  # resolved: pending work, the clock runs
    clock.advance(2)  # nobody claims for 2 s: that counts (it is not waiting on the outside world)
    c = ledger.claim("t", "w", lease_s=LONG)
    assert c.node_key == "a"
    clock.advance(3)
    assert ledger.task("t").wall_used_s == pytest.approx(15)


def test_the_clock_runs_while_another_node_of_the_task_runs(ledger, clock):
    ledger.create_task("t", budget=Budget(wall_s=1000))
    ledger.add_nodes("t", [NodeSpec("a", "a"), NodeSpec("b", "b"), NodeSpec("c", "c")])
    a = ledger.claim("t", "w1", lease_s=LONG, kinds=["a"])
    b = ledger.claim("t", "w2", lease_s=LONG, kinds=["b"])
    clock.advance(5)
    ask(ledger, a, kind="confirm", question="go?")
    assert ledger.task("t").paused_since is None  # b still runs
    clock.advance(150)
    assert ledger.task("t").wall_used_s == pytest.approx(155)
    ledger.commit(b, output={})  # now nothing runs and a waits on a human: the clock stops
    assert ledger.task("t").paused_for == "handoff"
    clock.advance(500)
    assert ledger.task("t").wall_used_s == pytest.approx(155)
    c = ledger.claim("t", "w3", lease_s=LONG, kinds=["c"])  # work again: it runs
    assert ledger.task("t").paused_since is None
    clock.advance(7)
    assert ledger.task("t").wall_used_s == pytest.approx(162)
    ledger.fail(c, error="boom", retryable=True, retry_after_s=1)  # c pending again, a waiting: stopped
    assert ledger.task("t").paused_for == "handoff"


def test_a_node_parked_on_its_own_is_waiting_too(ledger, clock):
    ledger.create_task("t", budget=Budget(wall_s=1000))
    ledger.add_nodes("t", [NodeSpec("a", "a"), NodeSpec("b", "b")])
    a = ledger.claim("t", "w", lease_s=LONG, kinds=["a"])
    clock.advance(4)
    ledger.apply(ledger.plan_park("t", node="b", reason="needs the key"), operator="op")
    assert ledger.task("t").paused_since is None  # a runs
    ledger.commit(a, output={})
    assert ledger.task("t").paused_for == "parked node"
    clock.advance(1000)
    assert ledger.task("t").wall_used_s == pytest.approx(4)
    _resume(ledger, "t", node="b")
    assert ledger.task("t").paused_since is None


def test_an_idle_task_with_nothing_waiting_keeps_its_clock(ledger, clock):
    """Ready work nobody claims is not waiting on the outside world: the clock runs."""
    ledger.create_task("t", budget=Budget(wall_s=1000))
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b")])
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(2)
    ledger.commit(c, output={})
    clock.advance(100)
    assert ledger.task("t").wall_used_s == pytest.approx(102) and ledger.task("t").paused_since is None


def test_a_finished_task_stops_and_a_reopened_one_does_not_count_the_gap(ledger, clock):
    ledger.create_task("t", budget=Budget(wall_s=1000))
    ledger.add_node("t", "a")
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(10)
    ledger.commit(c, output={})
    assert ledger.task("t").status == "completed"
    clock.advance(5000)
    assert ledger.task("t").wall_used_s == pytest.approx(10)
    ledger.apply(ledger.plan_rewind("t", "a", reason="again"), operator="op")  # reopens
    clock.advance(3)
    assert ledger.task("t").wall_used_s == pytest.approx(13)
    ledger.add_node("t", "b")
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(1)
    ledger.commit(c, output={})
    c = ledger.claim("t", "w", lease_s=LONG)
    ledger.commit(c, output={})
    clock.advance(100)
    assert ledger.task("t").status == "completed" and ledger.task("t").wall_used_s == pytest.approx(14)
    ledger.add_node("t", "c")  # reopened by new work: the time it sat completed is not counted
    clock.advance(2)
    assert ledger.task("t").wall_used_s == pytest.approx(16)


def test_aborted_tasks_stop_their_clock(ledger, clock):
    ledger.create_task("t", budget=Budget(wall_s=1000))
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b")])
    ledger.claim("t", "w", lease_s=LONG)
    clock.advance(8)
    ledger.apply(ledger.plan_abort("t", reason="stop"), operator="op")
    clock.advance(999)
    assert ledger.task("t").wall_used_s == pytest.approx(8)


def test_a_park_before_any_claim_does_not_count_later(ledger, clock):
    ledger.create_task("t", budget=Budget(wall_s=100))
    ledger.add_node("t", "a")
    _park(ledger, "t")
    clock.advance(500)
    _resume(ledger, "t")
    clock.advance(7)
    c = ledger.claim("t", "w", lease_s=LONG)  # the clock starts at the first claim
    clock.advance(3)
    ledger.commit(c, output={})
    assert ledger.task("t").wall_used_s == pytest.approx(3)


def test_the_heartbeat_gate_follows_the_paused_clock(ledger, clock):
    """An in-flight step of a task parked without --now: its heartbeat's gate uses the stopped clock."""
    ledger.create_task("t", budget=Budget(wall_s=100))
    ledger.add_node("t", "a")
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(60)
    _park(ledger, "t")
    clock.advance(10_000)
    pulse = ledger.heartbeat(c)
    assert pulse.parked and pulse.gate == "ok"


def test_the_budget_signal_since_accounts_for_stops(ledger, clock):
    ledger.create_task("t", budget=Budget(wall_s=100))
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b")])
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(50)
    ledger.commit(c, output={})
    _park(ledger, "t")
    clock.advance(1000)
    _resume(ledger, "t")
    c = ledger.claim("t", "w", lease_s=LONG)
    clock.advance(30)  # 80 s used: soft from 70 s, i.e. 10 s ago
    sig = [s for s in status_json(ledger)["tasks"][0]["signals"] if s["kind"] == "budget_soft"]
    assert len(sig) == 1
    from store.clock import iso
    assert sig[0]["since"] == iso(clock.now - 10)


_SIZES: dict[str, int] = {}


# ---------------------------------------------------------------------- a reference model
KEYS = ["a", "b", "c", "d", "e"]
SPECS = [NodeSpec("a", "a"), NodeSpec("b", "b", ("a",)), NodeSpec("c", "c"), NodeSpec("d", "d", ("c",)),
         NodeSpec("e", "e")]
_SHARED: dict = {}


def _shared() -> tuple[Ledger, ManualClock]:
    if not _SHARED:
        import atexit

        d = tempfile.mkdtemp(prefix="warden-clock-")
        clock = ManualClock(1_800_000_000.0)
        led = Ledger.open(f"{d}/ledger.db", clock=clock)
        led.db.execute_sql("PRAGMA synchronous=OFF")
        _SHARED.update(led=led, clock=clock, n=0)
        atexit.register(lambda: (led.close(), shutil.rmtree(d, ignore_errors=True)))
    _SHARED["n"] += 1
    return _SHARED["led"], _SHARED["clock"]


class ClockMachine(RuleBasedStateMachine):
    """Random agent and operator moves; after each, wall_used_s equals the reference integral of
    the time the clock should have run (started, not parked/finished, not (idle and waiting))."""

    def __init__(self) -> None:
        super().__init__()
        self.led, self.clock = _shared()
        self.t = f"t{_SHARED['n']}"
        self.led.create_task(self.t, budget=Budget(wall_s=10**9), max_claims=50)
        self.led.add_nodes(self.t, SPECS)
        self.claims: dict[str, object] = {}
        self.expected = 0.0
        self.started = False

    def _stopped(self) -> bool:
        g = self.led.graph(self.t)
        statuses = [n.status for n in g.nodes]
        return clock_stopped(g.task.status, "running" in statuses, "blocked" in statuses or "parked" in statuses)

    @rule(dt=st.sampled_from([0.5, 1, 7, 60, 3600]))
    def advance(self, dt):
        if self.started and not self._stopped():
            self.expected += dt
        self.clock.advance(dt)

    @rule(kind=st.sampled_from(KEYS))
    def claim(self, kind):
        c = self.led.claim(self.t, "w", lease_s=10**7, kinds=[kind])
        if c is not None:
            self.claims[c.node_key] = c
            self.started = True

    @precondition(lambda self: self.claims)
    @rule(data=st.data(), how=st.sampled_from(["commit", "fail", "human"]))
    def finish(self, data, how):
        key = data.draw(st.sampled_from(sorted(self.claims)))
        c = self.claims.pop(key)
        try:
            if how == "commit":
                self.led.commit(c, output={})
            elif how == "fail":
                self.led.fail(c, error="x", retryable=True, retry_after_s=0)
            else:
                ask(self.led, c, kind="confirm", question="?", options=[{"id": "y"}])
        except LeaseLost:
            pass

    @rule(now=st.booleans(), node=st.sampled_from([None, *KEYS]))
    def park(self, now, node):
        try:
            self.led.apply(self.led.plan_park(self.t, reason="r", node=node, now=now), operator="op")
        except (Refused, StaleRevision):
            pass

    @rule(node=st.sampled_from([None, *KEYS]))
    def resume(self, node):
        try:
            self.led.apply(self.led.plan_resume(self.t, node=node), operator="op")
        except (Refused, StaleRevision):
            pass

    @rule()
    def resolve(self):
        for h in self.led.handoffs(task_id=self.t):
            try:
                self.led.apply(self.led.plan_resolve(h.id, option="y"), operator="op")
            except (Refused, StaleRevision):
                pass
            return

    @rule(key=st.sampled_from(KEYS))
    def rewind(self, key):
        try:
            self.led.apply(self.led.plan_rewind(self.t, key, reason="again"), operator="op")
        except (Refused, StaleRevision):
            pass

    @invariant()
    def wall_used_matches_the_model(self):
        t = self.led.task(self.t)
        assert t.wall_used_s == pytest.approx(self.expected, abs=1e-6), (t, self.expected)
        # the stored stop agrees with what the task waits on (for a started task)
        if self.started:
            assert (t.paused_since is not None) == self._stopped()


ClockMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
test_the_clock_follows_the_reference_model = ClockMachine.TestCase


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(work=st.floats(0.1, 1000), wait=st.floats(0.1, 10**6), cap=st.floats(1, 10**4))
def test_wall_used_is_work_only_for_any_sizes(ledger, clock, work, wait, cap):
    led = ledger
    _SIZES["n"] = _SIZES.get("n", 0) + 1
    tid = f"t{_SIZES['n']}"
    led.create_task(tid, budget=Budget(wall_s=cap))
    led.add_nodes(tid, [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    c = led.claim(tid, "w", lease_s=LONG)
    clock.advance(work)
    ask(led, c, kind="direction", question="which way?")
    clock.advance(wait)
    t = led.task(tid)
    assert t.wall_used_s == pytest.approx(work) and t.waited_s == pytest.approx(wait)

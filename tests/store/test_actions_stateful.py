"""A Hypothesis state machine: agents (claim, heartbeat, commit, fail, request_human), operators
(park, resume, narrow, rewind, abort, resolve — applied at once or later, possibly stale) and the
clock, on one small graph with a diamond and preconditions.

Invariants after every step: no running node without a lease; nothing claimable in a parked or
aborted task; abandoned nodes are never claimed (and stay abandoned); every applied action has its
Action row and its operator event; the task revision only grows; an applied plan changed node
statuses exactly as it said (as applied: planned again when the ledger moved since its preview,
and then saying what differed).
"""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from store import LeaseLost, Ledger, ManualClock, NodeSpec, Refused, StaleRevision
from store.actions import Plan
from tests.support.asks import ask

KEYS = ["a", "b", "c", "d", "e", "f", "g", "h"]
SPECS = [
    NodeSpec("a", "a"),
    NodeSpec("b", "b", ("a",)),
    NodeSpec("c", "c", ("a",), preconditions={"lang": "py"}),
    NodeSpec("d", "d", ("b", "c")),
    NodeSpec("e", "e", ("d",)),
    NodeSpec("f", "f", ("a",), preconditions={"scope": "x"}),
    NodeSpec("g", "g", preconditions={"scope": ["x", "y"]}),
    NodeSpec("h", "h", ("e", "f")),
]


_SHARED: dict = {}


def _shared_ledger() -> tuple[Ledger, ManualClock]:
    """One throw-away ledger for every example (a new task each): creating a schema per example
    would cost more than the example. Removed at exit."""
    if not _SHARED:
        import atexit

        d = tempfile.mkdtemp(prefix="warden-stateful-")
        clock = ManualClock(1_800_000_000.0)
        led = Ledger.open(f"{d}/ledger.db", clock=clock)
        led.db.execute_sql("PRAGMA synchronous=OFF")  # durability is not what this tests
        _SHARED.update(led=led, clock=clock, dir=d, n=0)
        atexit.register(lambda: (led.close(), shutil.rmtree(d, ignore_errors=True)))
    _SHARED["n"] += 1
    return _SHARED["led"], _SHARED["clock"]


class ActionsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.led, self.clock = _shared_ledger()
        self.t = f"t{_SHARED['n']}"
        self.led.create_task(self.t, preconditions={"scope": "x", "lang": "py"}, max_claims=4)
        self.led.add_nodes(self.t, SPECS)
        self.claims: list = []
        self.pending: list[Plan] = []
        self.applied: set[int] = set()
        self.abandoned: set[str] = set()
        self.revision = self.led.task(self.t).revision
        self.cursor = self.led.last_event_id()
        self.events_seen: set = set()

    # ------------------------------------------------------------------ helpers
    def statuses(self) -> dict[str, str]:
        return {n.key: n.status for n in self.led.graph(self.t).nodes}

    def _claim_at(self, i: int):
        return self.claims[i % len(self.claims)]

    def _agent(self, i: int, fn) -> None:
        c = self._claim_at(i)
        try:
            fn(c)
        except LeaseLost:
            self.claims.remove(c)
            return
        except Refused:
            return

    def apply(self, plan: Plan) -> None:
        before = self.statuses()
        rev = self.led.task(self.t).revision
        try:
            done = self.led.apply(plan, operator="op")
        except StaleRevision:
            assert self.statuses() == before
            assert self.led.task(self.t).revision == rev
            assert self.led.actions(self.t, limit=1)[0].result == "refused"
            return
        except Refused as e:  # only a stale resolve or an aborted task may refuse here
            raise AssertionError(f"unexpected refusal at apply: {e}") from None
        self.applied.add(done.action_id)
        after = self.statuses()
        # the plan as applied (planned again when the ledger moved since the preview) is what the ledger holds
        assert {k: (before[k], after[k]) for k in before if before[k] != after[k]} == {
            k: (a, b) for k, (a, b) in done.changes.items() if a != b}
        assert all(before[k] == a for k, (a, _) in done.changes.items())
        if done.changes != plan.changes:
            assert done.differed, (plan.changes, done.changes)

    def plan(self, make, later: bool) -> None:
        try:
            p = make()
        except Refused:
            return
        if later:
            self.pending.append(p)
        else:
            self.apply(p)

    # ------------------------------------------------------------------ agents
    @rule(worker=st.sampled_from(["w1", "w2", "w3"]))
    def claim(self, worker):
        before = self.statuses()
        task = self.led.task(self.t)
        c = self.led.claim(self.t, worker, lease_s=30)
        if c is None:
            return
        assert task.status == "active"
        assert before[c.node_key] in ("pending", "running"), (c.node_key, before[c.node_key])
        assert c.node_key not in self.abandoned
        self.claims = [x for x in self.claims if x.node_key != c.node_key]  # a reclaimed lease
        self.claims.append(c)

    @precondition(lambda self: self.claims)
    @rule(i=st.integers(0, 9))
    def heartbeat(self, i):
        self._agent(i, lambda c: self.led.heartbeat(c, units_done=1, observation="x"))

    @precondition(lambda self: self.claims)
    @rule(i=st.integers(0, 9))
    def commit(self, i):
        def go(c):
            self.led.commit(c, output={"k": c.node_key})
            self.claims.remove(c)
        self._agent(i, go)

    @precondition(lambda self: self.claims)
    @rule(i=st.integers(0, 9), retryable=st.booleans())
    def fail(self, i, retryable):
        def go(c):
            self.led.fail(c, error="boom", retryable=retryable, retry_after_s=5)
            self.claims.remove(c)
        self._agent(i, go)

    @precondition(lambda self: self.claims)
    @rule(i=st.integers(0, 9))
    def request_human(self, i):
        def go(c):
            ask(self.led, c, kind="confirm", question="ok?", options=[{"id": "yes"}, {"id": "no"}])
            self.claims.remove(c)
        self._agent(i, go)

    # ------------------------------------------------------------------ clock
    @rule(s=st.sampled_from([1, 10, 31, 120]))
    def advance(self, s):
        self.clock.advance(s)

    # ------------------------------------------------------------------ operators
    @rule(node=st.sampled_from([None, *KEYS]), now=st.booleans(), later=st.booleans())
    def park(self, node, now, later):
        self.plan(lambda: self.led.plan_park(self.t, node=node, reason="hold", now=now), later)

    @rule(node=st.sampled_from([None, *KEYS]), later=st.booleans())
    def resume(self, node, later):
        self.plan(lambda: self.led.plan_resume(self.t, node=node), later)

    @rule(value=st.sampled_from(["x", "y", "z", ["x", "y"]]), later=st.booleans())
    def narrow_scope(self, value, later):
        self.plan(lambda: self.led.plan_narrow(self.t, set={"scope": value}, reason="scope"), later)

    @rule(key=st.sampled_from(KEYS), later=st.booleans())
    def narrow_exclude(self, key, later):
        self.plan(lambda: self.led.plan_narrow(self.t, exclude=[key], reason="exclude"), later)

    @rule(key=st.sampled_from(KEYS), later=st.booleans())
    def rewind(self, key, later):
        self.plan(lambda: self.led.plan_rewind(self.t, key, reason=f"redo {key}"), later)

    @precondition(lambda self: len(self.applied) >= 3)  # let the graph move before it ends
    @rule(later=st.booleans())
    def abort(self, later):
        self.plan(lambda: self.led.plan_abort(self.t, reason="stop"), later)

    @rule(option=st.sampled_from(["yes", "no", "maybe"]), later=st.booleans())
    def resolve(self, option, later):
        hs = self.led.handoffs(task_id=self.t)
        if not hs:
            return
        self.plan(lambda: self.led.plan_resolve(hs[0].id, option=option), later)

    @precondition(lambda self: self.pending)
    @rule()
    def apply_later(self):
        self.apply(self.pending.pop(0))

    # ------------------------------------------------------------------ invariants
    @invariant()
    def invariants(self):
        # one read of each table per step: this runs after every step of every example
        task = self.led.task(self.t)
        nodes = self.led.graph(self.t).nodes
        # no running node without a lease
        for n in nodes:
            if n.status == "running":
                assert n.lease_owner is not None and n.lease_until is not None, n.key
        # nothing claimable in a parked or aborted task
        if task.status in ("parked", "aborted"):
            assert self.led.claim(self.t, "probe", lease_s=30) is None
        # abandoned stays abandoned (and claim() checked it is never claimed)
        abandoned = {n.key for n in nodes if n.status == "abandoned"}
        assert self.abandoned <= abandoned
        self.abandoned = abandoned
        # every applied action has its Action row and its operator event
        rows = self.led.actions(self.t, limit=10_000)
        assert {a.id for a in rows if a.result == "applied"} == self.applied
        for e in self.led.events(self.cursor, task_id=self.t, limit=100_000):
            self.cursor = e.id
            if e.layer == "operator":
                self.events_seen.add(e.payload.get("action_id"))
        assert self.applied <= self.events_seen
        # the task revision only grows
        assert task.revision >= self.revision
        self.revision = task.revision


ActionsMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestActionsStateful = ActionsMachine.TestCase

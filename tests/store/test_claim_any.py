"""A claim of any task (``claim(None)``) in a fleet of hundreds of active tasks: it finds
the tasks with something to claim in one statement instead of looking at every active task in
turn (490 tasks with nothing ready: 1.6-2.8 s on PostgreSQL, SQLite's write lock held 120-200 ms),
and still takes the oldest task's work first — an expired lease, a ready node, a retry whose time
has come — of the kinds and workflow version asked for."""

from __future__ import annotations

import pytest

from store import Budget, Ledger, ManualClock, NodeSpec

T0 = 1_800_000_000.0


def chain(led: Ledger, tid: str, n: int = 3, **kw) -> None:
    led.create_task(tid, **kw)
    led.add_nodes(tid, [NodeSpec(key=f"s{i}", deps=(f"s{i - 1}",) if i else ()) for i in range(n)])


def statements(led: Ledger, fn):
    """(fn's result, how many SQL statements it sent) — on SQLite, from the connection's trace."""
    seen: list[str] = []
    con = led.db.connection()
    con.set_trace_callback(seen.append)
    try:
        return fn(), len(seen)
    finally:
        con.set_trace_callback(None)


def test_a_claim_of_any_task_does_not_look_at_every_busy_task(tmp_path):
    with Ledger.open(str(tmp_path / "l.db"), clock=ManualClock(T0)) as led:
        for i in range(300):
            chain(led, f"t{i:03d}")
        for i in range(295):  # the oldest 295: their one ready node is running, nothing else is ready
            assert led.claim(f"t{i:03d}", "busy", lease_s=3600) is not None
        c, n = statements(led, lambda: led.claim(None, "w", lease_s=60))
        assert (c.task_id, c.node_key) == ("t295", "s0")
        assert n < 40, n  # one statement finds the candidates (it was three or more per busy task: 900+)


def test_the_oldest_claimable_work_comes_first(ledger, clock):
    chain(ledger, "c", budget=Budget(tokens=10))  # made first, but a little later by the clock below
    clock.advance(-2)
    chain(ledger, "a")
    clock.advance(1)
    chain(ledger, "b")
    clock.advance(1)
    first = ledger.claim(None, "w1", lease_s=10)
    assert (first.task_id, first.node_key) == ("a", "s0")
    nxt = ledger.claim(None, "w2", lease_s=10)
    assert (nxt.task_id, nxt.node_key) == ("b", "s0")  # a has nothing ready now: s1 waits for s0
    clock.advance(11)  # both leases expire: a's is the oldest task's, reclaimed first
    again = ledger.claim(None, "w3", lease_s=10)
    assert (again.task_id, again.node_key, again.attempt) == ("a", "s0", 2)
    ledger.commit(again)
    assert (ledger.claim(None, "w4", lease_s=60).task_id, ledger.claim(None, "w5", lease_s=60).task_id) == ("a", "b")
    c = ledger.claim(None, "w6", lease_s=60)
    assert c.task_id == "c"
    ledger.fail(c, error="flaky", retryable=True, retry_after_s=30)
    assert ledger.claim(None, "w7") is None  # c's node waits for its retry time; nothing else is ready
    clock.advance(31)
    assert ledger.claim(None, "w7").task_id == "c"


def test_kinds_and_workflow_version_narrow_the_candidates(ledger):
    ledger.create_task("old", workflow_version="1")
    ledger.add_nodes("old", [NodeSpec(key="x", kind="tool")])
    ledger.create_task("new", workflow_version="2")
    ledger.add_nodes("new", [NodeSpec(key="y", kind="tool"), NodeSpec(key="z", kind="llm_call")])
    # a worker naming no version knows none: it takes no versioned task
    assert ledger.claim(None, "w", kinds=["llm_call"]) is None
    c = ledger.claim(None, "w", kinds=["llm_call"], workflow_version="2")
    assert (c.task_id, c.node_key) == ("new", "z")
    assert ledger.claim(None, "w", kinds=["llm_call"], workflow_version="2") is None
    c = ledger.claim(None, "w", workflow_version="2")
    assert (c.task_id, c.node_key) == ("new", "y")
    c = ledger.claim(None, "w", workflow_version="1")
    assert (c.task_id, c.node_key) == ("old", "x")


@pytest.mark.parametrize("status", ["parked", "completed"])
def test_tasks_that_are_not_active_are_not_candidates(ledger, status):
    chain(ledger, "a")
    chain(ledger, "b")
    if status == "parked":
        ledger.apply(ledger.plan_park("a", reason="hold"), operator="op")
    else:
        for _ in range(3):
            ledger.commit(ledger.claim("a", "w"))
        assert ledger.task("a").status == "completed"
    assert ledger.claim(None, "w").task_id == "b"

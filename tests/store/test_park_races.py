"""A task park applies exactly its preview, raced by real processes on both backends.

Each round: the operator plans a park of a task whose node ``x`` is pending (with ``--now`` on
even rounds, without on odd ones); then, released together by a Barrier with random jitter, an
agent claims ``x`` and the operator applies the plan. The park applies every round, in one order
or the other: the claim first — ``x`` was claimed after the preview, so it is parked too (its lease
revoked, ``--now`` or not) and the result says so; the park first — the claim finds nothing. Never
a parked task with a node claimed after the preview still running under a live lease.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import traceback

import pytest

from store import Ledger, NodeSpec, StaleRevision
from tests.store.test_action_races import BARRIER_TIMEOUT, _collect, _jitter, _open, _prepare

ROUNDS = 160

pytestmark = pytest.mark.slow

CTX = mp.get_context("fork")


def _agent(path: str, rounds: int, seed: int, barrier, q) -> None:
    try:
        rng = random.Random(seed)
        led = _open(path)
        for i in range(rounds):
            barrier.wait()  # 1: the operator has its plan
            _jitter(rng)
            c = led.claim(f"p{i}", "agent", lease_s=3600, kinds=["x"])
            q.put(("agent", i, "claimed" if c is not None else "none", ""))
        led.close()
    except BaseException:
        q.put(("agent", -1, "crash", traceback.format_exc()))
        barrier.abort()


def _operator(path: str, rounds: int, seed: int, barrier, q) -> None:
    try:
        rng = random.Random(seed)
        led = _open(path)
        for i in range(rounds):
            plan = led.plan_park(f"p{i}", reason="hold", now=bool(i % 2 == 0))
            assert "x" in plan.versions and "y" in plan.versions and "done" not in plan.versions
            barrier.wait()  # 1
            _jitter(rng)
            try:
                done = led.apply(plan, operator="op")
                q.put(("op", i, "applied", done.differed.summary if done.differed else ""))
            except StaleRevision as e:
                q.put(("op", i, "stale", str(e)))
        led.close()
    except BaseException:
        q.put(("op", -1, "crash", traceback.format_exc()))
        barrier.abort()


def test_a_claim_after_the_preview_is_parked_too(new_target):
    path = new_target("park")
    _prepare(path, ROUNDS, "p", [NodeSpec("done", "done"), NodeSpec("x", "x"), NodeSpec("y", "y", ("x",))])
    with _open(path) as led:  # one finished node, so the plan's versions are "every unfinished node"
        for i in range(ROUNDS):
            c = led.claim(f"p{i}", "setup", kinds=["done"])
            led.commit(c, output={})
    barrier = CTX.Barrier(2, timeout=BARRIER_TIMEOUT)
    q = CTX.Queue()
    seed = random.randrange(1 << 30)
    procs = [CTX.Process(target=_agent, args=(path, ROUNDS, seed, barrier, q)),
             CTX.Process(target=_operator, args=(path, ROUNDS, seed + 1, barrier, q))]
    for p in procs:
        p.start()
    results = _collect(q, procs, 2 * ROUNDS)
    by = {(who, i): (r, msg) for who, i, r, msg in results}
    wins = {"agent": 0, "op": 0}
    with Ledger.open(path) as led:
        for i in range(ROUNDS):
            tid = f"p{i}"
            (a, _), (o, msg) = by[("agent", i)], by[("op", i)]
            assert o == "applied", (seed, i, a, o, msg)
            t = led.task(tid)
            x = led.node(tid, "x")
            [row] = led.actions(tid)
            assert t.status == "parked" and x.lease_owner is None and row.result == "applied"
            if a == "claimed":
                wins["agent"] += 1
                assert x.status == "parked" and msg == "1 node was claimed meanwhile and is parked too: x"
                assert row.plan["differed"]["summary"] == msg
            else:
                wins["op"] += 1
                assert x.status == "pending" and msg == ""
    print("wins", wins)
    assert wins["agent"] > 0 and wins["op"] > 0, (seed, wins)

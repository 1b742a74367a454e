"""Races on the budget clock, between real processes: a claim and an agent write that would stop
the clock ("nothing runs any more and a node waits on a human") at the same instant.

Each round has a task with ``h`` blocked on a human, ``a`` running (agent one) and ``b`` ready.
Agent one commits ``a`` while agent two claims ``b``, released together by a Barrier with random
jitter on each side. Whatever the order, ``b`` ends up running, so the clock must be running: a
commit that missed the concurrent claim (PostgreSQL: claims take only KEY SHARE on the task row)
would stop it for good. Both backends; many rounds.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import traceback

import pytest

from store import Ledger, NodeSpec
from store.storage.db import is_sqlite
from tests.store.test_action_races import BARRIER_TIMEOUT, _collect, _jitter
from tests.support.asks import ask

ROUNDS = 150
LONG = 10**7

pytestmark = pytest.mark.slow

CTX = mp.get_context("fork")


def _open(path: str) -> Ledger:
    led = Ledger.open(path)
    if is_sqlite(led.db):
        led.db.execute_sql("PRAGMA synchronous=NORMAL")
    return led


def _committer(path: str, claims, seed: int, barrier, q) -> None:
    try:
        rng = random.Random(seed)
        led = _open(path)
        for i, c in enumerate(claims):
            barrier.wait()
            _jitter(rng)
            led.commit(c, output={"round": i})
            q.put(("commit", i, "done", ""))
        led.close()
    except BaseException:
        q.put(("commit", -1, "crash", traceback.format_exc()))
        barrier.abort()


def _claimer(path: str, rounds: int, seed: int, barrier, q) -> None:
    try:
        rng = random.Random(seed)
        led = _open(path)
        for i in range(rounds):
            barrier.wait()
            _jitter(rng)
            c = led.claim(f"r{i}", "two", lease_s=LONG, kinds=["b"])
            q.put(("claim", i, "claimed" if c is not None else "none", ""))
        led.close()
    except BaseException:
        q.put(("claim", -1, "crash", traceback.format_exc()))
        barrier.abort()


def test_a_claim_and_a_write_that_would_stop_the_clock(new_target):
    path = new_target("clock")
    claims = []
    with _open(path) as led:
        for i in range(ROUNDS):
            tid = f"r{i}"
            led.create_task(tid)
            led.add_nodes(tid, [NodeSpec("h", "h"), NodeSpec("a", "a"), NodeSpec("b", "b")])
            h = led.claim(tid, "one", lease_s=LONG, kinds=["h"])
            ask(led, h, kind="confirm", question="go?")
            claims.append(led.claim(tid, "one", lease_s=LONG, kinds=["a"]))
    barrier = CTX.Barrier(2, timeout=BARRIER_TIMEOUT)
    q = CTX.Queue()
    seed = random.randrange(1 << 30)
    procs = [CTX.Process(target=_committer, args=(path, claims, seed, barrier, q)),
             CTX.Process(target=_claimer, args=(path, ROUNDS, seed + 1, barrier, q))]
    for p in procs:
        p.start()
    results = _collect(q, procs, 2 * ROUNDS)
    assert all(r[2] in ("done", "claimed") for r in results), results
    with Ledger.open(path) as led:
        stopped = []
        for i in range(ROUNDS):
            t = led.task(f"r{i}")
            assert t.counts == {"blocked": 1, "succeeded": 1, "running": 1}, t.counts
            if t.paused_since is not None:
                stopped.append(i)
        assert stopped == [], f"seed {seed}: the clock stopped while b ran in rounds {stopped[:10]}"

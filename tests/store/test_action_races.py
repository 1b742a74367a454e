"""Races between real processes: an agent commits while an operator applies a plan on the same node.

One long-lived agent process and one long-lived operator process play many rounds each,
synchronised per round on a multiprocessing Barrier (no sleeps): the agent claims a fresh node,
the operator plans while it runs, then both act at once (with random jitter on each side). One
order or the other, never a mix: the operator first — the agent's commit gets ``LeaseLost``; the
agent first — its commit stands and the operator's apply goes through it (the commit is the
agents' progress the preview's promise allows), saying that the node finished meanwhile, or is
refused saying why (a node park with nothing left to park). The journal and Action rows account
for every attempt, and the node ends as the winner's order says.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import traceback

import pytest

from store import LeaseLost, Ledger, NodeSpec, StaleRevision
from store.storage.db import is_sqlite
from tests.support.asks import ask

ROUNDS = 200
BARRIER_TIMEOUT = 60

pytestmark = pytest.mark.slow

CTX = mp.get_context("fork")


def _open(path: str) -> Ledger:
    """A ledger for race rounds. ``synchronous=NORMAL``: these tests are about who wins the write
    lock and the compare-and-set, not about fsync durability (tested elsewhere), and FULL would
    spend most of the run waiting for the disk."""
    led = Ledger.open(path)
    if is_sqlite(led.db):
        led.db.execute_sql("PRAGMA synchronous=NORMAL")
    return led


def _prepare(path: str, rounds: int, prefix: str, specs) -> None:
    with _open(path) as led:
        for i in range(rounds):
            led.create_task(f"{prefix}{i}")
            led.add_nodes(f"{prefix}{i}", specs)


def _jitter(rng: random.Random) -> None:
    # Random amounts of pure computation so either side may reach the write lock first (not a sleep,
    # and not synchronisation: the barrier synchronises, this only shuffles who wins).
    n = rng.choice((0, 0, 10, 100, 1000, 5000, 20000))
    x = 0
    for i in range(n):
        x ^= i
    return None


def _agent(path: str, rounds: int, seed: int, barrier, q) -> None:
    try:
        rng = random.Random(seed)
        led = _open(path)
        for i in range(rounds):
            tid = f"r{i}"
            c = led.claim(tid, "agent", lease_s=3600)
            assert c is not None and c.node_key == "x"
            barrier.wait()  # 1: claimed
            barrier.wait()  # 2: the operator has its plan
            _jitter(rng)
            try:
                for _ in range(rng.randrange(3)):
                    led.heartbeat(c, units_done=1)
                led.commit(c, output={"round": i})
                q.put(("agent", i, "committed", ""))
            except LeaseLost as e:
                q.put(("agent", i, "lost", str(e)))
        led.close()
    except BaseException:  # report, never hang the test
        q.put(("agent", -1, "crash", traceback.format_exc()))
        barrier.abort()


def _operator(path: str, rounds: int, seed: int, actions: tuple[str, ...], barrier, q, name: str = "op") -> None:
    try:
        rng = random.Random(seed)
        led = _open(path)
        for i in range(rounds):
            tid = f"r{i}"
            action = actions[i % len(actions)]
            barrier.wait()  # 1
            if action == "rewind":
                plan = led.plan_rewind(tid, "x", reason="wrong approach")
            elif action == "abort":
                plan = led.plan_abort(tid, reason="stop")
            elif action == "park_now":
                plan = led.plan_park(tid, reason="hold", now=True)
            elif action == "park_node_now":
                plan = led.plan_park(tid, node="x", reason="hold", now=True)
            else:
                raise AssertionError(action)
            assert [dict(r) for r in plan.revoked_leases] == [{"node": "x", "owner": "agent"}]
            barrier.wait()  # 2
            _jitter(rng)
            try:
                done = led.apply(plan, operator=name)
                q.put(("op", i, "applied", done.differed.summary if done.differed else ""))
            except StaleRevision as e:
                q.put(("op", i, "stale", str(e)))
        led.close()
    except BaseException:
        q.put(("op", -1, "crash", traceback.format_exc()))
        barrier.abort()


def _collect(q, procs, expected: int) -> list[tuple]:
    out = []
    while len(out) < expected:
        item = q.get(timeout=BARRIER_TIMEOUT * 2)
        assert item[2] != "crash", item[3]
        out.append(item)
    for p in procs:
        p.join(timeout=BARRIER_TIMEOUT)
        assert p.exitcode == 0
    return out


EXPECTED_STATUS = {"rewind": "pending", "abort": "abandoned", "park_now": "parked", "park_node_now": "parked"}
LOST_WHY = {"rewind": "revoked", "abort": "aborted", "park_now": "parked", "park_node_now": "parked"}
# The agent committed first: what the operator's apply does then (its note, or its refusal), and x after.
AFTER_COMMIT = {
    "rewind": ("applied", "1 node finished meanwhile and is reset too: x", "pending"),
    "abort": ("applied", "1 node finished meanwhile (left as it is): x", "succeeded"),
    "park_now": ("applied", "1 node finished meanwhile (left as it is): x", "succeeded"),
    "park_node_now": ("stale", "node x is succeeded: nothing to park", "succeeded"),
}


@pytest.mark.parametrize("actions", [("rewind",), ("abort",), ("park_now", "park_node_now")],
                         ids=["rewind", "abort", "park-now"])
def test_agent_commit_races_operator_action(new_target, actions):
    path = new_target("race")
    _prepare(path, ROUNDS, "r", [NodeSpec("x", "x"), NodeSpec("y", "y", ("x",))])
    barrier = CTX.Barrier(2, timeout=BARRIER_TIMEOUT)
    q = CTX.Queue()
    seed = random.randrange(1 << 30)
    procs = [CTX.Process(target=_agent, args=(path, ROUNDS, seed, barrier, q)),
             CTX.Process(target=_operator, args=(path, ROUNDS, seed + 1, actions, barrier, q))]
    for p in procs:
        p.start()
    results = _collect(q, procs, 2 * ROUNDS)
    agent = {i: (r, msg) for who, i, r, msg in results if who == "agent"}
    op = {i: (r, msg) for who, i, r, msg in results if who == "op"}
    wins = {"agent": 0, "op": 0}
    with Ledger.open(path) as led:
        acts = {}
        for a in led.actions(limit=10 * ROUNDS):
            acts.setdefault(a.task_id, []).append(a)
        events = {}
        since = 0
        while True:
            batch = led.events(since, limit=5000)
            if not batch:
                break
            for e in batch:
                events.setdefault(e.task_id, []).append(e)
            since = batch[-1].id
        for i in range(ROUNDS):
            tid = f"r{i}"
            action = actions[i % len(actions)]
            a_res, a_msg = agent[i]
            o_res, o_msg = op[i]
            kinds = [e.kind for e in events[tid]]
            committed = "node.committed" in kinds
            op_events = [e for e in events[tid] if e.layer == "operator"]
            [row] = acts[tid]  # exactly one Action row per attempt
            node = led.node(tid, "x")
            if a_res == "committed":  # the agent first: the apply went through the commit, or said why not
                wins["agent"] += 1
                result, said, status = AFTER_COMMIT[action]
                assert (o_res, node.status) == (result, status), (seed, i, action, op[i], node.status)
                assert said in o_msg, (action, o_msg)
                assert committed and row.result == ("applied" if result == "applied" else "refused")
                assert len(op_events) == (1 if result == "applied" else 0)
                if op_events:  # in that order in the journal
                    commit_id = next(e.id for e in events[tid] if e.kind == "node.committed")
                    assert commit_id < op_events[0].id
                    assert row.plan["differed"]["summary"] == said
            else:
                wins["op"] += 1
                assert o_res == "applied" and o_msg == "", (seed, i, op[i])
                assert a_res == "lost" and LOST_WHY[action] in a_msg, (action, a_msg)
                assert not committed and len(op_events) == 1
                assert op_events[0].payload["action_id"] == row.id and op_events[0].payload["nodes"][0] == "x"
                assert row.result == "applied" and row.operator == "op"
                assert node.status == EXPECTED_STATUS[action] and node.lease_owner is None
    # Both outcomes happen; a race that one side always wins tests nothing.
    print("wins", actions, wins)
    assert wins["agent"] > 0 and wins["op"] > 0, (seed, wins)


def _asker(path: str, rounds: int, barrier, q) -> None:
    try:
        led = _open(path)
        for i in range(rounds):
            tid = f"h{i}"
            c = led.claim(tid, "agent", lease_s=3600)
            hid = ask(led, c, kind="confirm", question="go?", options=[{"id": "yes"}, {"id": "no"}])
            q.put(("asker", i, "asked", hid))
            barrier.wait()  # 1: the handoff is open
            barrier.wait()  # 2: both operators have their plans
        led.close()
    except BaseException:
        q.put(("asker", -1, "crash", traceback.format_exc()))
        barrier.abort()


def _resolver(path: str, rounds: int, seed: int, name: str, option: str, barrier, q) -> None:
    try:
        rng = random.Random(seed)
        led = _open(path)
        for i in range(rounds):
            barrier.wait()  # 1
            [h] = led.handoffs(task_id=f"h{i}")
            plan = led.plan_resolve(h.id, option=option, answer=f"{name} says {option}")
            barrier.wait()  # 2
            _jitter(rng)
            try:
                led.apply(plan, operator=name)
                q.put((name, i, "applied", ""))
            except StaleRevision as e:
                q.put((name, i, "stale", str(e)))
        led.close()
    except BaseException:
        q.put((name, -1, "crash", traceback.format_exc()))
        barrier.abort()


def test_two_operators_resolve_the_same_handoff(new_target):
    rounds = 60
    path = new_target("resolve")
    _prepare(path, rounds, "h", [NodeSpec("x", "x")])
    barrier = CTX.Barrier(3, timeout=BARRIER_TIMEOUT)
    q = CTX.Queue()
    seed = random.randrange(1 << 30)
    procs = [CTX.Process(target=_asker, args=(path, rounds, barrier, q)),
             CTX.Process(target=_resolver, args=(path, rounds, seed, "alice", "yes", barrier, q)),
             CTX.Process(target=_resolver, args=(path, rounds, seed + 1, "bob", "no", barrier, q))]
    for p in procs:
        p.start()
    results = _collect(q, procs, 3 * rounds)
    by = {(who, i): (r, msg) for who, i, r, msg in results}
    winners = {"alice": 0, "bob": 0}
    with Ledger.open(path) as led:
        for i in range(rounds):
            a, b = by[("alice", i)], by[("bob", i)]
            assert [a[0], b[0]].count("applied") == 1, (seed, i, a, b)
            win, lose = ("alice", b) if a[0] == "applied" else ("bob", a)
            winners[win] += 1
            assert lose[1].startswith(f"handoff {by[('asker', i)][1]} was already resolved by {win} at ")
            h = led.handoff(by[("asker", i)][1])
            assert h.status == "resolved" and h.resolved_by == win
            assert h.resolution_option == ("yes" if win == "alice" else "no")
            rows = led.actions(f"h{i}")
            assert sorted(r.result for r in rows) == ["applied", "refused"]
            assert [r.operator for r in rows if r.result == "applied"] == [win]
            assert led.node(f"h{i}", "x").status == "pending"
            ops = [e for e in led.events(0, task_id=f"h{i}") if e.layer == "operator"]
            assert len(ops) == 1 and ops[0].actor == win
    print("winners", winners)
    assert winners["alice"] > 0 and winners["bob"] > 0, (seed, winners)

"""PostgreSQL-only guarantees, against a real server (WARDEN_TEST_PG_URL; skipped without one).

* claims of different nodes of one task proceed at the same time (no serialising on the task row),
  while an operator action waits for an open claim (the one lock order: task, then node);
* 8 processes claiming from a 2,000-node graph: no node claimed twice, no deadlock;
* the journal never shows a gap to a tailing reader, with concurrent writers holding their
  transactions open after inserting (ids are serialised by the advisory lock);
* the feed wakes on NOTIFY, and after ``pg_terminate_backend`` on its listener it reconnects and
  catches up from its cursor with no gap;
* bounded retry on deadlocks (a real one) and a clear line when exhausted;
* read-only holds on every connection, including after a reconnect.

Processes synchronise on multiprocessing barriers/events and on pg_stat_activity conditions,
never on sleeps.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import random
import threading
import time
import traceback
import uuid
from urllib.parse import urlparse, urlunparse

import peewee as pw
import pytest

from store import Ledger, NodeSpec, ReadOnly
from store.storage import checkpoints
from store.storage.db import run_write, write_tx
from store.storage.events import NodeNote
from store.errors import WriteConflict
from store.reading.feed import Feed
from tests.support.waiting import Deadline, stretch

pytestmark = [pytest.mark.postgres]

CTX = mp.get_context("fork")
WAIT = 60.0


def _wait_until(cond, what: str, timeout: float = WAIT) -> None:
    """Poll a condition (not a sleep used as synchronisation): fail after ``timeout``."""
    deadline = Deadline(timeout)
    while not cond():
        if deadline.expired():
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def own_database(pg_only):
    """A database of this test's own on the test server (dropped afterwards), for tests that read
    database-wide figures: ``pg_stat_database.deadlocks`` and lock waits in ``pg_stat_activity``.
    In the shared database those count every other client of the server (a deadlock test of
    another run, another run's lock waits), which made such assertions flaky on a shared server."""
    from tests.conftest import pg_admin

    name = "wt_db_" + uuid.uuid4().hex[:12]
    with pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunparse(urlparse(pg_only)._replace(path="/" + name))
    finally:
        with pg_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin(url: str):
    """An autocommit connection to the database ``url`` names (not to the shared one)."""
    import psycopg

    return psycopg.connect(url, autocommit=True)


def _waiting_pids(admin) -> set[int]:
    """Backends of the admin's database waiting on a heavyweight lock (row or advisory)."""
    rows = admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                         "AND wait_event_type = 'Lock'").fetchall()
    return {r[0] for r in rows}


def _deadlocks(url: str) -> int:
    """The server's count of deadlocks detected in the database ``url`` names (a database of the
    test's own: see ``own_database``; backends flush it at exit)."""
    with _admin(url) as admin:
        return int(admin.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
                   .fetchone()[0])


# ---------------------------------------------------------------------- claims do not serialise
def _claimer(url: str, name: str, barrier, release, q) -> None:
    try:
        led = Ledger.open(url, create=False)
        q.put(("pid", name, led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]))

        def hold(task_id: str, key: str) -> None:  # inside the claim's transaction, node locked
            q.put(("holding", name, key))
            barrier.wait()  # both claim transactions are open at once, or this times out
            release.wait(WAIT)

        checkpoints.reach = lambda point, task_id, key: hold(task_id, key) if point == "claim.locked" else None
        c = led.claim("t", name, lease_s=600)
        q.put(("claimed", name, c.node_key if c else None))
        led.close()
    except BaseException:
        q.put(("crash", name, traceback.format_exc()))
        barrier.abort()


def test_claims_of_different_nodes_of_one_task_proceed_together(pg_target):
    url = pg_target()
    with Ledger.open(url) as led:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec(f"n{i}") for i in range(4)])
    barrier = CTX.Barrier(2, timeout=stretch(20))
    release = CTX.Event()
    q = CTX.Queue()
    procs = [CTX.Process(target=_claimer, args=(url, f"w{i}", barrier, release, q)) for i in range(2)]
    for p in procs:
        p.start()
    got = []
    while sum(1 for g in got if g[0] in ("claimed", "crash")) < 2:
        item = q.get(timeout=WAIT)
        got.append(item)
        if item[0] == "holding" and sum(1 for g in got if g[0] == "holding") == 2:
            release.set()
    for p in procs:
        p.join(WAIT)
    crashes = [g for g in got if g[0] == "crash"]
    assert not crashes, crashes[0][2]
    held = sorted(g[2] for g in got if g[0] == "holding")
    claimed = sorted(g[2] for g in got if g[0] == "claimed")
    assert len(held) == 2 and held == claimed and len(set(claimed)) == 2  # both held open, different nodes
    with Ledger.open(url, create=False) as led:
        assert led.task("t").claim_count == 2
        assert sorted(n.key for n in led.graph("t").nodes if n.status == "running") == claimed


def _operator_abort(url: str, q) -> None:
    try:
        led = Ledger.open(url, create=False)
        q.put(("pid", led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]))
        plan = led.plan_abort("t", reason="stop")
        try:
            done = led.apply(plan, operator="op")
            q.put(("applied", done.differed.summary if done.differed else ""))
        except Exception as e:  # StaleRevision: a change the abort's promise does not cover
            q.put(("refused", f"{type(e).__name__}: {e}"))
        led.close()
    except BaseException:
        q.put(("crash", traceback.format_exc()))


def test_an_operator_action_waits_for_an_open_claim_then_sees_it(own_database):
    """Task, then node: the claim holds KEY SHARE on the task row, the operator's FOR UPDATE waits
    for it (no deadlock, no lost update) and then sees it: the abort goes through the claim made
    since its preview (the claimed node is abandoned too) and says so."""
    url = own_database
    with Ledger.open(url) as led:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec("a"), NodeSpec("b")])
    deadlocks = _deadlocks(url)
    barrier = CTX.Barrier(2, timeout=stretch(20))  # the claimer and this test
    release = CTX.Event()
    q = CTX.Queue()
    claimer = CTX.Process(target=_claimer, args=(url, "w0", barrier, release, q))
    claimer.start()
    barrier.wait()  # the claim transaction is open, node locked
    q2 = CTX.Queue()
    op = CTX.Process(target=_operator_abort, args=(url, q2))
    op.start()
    kind, op_pid = q2.get(timeout=WAIT)
    assert kind == "pid"
    with _admin(url) as admin:
        _wait_until(lambda: op_pid in _waiting_pids(admin), "the operator to wait on the claim's lock")
    assert q2.empty()  # still waiting: it has not applied anything
    release.set()
    claimer.join(WAIT)
    op.join(WAIT)
    results = [q2.get(timeout=WAIT)]
    assert results[0][0] == "applied", results
    claimed = [g[2] for g in [q.get(timeout=WAIT) for _ in range(3)] if g[0] == "claimed"]  # pid, holding, claimed
    assert results[0][1] == f"1 node was claimed meanwhile and is abandoned too: {claimed[0]}", results
    with Ledger.open(url, create=False) as led:
        assert led.task("t").status == "aborted"
        assert [(n.status, n.lease_owner) for n in led.graph("t").nodes] == [("abandoned", None)] * 2
    assert _deadlocks(url) == deadlocks  # ordered locks, not a deadlock resolved by a retry


# ---------------------------------------------------------------------- 8 claimers, 2,000 nodes
def _drainer(url: str, name: str, start, q) -> None:
    """Claim and commit until the task is finished; report every claim."""
    try:
        led = Ledger.open(url, create=False)
        start.wait(WAIT)
        mine = []
        while True:
            c = led.claim("big", name, lease_s=600)
            if c is None:
                if led.task("big").status != "active":
                    break
                continue  # dependencies still running elsewhere: look again
            mine.append(c.node_key)
            led.commit(c, output={"by": name})
        q.put(("done", name, mine))
        led.close()
    except BaseException:
        q.put(("crash", name, traceback.format_exc()))


def test_eight_processes_claiming_from_a_2000_node_graph(own_database):
    url = own_database
    rng = random.Random(8)
    led = Ledger.open(url)
    led.create_task("big", max_claims=3)
    specs = []
    for i in range(2000):
        deps = tuple(sorted({f"n{rng.randrange(i)}" for _ in range(rng.randrange(3))})) if i >= 200 else ()
        specs.append(NodeSpec(f"n{i}", kind="work", deps=deps))
    led.add_nodes("big", specs)
    deadlocks = _deadlocks(url)
    start = CTX.Event()
    q = CTX.Queue()
    procs = [CTX.Process(target=_drainer, args=(url, f"w{i}", start, q)) for i in range(8)]
    for p in procs:
        p.start()
    t0 = time.monotonic()
    start.set()
    claims: dict[str, list[str]] = {}
    for _ in procs:
        kind, name, detail = q.get(timeout=900)
        assert kind == "done", detail  # a deadlock or a double claim would surface here
        for key in detail:
            claims.setdefault(key, []).append(name)
    elapsed = time.monotonic() - t0
    for p in procs:
        p.join(WAIT)
        assert p.exitcode == 0
    assert len(claims) == 2000
    assert all(len(who) == 1 for who in claims.values()), {k: v for k, v in claims.items() if len(v) > 1}
    assert len({w for who in claims.values() for w in who}) >= 4  # the work was really shared
    per_node: dict[str, list[str]] = {}
    for e in led.events(0, task_id="big", limit=1_000_000):
        if e.kind in ("node.claimed", "node.committed"):
            per_node.setdefault(e.node, []).append(e.kind)
    assert len(per_node) == 2000 and all(k == ["node.claimed", "node.committed"] for k in per_node.values())
    g = led.graph("big")
    assert {n.status for n in g.nodes} == {"succeeded"} and g.task.status == "completed"
    assert g.task.claim_count == 2000
    assert _deadlocks(url) == deadlocks
    print(f"8 workers drained 2000 nodes in {elapsed:.1f}s ({2000 / elapsed:.0f} claim+commit/s)")
    led.close()


# ---------------------------------------------------------------------- the feed never skips
def _journal_writer(url: str, name: str, n: int, seed: int, start, q) -> None:
    try:
        rng = random.Random(seed)
        led = Ledger.open(url, create=False)
        start.wait(WAIT)
        for i in range(n):
            with write_tx(led.db):
                led.journal("t", None, name, f"{name} {i}", NodeNote(text=f"{name} {i}", data={"i": i}))
                # Hold the transaction open after the insert for a random while, so that without
                # serialised journal inserts a later id would often commit before an earlier one.
                x = 0
                for j in range(rng.choice((0, 10, 1000, 20000, 100000))):
                    x ^= j
        q.put(("done", name))
        led.close()
    except BaseException:
        q.put(("crash", traceback.format_exc()))


def test_a_tailing_reader_sees_every_committed_event_once_in_order(pg_target):
    url = pg_target()
    with Ledger.open(url) as led:
        led.create_task("t")
        first = led.last_event_id()
    writers, per_writer = 4, 150
    start = CTX.Event()
    q = CTX.Queue()
    procs = [CTX.Process(target=_journal_writer, args=(url, f"w{i}", per_writer, i, start, q))
             for i in range(writers)]
    for p in procs:
        p.start()
    reader = Ledger.open(url, create=False)
    seen: list[int] = []
    cursor = first
    start.set()
    done = 0
    while True:
        finished = done == writers
        batch = reader.events(cursor, limit=50)
        seen.extend(e.id for e in batch)
        if batch:
            cursor = batch[-1].id
        if finished and not batch:
            break
        while not q.empty():
            item = q.get()
            assert item[0] != "crash", item[1]
            done += 1
    for p in procs:
        p.join(WAIT)
    everything = [e.id for e in reader.events(first, limit=1_000_000)]
    reader.close()
    assert len(everything) == writers * per_writer
    assert seen == everything  # every committed event, exactly once, in id order: no skip


# ---------------------------------------------------------------------- LISTEN/NOTIFY wake-ups
def _feed_run(feed: Feed, coro_fn):
    return asyncio.run(coro_fn(feed))


def test_the_feed_wakes_on_notify_and_catches_up_after_its_listener_is_killed(pg_target):
    from tests.conftest import pg_admin

    url = pg_target()
    writer = Ledger.open(url)
    writer.create_task("t")
    feed = Feed(url, read_only=True, fallback_poll_s=120.0)  # a poll cannot be what wakes it here
    cursor = feed.last_event_id()
    seen: list[int] = []
    listeners: list[int | None] = []

    async def scenario(feed: Feed) -> None:
        nonlocal cursor
        wake = feed.wakeups()

        async def next_wake() -> str:
            return await asyncio.wait_for(wake.__anext__(), WAIT)

        def drain() -> None:
            nonlocal cursor
            while True:
                d = feed.since(cursor, limit=7)
                seen.extend(e.id for e in d.events)
                cursor = d.cursor
                if not d.more:
                    return

        assert await next_wake() == "change"  # LISTEN is in place: catch up once
        drain()
        first_pid = feed.listener_pid
        assert first_pid is not None
        for i in range(3):  # each commit notifies; the reader reads from its cursor
            await asyncio.to_thread(writer.create_task, f"n{i}")
            assert await next_wake() == "change"
            drain()
        # Kill the listener's backend, write while nobody listens, and expect a reconnect that
        # wakes the reader to catch up from its cursor.
        with pg_admin() as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (first_pid,)).fetchone()[0]
        for i in range(5):
            await asyncio.to_thread(writer.create_task, f"gap{i}")
        while feed.listener_pid in (None, first_pid):  # until a new LISTEN connection is in place
            assert await next_wake() == "change"
            drain()
        drain()
        assert feed.listener_pid not in (None, first_pid)
        listeners.append(feed.listener_pid)
        await asyncio.to_thread(writer.create_task, "after")
        assert await next_wake() == "change"  # listening again on the new connection
        drain()
        await wake.aclose()

    _feed_run(feed, scenario)
    everything = [e.id for e in writer.events(0, limit=100_000)]
    start = everything.index(seen[0])
    assert seen == everything[start:] and len(seen) == len(set(seen))
    assert {e.task_id for e in writer.events(seen[0] - 1, limit=100)} >= {"gap0", "gap4", "after"}
    with pg_admin() as admin:  # the feed's listener is gone once the feed stopped
        # (its own backend: other clients of a shared server may be listening in this database)
        _wait_until(lambda: not admin.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (listeners[0],)).fetchall(), "the listener to close")
    feed.close()
    writer.close()


def test_the_feed_reads_again_after_its_read_connection_is_killed(pg_target):
    from tests.conftest import pg_admin

    url = pg_target()
    with Ledger.open(url) as w:
        w.create_task("t")
    feed = Feed(url, read_only=True)
    d = feed.since(0)
    pid = feed.read(lambda led: led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0])
    with pg_admin() as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with Ledger.open(url) as w:
        w.create_task("u")
    d2 = feed.since(d.cursor)
    assert [e.task_id for e in d2.events] == ["u"]
    assert feed.read(lambda led: led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]) != pid
    feed.close()


# ---------------------------------------------------------------------- retry, read-only
def test_a_real_deadlock_is_retried_and_both_writes_land(pg_target):
    url = pg_target()
    with Ledger.open(url) as led:
        led.create_task("a")
        led.create_task("b")
    barrier = threading.Barrier(2, timeout=WAIT)
    attempts = {"x": 0, "y": 0}
    errors: list[BaseException] = []

    def writer(name: str, first: str, second: str) -> None:
        led = Ledger.open(url, create=False)

        def body() -> None:
            attempts[name] += 1
            with write_tx(led.db):
                led.db.execute_sql("UPDATE task SET title = title || %s WHERE task_id = %s", (name, first))
                if attempts[name] == 1:
                    barrier.wait()  # both hold their first row: the second update deadlocks
                led.db.execute_sql("UPDATE task SET title = title || %s WHERE task_id = %s", (name, second))

        try:
            run_write(led.db, body)
        except BaseException as e:
            errors.append(e)
        finally:
            led.close()

    ts = [threading.Thread(target=writer, args=("x", "a", "b")), threading.Thread(target=writer, args=("y", "b", "a"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(WAIT)
    assert not errors, errors
    assert sorted(attempts.values()) == [1, 2]  # PostgreSQL aborted exactly one; it was re-run
    with Ledger.open(url, create=False) as led:
        assert sorted(led.task("a").title) == ["x", "y"] and sorted(led.task("b").title) == ["x", "y"]


def test_retries_are_bounded_with_one_clear_line(pg_target):
    url = pg_target()
    led = Ledger.open(url)
    calls = []

    def always_deadlocks() -> None:
        calls.append(1)
        with write_tx(led.db):
            led.db.execute_sql("DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = 'deadlock_detected'; END $$")

    with pytest.raises(WriteConflict) as e:
        run_write(led.db, always_deadlocks, what="commit")
    assert len(calls) == 5
    msg = str(e.value)
    assert "commit" in msg and "5 times" in msg and "deadlock" in msg and "nothing was written" in msg
    assert "\n" not in msg and "simulated" not in msg

    def other_error() -> None:
        calls.append(1)
        with write_tx(led.db):
            led.db.execute_sql("SELECT 1 / 0")

    calls.clear()
    with pytest.raises(pw.DataError):  # not a conflict: no retry
        run_write(led.db, other_error)
    assert len(calls) == 1
    led.close()


def test_read_only_holds_on_every_connection(pg_target):
    url = pg_target()
    with Ledger.open(url) as led:
        led.create_task("t")
    ro = Ledger.open(url, read_only=True, create=False)
    for _ in range(2):
        with pytest.raises(pw.DatabaseError, match="read-only transaction"):
            with ro.db.atomic():
                ro.db.execute_sql("UPDATE task SET title = 'x'")
        with pytest.raises(ReadOnly):
            ro.create_task("u")
        ro.db.close()  # the next statement reconnects: still read-only
        assert ro.task("t").title == ""
    ro.close()


# ---------------------------------------------------------------------- agents starting at once
def _starter(url: str, name: str, barrier, q) -> None:
    try:
        barrier.wait()
        led = Ledger.open(url)  # the first one creates the schema; the others wait for it and see it
        barrier.wait()
        led.create_task("t", title="shared", exist_ok=True)
        led.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
        q.put(("ok", name, None))
        led.close()
    except BaseException:
        q.put(("crash", name, traceback.format_exc()))
        barrier.abort()


def test_agents_starting_at_once_create_the_schema_and_the_task_once(pg_target):
    url = pg_target()  # an empty schema
    barrier = CTX.Barrier(4, timeout=WAIT)
    q = CTX.Queue()
    procs = [CTX.Process(target=_starter, args=(url, f"w{i}", barrier, q)) for i in range(4)]
    for p in procs:
        p.start()
    got = [q.get(timeout=WAIT) for _ in procs]
    for p in procs:
        p.join(WAIT)
    assert all(g[0] == "ok" for g in got), [g[2] for g in got if g[0] != "ok"]
    with Ledger.open(url, create=False) as led:
        kinds = [e.kind for e in led.events(0)]
        assert kinds == ["task.created", "graph.nodes_added"]
        assert [n.key for n in led.graph("t").nodes] == ["a", "b"]


# ---------------------------------------------------------------------- fenced writes without a CAS
def _intender(url: str, barrier, release, q) -> None:
    try:
        led = Ledger.open(url, create=False)
        c = led.claim("t", "agent", lease_s=600)

        def hold(task_id: str, key: str) -> None:  # fenced, inside the transaction
            barrier.wait()
            release.wait(WAIT)

        checkpoints.reach = lambda point, task_id, key: hold(task_id, key) if point == "effect.fenced" else None
        e = led.intend_effect(c, "pr:x:create")
        q.put(("intended", e.status))
        led.close()
    except BaseException:
        q.put(("crash", traceback.format_exc()))
        barrier.abort()


def test_an_operator_revocation_waits_for_a_fenced_effect_intent(own_database):
    """intend_effect does not update the node, so its fence holds the node row until commit: an
    operator's rewind cannot revoke the lease between the check and the commit."""
    url = own_database
    with Ledger.open(url) as led:
        led.create_task("t")
        led.add_node("t", "a")
    barrier = CTX.Barrier(2, timeout=stretch(20))
    release = CTX.Event()
    q = CTX.Queue()
    agent = CTX.Process(target=_intender, args=(url, barrier, release, q))
    agent.start()
    barrier.wait()  # the agent is fenced and holds its transaction open
    op = Ledger.open(url, create=False)
    plan = op.plan_rewind("t", "a", reason="wrong approach")
    done = threading.Event()
    failed: list[BaseException] = []

    def apply() -> None:
        try:
            op.apply(plan, operator="op")
            done.set()
        except BaseException as e:
            failed.append(e)

    th = threading.Thread(target=apply)
    th.start()
    with _admin(url) as admin:
        # The only backend that can wait on a lock in this test's own database is the operator's
        # (the agent is idle in its transaction, waiting for `release`).
        _wait_until(lambda: failed or _waiting_pids(admin), "the rewind to wait for the fenced intent")
    assert not failed, failed
    assert not done.is_set()
    release.set()
    assert q.get(timeout=WAIT) == ("intended", "intended")
    th.join(WAIT)
    agent.join(WAIT)
    assert done.is_set()
    kinds = [e.kind for e in op.events(0, task_id="t")]
    assert kinds.index("effect.intended") < kinds.index("operator.rewind")  # intent, then revocation
    assert op.node("t", "a").status == "pending"
    op.close()

"""PostgreSQL through PgBouncer in transaction mode (``?pool=transaction``, docs/deployment.md
"Connection pooling"): agents and a read-only reader share two server connections; nothing relies
on a session — no prepared statement outlives its transaction, the lock timeout and read-only hold
per transaction and never leak to another client — and the feed LISTENs on the URL's ``listen=``
(LISTEN cannot work through the pool) or, without one, polls every half second. Skipped without a
server or a pgbouncer binary (saying why)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from urllib.parse import quote, urlparse

import pytest

from store import Ledger, NodeSpec
from store.errors import LedgerBusy, LedgerUnavailable, ReadOnly
from store.reading.feed import Feed
from store.storage.watch import POOLED_POLL_S
from tests.conftest import PG_URL, pg_admin
from tests.support import pgbouncer
from tests.support.pg_listens import listens

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def pooled(pg_only):
    """(URL through a transaction-mode PgBouncer with one server connection, the direct URL) of a
    fresh database."""
    why = pgbouncer.available()
    if why:
        pytest.skip(why)
    name = "wpb_" + uuid.uuid4().hex[:10]
    with pg_admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    server = urlparse(PG_URL)
    bouncer = pgbouncer.Bouncer(server.hostname or "127.0.0.1", server.port or 5432, pool_size=1).start()
    direct = f"postgresql://{server.netloc}/{name}"
    try:
        with Ledger.open(direct) as led:  # the schema, made directly
            led.create_task("t")
            led.add_nodes("t", [NodeSpec(key=f"n{i}") for i in range(40)])
        yield bouncer.url(name) + "?pool=transaction", direct
    finally:
        bouncer.stop()
        with pg_admin() as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_without_pool_transaction_the_pool_breaks_the_session_psycopg_relies_on(pooled):
    """The setup really pools per transaction: two clients on one server connection, psycopg's
    prepared statements collide (why pool=transaction exists)."""
    url, _ = pooled
    plain = url.replace("?pool=transaction", "")
    a, b = Ledger.open(plain, create=False), Ledger.open(plain, create=False)
    try:
        with pytest.raises(Exception, match="prepared statement"):
            for _ in range(20):
                a.task("t")
                b.task("t")
    finally:
        for led in (a, b):
            try:
                led.close()
            except Exception:
                pass


def test_agents_and_a_reader_through_the_pool(pooled):
    url, direct = pooled
    agents = [Ledger.open(url, create=False) for _ in range(2)]
    reader = Ledger.open(url, create=False, read_only=True)
    try:
        for i in range(20):  # every statement many times over, on whichever server connection
            led = agents[i % 2]
            c = led.claim("t", f"w{i % 2}")
            led.heartbeat(c, observation=f"step {i}")
            led.commit(c, output={"i": i})
            assert reader.task("t").counts["succeeded"] == i + 1  # a read-only client in between ...
        with pytest.raises(ReadOnly):
            reader.apply(reader.plan_park("t", reason="no"), operator="op")
        assert agents[0].claim("t", "w0") is not None  # ... never leaves the server connection read-only
    finally:
        for led in [*agents, reader]:
            led.close()
    with Ledger.open(direct, create=False) as led:
        assert led.task("t").counts["succeeded"] == 20


def test_the_lock_timeout_holds_per_transaction(pooled):
    url, direct = pooled
    import psycopg

    holder = psycopg.connect(direct, autocommit=False)
    got: list[BaseException] = []
    try:
        holder.execute("SELECT 1 FROM task WHERE task_id = 't' FOR UPDATE")  # an operator action under way
        led = Ledger.open(url, create=False, busy_timeout_s=0.3)

        def act() -> None:
            try:
                led.apply(led.plan_park("t", reason="wait"), operator="op")  # needs the task row
            except BaseException as e:
                got.append(e)

        t = threading.Thread(target=act)
        t.start()
        t.join(30)  # a safety net: without the lock timeout it would wait for the holder forever
        timed_out = t.is_alive()
    finally:
        holder.rollback()
        holder.close()
    t.join()
    led.close()
    assert not timed_out, "the lock timeout did not hold through the pool"
    assert len(got) == 1 and isinstance(got[0], LedgerBusy)


async def follow(feed: Feed, writer: Ledger, want: str) -> tuple[list[str], int]:
    """Wake-ups until one after a commit has been read; returns (reasons, events read)."""
    reasons: list[str] = []
    cursor = feed.last_event_id()
    ready = threading.Event()

    async def wakes() -> None:
        async for reason in feed.wakeups(on_watching=ready.set):
            reasons.append(reason)
            if reason not in ("listening", "start") and feed.since(cursor).events:
                return

    task = asyncio.ensure_future(wakes())
    while not ready.is_set():
        await asyncio.sleep(0.01)
    await asyncio.to_thread(lambda: writer.commit(writer.claim("t", "w")))
    await asyncio.wait_for(task, 30)
    return reasons, len(feed.since(cursor).events)


async def test_the_feed_listens_on_listen_and_polls_without_it(pooled, monkeypatch):
    url, direct = pooled
    listened = listens(monkeypatch)
    writer = Ledger.open(direct, create=False)
    try:
        feed = Feed(url + "&listen=" + quote(direct, safe=""), read_only=True)
        assert feed.listen_target == direct and feed.fallback_poll_s > POOLED_POLL_S
        reasons, n = await follow(feed, writer, "notify")
        # woken by the notification (a follow-up "settle" may come after it: listen= arms them for a
        # replica's lag), never by the slow poll
        assert n == 2 and "change" in reasons and "poll" not in reasons and len(listened) == 1
        feed.close()
        listened.clear()
        feed = Feed(url, read_only=True)
        assert feed.listen_target is None and feed.fallback_poll_s == POOLED_POLL_S
        reasons, n = await follow(feed, writer, "poll")
        assert n == 2 and set(reasons) == {"poll"} and listened == []
        feed.close()
    finally:
        writer.close()


@pytest.mark.parametrize("query, says", [
    ("?pool=statement", "pool= must be one of session, transaction"),
    ("?pool=transaction&listen=mysql%3A%2F%2Fx", "listen= must be a postgresql:// URL"),
    ("?listen=postgresql%3A%2F%2Fh%2Fd%3Fpool%3Dtransaction", "cannot itself have pool= or listen="),
])
def test_bad_pool_parameters_are_one_clear_line(pg_only, query, says):
    with pytest.raises(LedgerUnavailable, match=says.replace("(", r"\(")):
        Ledger.open(PG_URL.split("?")[0] + query, create=False)

"""A console on a read replica (docs/deployment.md "Read replicas for consoles"): a hot standby
refuses LISTEN, so the feed LISTENs on the primary named by ``listen=`` and reads the replica; a
notification can come before the replica has replayed the commit, so the feed re-reads a few times
after it (``settle``) — every commit is read within a second, none waits for the fallback poll.
Without ``listen=`` the feed polls the replica every half second instead of retrying LISTEN
forever. A real primary and a streaming standby of the test's own (tests/support/pgcluster.py)."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import quote

import pytest

from store import Ledger, NodeSpec
from store.reading.feed import Feed
from store.storage.watch import POOLED_POLL_S
from tests.support import pgcluster
from tests.support.pg_listens import listens
from tests.support.waiting import Deadline, stretch

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def pair():
    why = pgcluster.available()
    if why:
        pytest.skip(why)
    primary = pgcluster.Cluster().start()
    standby = None
    try:
        with Ledger.open(primary.url) as led:
            led.create_task("t")
            led.add_nodes("t", [NodeSpec(key=f"n{i}") for i in range(40)])
        standby = pgcluster.Cluster().start(standby_of=primary)
        deadline = Deadline(120)
        while True:  # until the standby has replayed the ledger (a condition, bounded)
            try:
                with Ledger.open(standby.url, create=False, read_only=True) as led:
                    if led.task("t").total == 40:
                        break
            except Exception:
                pass
            if deadline.expired():
                raise RuntimeError("the standby never caught up")
            time.sleep(0.1)
        yield primary, standby
    finally:
        if standby is not None:
            standby.stop()
        primary.stop()


async def read_commits(feed: Feed, writer: Ledger, n: int) -> tuple[list[float], dict[str, int]]:
    """Commit ``n`` times on the primary, one at a time with quiet around each; for each, how long
    until the feed's reader (woken by its wake-ups only) had read it. Returns (seconds, reasons)."""
    reasons: dict[str, int] = {}
    cursor = feed.last_event_id()
    seen: dict[int, float] = {}
    ready = asyncio.Event()

    async def reader() -> None:
        nonlocal cursor
        async for reason in feed.wakeups(on_watching=ready.set):
            reasons[reason] = reasons.get(reason, 0) + 1
            delta = await asyncio.to_thread(feed.since, cursor)
            for e in delta.events:
                seen[e.id] = time.monotonic()
            cursor = delta.cursor

    task = asyncio.ensure_future(reader())
    await asyncio.wait_for(ready.wait(), 30)
    took = []
    try:
        for _ in range(n):
            await asyncio.sleep(0.3)  # quiet before each commit (pacing, not synchronisation)
            eid = await asyncio.to_thread(lambda: writer.commit(writer.claim("t", "w")))
            done = time.monotonic()
            deadline = Deadline(30)
            while eid not in seen and not deadline.expired():
                await asyncio.sleep(0.005)
            assert eid in seen, "a commit was never read"
            took.append(seen[eid] - done)
    finally:
        task.cancel()
    return took, reasons


async def test_a_feed_on_a_replica_listens_on_the_primary_and_reads_every_commit(pair, monkeypatch):
    primary, standby = pair
    listened = listens(monkeypatch)
    writer = Ledger.open(primary.url, create=False)
    feed = Feed(standby.url + "?listen=" + quote(primary.url, safe=""), read_only=True, fallback_poll_s=300.0)
    try:
        took, reasons = await read_commits(feed, writer, 6)
        assert max(took) < stretch(2.0), took  # none waited for the (300 s) poll (a loaded machine stretches it)
        assert len(listened) == 1 and reasons.get("poll", 0) == 0
    finally:
        feed.close()
        writer.close()


async def test_a_feed_on_a_replica_without_listen_polls_instead_of_retrying_listen(pair, monkeypatch):
    primary, standby = pair
    listened = listens(monkeypatch)
    writer = Ledger.open(primary.url, create=False)
    feed = Feed(standby.url, read_only=True)
    try:
        took, reasons = await read_commits(feed, writer, 3)
        assert listened == [] and feed.listen_target is None
        assert feed.fallback_poll_s == POOLED_POLL_S
        assert max(took) < stretch(3.0), took
        assert reasons.get("poll", 0) >= 3
    finally:
        feed.close()
        writer.close()

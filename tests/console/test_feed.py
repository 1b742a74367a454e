"""store/reading/feed.py: the cursor never skips or repeats an event; wake-ups come from file changes."""

from __future__ import annotations

import asyncio
import os
import random
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from store import Ledger
from store.errors import LedgerUnavailable
from store.reading.feed import Feed, changed_nodes, graph_at, graph_pages, tail_at
from tests.support.commit_writer import Writer, strace_can_delay
from tests.support.waiting import Deadline

ROOT = Path(__file__).resolve().parents[2]


def test_since_pages_through_the_journal_in_order(ledger_path):
    feed = Feed(ledger_path, read_only=True, batch=7)
    seen, cursor = [], 0
    while True:
        d = feed.since(cursor)
        seen.extend(e.id for e in d.events)
        cursor = d.cursor
        if not d.more:
            break
    with Ledger.open(ledger_path, create=False) as ledger:
        assert seen == [e.id for e in ledger.events(0, limit=100000)]
        assert cursor == ledger.last_event_id()
    assert feed.since(cursor).events == () and feed.since(cursor).cursor == cursor


def test_changed_nodes_reads_event_node_and_payload_lists(ledger_path):
    feed = Feed(ledger_path)
    with Ledger.open(ledger_path, create=False) as ledger:
        cursor = ledger.last_event_id()
        ledger.apply(ledger.plan_rewind("report-001", "outline", reason="wrong outline"), operator="op")
    d = feed.since(cursor)
    keys = changed_nodes(d.events, "report-001")
    assert {"outline", "section-1", "section-2", "section-3"} <= keys
    assert "collect" not in keys and changed_nodes(d.events, "evil-task") == set()


def test_graph_and_tail_are_one_snapshot(ledger_path):
    feed = Feed(ledger_path, read_only=True)
    graph, at = graph_at(feed, "report-001")
    tasks, tail, cursor = tail_at(feed, 5)
    assert at == cursor and len(tail) == 5 and tail[-1].id == cursor
    assert [n.key for n in graph.nodes][0] == "collect" and len(tasks) == 3


def test_missing_and_replaced_ledger(ledger_path, tmp_path):
    feed = Feed(ledger_path)
    assert feed.check() is True  # opened
    assert feed.check() is False
    os.rename(ledger_path, tmp_path / "aside.db")
    with pytest.raises(LedgerUnavailable, match="disappeared"):
        feed.check()
    os.rename(tmp_path / "aside.db", ledger_path)
    assert feed.check() is False  # same file back: same inode, nothing to reopen
    with Ledger.open(tmp_path / "other.db") as other:
        other.create_task("other")
    os.replace(tmp_path / "other.db", ledger_path)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(str(ledger_path) + suffix):
            os.unlink(str(ledger_path) + suffix)
    assert feed.check() is True  # replaced: reopened
    assert [t.task_id for t in feed.ledger.tasks()] == ["other"]


def test_missing_ledger_is_refused_not_created(tmp_path):
    feed = Feed(tmp_path / "nope.db")
    with pytest.raises(LedgerUnavailable, match="warden demo"):
        feed.since(0)
    assert not (tmp_path / "nope.db").exists()


def test_graph_pages_are_the_graph_in_order(ledger_path):
    feed = Feed(ledger_path, read_only=True)
    graph, at = graph_at(feed, "report-001")
    pages = list(graph_pages(feed, "report-001", first=3, page=2))
    assert [p.start for p in pages] == [0, 3, 5, 7] and [p.last for p in pages] == [False] * 3 + [True]
    assert {p.at for p in pages} == {at} and {p.total for p in pages} == {len(graph.nodes)}
    rows = [n for p in pages for n in p.nodes]
    assert [n.key for n in rows] == [n.key for n in graph.nodes]
    for row, view in zip(rows, graph.nodes):
        assert (row.status, row.kind, row.attempt, row.lease_owner, row.lease_until, row.has_lease,
                sorted(row.deps)) == (view.status, view.kind, view.attempt, view.lease_owner, view.lease_until,
                                      view.has_lease, sorted(view.deps))


WRITES = ("add", "claim", "beat", "note", "commit")


def write_plan(seed: int, n: int = 7) -> list[str]:
    """A seeded mix of agent writes (each one transaction), starting with a node to claim."""
    rnd = random.Random(seed)
    return ["add", "claim"] + [rnd.choice(WRITES) for _ in range(n - 2)]


def slow_fsync_params() -> list:
    skip = pytest.mark.skipif(not strace_can_delay(), reason="needs strace (to delay the writer's fsync)")
    return [pytest.param(0, id="disk"), pytest.param(40, id="fsync40ms", marks=skip),
            pytest.param(300, id="fsync300ms", marks=skip)]


@pytest.mark.parametrize("spacing_s", [0.0, 0.05], ids=["unspaced", "spaced"])
@pytest.mark.parametrize("slow_ms", slow_fsync_params())
@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "watchfiles"])
async def test_each_isolated_commit_wakes_the_reader(ledger_path, inotify, slow_ms, spacing_s):
    """A commit with nothing written after it reaches the reader on its own wake-up, not
    on the fallback poll (set far beyond the test's deadline) or the next write. The writer waits
    for each commit to be read before it writes the next; with its fsync delayed the commit becomes
    visible well after its last file event — what a reader woken by file events alone missed."""
    from store.storage.watch import inotify_lib

    if inotify and inotify_lib() is None:
        pytest.skip("no inotify on this platform")
    feed = Feed(ledger_path, read_only=True, fallback_poll_s=600, use_inotify=inotify, spacing_s=spacing_s)
    assert feed._notify_source().__name__ == ("_inotify" if inotify else "_watchfiles")
    seen: dict[int, str] = {}  # event id -> the wake-up reason of the read that found it
    woke: Counter[str] = Counter()  # every wake-up, by reason
    arrived = asyncio.Event()
    cursor = feed.last_event_id()

    async def reader() -> None:
        nonlocal cursor
        async for reason in feed.wakeups():
            woke[reason] += 1
            delta = await asyncio.to_thread(feed.since, cursor)
            for e in delta.events:
                seen[e.id] = reason
            cursor = delta.cursor
            arrived.set()

    follow = asyncio.ensure_future(reader())
    writer = await Writer(str(ledger_path), "report-001", slow_fsync_ms=slow_ms).start()
    try:
        for cmd in write_plan(seed=slow_ms + 7 * inotify):
            wrote = await writer.send(cmd)
            if wrote is None:
                continue
            eid = wrote[0]
            deadline = Deadline(30)  # << the 600 s fallback poll
            while eid not in seen:
                assert not deadline.expired(), f"{cmd} (event {eid}) never reached the reader"
                arrived.clear()
                try:
                    await asyncio.wait_for(arrived.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass
            assert seen[eid] in ("change", "settle", "start"), (cmd, seen[eid])
    finally:
        await writer.close()
        follow.cancel()
    assert woke["poll"] == 0
    if slow_ms:  # visible only after its last file event: found by a follow-up check
        assert "settle" in seen.values(), woke


@pytest.mark.parametrize("rate", [150, 600])
async def test_spaced_wake_ups_under_a_write_stream_miss_nothing(ledger_path, rate):
    """With ``spacing_s`` a stream of commits wakes the reader at most once per spacing
    (the file events gather in the kernel meanwhile), and every commit is still read on a wake-up
    of its own stream — none waits for the fallback poll, the last one included."""
    spacing = 0.04
    feed = Feed(ledger_path, read_only=True, fallback_poll_s=600, spacing_s=spacing)
    cursor = feed.last_event_id()
    yields: list[float] = []
    woke: Counter[str] = Counter()  # every wake-up, by reason
    read_to = [cursor]
    caught_up = asyncio.Event()
    target = [None]

    async def reader() -> None:
        async for reason in feed.wakeups():
            yields.append(time.monotonic())
            woke[reason] += 1
            assert reason in ("start", "change", "settle"), reason
            delta = await asyncio.to_thread(feed.since, read_to[0])
            read_to[0] = delta.cursor
            if target[0] is not None and read_to[0] >= target[0]:
                caught_up.set()

    follow = asyncio.ensure_future(reader())
    started = Deadline(30)
    while not yields:  # the watch is set ("start"): a condition polled, with a deadline
        started.check("the feed's start")
        await asyncio.sleep(0.01)
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from store import Ledger, NodeSpec
        led = Ledger.open({str(ledger_path)!r})
        led.create_task("stream", title="stream")
        led.add_nodes("stream", [NodeSpec(key=f"n{{i}}") for i in range(60)])
        t = time.monotonic()
        for i in range(60):
            c = led.claim("stream", "w", lease_s=60)
            led.commit(c)
            t += 2 / {rate}
            time.sleep(max(0.0, t - time.monotonic()))  # pacing the writer, not synchronisation
        print(led.last_event_id())
    """)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    target[0] = int(out.decode().split()[-1])
    if read_to[0] < target[0]:
        await asyncio.wait_for(caught_up.wait(), 30)  # << the 600 s fallback poll: the last commit woke it
    follow.cancel()
    gaps = [b - a for a, b in zip(yields[1:], yields[2:])]  # after "start"
    close = [i for i, g in enumerate(gaps) if g < spacing * 0.9]  # a lone wake-up holds nothing back
    assert len(yields) > 3 and not any(i + 1 in close for i in close), f"two quick wake-ups in a row: {gaps}"
    assert len(yields) < 60 + 2, "a wake-up per commit or more: nothing was gathered"
    assert woke["poll"] == 0


async def test_fallback_poll_without_any_change(ledger_path):
    feed = Feed(ledger_path, read_only=True, fallback_poll_s=0.05)
    it = feed.wakeups()
    assert await asyncio.wait_for(it.__anext__(), 5) == "start"  # the reader looks once the watch is set
    assert await asyncio.wait_for(it.__anext__(), 5) == "poll"
    assert await asyncio.wait_for(it.__anext__(), 5) == "poll"
    await it.aclose()


def test_graph_pages_fall_back_to_position_order(ledger_path):
    import sqlite3

    con = sqlite3.connect(ledger_path)
    with con:  # ids no longer in position order (not what add_nodes writes; the reader must not care)
        con.execute("UPDATE node SET position = 1000 - position WHERE task_id = 'report-001'")
    con.close()
    feed = Feed(ledger_path, read_only=True)
    pages = list(graph_pages(feed, "report-001", first=3, page=100))
    rows = [n for p in pages for n in p.nodes]  # in id order these would be in descending position
    assert [n.position for n in rows] == sorted(n.position for n in rows) and len(rows) == 8
    assert pages[0].start == 0 and pages[-1].last

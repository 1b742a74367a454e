"""store/feed.py: the cursor never skips or repeats an event; wake-ups come from file changes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from store import Ledger
from store.errors import LedgerUnavailable
from store.feed import Feed, changed_nodes, graph_at, tail_at


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


async def test_wakeup_on_a_commit_from_another_process(ledger_path):
    feed = Feed(ledger_path, read_only=True, fallback_poll_s=30)  # the poll cannot be what wakes us
    cursor = feed.last_event_id()
    wakeups = feed.wakeups()
    first = asyncio.ensure_future(wakeups.__anext__())
    await asyncio.sleep(0)  # let the watcher start (not synchronisation: the assertion waits on the event)
    script = (f"import sys; sys.path.insert(0, {os.getcwd()!r}); from store import Ledger; "
              f"L = Ledger.open({str(ledger_path)!r}, create=False); L.add_node('report-001', 'w', kind='tool')")
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
    assert await proc.wait() == 0
    reason = await asyncio.wait_for(first, 10)
    assert reason == "change" and time.monotonic() - t0 < 10
    await wakeups.aclose()
    # the wake-up is a hint; the cursor is the truth
    deadline = time.monotonic() + 10
    while not feed.since(cursor).events:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert any(e.node == "w" for e in feed.since(cursor).events)


async def test_fallback_poll_without_any_change(ledger_path):
    feed = Feed(ledger_path, read_only=True, fallback_poll_s=0.05)
    it = feed.wakeups()
    assert await asyncio.wait_for(it.__anext__(), 5) == "poll"
    await it.aclose()

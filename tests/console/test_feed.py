"""store/feed.py: the cursor never skips or repeats an event; wake-ups come from file changes."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from store import Ledger
from store.errors import LedgerUnavailable
from store.feed import Feed, changed_nodes, graph_at, graph_pages, tail_at


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


@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "watchfiles"])
async def test_wakeup_on_a_commit_from_another_process(ledger_path, inotify):
    from store.feed import _inotify

    if inotify and _inotify() is None:
        pytest.skip("no inotify on this platform")
    feed = Feed(ledger_path, read_only=True, fallback_poll_s=30, use_inotify=inotify)  # the poll cannot wake us
    assert feed._notify_source().__name__ == ("_inotify" if inotify else "_watchfiles")
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

"""The change feed: the journal's cursor plus wake-ups when the ledger may have changed.

A reader keeps the id of the last event it has seen (the *cursor*) and asks for what came after:

    feed = Feed("ledger.db", read_only=True)
    delta = feed.since(cursor)            # Delta(events, cursor, more)
    async for reason in feed.wakeups():   # "start", "change", "settle" or "poll" (the slow fallback)
        ...

Wake-ups (``store/storage/watch.py``) for SQLite come from the database's directory, filtered to the
database file, its ``-wal`` and its ``-shm``: on Linux straight from inotify on the event loop (no
thread, no timer: nothing runs while nothing changes), elsewhere from ``watchfiles.awatch`` (a
short step, ~5 ms). A file event is not yet a commit: the writer's last write to the WAL comes
*before* its fsync and before the commit is published in the shared-memory index, which no file
event reports. So a file event only starts a short watch with ``PRAGMA data_version``
(``store/storage/commitprobe.py``: a few microseconds per look, 1, 2, 4, 8 ms after the event, then every
10 ms for a second, then ever more rarely); the reader is woken when the commit has landed. A slow
fallback poll stays as a safety net: a missed notification is only late, never lost. A wake-up is
only a hint: the cursor is the truth, so spurious wake-ups cost one cheap ``id > cursor`` query.

PostgreSQL: a trigger NOTIFYs ``warden_events`` on every journal insert; the feed LISTENs on its
own autocommit connection (not the one it reads with) and wakes on each notification — a hint,
never data: the reader re-reads ``id > cursor``. A notification is delivered only after the
sending transaction has committed, so unlike a SQLite file event it never comes early (traced: every
isolated commit was read on its own notification) and needs no follow-up. When that connection drops (server restart,
``pg_terminate_backend``, network) the listener reconnects with a short back-off, LISTENs again and
then wakes the reader once, so whatever committed while nobody listened is read from the cursor —
no gap. The fallback poll carries on throughout. Journal inserts are serialised by a
transaction-scoped advisory lock (``LedgerCore.journal``), so events become visible in id order and
``id > cursor`` never skips one that commits later with a smaller id.

The feed also watches the ledger's identity: a SQLite file that disappears raises
``LedgerUnavailable`` from :meth:`check` (an open connection would otherwise keep reading the
deleted inode); a file that is replaced (new inode) is reopened.

Each thread gets its own SQLite connection (Peewee's connection state is thread-local), so
``since`` may be called from any worker thread.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, TypeVar

import peewee as pw

from store.storage.backends import one_line
from store.clock import Clock
from store.storage.db import CONNECT_TIMEOUT_S, NO_LEDGER_HINT, read_tx, run_read
from store.errors import LedgerUnavailable, WardenError
from store.storage.events import payload_of
from store.facade import Ledger
from store.ledger.queries import GRAPH_FIRST_PAGE, GRAPH_PAGE
from store.text import safe_line
from store.views import EventView, GraphPage, GraphView, NodeRow, TaskView
from store.storage.commitprobe import CommitProbe
from store.storage.watch import (
    FALLBACK_POLL_S,
    PG_CHANNEL,
    PG_RECONNECT_S,
    WATCH_DEBOUNCE_MS,
    WATCH_STEP_MS,
    Wakeups,
)

# Re-exported: these lived here before store/storage/watch.py.
_REEXPORTED = (PG_CHANNEL, PG_RECONNECT_S)

__all__ = ["Delta", "Feed", "GraphPage", "NodeRow", "changed_nodes", "graph_at", "graph_pages", "passes", "tail_at"]

_T = TypeVar("_T")

DEFAULT_BATCH = 5000
FEED_RECONNECT_S = 1.5  # PostgreSQL: how long a feed read re-tries a lost connection before LedgerUnavailable


@dataclass(frozen=True)
class Delta:
    """Events after a cursor, in id order, and the new cursor. ``more``: the batch was full."""

    events: tuple[EventView, ...]
    cursor: int
    more: bool = False

    def task_ids(self) -> set[str]:
        return {e.task_id for e in self.events if e.task_id is not None}

    def node_keys(self, task_id: str) -> set[str]:
        """Every node of ``task_id`` these events name (``.node`` and their payload's ``node_keys``)."""
        return changed_nodes(self.events, task_id)


def changed_nodes(events: Iterable[EventView], task_id: str) -> set[str]:
    keys: set[str] = set()
    for e in events:
        if e.task_id != task_id:
            continue
        if e.node:
            keys.add(e.node)
        keys.update(payload_of(e).node_keys())
    return keys


class Feed(Wakeups):
    """Cursor reads and wake-ups (:class:`~store.storage.watch.Wakeups`) for one ledger. Opens its own
    :class:`Ledger` (``application_name``: ``warden-console`` unless told otherwise)."""

    def __init__(
        self,
        target: str | os.PathLike[str],
        *,
        read_only: bool = False,
        clock: Clock | None = None,
        batch: int = DEFAULT_BATCH,
        fallback_poll_s: float = FALLBACK_POLL_S,
        step_ms: int = WATCH_STEP_MS,
        debounce_ms: int = WATCH_DEBOUNCE_MS,
        use_inotify: bool = True,
        application_name: str = "warden-console",
        probe: Callable[[str], CommitProbe] | None = CommitProbe,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        reconnect_s: float = FEED_RECONNECT_S,
        spacing_s: float = 0.0,
    ) -> None:
        super().__init__(target, fallback_poll_s=fallback_poll_s, step_ms=step_ms, debounce_ms=debounce_ms,
                         use_inotify=use_inotify, application_name=application_name, probe=probe,
                         connect_timeout_s=connect_timeout_s, spacing_s=spacing_s)
        self.reconnect_s = reconnect_s
        self.read_only = read_only
        self.clock = clock
        self.batch = batch
        self._lock = threading.Lock()
        self._ledger: Ledger | None = None
        self._identity: tuple[int, int] | None = None

    # ------------------------------------------------------------------ the ledger
    @property
    def ledger(self) -> Ledger:
        """The open ledger (opened on first use; reopened after :meth:`check` saw it replaced)."""
        with self._lock:
            if self._ledger is None:
                self._ledger = self._open()
            return self._ledger

    def _open(self) -> Ledger:
        # One connection for every thread that reads through the feed (PostgreSQL; the LISTEN
        # connection is the other): store/storage/pgshared.py.
        # A short reconnect budget: a reader that shows the ledger (the console) says an outage
        # within seconds instead of re-trying for RECONNECT_BUDGET_S; its next wake-up tries again.
        ledger = Ledger.open(self.target, create=False, read_only=self.read_only, clock=self.clock,
                             application_name=self.application_name, one_connection=True,
                             connect_timeout_s=self.connect_timeout_s, reconnect_s=self.reconnect_s)
        self._identity = self._stat_identity()
        return ledger

    def _stat_identity(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            shown = safe_line(self.path)
            if os.path.islink(self.path):
                raise LedgerUnavailable(f"{shown} is a symbolic link; open the real file instead") from None
            if self._identity is None:  # never opened: it did not disappear, it never was
                raise LedgerUnavailable(f"no ledger at {shown}: {NO_LEDGER_HINT}") from None
            raise LedgerUnavailable(f"the ledger {shown} has disappeared; waiting for it to return") from None
        return (st.st_dev, st.st_ino)

    def check(self) -> bool:
        """Raise ``LedgerUnavailable`` when the file is gone; reopen it when it was replaced.

        Returns True when the ledger was (re)opened by this call.
        """
        if self.path is None:
            if self._ledger is None:
                _ = self.ledger
                return True
            return False
        ident = self._stat_identity()
        with self._lock:
            if self._ledger is not None and ident == self._identity:
                return False
            old, self._ledger = self._ledger, None
        if old is not None:
            try:
                old.close()
            except Exception:
                pass
        _ = self.ledger
        return True

    @property
    def live(self) -> bool:
        """False when changes cannot be followed (shown as "snapshot")."""
        if self.backend != "sqlite" or self.path is None:
            return True
        if not self.read_only:
            return True
        # A read-only reader of a WAL database needs the shared-memory index to see new commits;
        # when SQLite could not share it, the ledger was opened immutable: a snapshot.
        with self._lock:
            ledger = self._ledger
        if ledger is not None:
            return not getattr(ledger.db, "snapshot", False)
        shm = self.path + "-shm"
        if os.path.exists(shm):
            return os.access(shm, os.R_OK)
        return os.access(os.path.dirname(self.path), os.W_OK)

    def close(self) -> None:
        with self._lock:
            old, self._ledger = self._ledger, None
        if old is not None:
            old.close()

    # ------------------------------------------------------------------ reads
    def last_event_id(self) -> int:
        return self._guard(lambda: self.ledger.last_event_id())

    def since(self, cursor: int, *, limit: int | None = None, task_id: str | None = None) -> Delta:
        """Events with ``id > cursor`` (at most ``limit``), and the new cursor."""
        n = limit or self.batch
        events = self._guard(lambda: self.ledger.events(cursor, task_id=task_id, limit=n))
        new_cursor = events[-1].id if events else cursor
        return Delta(tuple(events), new_cursor, more=len(events) >= n)

    def read(self, fn: Callable[[Ledger], _T]) -> _T:
        """Run ``fn(ledger)`` translating driver errors into ``LedgerUnavailable``."""
        return self._guard(lambda: fn(self.ledger))

    def _guard(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except WardenError:
            raise
        except (pw.OperationalError, pw.InterfaceError) as e:
            if self.backend == "sqlite" or not self._reconnect():
                raise self.unavailable(e) from None
        except (pw.DatabaseError, sqlite3.Error) as e:
            raise self.unavailable(e) from None
        try:  # PostgreSQL: the read connection dropped; one more try on a fresh one
            return fn()
        except WardenError:
            raise
        except (pw.DatabaseError, pw.InterfaceError, sqlite3.Error) as e:
            raise self.unavailable(e) from None

    def _reconnect(self) -> bool:
        """Drop a broken PostgreSQL connection so the next read opens a new one."""
        with self._lock:
            ledger = self._ledger
        if ledger is None:
            return False
        try:
            ledger.db.close()
        except Exception:
            pass
        return True

    def unavailable(self, e: BaseException) -> LedgerUnavailable:
        """A driver's error while reading, as the one-line ``LedgerUnavailable`` to raise (the
        ledger named escaped, a PostgreSQL URL without its password)."""
        msg = one_line(e)
        where = safe_line(self.path) if self.path else (self._ledger.display if self._ledger is not None
                                                         else "the PostgreSQL ledger")
        return LedgerUnavailable(f"cannot read the ledger {where}: {msg}")

    # ------------------------------------------------------------------ wake-ups

def _graph_at(ledger: Ledger, task_id: str) -> tuple[GraphView, int]:
    def snapshot() -> tuple[GraphView, int]:
        with read_tx(ledger.db):
            last = ledger.last_event_id()
            graph = ledger.graph(task_id)
        return graph, last

    return run_read(ledger.db, snapshot)


def _tail_at(ledger: Ledger, tail: int) -> tuple[list[TaskView], list[EventView], int]:
    """(tasks, the last ``tail`` events, cursor) from one consistent snapshot."""
    def snapshot() -> tuple[list[TaskView], list[EventView], int]:
        with read_tx(ledger.db):
            last = ledger.last_event_id()
            tasks = ledger.tasks()
            events = ledger.events(max(0, last - tail), limit=tail) if tail else []
        return tasks, events, last

    return run_read(ledger.db, snapshot)


def graph_at(feed: Feed, task_id: str) -> tuple[GraphView, int]:
    """A task's whole graph and the journal id it reflects (read in one snapshot)."""
    return feed.read(lambda ledger: _graph_at(ledger, task_id))


def tail_at(feed: Feed, tail: int = 2000) -> tuple[list[TaskView], list[EventView], int]:
    """Every task, the journal's last ``tail`` events and the cursor they reflect (one snapshot)."""
    return feed.read(lambda ledger: _tail_at(ledger, tail))


# ---------------------------------------------------------------------- a graph in pages
def graph_pages(feed: Feed, task_id: str, *, first: int = GRAPH_FIRST_PAGE,
                page: int = GRAPH_PAGE) -> Iterator[GraphPage]:
    """A task's graph as a stream of pages of lean :class:`NodeRow` tuples, all from one read
    snapshot (``Ledger.graph_pages``): a small first page (the rows on screen, fast), then big
    ones. The same 100k-node graph as ``Ledger.graph`` (NodeViews) took 20 s and 250 MB here.

    Runs in a worker thread; the caller posts each page to the UI as it arrives."""
    try:
        yield from feed.ledger.graph_pages(task_id, first=first, page=page)
    except WardenError:
        raise
    except (pw.DatabaseError, pw.InterfaceError, sqlite3.Error) as e:
        raise feed.unavailable(e) from None  # escaped, and a PostgreSQL URL shown without its password


async def passes(feed: Feed, stop: asyncio.Event, begin: Callable[[], object], step: Callable[[], float], *,
                 hold: Callable[[], bool] = lambda: False) -> None:
    """A follower's life on the feed: ``begin()`` once, then ``step()`` pass after pass (in a thread;
    it returns the seconds until the next pass is due) until ``stop`` is set. A wake-up of the feed
    starts the next pass early — except while ``hold()`` says the follower is backing off (a failed
    send, a ledger that cannot be read: a missing file's wake-ups must not make it spin). The feed is
    closed at the end."""
    woken = asyncio.Event()

    async def watch() -> None:
        async for _ in feed.wakeups():
            woken.set()

    watcher = asyncio.create_task(watch())
    try:
        await asyncio.to_thread(begin)
        while not stop.is_set():
            woken.clear()
            wait = await asyncio.to_thread(step)
            held = hold()
            if wait <= 0 and not held:
                continue
            stopped = asyncio.create_task(stop.wait())
            wake = asyncio.create_task(stop.wait() if held else woken.wait())
            await asyncio.wait({stopped, wake}, timeout=max(0.0, wait), return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            wake.cancel()
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        feed.close()

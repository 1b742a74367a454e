"""The change feed: the journal's cursor plus wake-ups when the ledger may have changed.

A reader keeps the id of the last event it has seen (the *cursor*) and asks for what came after:

    feed = Feed("ledger.db", read_only=True)
    delta = feed.since(cursor)            # Delta(events, cursor, more)
    async for reason in feed.wakeups():   # "change" (watchfiles) or "poll" (slow fallback)
        ...

Wake-ups for SQLite come from the database's directory, filtered to the database file, its
``-wal`` and its ``-shm``: on Linux straight from inotify on the event loop (no thread, no timer:
nothing runs while nothing changes), elsewhere from ``watchfiles.awatch`` (a short step, ~5 ms);
plus a slow fallback poll so a missed notification is only late, never lost. A wake-up is only a hint: the cursor is the truth,
so spurious wake-ups cost one cheap ``id > cursor`` query and nothing else.

PostgreSQL: a trigger NOTIFYs ``warden_events`` on every journal insert; the feed LISTENs on its
own autocommit connection (not the one it reads with) and wakes on each notification — a hint,
never data: the reader re-reads ``id > cursor``. When that connection drops (server restart,
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
import struct
import sys
import threading
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Iterable, Iterator, TypeVar

import peewee as pw

from .clock import Clock
from .db import parse_target, pg_connect_args, read_tx
from .errors import LedgerUnavailable, WardenError
from .ledger import Ledger
from .ledger.queries import GRAPH_FIRST_PAGE, GRAPH_PAGE
from .views import EventView, GraphPage, GraphView, NodeRow, TaskView

__all__ = ["Delta", "Feed", "GraphPage", "NodeRow", "changed_nodes", "graph_at", "graph_pages", "tail_at"]

_T = TypeVar("_T")

DEFAULT_BATCH = 5000
PG_CHANNEL = "warden_events"
PG_RECONNECT_S = (0.05, 2.0)  # the listener's reconnect back-off: first and longest wait
WATCH_STEP_MS = 5
WATCH_DEBOUNCE_MS = 40
FALLBACK_POLL_S = 5.0  # a safety net: inotify / watchfiles / LISTEN wake the feed at once


_INOTIFY: Any = False


def _inotify() -> Any:
    """libc with inotify (Linux), or None elsewhere: then watchfiles watches instead."""
    global _INOTIFY
    if _INOTIFY is False:
        _INOTIFY = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes
                import ctypes.util

                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                lib.inotify_init1.argtypes = [ctypes.c_int]
                lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
                _INOTIFY = lib
            except (OSError, AttributeError):
                _INOTIFY = None
    return _INOTIFY


def ctypes_errno() -> int:
    import ctypes

    return ctypes.get_errno()


@dataclass(frozen=True)
class Delta:
    """Events after a cursor, in id order, and the new cursor. ``more``: the batch was full."""

    events: tuple[EventView, ...]
    cursor: int
    more: bool = False

    def task_ids(self) -> set[str]:
        return {e.task_id for e in self.events if e.task_id is not None}

    def node_keys(self, task_id: str) -> set[str]:
        """Every node of ``task_id`` these events name (``.node`` and ``payload["nodes"]``)."""
        return changed_nodes(self.events, task_id)


def changed_nodes(events: Iterable[EventView], task_id: str) -> set[str]:
    keys: set[str] = set()
    for e in events:
        if e.task_id != task_id:
            continue
        if e.node:
            keys.add(e.node)
        listed = e.payload.get("nodes") if isinstance(e.payload, dict) or hasattr(e.payload, "get") else None
        if isinstance(listed, (list, tuple)):
            keys.update(str(k) for k in listed if isinstance(k, str))
        elif isinstance(listed, dict):  # {"reset": [...], "abandoned": [...]} style payloads
            for v in listed.values():
                if isinstance(v, (list, tuple)):
                    keys.update(str(k) for k in v if isinstance(k, str))
    return keys


class Feed:
    """Cursor reads and wake-ups for one ledger. Opens its own :class:`Ledger`."""

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
    ) -> None:
        self.target = os.fspath(target)
        self.read_only = read_only
        self.clock = clock
        self.batch = batch
        self.fallback_poll_s = fallback_poll_s
        self.step_ms = step_ms
        self.use_inotify = use_inotify
        self.debounce_ms = debounce_ms
        t = parse_target(self.target)
        self.backend = t.backend
        self.path = os.path.abspath(t.path) if t.backend == "sqlite" and t.path else None
        self._lock = threading.Lock()
        self._ledger: Ledger | None = None
        self._identity: tuple[int, int] | None = None
        self.listener_pid: int | None = None  # PostgreSQL: the LISTEN connection's backend pid
        self.listen_count = 0  # PostgreSQL: how many times LISTEN was (re-)established

    # ------------------------------------------------------------------ the ledger
    @property
    def ledger(self) -> Ledger:
        """The open ledger (opened on first use; reopened after :meth:`check` saw it replaced)."""
        with self._lock:
            if self._ledger is None:
                self._ledger = self._open()
            return self._ledger

    def _open(self) -> Ledger:
        ledger = Ledger.open(self.target, create=False, read_only=self.read_only, clock=self.clock)
        self._identity = self._stat_identity()
        return ledger

    def _stat_identity(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise LedgerUnavailable(f"the ledger {self.path} has disappeared; waiting for it to return") from None
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
        # without a readable -shm (and a directory it may create it in) it reads a snapshot.
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
                raise self._unavailable(e) from None
        except (pw.DatabaseError, sqlite3.Error) as e:
            raise self._unavailable(e) from None
        try:  # PostgreSQL: the read connection dropped; one more try on a fresh one
            return fn()
        except WardenError:
            raise
        except (pw.DatabaseError, pw.InterfaceError, sqlite3.Error) as e:
            raise self._unavailable(e) from None

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

    def _unavailable(self, e: BaseException) -> LedgerUnavailable:
        msg = " ".join(str(e).split()) or type(e).__name__
        where = self.path or (self._ledger.display if self._ledger is not None else "the PostgreSQL ledger")
        return LedgerUnavailable(f"cannot read the ledger {where}: {msg}")

    # ------------------------------------------------------------------ wake-ups
    def _watch_names(self) -> set[str]:
        assert self.path is not None
        base = os.path.basename(self.path)
        return {base, base + "-wal", base + "-shm", base + "-journal"}

    def _notify_source(self) -> AsyncIterator[Any] | None:
        """An async iterator yielding once per change notification, or None to poll only.

        SQLite: watchfiles on the database's files. PostgreSQL: LISTEN/NOTIFY goes here.
        """
        if self.backend == "sqlite" and self.path is not None:
            if self.use_inotify and _inotify() is not None:
                return self._inotify()
            return self._watchfiles()
        if self.backend == "postgresql":
            return self._pg_notifies()
        return None

    async def _pg_notifies(self) -> AsyncIterator[str]:
        """LISTEN on a dedicated autocommit connection; yield once per notification, and once
        after every (re)connect so the reader catches up on what committed while nobody listened."""
        import psycopg

        dbname, kwargs = pg_connect_args(parse_target(self.target))
        wait = PG_RECONNECT_S[0]
        while not self._stop.is_set():
            conn = None
            try:
                conn = await psycopg.AsyncConnection.connect(dbname=dbname, autocommit=True, **kwargs)
                await conn.execute(f"LISTEN {PG_CHANNEL}")
                self.listener_pid = conn.info.backend_pid
                self.listen_count += 1
                wait = PG_RECONNECT_S[0]
                yield "listening"  # catch up from the cursor: LISTEN is in place from here on
                async for _ in conn.notifies():
                    yield "notify"
            except psycopg.Error:
                pass  # dropped or refused: reconnect below, the fallback poll carries on meanwhile
            finally:
                self.listener_pid = None
                if conn is not None:
                    try:
                        await conn.close()
                    except Exception:
                        pass
            try:  # back off, but stop at once when the feed stops
                await asyncio.wait_for(self._stop.wait(), wait)
            except asyncio.TimeoutError:
                pass
            wait = min(PG_RECONNECT_S[1], wait * 2)

    async def _inotify(self) -> AsyncIterator[Any]:
        """Linux: the kernel's inotify on the database's directory, read when the event loop says
        the descriptor is readable — no thread and no timer, so nothing runs while nothing
        changes, and a commit wakes the reader at once. watchfiles' Rust loop wakes every
        ``step`` ms and takes the GIL each time: 1.1 % of a core idle at a 5 ms step (measured
        here), and a 50 ms step would add that much latency. Names are filtered as for
        watchfiles; events that arrive together are one wake-up."""
        lib = _inotify()
        assert lib is not None and self.path is not None
        names = {n.encode() for n in self._watch_names()}
        directory = os.path.dirname(self.path) or "."
        fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes_errno(), "inotify_init1 failed")
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        try:
            # modify, close-after-write, moved to/from, create, delete; and the directory itself
            mask = 0x2 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
            if lib.inotify_add_watch(fd, os.fsencode(directory), mask) < 0:
                raise OSError(ctypes_errno(), f"inotify_add_watch failed on {directory}")
            loop.add_reader(fd, readable.set)
            while not self._stop.is_set():
                await readable.wait()
                readable.clear()
                hit = gone = False
                while True:
                    try:
                        buf = os.read(fd, 65536)
                    except BlockingIOError:
                        break
                    off = 0
                    while off + 16 <= len(buf):
                        _wd, ev_mask, _cookie, size = struct.unpack_from("iIII", buf, off)
                        name = buf[off + 16:off + 16 + size].rstrip(b"\0")
                        off += 16 + size
                        if ev_mask & (0x400 | 0x800 | 0x8000):  # the directory went away / unwatched
                            gone = True
                        elif name in names:
                            hit = True
                if hit:
                    yield "change"
                if gone:
                    return  # the poll carries on; wakeups() restarts the source
        finally:
            try:
                loop.remove_reader(fd)
            except Exception:
                pass
            os.close(fd)

    async def _watchfiles(self) -> AsyncIterator[Any]:
        from watchfiles import awatch

        names = self._watch_names()
        directory = os.path.dirname(self.path or ".") or "."

        def wanted(_change: Any, path: str) -> bool:
            return os.path.basename(path) in names

        async for changes in awatch(
            directory, watch_filter=wanted, step=self.step_ms, debounce=self.debounce_ms,
            recursive=False, rust_timeout=500, yield_on_timeout=False, stop_event=self._stop,
        ):
            yield changes

    async def wakeups(self) -> AsyncIterator[str]:
        """Yield "change" when the ledger's files changed, "poll" every ``fallback_poll_s`` otherwise."""
        self._stop = asyncio.Event()
        ready = asyncio.Event()
        source = self._notify_source()

        async def pump() -> None:
            if source is None:
                return
            try:
                async for _ in source:
                    ready.set()
            except (asyncio.CancelledError, GeneratorExit):
                raise
            except Exception:
                return  # the directory went away or the watcher failed: the poll carries on

        task = asyncio.ensure_future(pump())
        try:
            while True:
                try:
                    await asyncio.wait_for(ready.wait(), self.fallback_poll_s)
                    reason = "change"
                except asyncio.TimeoutError:
                    reason = "poll"
                    if task.done() and source is not None:  # watcher died (directory removed): restart
                        source = self._notify_source()
                        task = asyncio.ensure_future(pump())
                ready.clear()
                yield reason
        finally:
            self._stop.set()
            task.cancel()


def _graph_at(ledger: Ledger, task_id: str) -> tuple[GraphView, int]:
    with read_tx(ledger.db):
        last = ledger.last_event_id()
        graph = ledger.graph(task_id)
    return graph, last


def _tail_at(ledger: Ledger, tail: int) -> tuple[list[TaskView], list[EventView], int]:
    """(tasks, the last ``tail`` events, cursor) from one consistent snapshot."""
    with read_tx(ledger.db):
        last = ledger.last_event_id()
        tasks = ledger.tasks()
        events = ledger.events(max(0, last - tail), limit=tail) if tail else []
    return tasks, events, last


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
        msg = " ".join(str(e).split()) or type(e).__name__
        raise LedgerUnavailable(f"cannot read the ledger {feed.path or feed.target}: {msg}") from None

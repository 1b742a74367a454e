"""Wake-ups when a ledger may have changed: the machinery under :class:`store.reading.feed.Feed` and
:meth:`store.Ledger.wait_for_resolution`.

SQLite: change notifications on the database's directory, filtered to the database file, its
``-wal``, ``-shm`` and ``-journal`` — on Linux straight from inotify on the event loop (no
thread, no timer), elsewhere from ``watchfiles.awatch``. PostgreSQL: ``LISTEN warden_events`` on a
dedicated autocommit connection (a trigger NOTIFYs on every journal insert), re-established with
back-off when it drops. Both with a slow fallback poll, so a missed notification is only late,
never lost. A wake-up is a hint: the reader re-reads what it cares about.

A SQLite file event is not yet a commit: the writer's last write to the ``-wal`` comes before its
fsync and before the commit is published in the ``-shm`` index (through ``mmap``, which inotify does
not report), so a reader woken by the write alone read the old state and was woken again only by
the next write or the poll. A file event therefore starts a short watch with ``PRAGMA
data_version`` (``store/storage/commitprobe.py``), and the reader is woken when the commit is visible
(``"settle"``). A NOTIFY is delivered after its transaction committed: no such watch needed.

``wakeups(on_watching=cb)`` calls ``cb`` once the source is in place (the inotify watch added,
LISTEN issued), so a reader can look *after* that point and miss nothing in between.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import socket
import struct
import sys
from typing import AsyncGenerator, AsyncIterator, Callable, Iterator, Protocol, TypeVar

from store.storage.backends import CONNECT_TIMEOUT_S, unreachable_why
from store.storage.commitprobe import CommitProbe, follow_up_offsets
from store.storage.db import parse_target, pg_client_args, warden_params

PG_CHANNEL = "warden_events"
PG_RECONNECT_S = (0.05, 2.0)  # the listener's reconnect back-off: first and longest wait
# The LISTEN connection is also the console's outage sentinel: a server that goes away
# closes it at once; a network that goes silent is noticed by a ping after PG_PING_S without a
# notification, answered within PG_PING_TIMEOUT_S — so an outage is said within 1.7 s (plus the
# time to show it). A ping is one round trip every 0.4 s on a connection that idles otherwise.
PG_PING_S = 0.4
PG_PING_TIMEOUT_S = 1.2
PG_PING_GRACE_S = 0.1
WATCH_STEP_MS = 5
WATCH_DEBOUNCE_MS = 40
FALLBACK_POLL_S = 5.0  # a safety net: inotify / watchfiles / LISTEN wake the reader at once
POOLED_POLL_S = 0.5  # PostgreSQL with nowhere to LISTEN (a pooler, a replica, no listen= URL): the only wake-up
READ_ONLY_SQLSTATE = "25006"  # what a hot standby answers LISTEN with


_INOTIFY: ctypes.CDLL | None = None
_INOTIFY_LOOKED = False  # whether _INOTIFY was looked for


def inotify_lib() -> ctypes.CDLL | None:
    """libc with inotify (Linux), or None elsewhere: then watchfiles watches instead."""
    global _INOTIFY, _INOTIFY_LOOKED
    if not _INOTIFY_LOOKED:
        _INOTIFY_LOOKED = True
        if sys.platform.startswith("linux"):
            try:
                import ctypes.util

                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                lib.inotify_init1.argtypes = [ctypes.c_int]
                lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
                _INOTIFY = lib
            except (OSError, AttributeError):
                _INOTIFY = None
    return _INOTIFY


def inotify_events(buf: bytes) -> Iterator[tuple[int, bytes]]:
    """(mask, name) of each ``struct inotify_event`` in a buffer read from an inotify descriptor
    (name is b"" for an event on the watched directory itself)."""
    off = 0
    while off + 16 <= len(buf):
        _wd, mask, _cookie, size = struct.unpack_from("iIII", buf, off)
        yield mask, buf[off + 16:off + 16 + size].rstrip(b"\0")
        off += 16 + size


def ctypes_errno() -> int:
    import ctypes

    return ctypes.get_errno()



class Wakeups:
    """Wake-ups for one ledger target (a path or a postgresql:// URL)."""

    def __init__(
        self,
        target: str | os.PathLike[str],
        *,
        fallback_poll_s: float = FALLBACK_POLL_S,
        step_ms: int = WATCH_STEP_MS,
        debounce_ms: int = WATCH_DEBOUNCE_MS,
        use_inotify: bool = True,
        application_name: str = "warden-console",
        probe: Callable[[str], CommitProbe] | None = CommitProbe,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        spacing_s: float = 0.0,
    ) -> None:
        self.target = os.fspath(target)
        # Wake-ups at least this far apart while changes keep coming (the first after a quiet
        # spell at once): meanwhile the file events gather in the kernel and the probe rests, so a
        # write stream costs the loop one turn per spacing, not several per commit (the console
        # passes its LIVE_APPLY_S; 0: every event is looked at as it comes).
        self.spacing_s = spacing_s
        self._held_until = 0.0  # loop time until which the wake-ups are held
        self.connect_timeout_s = connect_timeout_s
        # PostgreSQL: why the LISTEN connection is down (an outage the reader should say), or None.
        self.outage: str | None = None
        # How a SQLite commit is seen to land after its file events (given the database's path);
        # None: a file event wakes the reader alone, with a few blind re-reads after it.
        self.probe = probe
        self.fallback_poll_s = fallback_poll_s
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.use_inotify = use_inotify
        self.application_name = application_name
        t = parse_target(self.target)
        self.backend = t.backend
        self.path = os.path.abspath(t.path) if t.backend == "sqlite" and t.path else None
        # PostgreSQL: where to LISTEN. Through a pooler in transaction mode (``pool=transaction``)
        # LISTEN cannot work (the server session that listened is handed to another client after
        # the statement), so only on the URL's ``listen=`` (a direct or session-pooled connection);
        # without one the reader polls every POOLED_POLL_S instead.
        self.listen_target: str | None = None
        self.separate_listener = False  # LISTEN on another server than the reads (a replica's primary)
        if t.backend == "postgresql":
            params = warden_params(t)
            self.listen_target = params.get("listen") or (None if params.get("pool") == "transaction" else self.target)
            if self.listen_target is None:
                self.fallback_poll_s = min(self.fallback_poll_s, POOLED_POLL_S)
            self.separate_listener = "listen" in params
        self.listener_pid: int | None = None  # PostgreSQL: the LISTEN connection's backend pid
        self._on_watching: Callable[[], None] = _nothing
        self._stop = asyncio.Event()

    def _watch_names(self) -> set[str]:
        assert self.path is not None
        base = os.path.basename(self.path)
        return {base, base + "-wal", base + "-shm", base + "-journal"}

    def _notify_source(self) -> AsyncIterator[object] | None:
        """An async iterator yielding once per change notification, or None to poll only.

        SQLite: watchfiles on the database's files. PostgreSQL: LISTEN/NOTIFY goes here.
        """
        if self.backend == "sqlite" and self.path is not None:
            if self.use_inotify and inotify_lib() is not None:
                return self._inotify()
            return self._watchfiles()
        if self.backend == "postgresql" and self.listen_target is not None:
            return self._pg_notifies()
        return None

    async def _pg_notifies(self) -> AsyncIterator[str]:
        """LISTEN on a dedicated autocommit connection; yield once per notification, and once
        after every (re)connect so the reader catches up on what committed while nobody listened."""
        import psycopg

        listen = parse_target(self.listen_target or self.target)
        dbname, kwargs = pg_client_args(listen, application_name=self.application_name,
                                        connect_timeout_s=self.connect_timeout_s)
        wait = PG_RECONNECT_S[0]
        # A LISTEN connection that just dropped is not yet an outage (pg_terminate_backend, a
        # pooler recycling it): the first reconnect, bounded by PG_PING_TIMEOUT_S, decides.
        dropped = False
        while not self._stop.is_set():
            conn = None
            listening = False
            try:
                connect = psycopg.AsyncConnection.connect(dbname=dbname, autocommit=True, **kwargs)
                if dropped:
                    try:
                        conn = await asyncio.wait_for(connect, PG_PING_TIMEOUT_S)
                    except asyncio.TimeoutError:
                        raise psycopg.OperationalError("timeout expired") from None
                else:
                    conn = await connect
                await conn.execute(f"LISTEN {PG_CHANNEL}")
                listening = True
                dropped = False
                self.listener_pid = conn.info.backend_pid
                self._on_watching()
                wait = PG_RECONNECT_S[0]
                self.outage = None
                yield "listening"  # catch up from the cursor: LISTEN is in place from here on
                while True:
                    async for _ in conn.notifies(timeout=PG_PING_S):
                        yield "notify"
                    # Quiet for PG_PING_S: is the server still there? (A cut network says nothing.)
                    ping = asyncio.ensure_future(conn.execute("SELECT 1"))
                    done, _ = await asyncio.wait({ping}, timeout=PG_PING_TIMEOUT_S)
                    if not done:  # a second chance, in case it was this event loop that stalled (a long render)
                        done, _ = await asyncio.wait({ping}, timeout=PG_PING_GRACE_S)
                    if not done:
                        # Said now; the connection is then dropped without waiting on it (cancelling
                        # the query would itself wait for the silent server).
                        self.outage = _unreachable(listen.display, f"no answer within {PG_PING_TIMEOUT_S:g}s")
                        yield "lost"
                        _abandon(ping, conn)
                        conn = None
                        raise psycopg.OperationalError("no answer to a ping")
                    ping.result()
            except psycopg.Error as e:
                refused_listen = getattr(e, "sqlstate", None) == READ_ONLY_SQLSTATE and self.listener_pid is None
                dropped = listening and self.outage is None  # reconnect at once; said only if that fails
                if not dropped and self.outage is None and not self._stop.is_set() and not refused_listen:
                    self.outage = _unreachable(listen.display, unreachable_why(e, self.connect_timeout_s))
                    yield "lost"
                if refused_listen:
                    # A hot standby (a replica) refuses LISTEN ("during recovery"): no notification will
                    # ever come from it. Poll instead of reconnecting forever; listen= names the primary.
                    self.listen_target = None
                    self.fallback_poll_s = min(self.fallback_poll_s, POOLED_POLL_S)
                    self._on_watching()
                    return
                # dropped or refused: reconnect below, the fallback poll carries on meanwhile
            finally:
                self.listener_pid = None
                if conn is not None:
                    try:
                        await conn.close()
                    except Exception:
                        pass
            if dropped:
                continue  # the deciding reconnect, now
            try:  # back off, but stop at once when the feed stops
                await asyncio.wait_for(self._stop.wait(), wait)
            except asyncio.TimeoutError:
                pass
            wait = min(PG_RECONNECT_S[1], wait * 2)

    async def _inotify(self) -> AsyncIterator[str]:
        """Linux: the kernel's inotify on the database's directory, read when the event loop says
        the descriptor is readable — no thread and no timer, so nothing runs while nothing
        changes, and a commit wakes the reader at once. watchfiles' Rust loop wakes every
        ``step`` ms and takes the GIL each time: 1.1 % of a core idle at a 5 ms step (measured
        here), and a 50 ms step would add that much latency. Names are filtered as for
        watchfiles; events that arrive together are one wake-up."""
        lib = inotify_lib()
        assert lib is not None and self.path is not None
        names = {n.encode() for n in self._watch_names()}
        own = os.path.basename(self.path).encode()
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
            self._on_watching()
            loop.add_reader(fd, readable.set)
            while not self._stop.is_set():
                await readable.wait()
                hold = self._held_until - loop.time()
                if hold > 0:  # wake-ups are held: the kernel gathers (and merges) this burst's events
                    loop.remove_reader(fd)  # (a readable descriptor would wake the loop at every turn)
                    try:
                        await asyncio.sleep(hold)
                    finally:
                        loop.add_reader(fd, readable.set)
                readable.clear()
                hit = gone = moved = False
                while True:
                    try:
                        buf = os.read(fd, 65536)
                    except BlockingIOError:
                        break
                    for ev_mask, name in inotify_events(buf):
                        if ev_mask & (0x400 | 0x800 | 0x8000):  # the directory went away / unwatched
                            gone = True
                        elif ev_mask & 0x4000:  # the kernel's queue overflowed: something changed
                            hit = True
                        elif name == own and ev_mask & (0x40 | 0x80 | 0x100 | 0x200):
                            moved = True  # the ledger file itself moved, removed or (re)created
                        elif name in names:
                            hit = True
                if moved:
                    yield "moved"
                elif hit:
                    yield "change"
                if gone:
                    return  # the poll carries on; wakeups() restarts the source
        finally:
            try:
                loop.remove_reader(fd)
            except Exception:
                pass
            os.close(fd)

    async def _watchfiles(self) -> AsyncIterator[object]:
        from watchfiles import awatch

        names = self._watch_names()
        directory = os.path.dirname(self.path or ".") or "."

        def wanted(_change: object, path: str) -> bool:
            return os.path.basename(path) in names

        self._on_watching()  # awatch cannot say when it is watching: the fallback poll covers the gap
        async for changes in awatch(
            directory, watch_filter=wanted, step=self.step_ms, debounce=self.debounce_ms,
            recursive=False, rust_timeout=500, yield_on_timeout=False, stop_event=self._stop,
        ):
            yield changes

    async def wakeups(self, *, on_watching: Callable[[], None] | None = None) -> AsyncGenerator[str, None]:
        """Yield a reason each time the reader should look (re-read from its cursor):

        * ``"start"`` (SQLite) once at the beginning: anything committed between the reader's own
          first read and the watch being in place is read now;
        * ``"change"``: a notification (PostgreSQL: a NOTIFY, or LISTEN (re-)established; SQLite: a
          file event after which ``data_version`` had already moved);
        * ``"settle"`` (SQLite): a follow-up after a file event found a commit that became visible
          after its last write — the case no file event ever announces (see store/storage/commitprobe.py);
        * ``"poll"``: nothing for ``fallback_poll_s`` (the safety net);
        * ``"lost"`` (PostgreSQL): the LISTEN connection dropped or stopped answering — the server
          is unreachable (``outage`` says how); nothing to read until ``"change"`` says it is back.

        ``on_watching`` is called once the notification source is in place (at once when there is none, or when it
        cannot tell: watchfiles)."""
        self._stop = asyncio.Event()
        self._on_watching = on_watching or _nothing
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        notified = False
        lost = False
        moved = False
        source = self._notify_source()
        if source is None:
            self._on_watching()
        probe = (self.probe(self.path) if self.probe is not None and self.backend == "sqlite" and self.path is not None
                 else None)

        async def pump() -> None:
            nonlocal notified, lost, moved
            if source is None:
                return
            try:
                async for what in source:
                    if what == "lost":
                        lost = True
                    elif what == "moved":
                        moved = True
                    else:
                        notified = True
                    wake.set()
            except (asyncio.CancelledError, GeneratorExit):
                raise
            except Exception:
                return  # the directory went away or the watcher failed: the poll carries on
            wake.set()  # the source ended (a replica refused LISTEN): the poll, maybe shorter now, takes over

        task = asyncio.ensure_future(pump())
        offsets: Iterator[float] | None = None  # the follow-up schedule after the last file event
        since = due = 0.0
        timer: asyncio.TimerHandle | None = None

        # PostgreSQL with notifications from another server than the one read (``listen=`` the
        # primary, the reads on a replica): a NOTIFY may come before the replica has replayed the
        # commit, so it starts a few blind re-reads like a SQLite file event without a probe.
        follow_notifies = probe is None and self.separate_listener

        def arm(now: float) -> None:
            nonlocal offsets, since, due
            offsets = follow_up_offsets(self.fallback_poll_s, blind=probe is None or not probe.usable)
            since, due = now, now + next(offsets)

        reason: str | None = "start" if probe is not None else None
        poll_from = loop.time()  # the fallback poll is due fallback_poll_s after this (which may shrink)
        try:
            while True:
                if reason is None:
                    poll_due = poll_from + self.fallback_poll_s
                    at = poll_due if offsets is None else min(poll_due, due)
                    if timer is not None:
                        timer.cancel()
                    timer = loop.call_at(at, wake.set)
                    await wake.wait()
                    wake.clear()
                    now = loop.time()
                    poll_due = poll_from + self.fallback_poll_s
                    if lost:
                        lost = False
                        reason = "lost"  # PostgreSQL: the server went away (self.outage says how)
                    elif moved:
                        moved = notified = False
                        reason = "change"  # SQLite: the ledger file moved (no commit for the probe to see): look now
                        if probe is not None:
                            arm(now)
                    elif notified:
                        notified = False
                        reason = "change"
                        if probe is not None:  # maybe a commit's first write, maybe its last
                            arm(now)
                            if probe.usable and not probe.moved():
                                reason = None  # not visible yet: the follow-ups will see it land
                        elif follow_notifies:
                            arm(now)
                    elif offsets is not None and now >= due - 0.0002:
                        moved = probe is None or not probe.usable or probe.moved()
                        blind = probe is None or not probe.usable
                        nxt = next(offsets, None)
                        while nxt is not None and since + nxt <= now:  # passed while the loop was busy or held
                            nxt = next(offsets, None)
                        if nxt is None:
                            offsets = None
                        else:
                            due = since + nxt
                        if moved:
                            reason = "settle"
                            if not blind:
                                arm(now)  # another commit may still be on its way
                    elif now >= poll_due - 0.0002:
                        reason = "poll"
                        if task.done() and source is not None:  # watcher died (directory removed): restart
                            source = self._notify_source()
                            task = asyncio.ensure_future(pump())
                    if reason is None:
                        continue
                if probe is not None:
                    probe.mark()  # before the reader reads: what it reads is at least this new
                    if reason == "start":
                        arm(loop.time())
                previous, poll_from = poll_from, loop.time()
                yield reason
                reason = None
                # In a burst (this wake-up came within two spacings of the one before) the next comes
                # no sooner than spacing_s after this one. Not after a lone wake-up: one may be
                # spurious (data_version moved for no new journal row) just before a commit, which
                # must not wait for it.
                if self.spacing_s > 0 and poll_from - previous < 2 * self.spacing_s:
                    self._held_until = poll_from + self.spacing_s
                    hold = self._held_until - loop.time()
                    if hold > 0:
                        await asyncio.sleep(hold)
        finally:
            self._stop.set()
            if timer is not None:
                timer.cancel()
            task.cancel()
            if probe is not None:
                probe.close()



def _nothing() -> None:
    return None


def _unreachable(display: str, why: str) -> str:
    """What ``Wakeups.outage`` says while the LISTEN connection cannot be had."""
    return f"the ledger {display} is unreachable ({why}); reconnecting — what changes meanwhile is shown when it is back"


class _Libpq(Protocol):
    @property
    def socket(self) -> int: ...

    def finish(self) -> None: ...


class _PgConnection(Protocol):
    """psycopg's connection, as :func:`_abandon` drops it (by its libpq connection)."""

    @property
    def pgconn(self) -> _Libpq: ...


_T = TypeVar("_T")


def _abandon(ping: "asyncio.Future[_T]", conn: _PgConnection) -> None:
    """Drop a connection whose server stopped answering, without waiting for it: its socket is
    shut down under libpq (nothing more is sent, and the unanswered query reads its end at once),
    and the libpq connection is freed once that query has failed — never before. psycopg's query
    generator holds the raw libpq pointer while it waits and calls ``PQconsumeInput`` on it every
    0.1 s: freed under it, that read was a use-after-free, which under load (the memory reused)
    hung the UI thread in libpq's ``fflush`` of a garbage trace stream."""
    ping.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no "never retrieved" noise
    try:
        with socket.fromfd(conn.pgconn.socket, socket.AF_INET, socket.SOCK_STREAM) as s:  # (a duplicate)
            s.shutdown(socket.SHUT_RDWR)
    except Exception:  # noqa: BLE001 - already closed: the query fails by itself
        pass

    def free(_: object) -> None:
        try:
            conn.pgconn.finish()
        except Exception:  # noqa: BLE001 - freed already
            pass
    ping.add_done_callback(free)

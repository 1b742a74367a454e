"""Has a SQLite ledger committed anything since we last looked? ``PRAGMA data_version``.

Why the feed needs this (measured): a file notification for a SQLite ledger comes from
the writer's ``pwrite`` calls to the ``-wal`` file, and those happen *before* the commit is
visible. A commit in WAL mode is: write the frames to the WAL (inotify ``IN_MODIFY`` — several
writes coalesce into one event while it is unread), ``fdatasync`` the WAL (``synchronous=FULL``:
0.2 ms on an idle disk, 5–11 ms at load 5, as long as the disk wants under I/O pressure), then
publish the new WAL end in the shared-memory index (``-shm``, written through ``mmap``: inotify
never reports ``mmap`` writes) and release the write lock (``fcntl``: no event either). So the
last notification of a commit comes before its fsync, a reader woken by it reads the old state,
and nothing wakes it again until the next write — a commit with nothing written after it waited
for the next commit or the fallback poll (traced with strace and a monotonic log of every
inotify event: ``tests/bench/trace_wakeups.py``).

The fix in :meth:`store.reading.feed.Feed.wakeups`: a file event only *starts* a short watch; this probe,
one read-only connection asking ``PRAGMA data_version`` (a few microseconds: it reads the WAL
index header from shared memory, no I/O), says when a commit has actually become visible, and
only then is the reader woken. After each file event it is asked on a schedule
(:func:`follow_up_offsets`: 1, 2, 4, 8, 16 ms, then every 10 ms for a second, then ever more
rarely up to the fallback poll), which bounds how long a commit can stay unseen after its last
write to the fsync's own duration plus at most 10 ms during the first second.

``data_version`` changes when *another* connection commits (any process, or the console's own
writes on its other connections); this connection only reads. The mark is taken before each
wake-up is handed to the reader, so whatever the reader reads is at least as new as the mark: a
commit is either seen by that read or moves ``data_version`` past the mark afterwards.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Iterator

from store.storage import lockguard
from store.storage.sqlite_file import uri

FIRST_FOLLOW_UP_S = 0.001
FOLLOW_UP_STEP_S = 0.010  # the widest gap between two checks during the first second
FOLLOW_UP_DENSE_S = 1.0  # checked densely this long after a file event; then ever more rarely


BLIND_FOLLOW_UPS_S = (0.005, 0.025, 0.1, 0.25, 1.0)  # without a probe: re-read this often, no more


def follow_up_offsets(until_s: float, *, blind: bool = False) -> Iterator[float]:
    """When to look again after a file event (seconds after it): doubling from 1 ms to a 10 ms
    step, every 10 ms up to one second, then doubling again until ``until_s`` (the fallback poll,
    which takes over from there). ``blind`` (no probe: each look is a read): a few, sparse."""
    if blind:
        yield from (t for t in BLIND_FOLLOW_UPS_S if t < until_s)
        return
    t = FIRST_FOLLOW_UP_S
    while t < FOLLOW_UP_DENSE_S:
        yield t
        t += min(t, FOLLOW_UP_STEP_S)
    while t < until_s:
        yield t
        t *= 2


class CommitProbe:
    """``PRAGMA data_version`` on a read-only connection of its own (never busy-waits: a locked or
    unreadable database answers "moved", so the reader goes and looks for itself)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._con: sqlite3.Connection | None = None
        self._ident: tuple[int, int] | None = None
        self._mark: int | None = None

    def _version(self) -> int | None:
        try:
            if self._con is None:
                st = os.stat(self.path)
                self._con = lockguard.connect(self.path, uri(self.path, mode="ro"), uri=True, timeout=0,
                                              isolation_level=None, check_same_thread=False)
                self._ident = (st.st_dev, st.st_ino)
            row = self._con.execute("PRAGMA data_version").fetchone()
            return int(row[0])
        except (sqlite3.Error, OSError):
            self.close()
            return None

    def mark(self) -> None:
        """Remember the current version: call it before the reader reads. A file replaced under
        the same name (new inode) gets a new connection."""
        if self._con is not None:
            try:
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) != self._ident:
                    self.close()
            except OSError:
                self.close()
        self._mark = self._version()

    @property
    def usable(self) -> bool:
        """The last :meth:`mark` read a version (else the caller falls back to blind re-reads)."""
        return self._mark is not None

    def moved(self) -> bool:
        """True when something was committed since :meth:`mark` (or the probe cannot tell)."""
        v = self._version()
        return v is None or self._mark is None or v != self._mark

    def close(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            try:
                lockguard.disconnect(con)
            except sqlite3.Error:
                pass


__all__ = ["CommitProbe", "follow_up_offsets"]

"""SQLite writers take turns: a queue in front of ``BEGIN IMMEDIATE``.

SQLite lets one writer at a time hold a ledger's write lock. A writer that finds it taken runs
SQLite's busy handler, which *sleeps* between tries — 1, 2, 5, 10 … then 100 ms at a time —
while writers arriving meanwhile try at once and win. Under 20 agent processes writing 200 times
a second a claim waited 2.65 s that way (docs/performance.md), though each write holds the lock
for a few milliseconds.

So every write transaction of a Warden SQLite ledger first takes an exclusive ``flock`` on a
small file beside it, ``<ledger>-writers``, and lets it go when the transaction ends (commit or
rollback). A writer that finds the gate taken waits in the kernel and is woken the moment it is
released: no sleeping through free moments, so the longest wait is a few writes long, not a
streak of unlucky tries.

* ``flock``, not ``fcntl``: POSIX (``fcntl``) locks belong to the process and close with any of its
  descriptors of the file; ``flock`` locks belong to one open file, so two connections of one
  process queue like two processes do. The gate is its own file: the ledger itself is never
  opened outside SQLite (:mod:`store.storage.lockguard`).
* Bounded: a writer waits at most ``busy_timeout_s`` in all — at the gate, then for SQLite's lock
  with what is left of it — then gets ``LedgerBusy`` as it would from SQLite (a writer stopped
  with its transaction open — ``kill -STOP`` — holds both). The wait runs in a helper thread so
  it can be abandoned; an abandoned wait stays in the queue for the next writer at that gate to
  take over (a holder stopped for an hour leaves one waiting thread, not one per retry), and lets
  the gate go the moment it gets it if nobody did.
* Best effort: a ledger whose directory cannot hold the file (read-only, a symlink or a FIFO in
  its place) writes as before, under SQLite's busy handler alone. Other programs (the ``sqlite3``
  shell) do not know the gate; SQLite's own lock still excludes them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
import time
from typing import Callable, Iterator

__all__ = ["GATE_SUFFIX", "held", "tidy"]

GATE_SUFFIX = "-writers"


_lock = threading.Lock()  # guards _abandoned

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_gate(path: str, ours: Callable[[], None]) -> int | None:
    """A descriptor of the gate file, or None where it cannot be a plain file of ours."""
    gate = path + GATE_SUFFIX
    try:
        # read-only (flock needs no more): closing it raises no close-after-write event for the
        # console's inotify watch on the ledger's directory
        try:
            fd = os.open(gate, _FLAGS)
        except FileNotFoundError:
            try:
                fd = os.open(gate, _FLAGS | os.O_CREAT | os.O_EXCL, 0o644)
                ours()
            except FileExistsError:
                # Another writer made it between our two opens (a fleet's agents starting at once
                # on a ledger at rest): queue at theirs. Going on without a gate, as before, left
                # those first writes to SQLite's busy handler: claims of 0.5-1.4 s at a fleet's start.
                fd = os.open(gate, _FLAGS)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


class _Wait:
    """A blocking ``flock`` in a helper thread, on its own descriptor of the gate."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.got = threading.Event()
        self.abandoned = False


# Waits given up (past their timeout) and still blocked in the kernel, by gate file. The next
# writer to queue at the same gate takes one over instead of starting another thread: a holder
# stopped for an hour leaves one waiting thread, not one per retry.
_abandoned: dict[str, list[_Wait]] = {}


def _run(gate: str, w: _Wait) -> None:
    try:
        fcntl.flock(w.fd, fcntl.LOCK_EX)
        got = True
    except OSError:
        got = False
    with _lock:
        if got and not w.abandoned:
            w.got.set()
            return
        if w in _abandoned.get(gate, []):
            _abandoned[gate].remove(w)
    os.close(w.fd)  # nobody waits for it any more: let the next writer in


def _wait_for(gate: str, fd: int, timeout_s: float) -> int | None:
    """Queue at the gate (blocking in a helper thread, for at most ``timeout_s``): the descriptor
    that holds it, or None when it was not had in time."""
    with _lock:
        waits = _abandoned.get(gate)
        w = waits.pop(0) if waits else None
        if w is not None:
            w.abandoned = False
    if w is None:
        w = _Wait(fd)
        threading.Thread(target=_run, args=(gate, w), name="warden-write-gate", daemon=True).start()
    else:
        os.close(fd)  # an earlier wait, still in the queue, goes on for this writer
    if w.got.wait(timeout_s):
        return w.fd
    with _lock:
        if w.got.is_set():
            return w.fd
        w.abandoned = True
        _abandoned.setdefault(gate, []).append(w)
    return None


@contextlib.contextmanager
def held(path: str, timeout_s: float, busy: Callable[[], Exception], ours: Callable[[], None],
         sqlite_wait: Callable[[float], None] | None = None) -> Iterator[None]:
    """Hold the gate of the SQLite ledger at ``path`` for the ``with`` body (a write transaction);
    raise ``busy()`` when it is not had within ``timeout_s``. ``ours()`` is called when this made
    the gate file or a write went through it: the caller may then :func:`tidy` it when it closes
    (one that only failed leaves the directory as it found it).

    ``timeout_s`` is the whole wait, gate and SQLite's lock together: after waiting at the gate,
    ``sqlite_wait(left)`` gives SQLite's busy handler what is left of it for this transaction (a
    process outside Warden may hold SQLite's lock, and a writer queued behind another that waited
    on it would otherwise wait twice), and ``sqlite_wait(timeout_s)`` puts it back afterwards."""
    fd = _open_gate(path, ours) if path else None
    if fd is None:
        yield
        return
    shortened = False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        start = time.monotonic()
        got = _wait_for(path + GATE_SUFFIX, fd, timeout_s)
        if got is None:
            raise busy() from None  # the wait goes on in its thread and lets the gate go once it has it
        fd = got
        if sqlite_wait is not None:
            try:
                sqlite_wait(max(0.001, timeout_s - (time.monotonic() - start)))
                shortened = True
            except BaseException:
                os.close(fd)
                raise
    except OSError:  # flock not supported here (some network file systems): SQLite alone
        os.close(fd)
        yield
        return
    try:
        yield
        ours()  # a write went through it
    finally:
        try:
            if shortened and sqlite_wait is not None:
                sqlite_wait(timeout_s)
        finally:
            os.close(fd)  # closing the file lets the gate go


def tidy(path: str) -> None:
    """After a Ledger that made the gate or wrote through it closed: when SQLite removed the
    ledger's ``-wal`` (its last connection closed), remove the gate too, so a ledger at rest is
    one file again. A writer that opened the old gate meanwhile only loses its place in the queue
    for that write (SQLite's lock still excludes); the next one makes the file again."""
    gate = path + GATE_SUFFIX
    try:
        if os.path.lexists(path + "-wal") or not stat.S_ISREG(os.lstat(gate).st_mode):
            return
        os.unlink(gate)
    except OSError:
        pass

"""Never drop this process's SQLite locks: the files a ledger lives in are left to SQLite.

SQLite locks a database with POSIX advisory locks (``fcntl``), and those belong to the *process*,
not to a descriptor: closing **any** descriptor of the ledger file — one opened to peek at its
header, to hash it as a "changed file", to read it from a run directory — drops every lock every
SQLite connection of this process holds on it. Another process then believes it is the last
connection, checkpoints and deletes the ``-wal`` under a live writer, and that writer's later
commits go into a deleted file (sqlite.org/howtocorrupt.html §2.2). SQLite's own
connections are safe with one another: the one libsqlite3 of the process keeps a per-inode lock
table and defers closing a descriptor while any connection holds a lock (checked: the ``READ``
lock of an idle WAL connection, ``/proc/locks``, survives other connections' closes, including
``immutable=1`` and ``mode=ro`` ones; it does not survive an ``os.close``).

So this module is the one place that opens a file Warden did not write:

* :func:`opening`, :func:`track` — the SQLite ledgers this process has connections on, by
  path, recorded *before* SQLite opens them (:func:`connect` for a momentary probe);
* :func:`protected` — is this file (``os.stat_result``) a ledger of this process, its ``-wal``,
  ``-shm`` or ``-journal``, or any file this process holds a descriptor on (``/proc/self/fd``,
  read with ``stat``, which opens nothing)? Such a file is never opened outside SQLite;
* :func:`close` — close a descriptor we opened, unless the file became protected meanwhile (a
  hard link made after the check, a ledger opened by another thread): then it stays open for
  the life of the process (closing it would be the bug; keeping it costs one descriptor);
* :func:`read_regular` — a file an agent named, read the safe way: ``lstat`` first (nothing
  but a regular file is opened: a FIFO would block, ``/dev/zero`` never ends), opened
  ``O_NOFOLLOW | O_NONBLOCK``, ``fstat``-checked to be the same regular file, read with a byte
  cap and a time bound;
* the **fork** guard: a process started by ``fork()`` (``multiprocessing``'s default start on
  Linux) inherits the parent's SQLite connections and SQLite's per-inode lock table. Using or
  closing an inherited connection, or opening the same file again in the child, works from a
  copy of the parent's lock state that the kernel does not honour (howtocorrupt §2.7). The
  connections open at the fork are kept alive (never closed by the child) and
  :func:`inherited` names the files they were on; ``store.storage.backends`` refuses to use them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
import threading
import time
import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator, Literal

SIDE_FILES = ("-wal", "-shm", "-journal")
PROC_FDS = "/proc/self/fd"

_lock = threading.RLock()
_opening: Counter[str] = Counter()  # ledger paths SQLite is opening now (not yet tracked)
_kept: list[int] = []  # descriptors that could not be closed safely: open until the process ends

# Raw driver connections now open, with the ledger file each is on (SQLite) or None (PostgreSQL).
_open_connections: "weakref.WeakKeyDictionary[object, str | None]" = weakref.WeakKeyDictionary()
_at_fork: list[tuple[object, str | None]] = []  # strong references across a fork (see _before_fork)
_inherited: dict[str, int] = {}  # in a forked child: ledger path → the parent's pid
_parent_pid: int | None = None


# ---------------------------------------------------------------------- ledgers and protected files
@contextlib.contextmanager
def opening(path: str) -> Iterator[None]:
    """Around SQLite opening the ledger ``path`` (absolute) and until its connection is tracked:
    the file is protected from before SQLite can take a lock on it."""
    with _lock:
        _opening[path] += 1
    try:
        yield
    finally:
        with _lock:
            _opening[path] -= 1
            if not _opening[path]:
                del _opening[path]


class SqliteConnection(sqlite3.Connection):
    """``sqlite3.Connection`` that can be tracked by weak reference (the C type cannot)."""

    inode: tuple[int, int] | None = None  # (st_dev, st_ino) of the ledger file when it was opened


def connect(path: str, target: str, *, uri: bool = False, timeout: float = 5.0, isolation_level: Literal["DEFERRED", "EXCLUSIVE", "IMMEDIATE"] | None = "DEFERRED",
            check_same_thread: bool = True) -> sqlite3.Connection:
    """``sqlite3.connect(target, ...)`` for a momentary connection on the ledger ``path`` (a
    probe), tracked like the ledger's own; close it with :func:`disconnect`."""
    with opening(path):
        con = sqlite3.connect(target, factory=SqliteConnection, uri=uri, timeout=timeout,
                              isolation_level=isolation_level, check_same_thread=check_same_thread)
        track(con, path)
    return con


def disconnect(con: sqlite3.Connection) -> None:
    untrack(con)
    con.close()


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _ledger_inodes() -> set[tuple[int, int]]:
    out: set[tuple[int, int]] = set()
    paths = set(_opening) | {p for p in _open_connections.values() if p is not None}
    for base in paths:
        for name in (base, *(base + s for s in SIDE_FILES)):
            try:
                out.add(_identity(os.stat(name)))
            except OSError:
                pass
    return out


def _held_inodes(skip: int | None = None) -> set[tuple[int, int]]:
    """Inodes of every descriptor this process holds (``stat`` of ``/proc/self/fd/N``: follows
    the link, opens nothing). Empty where there is no ``/proc``."""
    out: set[tuple[int, int]] = set()
    try:
        names = os.listdir(PROC_FDS)
    except OSError:
        return out
    for name in names:
        if skip is not None and name == str(skip):
            continue
        try:
            st = os.stat(f"{PROC_FDS}/{name}")
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.add(_identity(st))
    return out


def protected(st: os.stat_result, *, skip_fd: int | None = None) -> bool:
    """True when the file ``st`` describes must not be opened and closed outside SQLite: a ledger
    of this process or one of its side files, or a file this process already has open
    (``skip_fd``: our own descriptor of it, not counted)."""
    ident = _identity(st)
    with _lock:
        return ident in _ledger_inodes() or ident in _held_inodes(skip_fd)


def close(fd: int) -> None:
    """Close a descriptor of a regular file we opened — unless that file is now protected (see
    :func:`protected`): then it is kept open until the process ends, which drops nothing."""
    with _lock:
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return
        if stat.S_ISREG(st.st_mode) and protected(st, skip_fd=fd):
            _kept.append(fd)
            return
        os.close(fd)



# ---------------------------------------------------------------------- reading a file an agent named
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
READ_FLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
CHUNK = 1 << 20


@dataclass(frozen=True)
class Fingerprint:
    """What :func:`read_regular` saw. ``problem`` (one line, the path not included) when the path
    is not a regular file Warden may read; ``sha256`` None when it was too big or too slow to
    hash (then size and mtime are all there is)."""

    exists: bool
    size: int | None = None
    mtime_ns: int | None = None
    sha256: str | None = None
    problem: str | None = None
    kind: str = "file"


def kind_of(mode: int) -> str:
    """A file type in words: file, directory, symbolic link, FIFO, socket, device, other."""
    for test, word in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "directory"), (stat.S_ISLNK, "symbolic link"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"),
                       (stat.S_ISBLK, "device")):
        if test(mode):
            return word
    return "other"


def not_regular(kind: str) -> str:
    what = "something else" if kind == "other" else f"a {kind}"
    return f"not a regular file ({what})"


def read_regular(path: str, *, max_bytes: int, max_s: float,
                 clock: Callable[[], float] = time.monotonic) -> Fingerprint:
    """Fingerprint the regular file at ``path`` without following a link, without blocking on a
    FIFO or device, without reading a ledger of this process, and within ``max_bytes`` and
    ``max_s`` (past either bound the sha256 is None: compared by size and mtime)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return Fingerprint(exists=False)
    except OSError as e:
        return Fingerprint(exists=True, problem=f"cannot be looked at ({e.strerror})", kind="other")
    kind = kind_of(st.st_mode)
    if kind != "file":
        return Fingerprint(exists=True, problem=not_regular(kind), kind=kind)
    base = Fingerprint(exists=True, size=st.st_size, mtime_ns=st.st_mtime_ns)
    if protected(st):
        return Fingerprint(exists=True, size=st.st_size, mtime_ns=st.st_mtime_ns,
                           problem="a ledger file this process has open; not read", kind="ledger")
    if st.st_size > max_bytes:
        return base
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as e:  # ELOOP: it became a link since the lstat
        return Fingerprint(exists=True, problem=f"cannot be opened without following links ({e.strerror})",
                           kind="other")
    try:
        st2 = os.fstat(fd)
        kind2 = kind_of(st2.st_mode)
        if kind2 != "file":
            return Fingerprint(exists=True, problem=not_regular(kind2), kind=kind2)
        if _identity(st2) != _identity(st):
            return Fingerprint(exists=True, problem="changed while being opened; not read", kind="other")
        h = hashlib.sha256()
        start, total = clock(), 0
        while True:
            block = os.read(fd, CHUNK)
            if not block:
                break
            total += len(block)
            if total > max_bytes or clock() - start > max_s:
                return Fingerprint(exists=True, size=st2.st_size, mtime_ns=st2.st_mtime_ns)
            h.update(block)
        return Fingerprint(exists=True, size=st2.st_size, mtime_ns=st2.st_mtime_ns, sha256=h.hexdigest())
    except OSError as e:
        return Fingerprint(exists=True, problem=f"cannot be read ({e.strerror})", kind="other")
    finally:
        close(fd)


# ---------------------------------------------------------------------- fork
def track(conn: object, path: str | None) -> None:
    """A driver connection was opened (``path``: the SQLite ledger it is on; None: PostgreSQL)."""
    with _lock:
        _open_connections[conn] = path


def untrack(conn: object) -> None:
    with _lock:
        _open_connections.pop(conn, None)


def is_inherited(conn: object) -> bool:
    """True for a driver connection this (forked) process inherited from its parent."""
    return bool(_at_fork) and any(c is conn for c, _ in _at_fork)


def inherited(path: str | None) -> int | None:
    """In a process made by ``fork()``: the parent's pid when the parent had a connection open
    on the SQLite ledger ``path`` at the fork (None: not inherited, or not a forked child)."""
    return _inherited.get(path) if path is not None else None


def forked_from() -> int | None:
    """The parent's pid when this process was made by ``fork()`` with ledger connections open."""
    return _parent_pid


def _before_fork() -> None:
    # Strong references held across the fork, so that the child — where CPython clears the other
    # threads' state — never deallocates (and so never sqlite3_close()s or psycopg-terminates)
    # a connection that belongs to the parent.
    _lock.acquire()
    _at_fork[:] = list(_open_connections.items())


def _after_fork_parent() -> None:
    _at_fork.clear()
    _lock.release()


def _after_fork_child() -> None:
    global _parent_pid
    if _at_fork:
        parent = os.getppid()
        _parent_pid = parent
        for _conn, path in _at_fork:
            if path is not None:
                _inherited[path] = parent
    _open_connections.clear()
    _lock.release()
    # _at_fork keeps the inherited connections alive (never closed here) for the child's life.


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent,
                        after_in_child=_after_fork_child)

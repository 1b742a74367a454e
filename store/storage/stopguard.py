"""A supervised process is never stopped in the middle of a ledger write (docs/agents.md, "warden run").

``warden run`` parks its command by stopping every process of it. A process stopped inside a
write transaction would keep the ledger's write gate and SQLite's write lock (or a PostgreSQL
transaction's row locks) until it is resumed: every other writer, ``warden resume`` included,
would wait out its busy timeout. So the stop and the writes take turns through a *stop guard*:

* ``warden run`` makes a guard (a private directory with two empty files, ``entry`` and
  ``held``) and names it in the command's environment, ``WARDEN_STOP_GUARD`` (a nested ``warden
  run`` appends its own, ``:``-separated);
* every write transaction of a Ledger opened in such an environment — an agent's own script,
  ``warden mcp``, ``warden hook`` — first takes each guard: ``flock`` ``entry`` exclusively (a
  moment), ``held`` shared, lets ``entry`` go, and holds ``held`` until the transaction ends
  (both backends; before the write gate, so a writer waiting here holds nothing);
* before it stops the command, the supervisor takes ``entry`` exclusively (no write starts),
  then ``held`` exclusively (the writes under way finish), stops every process, and lets both go:
  a process waiting at the guard is stopped while it waits, holding nothing. A process of the
  command found stopped by someone else (``kill -STOP``) while the writes cannot finish is
  continued, its write awaited, and stopped again.

Innermost guard first: a nested supervisor's stop never leaves an outer guard held.
The wait is bounded by the ledger's busy timeout (then ``LedgerBusy``), like the write gate's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from typing import Callable, ContextManager, Iterator

from store.errors import LedgerBusy

__all__ = ["ENV", "StopGuard", "for_db", "writing"]

ENV = "WARDEN_STOP_GUARD"
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open(path: str) -> int | None:
    try:
        return os.open(path, _FLAGS)
    except OSError:
        return None


def _take(fd: int, how: int, deadline: float, meanwhile: Callable[[], None] | None = None) -> bool:
    """``flock`` ``fd`` by ``deadline`` (the guard is contended only while a stop is made: a
    short poll is cheaper than a helper thread)."""
    pause = 0.0005
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError:  # flock not supported here: no guard
            return True
        if time.monotonic() >= deadline:
            return False
        if meanwhile is not None:
            meanwhile()
        time.sleep(pause)  # the holder is a write under way (milliseconds) or a stop being made
        pause = min(pause * 2, 0.005)


@contextlib.contextmanager
def writing(timeout_s: float, busy: Callable[[], Exception]) -> Iterator[None]:
    """Hold every guard named in ``WARDEN_STOP_GUARD`` (shared) for one write transaction;
    ``busy()`` is raised when they are not had within ``timeout_s``."""
    names = [p for p in os.environ.get(ENV, "").split(":") if p]
    if not names:
        yield
        return
    deadline = time.monotonic() + timeout_s
    held: list[int] = []
    try:
        for name in reversed(names):  # innermost first
            entry = _open(os.path.join(name, "entry"))
            hold = _open(os.path.join(name, "held"))
            if entry is None or hold is None:  # the supervisor is gone (or the guard was never made)
                for fd in (entry, hold):
                    if fd is not None:
                        os.close(fd)
                continue
            try:
                ok = _take(entry, fcntl.LOCK_EX, deadline) and _take(hold, fcntl.LOCK_SH, deadline)
            finally:
                os.close(entry)
            held.append(hold)
            if not ok:
                raise busy()
        yield
    finally:
        for fd in held:
            os.close(fd)  # closing lets the guard go


def for_db(db: object) -> ContextManager[None]:
    """:func:`writing` with a ledger's busy timeout and its own ``LedgerBusy``."""
    timeout = float(getattr(db, "busy_timeout_s", None) or 30.0)
    busy = getattr(db, "busy", None) or getattr(db, "_busy", None)

    def fallback() -> Exception:
        return LedgerBusy(f"the ledger stayed busy for {timeout:g}s: a supervised stop did not end; nothing was written")

    return writing(timeout, busy if callable(busy) else fallback)


class StopGuard:
    """The supervisor's side: made in a private directory, removed by :meth:`close`."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix="warden-stop-guard-")
        for name in ("entry", "held"):
            with open(os.path.join(self.path, name), "w"):
                pass

    def env_value(self, inherited: str | None) -> str:
        """``WARDEN_STOP_GUARD`` for the command: the guards it inherits, then ours."""
        return ":".join([p for p in (inherited or "").split(":") if p] + [self.path])

    @contextlib.contextmanager
    def exclusive(self, timeout_s: float, meanwhile: Callable[[], None] | None = None) -> Iterator[bool]:
        """No write of the command starts or is under way for the ``with`` body. Yields False when
        the writes under way did not finish within ``timeout_s`` (the body goes on regardless:
        a stop cannot wait forever). ``meanwhile`` is called while waiting."""
        entry, hold = _open(os.path.join(self.path, "entry")), _open(os.path.join(self.path, "held"))
        try:
            deadline = time.monotonic() + timeout_s
            ok = entry is not None and hold is not None and _take(entry, fcntl.LOCK_EX, deadline) \
                and _take(hold, fcntl.LOCK_EX, deadline, meanwhile)
            yield ok
        finally:
            for fd in (entry, hold):
                if fd is not None:
                    os.close(fd)

    def writing_now(self) -> bool:
        """Whether a write of the command is under way (``held`` is had shared)."""
        fd = _open(os.path.join(self.path, "held"))
        if fd is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

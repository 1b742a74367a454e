"""The database classes of each backend: driver errors made typed, lost connections re-made.

Every statement, ``BEGIN``, ``COMMIT`` and ``ROLLBACK`` Warden sends goes through these classes,
so this is the one place that decides what a driver error means:

* **A lost PostgreSQL connection** (server restart or failover, ``pg_terminate_backend``, a
  network cut; SQLSTATE class 08, 57P01-57P03, or the driver saying the connection is closed):
  - outside a transaction (a plain read, a ``BEGIN``, the first statement after a drop) the
    connection is re-made with bounded, jittered back-off (:class:`Backoff`) and the statement
    re-sent;
  - inside a transaction it raises :class:`ConnectionLost`: the transaction is gone, and only
    the caller that opened it can re-run it (``db.run_write`` / ``db.run_read``). A lost
    ``COMMIT`` is *in doubt* (``ConnectionLost.in_doubt``): it may have committed.
  When the server stays away longer than the back-off's budget the error is
  :class:`~store.errors.LedgerUnavailable` with one line.
* **A lock not had in time** (SQLite ``database is locked`` after the busy timeout; PostgreSQL
  ``lock_timeout``, set to the same number of seconds) → :class:`LedgerBusy`.
* **SQLite I/O errors** (disk I/O error, disk full, cannot open, corrupt image) →
  :class:`~store.errors.LedgerUnavailable`.

Everything else (constraint violations, deadlocks, serialization failures) passes through as
Peewee raised it, for the layers above that handle those.
"""

from __future__ import annotations

import math
import os
import random
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import peewee as pw

from store.storage import lockguard
from store.errors import ConnectionLost, LedgerBusy, LedgerUnavailable, ReadOnly
from store.storage.sql import DriverConnection, DriverCursor, pg_session, pg_transaction
from store.text import safe_line

BUSY_TIMEOUT_S = 30.0
RECONNECT_BUDGET_S = 30.0
CONNECT_TIMEOUT_S = 10.0  # how long an open waits for a PostgreSQL server it cannot reach
# SQLSTATEs meaning "this connection is gone" (besides class 08, connection_exception): the
# server's admin/crash shutdown, "the database system is starting up / shutting down", too many
# connections (at connect time).
LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})
LOCK_TIMEOUT_SQLSTATE = "55P03"
# The server has no room: its disk is full (53100) or it is out of memory (53200).
PG_NO_ROOM = {"53100": "its disk is full", "53200": "it is out of memory"}
# SQLite primary result codes that mean the database cannot be used right now.
SQLITE_BUSY_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
SQLITE_IO_CODES = {10: "an I/O error", 11: "a corrupt database image", 13: "a full disk",
                   14: "a file it cannot open"}
SQLITE_FULL = 13
DISK_FULL_BYTES = 64 * 1024  # less free than this beside the ledger: an I/O error there is the full disk


def _fs_of(path: str) -> os.statvfs_result | None:
    """``statvfs`` of the file system ``path`` (a file in its directory) is on, or None."""
    try:
        return os.statvfs(os.path.dirname(path) or ".")
    except OSError:
        return None


def free_space(path: str) -> str:
    """How much room the file system of ``path`` has left, in words (for a message)."""
    st = _fs_of(path)
    if st is None:
        return "free space unknown"
    free = st.f_bavail * st.f_frsize
    return f"{free // 1024} KiB free" if free < 10 * 1024 * 1024 else f"{free // (1024 * 1024)} MiB free"


def disk_full(path: str) -> bool:
    """True when the file system of the ledger ``path`` has (almost) no room left for this user:
    SQLite reports a full disk as SQLITE_FULL, but growing ``-shm`` or creating ``-wal`` on a full
    file system comes back as an I/O error or "unable to open"."""
    st = _fs_of(path) if path else None
    if st is None:
        return False
    return st.f_bavail * st.f_frsize < DISK_FULL_BYTES or (st.f_favail == 0 and st.f_files > 0)


@dataclass
class Backoff:
    """How long and how often to try to reconnect: waits start at ``first_s`` and double up to
    ``max_s`` (each drawn in [w/2, w], so many agents do not reconnect in step), for at most
    ``budget_s`` in all, measured on ``clock``. ``sleep`` and ``clock`` are injectable."""

    budget_s: float = RECONNECT_BUDGET_S
    first_s: float = 0.05
    max_s: float = 2.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)

    def wait(self, attempt: int) -> float:
        w = min(self.max_s, self.first_s * (2 ** max(0, attempt - 1)))
        return self.rng.uniform(w / 2, w)


def one_line(e: BaseException) -> str:
    """A driver's message as one line, escaped (it may quote a path or a value from outside)."""
    return safe_line(" ".join(str(e).split()) or type(e).__name__)


def sqlstate(e: BaseException | None) -> str | None:
    """The SQLSTATE behind a (Peewee-wrapped) driver error, if any."""
    seen = 0
    while e is not None and seen < 8:
        code = getattr(e, "sqlstate", None)
        if code:
            return str(code)
        inner = e.args[0] if getattr(e, "args", None) and isinstance(e.args[0], BaseException) else None
        e = inner or e.__cause__ or e.__context__
        seen += 1
    return None


def sqlite_code(e: BaseException | None) -> int | None:
    """The SQLite primary result code behind a (Peewee-wrapped) driver error, if any."""
    seen = 0
    while e is not None and seen < 8:
        code = getattr(e, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF  # the primary result code
        inner = e.args[0] if getattr(e, "args", None) and isinstance(e.args[0], BaseException) else None
        e = inner or e.__cause__ or e.__context__
        seen += 1
    return None


def is_connection_lost(e: BaseException) -> bool:
    """True when a PostgreSQL error means the connection is gone (not that a statement failed)."""
    code = sqlstate(e)
    if code is not None:
        return code.startswith("08") or code in LOST_SQLSTATES
    # No SQLSTATE: the client library's own "connection closed / lost / refused".
    return isinstance(e, (pw.InterfaceError, pw.OperationalError))


class RequestState(threading.local):
    """The write a thread is running under ``db.run_write`` (PostgreSQL), if any: its request id,
    whether its ``write_tx`` joined the transaction ``run_write`` opened, and whether that body
    completed."""

    rid: str | None = None
    joined: bool = False
    body_done: bool = False
    rerunnable: int = 0  # > 0 while run_read / run_write will re-run what this thread runs


class _Outage(threading.local):
    since: float | None = None  # when this thread first saw the connection gone (backoff clock)
    attempt: int = 0


def _refuse_inherited(db: "WardenSqlite | WardenPostgres") -> None:
    """A connection this process inherited across fork() is the parent's: never used here."""
    if lockguard.forked_from() is not None and not db.is_closed() and lockguard.is_inherited(db.connection()):
        raise db.forked_error(lockguard.forked_from() or 0)


def _close_tracked(db: "WardenSqlite | WardenPostgres", close: Callable[[], bool]) -> bool:
    """Close this thread's connection — unless it is the parent's, inherited across fork(): closing
    it here could delete the parent's -wal (SQLite) or end its session (PostgreSQL); it is left
    open, and :mod:`store.storage.lockguard` keeps it alive, unused."""
    if db.is_closed():
        return bool(close())
    conn = db.connection()
    lockguard.untrack(conn)
    if lockguard.is_inherited(conn):
        return False
    return bool(close())


class WardenSqlite(pw.SqliteDatabase):
    read_only = False
    backend = "sqlite"
    display = ""  # what to call it in messages: the file's path, escaped
    busy_timeout_s = BUSY_TIMEOUT_S
    path = ""  # the file
    snapshot = False  # read-only and immutable: SQLite could not share the WAL index (see sqlite_file)
    tidy_on_close = False  # a read-only open of a quiescent WAL ledger: tidy -wal/-shm when the Ledger closes
    gate_ours = False  # made its write gate or wrote through it: tidy the gate when the Ledger closes

    def __init__(self, database: str | None, *, pragmas: Mapping[str, int | str] | None = None, uri: bool = False,
                 timeout: float = 5.0, check_same_thread: bool = True,
                 factory: type[sqlite3.Connection] = lockguard.SqliteConnection) -> None:  # tracked by weak reference
        super().__init__(database, pragmas=pragmas, uri=uri, timeout=timeout, check_same_thread=check_same_thread,
                         factory=factory)

    # ------------------------------------------------------------------ connections (store/storage/lockguard.py)
    def connect(self, reuse_if_open: bool = False) -> bool:
        forked = lockguard.inherited(self.path)
        if forked is not None:
            raise self.forked_error(forked)
        with lockguard.opening(self.path):  # protected before SQLite can take a lock
            try:
                opened = bool(super().connect(reuse_if_open))
            except (pw.OperationalError, pw.DatabaseError, sqlite3.Error) as e:
                self.translate_error(e)  # a full disk says so (creating -wal/-shm fails as an I/O error)
                raise
            if opened:
                conn = self.connection()
                lockguard.track(conn, self.path)
                try:
                    st = os.stat(self.path)  # (stat opens nothing: no lock is at stake)
                    conn.inode = (st.st_dev, st.st_ino)
                except OSError:
                    pass
        return opened

    def close(self) -> bool:
        return _close_tracked(self, super().close)

    def cursor(self, named_cursor: object = None) -> DriverCursor:
        _refuse_inherited(self)
        return super().cursor(named_cursor)

    def forked_error(self, parent: int) -> LedgerUnavailable:
        return LedgerUnavailable(
            f"the ledger {self.display} was open in process {parent} when it fork()ed this one: SQLite cannot be "
            "used safely across fork(); open the Ledger in a process started with spawn or forkserver "
            "(multiprocessing.get_context('spawn')) or by exec")

    def gate_is_ours(self) -> None:
        """This database made its write gate or wrote through it (store/storage/writegate.py): it tidies
        the gate when it closes."""
        self.gate_ours = True

    def busy(self) -> LedgerBusy:
        return LedgerBusy(f"the ledger {self.display} is busy: another process held its lock for more than "
                          f"{self.busy_timeout_s:g}s (busy_timeout_s); nothing was written")

    def translate_error(self, e: BaseException) -> None:
        """Raise the typed error for a busy or broken database; return for anything else."""
        code = sqlite_code(e)
        if code in SQLITE_BUSY_CODES:
            raise self.busy() from None
        if code == SQLITE_FULL or (code in SQLITE_IO_CODES and disk_full(self.path)):
            raise LedgerUnavailable(
                f"the ledger {self.display} cannot be written: the disk is full ({free_space(self.path)}); "
                "nothing was written and nothing committed is lost — free some space: writing resumes by itself"
            ) from None
        if code in SQLITE_IO_CODES:
            raise LedgerUnavailable(
                f"the ledger {self.display} hit {SQLITE_IO_CODES[code]}: {one_line(e)}"
            ) from None

    def execute_sql(self, sql: str, params: Sequence[object] | None = None) -> DriverCursor:
        try:
            return super().execute_sql(sql, params)
        except (pw.OperationalError, pw.DatabaseError, sqlite3.Error) as e:
            self.translate_error(e)
            raise

    def begin(self, lock_type: str | None = None) -> None:
        try:
            super().begin(lock_type)
        except (pw.OperationalError, pw.DatabaseError, sqlite3.Error) as e:
            self.translate_error(e)
            raise
        if lock_type and not self.read_only:
            self._same_file()

    def _same_file(self) -> None:
        """A write goes only into the file this connection opened under the ledger's name. Renamed,
        removed or replaced meanwhile (``mv``, a restore by copy), the name's ``-wal``/``-shm`` and
        the connection's file no longer belong together (howtocorrupt §2.5): refuse, write nothing."""
        conn = self.connection()
        was = getattr(conn, "inode", None)
        if was is None:
            return
        try:
            st = os.stat(self.path)
            now: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            now = None
        if now != was:
            super().rollback()
            what = "removed or renamed" if now is None else "replaced by another file"
            raise LedgerUnavailable(
                f"the ledger {self.display} was {what} while this process had it open: nothing was written; "
                "open it again by its name (and never move, delete or copy over a ledger in use)")

    def commit(self) -> None:
        try:
            super().commit()
        except (pw.OperationalError, pw.DatabaseError, sqlite3.Error) as e:
            self.translate_error(e)
            raise

    def rollback(self) -> None:
        # SQLite rolls a transaction back by itself on some errors (a full disk, an I/O error): a
        # ROLLBACK then fails with "cannot rollback - no transaction is active", which would hide
        # the error that matters. Nothing is left to undo.
        if not self.is_closed() and not self.connection().in_transaction:
            return
        try:
            super().rollback()
        except (pw.OperationalError, pw.DatabaseError, sqlite3.Error) as e:
            self.translate_error(e)
            raise


def libpq_timeout(seconds: float) -> str:
    """libpq's ``connect_timeout`` for ``seconds``: whole seconds, at least 2 (libpq's own floor)."""
    return str(max(2, math.ceil(seconds)))


def unreachable_why(e: BaseException, timeout_s: float) -> str:
    """Why a PostgreSQL server could not be reached, in words, from the driver's message."""
    low = " ".join(str(e).split()).lower()
    if "refused" in low:
        return "connection refused (is PostgreSQL running there and accepting TCP connections?)"
    if "translate host name" in low or "name or service not known" in low or "nodename nor servname" in low:
        return "unknown host name"
    if "timeout expired" in low or "timed out" in low:
        return f"no answer within {timeout_s:g}s"
    if "no route to host" in low or "network is unreachable" in low:
        return "no route to the host"
    if "starting up" in low or "shutting down" in low or "recovery mode" in low:
        return "the server is starting up or shutting down"
    return one_line(e)


class WardenPostgres(pw.PostgresqlDatabase):
    read_only = False
    pooled = False  # through a pooler in transaction mode (``?pool=transaction``): no session state
    backend = "postgresql"
    display = ""  # the URL without credentials
    url: str | None = None
    busy_timeout_s: float | None = BUSY_TIMEOUT_S
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    application_name = "warden-agent"  # what pg_stat_activity shows (a wait's LISTEN connection takes it too)

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # peewee's own (untyped) options, passed on
        super().__init__(*args, **kwargs)
        self.backoff = Backoff()
        self._outage = _Outage()
        self.request = RequestState()

    def connect(self, reuse_if_open: bool = False) -> bool:
        opened = bool(super().connect(reuse_if_open))
        if opened:
            lockguard.track(self.connection(), None)
        return opened

    def close(self) -> bool:
        return _close_tracked(self, super().close)

    def cursor(self, named_cursor: object = None) -> DriverCursor:
        _refuse_inherited(self)
        return super().cursor(named_cursor)

    def forked_error(self, parent: int) -> LedgerUnavailable:
        return LedgerUnavailable(
            f"this Ledger of {self.display} was opened in process {parent}, which fork()ed this one: its "
            "connection is the parent's; open a new Ledger here")

    def _initialize_connection(self, conn: DriverConnection) -> None:
        # Peewee calls this for every new connection (first use, and each reconnect after a
        # close), so a read-only ledger stays read-only on the server side whatever happens.
        if self.pooled:
            # Through a pooler in transaction mode the server session is not ours between
            # transactions: no session settings (begin() sets them per transaction) and no
            # prepared statements (psycopg prepares a query run 5 times; the next transaction
            # may be on a server connection that never saw it).
            conn.prepare_threshold = None
            return
        pg_session(conn, read_only=self.read_only,
                   lock_timeout_ms=int(self.busy_timeout_s * 1000) if self.busy_timeout_s else None)

    def _transaction_settings(self) -> None:
        """Pooled (``pool=transaction``): what a session would have set, for this transaction only."""
        try:
            pg_transaction(self.connection(), read_only=self.read_only,
                           lock_timeout_ms=int(self.busy_timeout_s * 1000) if self.busy_timeout_s else None)
        except Exception as e:
            try:  # the BEGIN went through: do not leave its transaction open behind Peewee's back
                pw.PostgresqlDatabase.rollback(self)
            except Exception:
                pass
            raise pw.OperationalError(one_line(e)) from e  # begin() decides: lost (re-made) or not

    # ------------------------------------------------------------------ the connection
    def _drop(self) -> None:
        """Forget a dead connection: closed now when no transaction is open, else its socket is
        closed and the Peewee state is reset once the transaction has unwound."""
        if self.is_closed():
            return
        try:
            if self.transaction_depth() == 0:
                self.close()
            else:
                self.connection().close()
        except Exception:
            pass

    def healthy(self) -> None:
        """The operation that started after an outage went through: the next outage gets a
        fresh budget."""
        self._outage.since = None
        self._outage.attempt = 0

    def connect_first(self) -> None:
        """The first connection of an open: a server that cannot be reached (refused, an unknown
        host, no answer, starting up) is tried again with back-off for ``connect_timeout_s`` in all
        (each attempt bounded by libpq's ``connect_timeout``), then ``LedgerUnavailable`` "cannot
        reach the server …". Any other refusal (authentication, no such database) at once."""
        b = self.backoff
        start = b.clock()
        attempt = 0
        while True:
            began = b.clock()
            try:
                self.connect(reuse_if_open=True)
                return
            except (pw.OperationalError, pw.InterfaceError) as e:
                if not is_connection_lost(e):
                    raise LedgerUnavailable(f"cannot open the ledger {self.display}: {one_line(e)}") from None
                attempt += 1
                delay = b.wait(attempt)
                # Another attempt only if it has time to get its answer: as long as this one took
                # (a refusal is instant; a silent host takes libpq's connect_timeout).
                if b.clock() - start + delay + (b.clock() - began) > self.connect_timeout_s:
                    raise LedgerUnavailable(
                        f"cannot reach the server {self.display} ({attempt} attempts in {b.clock() - start:.1f}s of "
                        f"the {self.connect_timeout_s:g}s connect timeout: connect_timeout_s, --connect-timeout): "
                        f"{unreachable_why(e, self.connect_timeout_s)}") from None
                b.sleep(delay)

    def reconnect(self, cause: BaseException, fate: str = "") -> None:
        """Connect again: at once, then with back-off; ``LedgerUnavailable`` once the budget is
        spent (``fate``: what that means for the write under way, said in the message)."""
        b, o = self.backoff, self._outage
        if o.since is None:
            o.since = b.clock()
        while True:
            if o.attempt:
                delay = b.wait(o.attempt)
                if b.clock() - o.since + delay > b.budget_s:
                    o.since, o.attempt = None, 0
                    raise LedgerUnavailable(
                        f"cannot reach the server {self.display}: lost the connection and could not reconnect "
                        f"within {b.budget_s:g}s ({unreachable_why(cause, self.connect_timeout_s)})"
                        + (f": {fate}" if fate else "")
                    ) from None
                b.sleep(delay)
            o.attempt += 1
            self._drop()
            try:
                self.connect(reuse_if_open=True)
                return
            except (pw.OperationalError, pw.InterfaceError) as e:
                if not is_connection_lost(e):
                    raise
                cause = e

    def _lost(self, e: BaseException, *, in_doubt: bool = False) -> ConnectionLost:
        self._drop()
        return ConnectionLost(f"lost the connection to {self.display}: {one_line(e)}", in_doubt=in_doubt)

    def _busy(self) -> LedgerBusy:
        return LedgerBusy(f"the ledger {self.display} is busy: a lock was not had within "
                          f"{self.busy_timeout_s:g}s (busy_timeout_s, PostgreSQL lock_timeout); nothing was written")

    def translate_error(self, e: BaseException) -> None:
        """For a statement sent outside :meth:`execute_sql` (a bulk insert through the cursor):
        raise the typed error its driver error means; return for anything else."""
        self._refused(e)
        lost = is_connection_lost(e) if sqlstate(e) is not None else \
            type(e).__name__ in ("OperationalError", "InterfaceError")  # the driver's own, unwrapped
        if lost:
            raise self._lost(e) from None

    def _refused(self, e: BaseException) -> None:
        """Raise ``LedgerBusy`` for a lock not had in time, ``LedgerUnavailable`` for a server with
        no room (disk, memory); return for anything else."""
        code = sqlstate(e)
        if code == LOCK_TIMEOUT_SQLSTATE:
            raise self._busy() from None
        if code is not None and code in PG_NO_ROOM:
            raise LedgerUnavailable(f"the PostgreSQL server of {self.display} cannot write: "
                                    f"{PG_NO_ROOM[code]} ({one_line(e)}); nothing was written") from None

    # ------------------------------------------------------------------ statements
    def execute_sql(self, sql: str, params: Sequence[object] | None = None) -> DriverCursor:
        if self.pooled and self.read_only and self.transaction_depth() == 0 and not _is_read(sql):
            # pooled, a statement outside a transaction has no session to be read-only in
            raise ReadOnly(f"the ledger {self.display} is open read-only; nothing was written")
        while True:
            try:
                cursor = super().execute_sql(sql, params)
            except (pw.OperationalError, pw.InterfaceError, pw.DatabaseError) as e:
                self._refused(e)
                if not is_connection_lost(e):
                    raise
                if self.transaction_depth() > 0 or not _is_read(sql):
                    raise self._lost(e) from None
                self.reconnect(e)  # a read outside a transaction: safe to send again
                continue
            if self._outage.since is not None:
                self.healthy()
            return cursor

    def begin(self, isolation_level: str | None = None) -> None:
        # Runs before the transaction is pushed (depth 0): nothing is in it yet, so a dead
        # connection here is simply re-made.
        while True:
            try:
                super().begin(isolation_level)
                if self.pooled:
                    self._transaction_settings()
                return
            except (pw.OperationalError, pw.InterfaceError) as e:
                if not is_connection_lost(e):
                    raise
                self.reconnect(e)

    def commit(self) -> None:
        try:
            super().commit()
        except (pw.OperationalError, pw.InterfaceError, pw.DatabaseError) as e:
            self._refused(e)
            if not is_connection_lost(e):
                raise
            raise self._lost(e, in_doubt=True) from None

    def rollback(self) -> None:
        try:
            super().rollback()
        except (pw.OperationalError, pw.InterfaceError) as e:
            if not is_connection_lost(e):
                raise
            self._drop()  # the server rolled back when the connection went: nothing to undo


def _is_read(sql: str) -> bool:
    head = sql.lstrip()[:8].upper()
    return head.startswith(("SELECT", "WITH", "SHOW"))

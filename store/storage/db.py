"""Open a ledger database from a path or URL; the one place that knows about backends.

* ``ledger.db``, ``/abs/ledger.db``, ``sqlite:///rel.db``, ``sqlite:////abs.db`` → SQLite
  (WAL, ``synchronous=FULL``, ``foreign_keys=ON``, a busy timeout).
* ``postgresql://user@host:port/db`` → PostgreSQL (psycopg 3, Read Committed). Credentials come
  from ``PGPASSWORD`` / ``~/.pgpass`` (libpq's usual sources) rather than the URL; query
  parameters (``?sslmode=require``, ``?options=-csearch_path%3Dwarden``) are passed to libpq.

Write transactions go through :func:`write_tx`, which begins ``IMMEDIATE`` on SQLite and refuses
to nest: Peewee silently turns a nested ``atomic()`` into a savepoint, which would let a caller
believe it holds the write lock it took at the outer level only.

PostgreSQL runs writes at Read Committed with explicit row locks taken in one fixed order —
the task row, then node rows, then (last) the journal's advisory lock — so operator actions and
agent writes cannot deadlock one another. Should the server still abort a write with a deadlock or
a serialization failure, :func:`retry_write` re-runs the whole transaction a bounded number of
times and then raises :class:`WriteConflict` with one line. Reads that must be one snapshot
(:func:`read_tx`) run at Repeatable Read on PostgreSQL; SQLite's deferred transaction already is.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import re
import sqlite3
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import unquote, urlparse

import peewee as pw

from store.storage import checkpoints, lockguard, sqlite_file, stopguard, write_requests, writegate
from store import errors
from store.storage.backends import (
    BUSY_TIMEOUT_S,
    CONNECT_TIMEOUT_S,
    RECONNECT_BUDGET_S,
    Backoff,
    ConnectionLost,
    LedgerBusy,
    WardenPostgres,
    WardenSqlite,
    libpq_timeout,
    one_line,
    sqlstate,
)
from store.errors import LedgerUnavailable, ReadOnly, WardenError, WriteConflict
from store.storage.pgshared import SharedPostgres
from store.storage.sql import is_sqlite, sqlite_busy_timeout
from store.text import safe_line
from store.storage.write_requests import register_result

__all__ = [
    "BUSY_TIMEOUT_S", "CONNECT_TIMEOUT_S", "RECONNECT_BUDGET_S", "Backoff", "ConnectionLost", "LedgerBusy", "Target", "WardenPostgres",
    "check_pg_url", "masked",
    "WardenSqlite", "close_database", "connect_checked", "is_sqlite", "open_database", "parse_target", "pg_client_args", "pg_connect_args", "read_tx",
    "warden_params",
    "register_result", "retry_conflicts", "retry_read", "retry_write", "run_read", "run_write", "sqlstate", "write_tx",
]

# The connection's application_name (pg_stat_activity) for each kind of client.
APPLICATION_NAMES = ("warden-agent", "warden-console", "warden-analysis", "warden-cli")
# TCP keepalives, so a connection to a server that vanished without a word (failover, a cut
# network) is noticed in about a minute instead of the kernel's two hours.
PG_KEEPALIVES = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10", "keepalives_count": "3"}
NO_LEDGER_HINT = sqlite_file.NO_LEDGER_HINT


@dataclass(frozen=True)
class Target:
    backend: str  # "sqlite" | "postgresql"
    path: str | None = None  # sqlite file
    url: str | None = None  # postgresql URL as given

    @property
    def display(self) -> str:
        """How messages name the ledger: the path, or the URL without its password; escaped."""
        if self.backend == "sqlite":
            return safe_line(self.path)
        p = urlparse(self.url or "")
        host = p.hostname or "localhost"
        if ":" in host:
            host = f"[{host}]"
        port = f":{p.port}" if p.port else ""
        return safe_line(f"postgresql://{host}{port}{p.path}")  # never show a password


_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*:)[^@/?#]*@")


def masked(target: str) -> str:
    """A ledger path or URL fit for a message: the password (``user:secret@``) hidden, escaped."""
    return safe_line(_PASSWORD.sub(r"\1***@", target), limit=300)


def parse_target(target: str | os.PathLike[str]) -> Target:
    """What a ``--ledger`` value names. A malformed one raises ``LedgerUnavailable`` with one line
    saying what is wrong (the password masked, the value escaped)."""
    s = os.fspath(target)
    if not isinstance(s, str):
        raise LedgerUnavailable("the ledger path must be text, not bytes")
    if not s:
        raise LedgerUnavailable("no ledger given: the path is empty")
    if "\x00" in s:
        raise LedgerUnavailable(f"bad ledger path {masked(s)}: it contains a NUL character")
    try:
        os.fsencode(s)  # a lone surrogate (not one standing for a raw byte of argv) names no file
    except UnicodeEncodeError:
        raise LedgerUnavailable(f"bad ledger path {masked(s)}: it is not valid text (a lone surrogate)") from None
    scheme = s.split("://", 1)[0].lower() if "://" in s else ""
    if scheme in ("postgresql", "postgres"):
        check_pg_url(s)
        return Target("postgresql", url=s)
    if s.lower().startswith("sqlite:///"):
        return Target("sqlite", path=unquote(s[len("sqlite:///"):]) or "ledger.db")
    if s.lower().startswith("sqlite:"):
        raise LedgerUnavailable(f"not a ledger URL: {masked(s)} (use sqlite:///path or a plain path)")
    if scheme:
        raise LedgerUnavailable(f"unsupported ledger URL scheme {safe_line(repr(scheme[:40]))} in {masked(s)}: "
                                "use a path, sqlite:///path or postgresql://host/db")
    return Target("sqlite", path=s)


def check_pg_url(url: str) -> None:
    """Refuse a PostgreSQL URL libpq would misread, with what is wrong with it."""
    bad = f"bad PostgreSQL URL {masked(url)}"
    try:
        p = urlparse(url)
        port = p.port  # ValueError: not a number, or out of range
        host = p.hostname
    except ValueError as e:
        why = str(e)
        if "Port" in why or "port" in why:
            raw = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1].rsplit(":", 1)[-1]
            why = f"the port {safe_line(repr(raw[:20]))} is not a number from 1 to 65535"
        elif "IPv6" in why:
            why = "an IPv6 host needs its closing ] (postgresql://[::1]:5432/db)"
        raise LedgerUnavailable(f"{bad}: {safe_line(why)}") from None
    if port == 0:
        raise LedgerUnavailable(f"{bad}: the port 0 is not a number from 1 to 65535")
    if port is not None and not host:
        raise LedgerUnavailable(f"{bad}: it has a port but no host")
    if p.fragment:
        raise LedgerUnavailable(f"{bad}: it has a #fragment, which means nothing to PostgreSQL")
    for part in (p.query or "").split("&"):
        if part and "=" not in part:
            raise LedgerUnavailable(f"{bad}: the query part {safe_line(repr(part[:40]))} is not key=value")


def close_database(db: pw.Database) -> None:
    """Close ``db`` and leave its directory as the open found it: a read tidies the ``-wal``/``-shm``
    it made; a database that made its write gate or wrote through it removes the gate when it is
    the last one out (store/storage/writegate.py). A command that only failed leaves nothing new."""
    if not db.is_closed():
        db.close()
    if getattr(db, "tidy_on_close", False):  # a read leaves the directory as it found it
        sqlite_file.tidy(str(getattr(db, "path", "")))
    elif isinstance(db, WardenSqlite) and db.gate_ours:
        writegate.tidy(db.path)  # the last one out: a ledger at rest is one file


def open_database(
    target: str | os.PathLike[str],
    *,
    read_only: bool = False,
    create: bool = False,
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    application_name: str = "warden-agent",
    backoff: Backoff | None = None,
    one_connection: bool = False,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> pw.Database:
    """Return a connected-on-demand database. Refuses a missing SQLite file unless ``create``.

    ``busy_timeout_s``: how long a write waits for a lock before ``LedgerBusy`` (SQLite's busy
    timeout; PostgreSQL's ``lock_timeout``). ``application_name``: what PostgreSQL shows in
    ``pg_stat_activity`` (a URL's own ``application_name=`` wins). ``backoff``: the reconnect
    policy (PostgreSQL). ``one_connection``: PostgreSQL — every thread shares one connection,
    taking turns per transaction (``store/storage/pgshared.py``; the console). ``connect_timeout_s``:
    PostgreSQL — how long the first connection is tried before "cannot reach the server" (and
    libpq's ``connect_timeout`` for every connection; a URL's own ``connect_timeout=`` wins for
    that)."""
    if not busy_timeout_s or busy_timeout_s <= 0:
        raise errors.Refused("busy_timeout_s must be positive")
    t = parse_target(target)
    if t.backend == "sqlite":
        return _open_sqlite(t, read_only=read_only, create=create, busy_timeout_s=float(busy_timeout_s))
    return _open_postgres(t, read_only=read_only, busy_timeout_s=float(busy_timeout_s),
                          application_name=application_name, backoff=backoff, one_connection=one_connection,
                          connect_timeout_s=float(connect_timeout_s))


def _open_sqlite(t: Target, *, read_only: bool, create: bool, busy_timeout_s: float) -> pw.Database:
    path = os.path.abspath(t.path or "ledger.db")
    shown = safe_line(path)
    parent = lockguard.inherited(path)
    if parent is not None:
        raise LedgerUnavailable(
            f"the ledger {shown} was open in process {parent} when it fork()ed this one: SQLite cannot be used "
            "safely across fork(); open it in a process started with spawn or forkserver, or by exec")
    seen = sqlite_file.inspect(path, read_only=read_only)  # refuses what is not a ledger; writes nothing
    if not seen.exists:
        if not create or read_only:
            raise LedgerUnavailable(f"no ledger at {shown}: {NO_LEDGER_HINT}")
        if not os.path.isdir(os.path.dirname(path)):
            raise LedgerUnavailable(f"cannot create a ledger at {shown}: the directory does not exist")
    elif seen.empty and (not create or read_only):
        raise LedgerUnavailable(f"{shown} is an empty file (0 bytes), not a Warden ledger: {NO_LEDGER_HINT}")
    if not seen.exists or seen.empty:
        for side in ("-wal", "-journal"):  # SQLite would take a journal it finds for the new ledger's own
            if sqlite_file.nonempty(path + side):
                raise LedgerUnavailable(
                    f"cannot create a ledger at {shown}: {safe_line(path + side)} is left from another database (a "
                    "crash, a move or a copy) and SQLite would replay it into the new file; move it away, or put "
                    "back the ledger it belongs to")
    busy_ms = int(busy_timeout_s * 1000)
    # mmap_size 0: no memory-mapped I/O, whatever this libsqlite3's default (a stray write into a
    # mapping would go straight to the file; docs/security.md).
    pragmas: dict[str, int | str] = {"foreign_keys": 1, "busy_timeout": busy_ms, "mmap_size": 0}
    if read_only:
        # mode=ro: SQLite cannot write; query_only: no statement may either. Never a journal-mode change.
        params = {"mode": "ro", "immutable": "1"} if seen.snapshot else {"mode": "ro"}
        db = WardenSqlite(sqlite_file.uri(path, **params), uri=True, timeout=busy_timeout_s, check_same_thread=False,
                          pragmas={**pragmas, "query_only": 1})
        db.read_only = True
        db.snapshot = seen.snapshot
        db.tidy_on_close = seen.quiescent and not seen.snapshot
    else:
        if seen.exists:
            sqlite_file.check_writable(path)
        db = WardenSqlite(path, timeout=busy_timeout_s, check_same_thread=False,
                          pragmas={"journal_mode": "wal", "synchronous": "full", **pragmas})
    db.display = shown
    db.path = path
    db.busy_timeout_s = busy_timeout_s
    return db


def _open_postgres(t: Target, *, read_only: bool, busy_timeout_s: float, application_name: str,
                   backoff: Backoff | None, one_connection: bool = False,
                   connect_timeout_s: float = CONNECT_TIMEOUT_S) -> pw.Database:
    dbname, kwargs = pg_client_args(t, application_name=application_name, connect_timeout_s=connect_timeout_s)
    pooled = warden_params(t).get("pool") == "transaction"
    cls = SharedPostgres if one_connection else WardenPostgres
    db = cls(dbname, isolation_level="READ COMMITTED", prefer_psycopg3=True, autoconnect=True, **kwargs)
    db.pooled = pooled
    db.read_only = read_only
    db.display = t.display
    db.url = t.url
    db.busy_timeout_s = busy_timeout_s
    db.connect_timeout_s = connect_timeout_s
    db.application_name = kwargs["application_name"]  # a wait's LISTEN connection is named the same
    if backoff is not None:
        db.backoff = backoff
    return db


def pg_client_args(t: Target, *, application_name: str,
                   connect_timeout_s: float = CONNECT_TIMEOUT_S) -> tuple[str, dict[str, Any]]:
    """:func:`pg_connect_args` with what every Warden connection adds (a URL's own values win):
    ``application_name``, libpq's ``connect_timeout`` and the TCP keepalives."""
    dbname, kwargs = pg_connect_args(t)
    kwargs.setdefault("application_name", application_name)
    kwargs.setdefault("connect_timeout", libpq_timeout(connect_timeout_s))
    for k, v in PG_KEEPALIVES.items():
        kwargs.setdefault(k, v)
    return dbname, kwargs


def pg_connect_args(t: Target) -> tuple[str, dict[str, Any]]:
    """(dbname, libpq keyword arguments) from a postgresql:// URL. Missing parts (password, host,
    user) are left to libpq: PGPASSWORD, ~/.pgpass, PGHOST, PGUSER..."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise LedgerUnavailable("PostgreSQL needs psycopg: pip install 'warden[postgres]'") from None
    p = urlparse(t.url or "")
    kwargs: dict[str, Any] = {}
    if p.hostname:
        kwargs["host"] = p.hostname
    if p.port:
        kwargs["port"] = p.port
    if p.username:
        kwargs["user"] = unquote(p.username)
    if p.password:
        kwargs["password"] = unquote(p.password)
    for part in (p.query or "").split("&"):
        if "=" in part:
            k, v = part.split("=", 1)
            if k not in WARDEN_PARAMS:  # Warden's own (below), not libpq's
                kwargs[k] = unquote(v)
    dbname = unquote(p.path.lstrip("/")) or "postgres"
    return dbname, kwargs


# URL parameters Warden reads itself (libpq never sees them): ``pool=transaction`` — the URL goes
# through a pooler in transaction mode (PgBouncer ``pool_mode = transaction``), so no session
# state is relied on; ``listen=URL`` — where the feed LISTENs (a connection that is not pooled per
# transaction: LISTEN cannot work through one). docs/deployment.md "Connection pooling".
WARDEN_PARAMS = ("pool", "listen")
POOL_MODES = ("session", "transaction")


def warden_params(t: Target) -> dict[str, str]:
    """Warden's own parameters of a postgresql:// URL (``pool``, ``listen``), checked: a bad value
    raises ``LedgerUnavailable`` with one line."""
    out: dict[str, str] = {}
    for part in (urlparse(t.url or "").query or "").split("&"):
        if "=" in part:
            k, v = part.split("=", 1)
            if k in WARDEN_PARAMS:
                out[k] = unquote(v)
    bad = f"bad PostgreSQL URL {masked(t.url or '')}"
    if out.get("pool", "session") not in POOL_MODES:
        raise LedgerUnavailable(f"{bad}: pool= must be one of {', '.join(POOL_MODES)}")
    if "listen" in out:
        listen = out["listen"]
        if listen.split("://", 1)[0].lower() not in ("postgresql", "postgres"):
            raise LedgerUnavailable(f"{bad}: listen= must be a postgresql:// URL (percent-encoded)")
        check_pg_url(listen)
        if any(k in WARDEN_PARAMS for k in warden_params(Target("postgresql", url=listen))):
            raise LedgerUnavailable(f"{bad}: the listen= URL cannot itself have pool= or listen=")
    return out


def connect_checked(db: pw.Database) -> None:
    """Connect now (PostgreSQL: a server that cannot be reached is tried for ``connect_timeout_s``,
    then "cannot reach the server …"), turning driver errors into one clear line."""
    try:
        if isinstance(db, WardenPostgres):
            db.connect_first()
            db.healthy()
        else:
            db.connect(reuse_if_open=True)
    except LedgerUnavailable as e:
        if isinstance(db, WardenSqlite) or str(e).startswith(("cannot reach the server", "cannot open the ledger")):
            raise  # already names the ledger (busy, a full disk, an I/O error, the server)
        raise LedgerUnavailable(f"cannot open ledger {getattr(db, 'display', '')}: {safe_line(str(e))}") from None
    except WardenError as e:
        raise LedgerUnavailable(f"cannot open ledger {getattr(db, 'display', '')}: {safe_line(str(e))}") from None
    except (pw.DatabaseError, pw.OperationalError, pw.InterfaceError, sqlite3.DatabaseError) as e:
        raise LedgerUnavailable(f"cannot open ledger {getattr(db, 'display', '')}: {one_line(e)}") from None


# ---------------------------------------------------------------------- transactions
@contextlib.contextmanager
def write_tx(db: pw.Database) -> Iterator[None]:
    """One write transaction at depth 0: ``BEGIN IMMEDIATE`` on SQLite, Read Committed on PG.

    Raises ``ReadOnly`` on a read-only ledger and ``RuntimeError`` when called inside another
    transaction (the nested-transaction guard). Under :func:`run_write` on PostgreSQL the
    transaction was opened by ``run_write`` (which records the write's request id in it before
    committing): this body joins it, once.
    """
    if getattr(db, "read_only", False):
        raise ReadOnly(f"the ledger {getattr(db, 'display', '')} is open read-only; nothing was written")
    depth = db.transaction_depth()
    req = db.request if isinstance(db, WardenPostgres) else None
    if req is not None and req.rid is not None and depth == 1 and not req.joined:
        req.joined = True
        yield
        req.body_done = True
        return
    if depth != 0:
        raise RuntimeError(f"nested write transaction (depth {depth}): a write must begin IMMEDIATE at depth 0, "
                           "not as a savepoint inside another transaction")
    with stopguard.for_db(db):  # a supervised process is never stopped inside a write
        if isinstance(db, WardenSqlite):
            # writers take turns through store/storage/writegate.py before SQLite's lock (its busy handler is unfair)
            with writegate.held(db.path, db.busy_timeout_s, db.busy, db.gate_is_ours,
                              functools.partial(sqlite_busy_timeout, db)), \
                    db.atomic("IMMEDIATE"):
                yield
        elif is_sqlite(db):
            with db.atomic("IMMEDIATE"):
                yield
        else:
            with db.atomic():
                yield


STRICT_READS_ENV = "WARDEN_STRICT_READS"


class UnretriedRead(AssertionError):
    """A PostgreSQL read transaction opened where nothing re-runs it after a lost connection
    (raised only under ``WARDEN_STRICT_READS=1``, which the test suite sets)."""


@contextlib.contextmanager
def read_tx(db: pw.Database, *, loss_is_callers: bool = False) -> Iterator[None]:
    """A consistent read snapshot (a deferred transaction on SQLite, Repeatable Read on
    PostgreSQL, where Read Committed would give each statement its own snapshot). Nests harmlessly.

    On PostgreSQL a connection lost inside the snapshot raises ``ConnectionLost``: the snapshot
    cannot be re-run from here. So a snapshot opened at depth 0 must run under :func:`run_read`
    (or :func:`retry_read`, or a write's :func:`run_write`), which re-runs the whole read — or say
    ``loss_is_callers=True`` when its caller deals with the loss itself (the console's feed says
    an outage within 2 s rather than wait out the reconnect budget). The test suite sets
    ``WARDEN_STRICT_READS=1``, under which a snapshot that is neither raises :class:`UnretriedRead`."""
    if db.transaction_depth() != 0:
        yield
        return
    if is_sqlite(db):
        with db.atomic():
            yield
        return
    assert isinstance(db, WardenPostgres)
    if not (loss_is_callers or db.request.rerunnable) and os.environ.get(STRICT_READS_ENV) == "1":
        raise UnretriedRead("a PostgreSQL read snapshot outside run_read/retry_read: a connection lost "
                            "inside it would reach the caller as ConnectionLost instead of being re-run")
    with db.atomic(isolation_level="REPEATABLE READ"):
        yield


@contextlib.contextmanager
def _rerunnable(db: WardenPostgres) -> Iterator[None]:
    db.request.rerunnable += 1
    try:
        yield
    finally:
        db.request.rerunnable -= 1


# ---------------------------------------------------------------------- retried writes and reads
# A write's result is recorded with its request id (PostgreSQL) so that a retry after a lost
# COMMIT returns what the first attempt returned: store/storage/write_requests.py.
WRITE_ATTEMPTS = 5
LOST_RERUNS = 20  # reruns after lost connections, on top of the reconnect budget (a flapping link)
RETRY_SQLSTATES = {"40001": "a serialization failure", "40P01": "a deadlock"}
_F = TypeVar("_F", bound=Callable[..., object])
_T = TypeVar("_T")


def _owned(db: WardenPostgres, fn: Callable[[], object], rid: str, now: Callable[[], float], what: str) -> object:
    """Run ``fn`` in a transaction opened here; record ``rid`` and the result in it; commit."""
    req = db.request
    req.rid, req.joined, req.body_done = rid, False, False
    raised: BaseException | None = None
    try:
        with stopguard.for_db(db), db.atomic():
            try:
                result = fn()
            except Exception as e:
                if not req.body_done:
                    raise  # the write's body failed: the transaction rolls back
                result, raised = e, e  # raised after its body committed (e.g. a refusal with an audit row)
            if req.body_done:
                write_requests.record(db, rid, float(now()), write_requests.encode(result))
                checkpoints.reach("tx.before_commit", "", what)
    finally:
        req.rid, req.joined, req.body_done = None, False, False
    if raised is not None:
        raise raised
    return result


def run_write(db: pw.Database, fn: Callable[[], object], *, attempts: int = WRITE_ATTEMPTS,
              what: str = "the write", args: tuple[object, ...] = (), kwargs: dict[str, object] | None = None,
              now: Callable[[], float] = time.time,
              idempotent: bool = True) -> object:
    """Run ``fn`` (which opens its own :func:`write_tx`) as one write that happens once.

    SQLite: ``fn`` runs once (its errors are already typed by the backend).

    PostgreSQL, at depth 0:
    * a deadlock or a serialization failure re-runs the whole transaction, at most ``attempts``
      times with a short jittered back-off, then raises :class:`WriteConflict`;
    * a lost connection re-connects (bounded back-off, ``Backoff``) and re-runs it. So that a
      write whose ``COMMIT`` was sent but whose answer was lost is not done twice, each write
      carries a request id recorded *in its own transaction* (table ``write_request``) with its
      result: before re-running, the id is looked up, and when it is there the recorded result is
      returned (or its recorded refusal raised) instead. ``args``/``kwargs`` (the write's own)
      rebuild registered result types. Past the budget: ``LedgerUnavailable``, one line.
    Inside an outer transaction ``fn`` runs once (only the outermost caller may retry)."""
    if is_sqlite(db) or db.transaction_depth() != 0:
        return fn()
    assert isinstance(db, WardenPostgres)
    kw = kwargs or {}
    rid = uuid.uuid4().hex if idempotent else None
    with _rerunnable(db):
        return _run_write(db, fn, attempts, what, args, kw, now, rid)


def _run_write(db: WardenPostgres, fn: Callable[[], object], attempts: int, what: str, args: tuple[object, ...],
               kw: dict[str, object], now: Callable[[], float], rid: str | None) -> object:
    conflicts = reruns = 0
    in_doubt = False
    last = ""
    while True:
        try:
            result = _owned(db, fn, rid, now, what) if rid is not None else fn()
            db.healthy()
            return result
        except write_requests.AlreadyDone:
            # An earlier attempt committed (found when recording): read its outcome below.
            reruns += 1
            if reruns > LOST_RERUNS:
                raise LedgerUnavailable(f"{what} on {db.display}: its request record cannot be read back; "
                                        f"{what} may or may not have been done") from None
        except ConnectionLost as e:
            in_doubt = in_doubt or e.in_doubt
            fate = f"{what} may or may not have been done" if in_doubt else f"{what} was not done"
            reruns += 1
            if reruns > LOST_RERUNS:
                raise LedgerUnavailable(f"{e}; gave up after {LOST_RERUNS} reconnects: {fate}") from None
            db.reconnect(e, fate)
        except WardenError:
            if not (in_doubt and rid is not None):
                raise
            # After a lost connection the first attempt may have committed and this one been
            # refused because of it (the lease it held is no longer current): look first.
            if write_requests.recorded(db, rid) is None:
                raise
        except (pw.DatabaseError, pw.InterfaceError) as e:
            code = sqlstate(e)
            if code not in RETRY_SQLSTATES:
                raise
            conflicts += 1
            last = RETRY_SQLSTATES[code]
            if conflicts >= attempts:
                raise WriteConflict(
                    f"{what} on {getattr(db, 'display', 'the ledger')} was aborted by PostgreSQL {attempts} "
                    f"times (last: {last}); nothing was written — try again"
                ) from None
            time.sleep(random.uniform(0.005, 0.02) * (2 ** (conflicts - 1)))
            continue
        if rid is not None:
            outcome = write_requests.recorded(db, rid)
            if outcome is not None:
                db.healthy()
                value = run_read(db, lambda: write_requests.decode(outcome, args, kw))  # a claim reads its inputs
                if isinstance(value, BaseException):
                    raise value
                return value


def _db_of(first: object) -> pw.Database:
    """The database a decorated write or read runs on: its first argument's ``db`` (a Ledger's) or
    the first argument itself."""
    db = getattr(first, "db", first)
    if not isinstance(db, pw.Database):
        raise TypeError(f"{type(first).__name__} is neither a Ledger nor a database")
    return db


def retry_write(fn: _F) -> _F:
    """Decorator for a write whose first argument has ``.db`` (a Ledger) or is the db."""
    return _retry_write(fn, idempotent=True)


def retry_conflicts(fn: _F) -> _F:
    """:func:`retry_write` without the request id: for writes that are safe to repeat as they
    are (creating the schema checks what exists first) or run before its table exists."""
    return _retry_write(fn, idempotent=False)


def _retry_write(fn: _F, *, idempotent: bool) -> _F:
    @functools.wraps(fn)
    def wrapper(first: object, *args: object, **kwargs: object) -> object:
        db = _db_of(first)
        what = fn.__name__.lstrip("_").replace("_", " ")
        now = getattr(first, "now", time.time)
        return run_write(db, lambda: fn(first, *args, **kwargs), what=what, args=(first, *args), kwargs=kwargs,
                         now=now, idempotent=idempotent)

    return wrapper  # type: ignore[return-value]


def run_read(db: pw.Database, fn: Callable[[], _T]) -> _T:
    """Run a read ``fn``; on PostgreSQL at depth 0, re-run it after a lost connection (reads are
    safe to repeat) within the reconnect budget, then ``LedgerUnavailable``."""
    if is_sqlite(db) or db.transaction_depth() != 0:
        return fn()
    assert isinstance(db, WardenPostgres)
    with _rerunnable(db):
        for _ in range(LOST_RERUNS):
            try:
                result = fn()
                db.healthy()
                return result
            except ConnectionLost as e:
                db.reconnect(e)
        return fn()


def retry_read(fn: _F) -> _F:
    """Decorator for a read method whose first argument has ``.db`` (a Ledger)."""

    @functools.wraps(fn)
    def wrapper(first: object, *args: object, **kwargs: object) -> object:
        return run_read(_db_of(first), lambda: fn(first, *args, **kwargs))

    return wrapper  # type: ignore[return-value]

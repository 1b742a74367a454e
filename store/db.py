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
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import urlparse, unquote

import peewee as pw

from .errors import LedgerUnavailable, ReadOnly, WriteConflict

BUSY_TIMEOUT_S = 30.0
NO_LEDGER_HINT = "start an agent (Ledger.open creates one) or run `warden demo`"


@dataclass(frozen=True)
class Target:
    backend: str  # "sqlite" | "postgresql"
    path: str | None = None  # sqlite file
    url: str | None = None  # postgresql URL as given

    @property
    def display(self) -> str:
        if self.backend == "sqlite":
            return str(self.path)
        p = urlparse(self.url or "")
        host = p.hostname or "localhost"
        port = f":{p.port}" if p.port else ""
        return f"postgresql://{host}{port}{p.path}"  # never show a password


def parse_target(target: str | os.PathLike[str]) -> Target:
    s = os.fspath(target)
    if s.startswith(("postgresql://", "postgres://")):
        return Target("postgresql", url=s)
    if s.startswith("sqlite:///"):
        return Target("sqlite", path=unquote(s[len("sqlite:///"):]) or "ledger.db")
    if s.startswith("sqlite:"):
        raise LedgerUnavailable(f"not a ledger URL: {s!r} (use sqlite:///path or a plain path)")
    if "://" in s:
        raise LedgerUnavailable(f"unsupported ledger URL scheme: {s.split('://')[0]!r}")
    return Target("sqlite", path=s)


class WardenSqlite(pw.SqliteDatabase):
    read_only = False
    backend = "sqlite"
    display = ""  # what to call it in messages: the file's path


class WardenPostgres(pw.PostgresqlDatabase):
    read_only = False
    backend = "postgresql"
    display = ""  # the URL without credentials
    url: str | None = None

    def _initialize_connection(self, conn: Any) -> None:
        # Peewee calls this for every new connection (first use, and each reconnect after a
        # close), so a read-only ledger stays read-only on the server side whatever happens.
        if self.read_only:
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")


def open_database(target: str | os.PathLike[str], *, read_only: bool = False, create: bool = False) -> pw.Database:
    """Return a connected-on-demand database. Refuses a missing SQLite file unless ``create``."""
    t = parse_target(target)
    if t.backend == "sqlite":
        return _open_sqlite(t, read_only=read_only, create=create)
    return _open_postgres(t, read_only=read_only)


def _open_sqlite(t: Target, *, read_only: bool, create: bool) -> pw.Database:
    path = os.path.abspath(t.path or "ledger.db")
    if os.path.islink(path):
        raise LedgerUnavailable(f"{path} is a symbolic link; open the real file instead")
    if os.path.exists(path):
        if not os.path.isfile(path):
            raise LedgerUnavailable(f"{path} is not a regular file")
    elif not create or read_only:
        raise LedgerUnavailable(f"no ledger at {path}: {NO_LEDGER_HINT}")
    elif not os.path.isdir(os.path.dirname(path)):
        raise LedgerUnavailable(f"cannot create a ledger at {path}: the directory does not exist")
    if read_only:
        db = WardenSqlite(
            f"file:{path}?mode=ro",
            uri=True,
            timeout=BUSY_TIMEOUT_S,
            check_same_thread=False,
            pragmas={"foreign_keys": 1, "busy_timeout": int(BUSY_TIMEOUT_S * 1000), "query_only": 1},
        )
        db.read_only = True
    else:
        db = WardenSqlite(
            path,
            timeout=BUSY_TIMEOUT_S,
            check_same_thread=False,
            pragmas={
                "journal_mode": "wal",
                "synchronous": "full",
                "foreign_keys": 1,
                "busy_timeout": int(BUSY_TIMEOUT_S * 1000),
            },
        )
    db.display = path
    return db


def _open_postgres(t: Target, *, read_only: bool) -> pw.Database:
    dbname, kwargs = pg_connect_args(t)
    db = WardenPostgres(dbname, isolation_level="READ COMMITTED", prefer_psycopg3=True, autoconnect=True, **kwargs)
    db.read_only = read_only
    db.display = t.display
    db.url = t.url
    return db


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
            kwargs[k] = unquote(v)
    dbname = unquote(p.path.lstrip("/")) or "postgres"
    return dbname, kwargs


def connect_checked(db: pw.Database) -> None:
    """Connect now, turning driver errors into one clear line."""
    try:
        db.connect(reuse_if_open=True)
    except (pw.DatabaseError, pw.OperationalError, sqlite3.DatabaseError) as e:
        raise LedgerUnavailable(f"cannot open ledger {getattr(db, 'display', '')}: {_one_line(e)}") from None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def is_sqlite(db: pw.Database) -> bool:
    return getattr(db, "backend", "sqlite") == "sqlite"


@contextlib.contextmanager
def write_tx(db: pw.Database) -> Iterator[None]:
    """One write transaction at depth 0: ``BEGIN IMMEDIATE`` on SQLite, Read Committed on PG.

    Raises ``ReadOnly`` on a read-only ledger and ``RuntimeError`` when called inside another
    transaction (the nested-transaction guard).
    """
    if getattr(db, "read_only", False):
        raise ReadOnly(f"the ledger {getattr(db, 'display', '')} is open read-only; nothing was written")
    depth = db.transaction_depth()
    if depth != 0:
        raise RuntimeError(
            f"nested write transaction (depth {depth}): a write must begin IMMEDIATE at depth 0, "
            "not as a savepoint inside another transaction"
        )
    if is_sqlite(db):
        with db.atomic("IMMEDIATE"):
            yield
    else:
        with db.atomic():
            yield


@contextlib.contextmanager
def read_tx(db: pw.Database) -> Iterator[None]:
    """A consistent read snapshot (a deferred transaction on SQLite, Repeatable Read on
    PostgreSQL, where Read Committed would give each statement its own snapshot). Nests harmlessly."""
    if db.transaction_depth() != 0:
        yield
        return
    if is_sqlite(db):
        with db.atomic():
            yield
    else:
        with db.atomic(isolation_level="REPEATABLE READ"):
            yield


# ---------------------------------------------------------------------- bounded retry (PostgreSQL)
WRITE_ATTEMPTS = 5
RETRY_SQLSTATES = {"40001": "a serialization failure", "40P01": "a deadlock"}
_F = TypeVar("_F", bound=Callable[..., Any])


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


def run_write(db: pw.Database, fn: Callable[[], Any], *, attempts: int = WRITE_ATTEMPTS,
              what: str = "the write") -> Any:
    """Run ``fn`` (which opens its own :func:`write_tx`) and re-run it when PostgreSQL aborts it
    with a deadlock or a serialization failure, at most ``attempts`` times, with a short jittered
    back-off; then raise :class:`WriteConflict`. Inside an outer transaction ``fn`` runs once
    (only the outermost caller may retry: a retry re-runs the whole transaction)."""
    if is_sqlite(db) or db.transaction_depth() != 0:
        return fn()
    last = ""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except (pw.DatabaseError, pw.InterfaceError) as e:
            code = sqlstate(e)
            if code not in RETRY_SQLSTATES:
                raise
            last = RETRY_SQLSTATES[code]
            if attempt < attempts:
                time.sleep(random.uniform(0.005, 0.02) * (2 ** (attempt - 1)))
    raise WriteConflict(
        f"{what} on {getattr(db, 'display', 'the ledger')} was aborted by PostgreSQL {attempts} times "
        f"(last: {last}); nothing was written — try again"
    )


def retry_write(fn: _F) -> _F:
    """Decorator for a write method whose first argument has ``.db`` (a Ledger) or is the db."""

    @functools.wraps(fn)
    def wrapper(first: Any, *args: Any, **kwargs: Any) -> Any:
        db = getattr(first, "db", first)
        return run_write(db, lambda: fn(first, *args, **kwargs), what=fn.__name__.lstrip("_").replace("_", " "))

    return wrapper  # type: ignore[return-value]


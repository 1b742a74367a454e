"""Open a ledger database from a path or URL; the one place that knows about backends.

* ``ledger.db``, ``/abs/ledger.db``, ``sqlite:///rel.db``, ``sqlite:////abs.db`` → SQLite
  (WAL, ``synchronous=FULL``, ``foreign_keys=ON``, a busy timeout).
* ``postgresql://user@host:port/db`` → PostgreSQL (psycopg 3, Read Committed).

Write transactions go through :func:`write_tx`, which begins ``IMMEDIATE`` on SQLite and refuses
to nest: Peewee silently turns a nested ``atomic()`` into a savepoint, which would let a caller
believe it holds the write lock it took at the outer level only.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from typing import Iterator
from urllib.parse import urlparse, unquote

import peewee as pw

from .errors import LedgerUnavailable, ReadOnly

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


class WardenPostgres(pw.PostgresqlDatabase):
    read_only = False
    backend = "postgresql"


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
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise LedgerUnavailable("PostgreSQL needs psycopg: pip install 'warden[postgres]'") from None
    p = urlparse(t.url or "")
    kwargs: dict = {}
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
    db = WardenPostgres(dbname, isolation_level="READ COMMITTED", prefer_psycopg3=True, autoconnect=True, **kwargs)
    db.read_only = read_only
    db.display = t.display
    db.url = t.url
    return db


def connect_checked(db: pw.Database) -> None:
    """Connect now, turning driver errors into one clear line."""
    try:
        db.connect(reuse_if_open=True)
        if getattr(db, "read_only", False) and getattr(db, "backend", "") == "postgresql":
            db.execute_sql("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
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
    """A consistent read snapshot (a deferred transaction on SQLite). Nests harmlessly."""
    if db.transaction_depth() != 0:
        yield
        return
    with db.atomic():
        yield


def translate_errors(db: pw.Database, e: BaseException) -> Exception:
    """Map a driver error to a typed store error with one line."""
    msg = _one_line(e)
    if "readonly" in msg.replace(" ", "").lower() or "read-only" in msg.lower():
        return ReadOnly(f"the ledger {getattr(db, 'display', '')} is read-only: {msg}")
    return LedgerUnavailable(f"ledger {getattr(db, 'display', '')}: {msg}")

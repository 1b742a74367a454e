"""The one raw-SQL layer: row primitives for every module of the store that writes SQL by hand.

The hot paths (the lease fence and its compare-and-set, the journal insert, the completion check,
graph reads, bulk inserts, set-based operator updates) are raw SQL because they were measured to
be several times faster than the same statements built with Peewee. They all go through here:

* SQL is written with ``?`` placeholders; :func:`translate` turns them into ``%s`` for
  PostgreSQL's driver (so SQL text must hold no literal ``?`` or ``%``: pass values as params).
* :class:`Inc` is ``column = column + n`` in :func:`set_clause`.
* JSON columns are stored as canonical text (``models.dumps``) and decoded on the way out
  (:func:`fetch_rows`, :func:`json_value`); boolean columns come back as ``bool``.
* Rows are read into NamedTuples whose fields are the columns (:func:`fetch_rows` /
  :func:`fetch_row`, the SELECT list from :func:`columns`) and read by attribute — the one way to
  read a row (docs/architecture.md "Reading rows"); :func:`fetch_all` (plain tuples, unpacked
  where they are read) and :func:`scalar` for a column or two.
* :func:`execute` / :func:`execute_many` run a statement on a database; :func:`lock` adds a row-lock clause on PostgreSQL only; :func:`chunks` splits long
  ``IN (...)`` lists.
* :func:`is_sqlite` says which dialect a database speaks; :func:`pg_session` is the statements
  every new PostgreSQL connection starts with (``store.storage.backends`` runs it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, TypeVar, cast

import peewee as pw

from store.storage.models import BOOL_COLUMNS, JSON_COLUMNS, dumps, loads

_Row = TypeVar("_Row")  # a row type: a NamedTuple, or a table's dataclass (fetch_rows)
_T = TypeVar("_T")

CHUNK = 500  # ids or keys per ``IN (...)`` list



class DriverConnection(Protocol):
    """The PostgreSQL driver's own connection (psycopg's), as Warden's backends use it."""

    closed: bool
    prepare_threshold: int | None

    def execute(self, query: str, /) -> object: ...

    def close(self) -> None: ...


class DriverCursor(Protocol):
    """The driver's cursor (sqlite3's or psycopg's) a statement returns; its rows are the driver's values."""

    @property
    def rowcount(self) -> int: ...

    def executemany(self, query: str, rows: Sequence[Sequence[object]], /) -> object: ...


class Inc:
    """``column = column + n`` in a raw update (see :func:`set_clause`)."""

    __slots__ = ("n",)

    def __init__(self, n: float) -> None:
        self.n = n


# ---------------------------------------------------------------------- dialects and sessions
def is_sqlite(db: pw.Database) -> bool:
    """True for a SQLite database (``store.storage.backends``' classes say which backend they are)."""
    return getattr(db, "backend", "sqlite") == "sqlite"


def pg_session(conn: DriverConnection, *, read_only: bool, lock_timeout_ms: int | None) -> None:
    """Set up a new PostgreSQL connection, on the driver's own connection before Peewee uses it:
    read-only on the server side, and how long a statement waits for a lock (``None``: the
    server's default). ``store.storage.backends`` calls this for every connection it makes."""
    if read_only:
        conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    if lock_timeout_ms is not None:
        conn.execute(f"SET lock_timeout = {int(lock_timeout_ms)}")


def pg_transaction(conn: DriverConnection, *, read_only: bool, lock_timeout_ms: int | None) -> None:
    """What :func:`pg_session` sets for a session, for the transaction just begun only: a
    connection through a pooler in transaction mode (``?pool=transaction``) gets a server session
    for one transaction at a time, and a session setting would stay behind for the pool's next
    client (a read-only console's would make the agents' writes fail)."""
    local = []
    if read_only:
        local.append("SET TRANSACTION READ ONLY")
    if lock_timeout_ms is not None:
        local.append(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}")
    if local:
        conn.execute("; ".join(local))


# ---------------------------------------------------------------------- statements
def sqlite_busy_timeout(db: pw.Database, seconds: float) -> None:
    """SQLite's busy timeout on this thread's connection: what is left of ``busy_timeout_s``
    after a wait at the write gate (store/storage/writegate.py), then the whole of it again."""
    db.execute_sql(f"PRAGMA busy_timeout = {max(1, int(seconds * 1000))}")


def translate(db: pw.Database, sql: str) -> str:
    """Our raw SQL is written with ``?``; PostgreSQL's driver wants ``%s``."""
    return sql if is_sqlite(db) else sql.replace("?", "%s")


def marks(n: int) -> str:
    """``?, ?, ?`` for an ``IN (...)`` list of ``n`` values."""
    return ", ".join("?" * n)


def lock(db: pw.Database, clause: str) -> str:
    """A row-lock clause (``" FOR UPDATE"``, ...) on PostgreSQL; nothing on SQLite, where the
    write transaction's ``BEGIN IMMEDIATE`` already excludes every other writer."""
    return "" if is_sqlite(db) else clause


def true(db: pw.Database) -> str:
    """The SQL literal for a true boolean column."""
    return "1" if is_sqlite(db) else "TRUE"


def execute(db: pw.Database, sql: str, params: Sequence[object] = ()) -> Any:
    """Run one statement; returns the driver's cursor."""
    return db.execute_sql(translate(db, sql), list(params))


def execute_count(db: pw.Database, sql: str, params: Sequence[object] = ()) -> int:
    """Run one statement; returns how many rows it changed (a compare-and-set checks this)."""
    return int(execute(db, sql, params).rowcount)


def execute_many(db: pw.Database, sql: str, rows: Sequence[Sequence[object]]) -> None:
    """One statement over many parameter rows (bulk inserts). The cursor is the driver's own, so
    its errors are given to the backend's ``translate_error`` (a full disk, a lost connection...)."""
    try:
        db.cursor().executemany(translate(db, sql), rows)
    except Exception as e:
        translate_error = getattr(db, "translate_error", None)
        if translate_error is not None:
            translate_error(e)
        raise


def fetch_all(db: pw.Database, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    """Every row as a plain tuple (no decoding: the caller knows its columns)."""
    return list(execute(db, sql, params).fetchall())


def columns(row: type, alias: str = "", computed: Mapping[str, str] | None = None) -> str:
    """The SELECT list of a row type: its fields, in order (``n.id, n.key`` with ``alias="n"``), so
    a statement and the row it is read into cannot disagree. ``computed``: a field read from an
    expression (another table's column, a CASE...), written ``expr AS field``."""
    prefix = f"{alias}." if alias else ""
    computed = computed or {}
    unknown = set(computed) - set(_fields(row))
    if unknown:
        raise TypeError(f"{row.__name__} has no field {sorted(unknown)[0]!r}")
    return ", ".join(f"{computed[f]} AS {f}" if f in computed else prefix + f for f in _fields(row))


def fetch_rows(db: pw.Database, row: type[_Row], sql: str, params: Sequence[object] = ()) -> list[_Row]:
    """Every row as a ``row`` (a NamedTuple whose fields are the statement's columns, in order:
    see :func:`columns`), JSON and boolean columns decoded. Read by attribute, so a renamed
    column is a type error (docs/architecture.md, "Reading rows")."""
    fields, make = _fields(row), _maker(row)
    return [make(_decoded(fields, r)) for r in fetch_all(db, sql, params)]


def fetch_row(db: pw.Database, row: type[_Row], sql: str, params: Sequence[object] = ()) -> _Row | None:
    """The first row as a ``row`` (:func:`fetch_rows`), or None."""
    found = execute(db, sql, params).fetchone()
    return None if found is None else _maker(row)(_decoded(_fields(row), found))


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(row: type) -> tuple[str, ...]:
    """A row type's fields: a NamedTuple's, or a dataclass's (a table's record, a view)."""
    got = _FIELDS.get(row)
    if got is None:
        fields = getattr(row, "_fields", None)
        if isinstance(fields, tuple):
            got = fields
        elif dataclasses.is_dataclass(row):
            got = tuple(f.name for f in dataclasses.fields(row))
        else:
            raise TypeError(f"{row.__name__} is not a row type (a NamedTuple or a dataclass)")
        got = _FIELDS[row] = got
    return got


def _maker(row: type[_Row]) -> Callable[[list[object]], _Row]:
    """How a row of ``row`` is made from its decoded values: a NamedTuple by position; a frozen
    dataclass (a table's record, a view) field by field, without its generated ``__init__`` (its
    fields may be keyword-only; it has no ``__post_init__``), every field from the statement."""
    if not dataclasses.is_dataclass(row):
        make = cast(Callable[..., _Row], row)
        return lambda values: make(*values)
    names = _fields(row)

    def made(values: list[object]) -> _Row:
        assert len(values) == len(names), (row.__name__, len(values))
        obj = object.__new__(row)
        for name, value in zip(names, values):
            object.__setattr__(obj, name, value)
        return obj
    return made


def _decoded(fields: Sequence[str], values: Sequence[object]) -> list[object]:
    out = list(values)
    for i, f in enumerate(fields):  # a row type may have more fields (with defaults) than the statement reads
        if f in JSON_COLUMNS:
            v = out[i]
            if isinstance(v, str):
                out[i] = loads(v)
        elif f in BOOL_COLUMNS and out[i] is not None:
            out[i] = bool(out[i])
    return out


def scalar(db: pw.Database, sql: str, params: Sequence[object] = ()) -> Any:
    """The first column of the first row, or None."""
    row = execute(db, sql, params).fetchone()
    return None if row is None else row[0]


def set_clause(fields: Mapping[str, object]) -> tuple[str, list[object]]:
    """``a = ?, b = b + ?`` and its values, JSON columns encoded (``Inc`` adds to the column)."""
    sets: list[str] = []
    values: list[object] = []
    for col, v in fields.items():
        if isinstance(v, Inc):
            sets.append(f"{col} = {col} + ?")
            values.append(v.n)
        else:
            sets.append(f"{col} = ?")
            values.append(dumps(v) if col in JSON_COLUMNS else v)
    return ", ".join(sets), values


def id_array(db: pw.Database, ids: Sequence[int]) -> tuple[str, str | list[int]]:
    """(a SELECT yielding these ids, its one parameter): the ids go in as a single parameter —
    a JSON array on SQLite, an array on PostgreSQL — however many there are."""
    if is_sqlite(db):
        return "SELECT value FROM json_each(?)", dumps([int(i) for i in ids])
    return "SELECT unnest(?::bigint[])", [int(i) for i in ids]


def chunks(seq: Sequence[_T], n: int = CHUNK) -> Iterator[Sequence[_T]]:
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


# ---------------------------------------------------------------------- decoding
_EMPTY_JSON = {"{}": None, "[]": None, "null": None}


def json_value(v: object, cache: dict[str, object] | None = None) -> Any:
    """One JSON column's value. With ``cache`` a text seen before is parsed once (many nodes share
    one preconditions text) and each caller gets its own copy of the container."""
    if v is None or not isinstance(v, str):
        return v
    if v in _EMPTY_JSON:  # the common case, without the parser
        return {} if v == "{}" else ([] if v == "[]" else None)
    if cache is None:
        return loads(v)
    got = cache.get(v)
    if got is None:
        got = cache[v] = loads(v)
    return dict(got) if isinstance(got, dict) else (list(got) if isinstance(got, list) else got)

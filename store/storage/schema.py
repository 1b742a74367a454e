"""Schema version, creation, migration; unknown versions are refused.

``meta.schema_version`` holds the version a ledger was written with. A newer one is refused (this
Warden cannot know what it means); an older one is refused with a pointer to ``warden migrate``,
which upgrades in place under a write lock. Nothing migrates on its own while agents run.
"""

from __future__ import annotations

import sqlite3
from typing import Callable

import peewee as pw

from store.storage import sql
from store.storage.db import is_sqlite, retry_conflicts, write_tx
from store.errors import LedgerUnavailable, SchemaMismatch
from store.storage.models import MIND_MODELS, MODEL, MODELS, SEED_MODELS, Meta, WriteRequest, specs
from store.storage.tables import TABLE
from store.storage.sqlite_file import checked_version

SCHEMA_VERSION = 5


def column_sql(table: str, name: str, *, sqlite: bool) -> str:
    """A column's type as ``ALTER TABLE … ADD COLUMN`` writes it, from its declaration
    (``store/storage/tables.py``): a column that may not be NULL takes its default (existing rows
    get it)."""
    [spec] = [s for s in specs(TABLE[table].record) if s.name == name]
    c = spec.column
    if c.width:
        kind = f"VARCHAR({c.width})"
    elif c.json or spec.type is str:
        kind = "TEXT"
    elif spec.type is float:
        kind = "REAL" if sqlite else "DOUBLE PRECISION"
    elif spec.type is int and not c.big:
        kind = "INTEGER"
    else:
        raise TypeError(f"{table}.{name}: no ADD COLUMN for {spec.type!r}")
    if spec.nullable:
        return kind
    if not isinstance(c.default, (int, float)) or isinstance(c.default, bool):
        raise TypeError(f"{table}.{name}: a column added NOT NULL needs a numeric default")
    return f"{kind} NOT NULL DEFAULT {c.default:g}"


def _add_columns(db: pw.Database, table: str, columns: list[str]) -> None:
    """ALTER TABLE … ADD COLUMN for each column named, typed as its declaration says (``column_sql``)."""
    sqlite = is_sqlite(db)
    have = {c.name for c in db.get_columns(table)}
    for name in columns:
        if name not in have:  # a step re-run after a partial upgrade adds only what is missing
            sql.execute(db, f"ALTER TABLE {table} ADD COLUMN {name} {column_sql(table, name, sqlite=sqlite)}")


def _migrate_1_to_2(db: pw.Database) -> None:
    """Schema 2. Every new column has a default or is nullable, so existing rows stay valid.

    * the ``write_request`` table (idempotent writes across lost connections);
    * task: ``paused_s``, ``paused_since`` (the budget clock stands still while the task waits) and
      ``wake_state`` (wake conditions of parks); effect: the compensation node and who marked it
      compensated, when and why. A task parked or finished at the upgrade has its clock stopped
      from then (``parked_at`` / ``finished_at``), so waiting before the upgrade is not counted.
    """
    with db.bind_ctx([WriteRequest]):
        db.create_tables([WriteRequest], safe=True)
    _add_columns(db, "task", ["paused_s", "paused_since", "wake_state"])
    _add_columns(db, "effect", ["compensation_node_id", "compensated_at", "compensated_by", "compensation_note"])
    sql.execute(db, "UPDATE task SET paused_since = parked_at WHERE status = 'parked' AND started_at IS NOT NULL")
    sql.execute(db, "UPDATE task SET paused_since = finished_at WHERE status IN ('completed', 'failed', 'aborted') "
                    "AND started_at IS NOT NULL AND finished_at IS NOT NULL")


def _migrate_2_to_3(db: pw.Database) -> None:
    """Schema 3: the node's own heartbeat figures and its declared wait: five nullable
    columns, so existing rows need no rewrite."""
    _add_columns(db, "node", ["beat_interval_s", "units_at", "wait_on", "wait_since", "wait_until"])


# Schema 4 is made of named parts, one per capability, each idempotent (a column or a
# table is added only when missing), run in this order inside the one migration transaction.
def _novelty(db: pw.Database) -> None:
    """Part "novelty": an observation's action, result, their identities, flags and
    concepts; a node's progress time, heartbeat rhythm and paused seconds. All nullable or with a
    default, so existing rows stay valid (an old observation is judged as an observation)."""
    _add_columns(db, "observation", ["action", "result", "action_key", "content", "flags", "concepts"])
    _add_columns(db, "node", ["progress_at", "beat_gaps", "beat_long_s", "paused_s"])


def _origin(db: pw.Database) -> None:
    """task.origin: which integration made the task. Nullable: a task made before is
    derived (``rows.task_origin``: ``langgraph`` for the adapter's workflow, else ``python``)."""
    _add_columns(db, "task", ["origin"])


SCHEMA_4_PARTS: list[tuple[str, Callable[[pw.Database], None]]] = [
    ("origin", _origin),
    ("novelty", _novelty),
]


def _seed_rules(db: pw.Database) -> None:
    """The seed rules: a step's deadline, the cost-density verdict and the repair request
    on the node; the task's cost-density limit. All nullable: existing rows need no rewrite."""
    _add_columns(db, "node", ["step_deadline", "density", "repair"])
    _add_columns(db, "task", ["density_limit"])


SCHEMA_4_PARTS.append(("seed rules", _seed_rules))
def _mind(db: pw.Database) -> None:
    """The task's mind: tables ``requirement``, ``conclusion``, ``plan_version``,
    ``memory``; task ``mind`` (JSON); node ``serves`` (JSON), ``removed_in``, ``removed_mode``. All
    nullable: an existing task has no requirements, an existing node serves none."""
    with db.bind_ctx(MIND_MODELS):
        db.create_tables(MIND_MODELS, safe=True)
    _add_columns(db, "task", ["mind"])
    _add_columns(db, "node", ["serves", "removed_in", "removed_mode"])


SCHEMA_4_PARTS.append(("mind", _mind))


def _migrate_3_to_4(db: pw.Database) -> None:
    """Schema 4: the parts listed in ``SCHEMA_4_PARTS`` (each says what it adds)."""
    for _name, part in SCHEMA_4_PARTS:
        part(db)


def _quotas_and_people(db: pw.Database) -> None:
    """Part "quotas and people": tables ``quota``, ``node_quota``, ``quota_draw`` (shared
    external quotas), ``confirm_kind`` (kinds whose effects a person confirms first); memory
    ``source``. Nullable: an existing memory has no source recorded."""
    with db.bind_ctx(SEED_MODELS):
        db.create_tables(SEED_MODELS, safe=True)
    _add_columns(db, "memory", ["source"])


def _one_observation(db: pw.Database) -> None:
    """Part "one observation": ``event.observation_id``, the observation row a heartbeat made. What
    a report brought is stored there only; a heartbeat written before keeps it in its payload (read
    as such: nothing is rewritten). Nullable: every other event names none."""
    _add_columns(db, "event", ["observation_id"])


def _rejections_by_reference(db: pw.Database) -> None:
    """Part "rejections by reference": a rewind's reason is stored once, as its rejected path (a
    ``conclusion`` row); a node's ``rejections`` lists those rows' ids from now on (an older
    ledger's reasons, written as text, are read as they are). No column changes: the version says
    the list may hold ids, which an older Warden would show as numbers."""


def _kind_norms(db: pw.Database) -> None:
    """Part "kind norms": the ``kind_norm`` table (what healthy nodes of a kind normally do, learnt
    from finished nodes and from alarms an operator marked healthy) and ``node.healthy_at`` (an
    alarm marked healthy: the attempt's loops are judged from then). Empty and nullable: a ledger's
    kinds learn from the nodes that finish after the upgrade."""
    with db.bind_ctx([MODEL["kind_norm"]]):
        db.create_tables([MODEL["kind_norm"]], safe=True)
    _add_columns(db, "node", ["healthy_at"])


# Schema 5 is made of named parts like schema 4 (each idempotent; a capability's part is appended
# where it is declared).
SCHEMA_5_PARTS: list[tuple[str, Callable[[pw.Database], None]]] = [
    ("quotas and people", _quotas_and_people),
    ("one observation", _one_observation),
    ("rejections by reference", _rejections_by_reference),
    ("kind norms", _kind_norms),
]


def _migrate_4_to_5(db: pw.Database) -> None:
    """Schema 5: the parts listed in ``SCHEMA_5_PARTS`` (each says what it adds)."""
    for _name, part in SCHEMA_5_PARTS:
        part(db)


# MIGRATIONS[n] upgrades a ledger from version n to n + 1, inside one write transaction.
MIGRATIONS: dict[int, Callable[[pw.Database], None]] = {1: _migrate_1_to_2, 2: _migrate_2_to_3, 3: _migrate_3_to_4,
                                                        4: _migrate_4_to_5}


def _read_version(db: pw.Database) -> int | None:
    """The stored schema version, None when the database has no Warden tables at all."""
    try:
        tables = set(db.get_tables())
    except (pw.DatabaseError, sqlite3.DatabaseError) as e:
        raise LedgerUnavailable(f"{getattr(db, 'display', 'ledger')} is not a Warden ledger: {' '.join(str(e).split())}") from None
    if "meta" not in tables:
        if tables:
            raise LedgerUnavailable(
                f"{getattr(db, 'display', 'ledger')} is a database but not a Warden ledger (no meta table)"
            )
        return None
    row = _version_row(db)
    if row is None:
        raise LedgerUnavailable(f"{getattr(db, 'display', 'ledger')} has no schema_version; not a Warden ledger")
    return _version(db, row[0])


def _version(db: pw.Database, value: object) -> int:
    """The stored version: plain digits only (``'abc'``, ``' 2\\n'``, ``'1e3'`` are refused)."""
    return checked_version(value, getattr(db, "display", "ledger"))


def check_version(db: pw.Database, *, create: bool) -> int:
    """Create the schema on an empty database (when allowed) or check the stored version."""
    version = _read_version(db)
    if version is None:
        if not create or getattr(db, "read_only", False):
            raise LedgerUnavailable(f"{getattr(db, 'display', 'ledger')} is empty: not a Warden ledger")
        create_schema(db)
        return SCHEMA_VERSION
    _refuse_mismatch(db, version)
    return version


def _refuse_mismatch(db: pw.Database, version: int) -> None:
    name = getattr(db, "display", "ledger")
    if version > SCHEMA_VERSION:
        raise SchemaMismatch(
            f"{name} was written by a newer Warden (schema {version}); this Warden reads schema "
            f"{SCHEMA_VERSION}: upgrade Warden"
        )
    if version < SCHEMA_VERSION:
        raise SchemaMismatch(
            f"{name} has schema {version}; this Warden needs schema {SCHEMA_VERSION}: stop the agents "
            "and run `warden migrate`"
        )


PG_SCHEMA_LOCK = 0x57A4DF  # serialises concurrent creators and migrators of one PostgreSQL ledger


def _schema_lock(db: pw.Database) -> None:
    if not is_sqlite(db):  # SQLite's BEGIN IMMEDIATE already serialises them
        sql.execute(db, "SELECT pg_advisory_xact_lock(?)", [PG_SCHEMA_LOCK])


@retry_conflicts
def create_schema(db: pw.Database) -> None:
    with write_tx(db):
        _schema_lock(db)
        if _read_version_in_tx(db) is not None:  # another process created it meanwhile
            return
        with db.bind_ctx(MODELS):
            db.create_tables(MODELS, safe=True)
        Meta.insert(key="schema_version", value=str(SCHEMA_VERSION)).on_conflict_ignore().bind(db).execute()
        if not is_sqlite(db):
            _install_pg_extras(db)


def _read_version_in_tx(db: pw.Database) -> int | None:
    if "meta" not in set(db.get_tables()):
        return None
    row = _version_row(db)
    return _version(db, row[0]) if row else None


def _version_row(db: pw.Database) -> tuple[object] | None:
    """The meta table's schema_version row (its one value), or None."""
    found = sql.fetch_all(db, "SELECT value FROM meta WHERE key = ? LIMIT 1", ["schema_version"])
    return (found[0][0],) if found else None


def _install_pg_extras(db: pw.Database) -> None:
    """PostgreSQL: NOTIFY on every journal insert (the feed's wake-up; a hint, not data)."""
    sql.execute(
        db,
        """
        CREATE OR REPLACE FUNCTION warden_event_notify() RETURNS trigger AS $$
        BEGIN
          PERFORM pg_notify('warden_events', NEW.id::text);
          RETURN NEW;
        END;
        $$ LANGUAGE plpgsql
        """
    )
    sql.execute(db, "DROP TRIGGER IF EXISTS warden_event_notify ON event")
    sql.execute(
        db,
        "CREATE TRIGGER warden_event_notify AFTER INSERT ON event "
        "FOR EACH ROW EXECUTE FUNCTION warden_event_notify()"
    )


def migrate(db: pw.Database) -> tuple[int, int]:
    """Upgrade in place under a write lock. Returns (from, to). Refuses newer schemas."""
    with write_tx(db):
        _schema_lock(db)
        version = _read_version_in_tx(db)
        if version is None:
            raise LedgerUnavailable(f"{getattr(db, 'display', 'ledger')} is not a Warden ledger")
        if version > SCHEMA_VERSION:
            _refuse_mismatch(db, version)
        start = version
        while version < SCHEMA_VERSION:
            step = MIGRATIONS.get(version)
            if step is None:
                raise SchemaMismatch(f"no migration from schema {version} to {version + 1}")
            step(db)
            version += 1
        sql.execute(db, "UPDATE meta SET value = ? WHERE key = ?", [str(version), "schema_version"])
    return start, version

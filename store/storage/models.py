"""Peewee models of the ledger, derived from the tables' declarations (``store/storage/tables.py``):
the DDL a new ledger is created with, and the query builder's writes (``Model.insert``).

The models are declared without a database; every query is bound to the ledger's database with
``.bind(db)`` so that several ledgers can be open in one process (tests, the demo, the console).
Times are float seconds since the epoch (UTC), produced by the ledger's injected clock.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from types import UnionType
from typing import Callable

import peewee as pw

from store.errors import LedgerUnavailable
from store.columns import NO_DEFAULT, Column
from store.jsontypes import JsonValue
from store.storage.tables import MIND_TABLES, SEED_TABLES, TABLES, Table

TASK_STATUSES = ("active", "parked", "completed", "failed", "aborted")
NODE_STATUSES = ("pending", "running", "blocked", "parked", "succeeded", "failed", "abandoned")
FINISHED_NODE_STATUSES = ("succeeded", "abandoned")
FAILURE_CLASSES = ("transient", "idempotent_write", "irreversible_write", "conclusion", "spec")
LAYERS = ("decision", "execution", "operator", "system")
# ``permission``: an agent asks leave to use a tool (Claude Code's PermissionRequest hook);
# ``alignment``: does the plan still serve the requirement? (store/mind/alignment.py).
HANDOFF_KINDS = ("confirm", "direction", "exception", "acceptance", "permission", "alignment")
HANDOFF_STATUSES = ("open", "resolved", "withdrawn", "expired")
EFFECT_STATUSES = ("intended", "confirmed", "compensated")


def dumps(value: object) -> str:
    """Canonical JSON used for storage and digests: sorted keys, no NaN, compact."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def loads(text: str) -> JsonValue:
    """A stored JSON value. Text that is not JSON (a damaged row, a ledger written by something
    else) is ``LedgerUnavailable`` with one line, not a ``JSONDecodeError``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise LedgerUnavailable("the ledger holds a value that is not JSON (a damaged row, or written by "
                                "something other than Warden): restore it from a backup") from None


class JSONField(pw.TextField):
    """A JSON value stored as canonical text."""

    def db_value(self, value: object) -> str | None:
        return None if value is None else dumps(value)

    def python_value(self, value: str | None) -> JsonValue:
        return None if value is None else loads(value)


class BaseModel(pw.Model):
    class Meta:
        database = None
        legacy_table_names = False


# ---------------------------------------------------------------------- columns from their declarations
_JSON_NAMES: dict[str, object] = {"JsonValue": object, "JsonScalar": object}  # recursive aliases: any value


class Spec(typing.NamedTuple):
    """One declared column: its name, its Python type (``None`` removed), whether it may be NULL and
    what its markers say (store/columns.py)."""

    name: str
    type: object
    nullable: bool
    column: Column


def specs(record: type) -> list[Spec]:
    """The columns of a table's record class, in order."""
    hints = typing.get_type_hints(record, include_extras=True, localns=_JSON_NAMES)
    out = []
    blank = Column()
    for f in dataclasses.fields(record):
        name, hint = f.name, hints[f.name]
        marks: tuple[object, ...] = ()
        if typing.get_origin(hint) is typing.Annotated:
            hint, marks = typing.get_args(hint)[0], typing.get_args(hint)[1:]
        column = blank
        for mark in marks:  # Annotated[int, BIG, Default(0)]: what each says, together
            if isinstance(mark, Column):
                column = dataclasses.replace(column, **{k: getattr(mark, k) for k in blank.__dataclass_fields__
                                                        if getattr(mark, k) != getattr(blank, k)})
        args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, UnionType) else ()
        nullable = type(None) in args
        if nullable:
            rest = [a for a in args if a is not type(None)]
            hint = rest[0] if len(rest) == 1 else object
        out.append(Spec(name, hint, nullable, column))
    return out


def _field(s: Spec, models: dict[str, type[BaseModel]]) -> tuple[str, pw.Field]:
    """The Peewee field of a column (a reference is named without its ``_id``, as Peewee does)."""
    c = s.column
    kw: dict[str, object] = {"null": s.nullable}
    if c.default is not NO_DEFAULT:
        kw["default"] = c.default
    if c.index:
        kw["index"] = True
    if c.ref is not None:
        table, column = c.ref
        if column != "id":
            kw["field"] = column
        fk: Callable[..., pw.Field] = pw.ForeignKeyField
        return s.name.removesuffix("_id"), fk(models[table], column_name=s.name, on_delete="CASCADE", **kw)
    if c.auto:
        return s.name, (pw.BigAutoField() if c.big else pw.AutoField())
    if c.key:
        kw["primary_key"] = True
    kinds: dict[object, Callable[..., pw.Field]] = {
        bool: pw.BooleanField, float: pw.DoubleField, bytes: pw.BlobField,
        int: pw.BigIntegerField if c.big else pw.IntegerField, str: pw.TextField}
    make: Callable[..., pw.Field] | None = JSONField if c.json else kinds.get(s.type)
    if c.width:
        make, kw["max_length"] = pw.CharField, c.width
    if make is None:
        raise TypeError(f"column {s.name}: no column kind for {s.type!r} (mark a JSON column with Json())")
    return s.name, make(**kw)


def _model(t: Table, models: dict[str, type[BaseModel]]) -> type[BaseModel]:
    fields = dict(_field(s, models) for s in specs(t.record))
    by_column = {f.column_name or name: name for name, f in fields.items()}
    meta: dict[str, object] = {"table_name": t.name,
                               "indexes": tuple((tuple(by_column[c] for c in cols), unique) for cols, unique in t.indexes)}
    if t.primary:
        meta["primary_key"] = pw.CompositeKey(*(by_column[c] for c in t.primary))
    name = "".join(w.title() for w in t.name.split("_"))
    return type(name, (BaseModel,), {**fields, "Meta": type("Meta", (), meta), "__module__": __name__})


def _models() -> dict[str, type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {}
    for t in TABLES:
        out[t.name] = _model(t, out)
    return out


MODEL: dict[str, type[BaseModel]] = _models()
"""Every table's model, by table name."""

Meta, Task, Node, Event = MODEL["meta"], MODEL["task"], MODEL["node"], MODEL["event"]
Effect, Artifact, Handoff, Action = MODEL["effect"], MODEL["artifact"], MODEL["handoff"], MODEL["action"]
WriteRequest = MODEL["write_request"]
MIND_MODELS = tuple(MODEL[t] for t in MIND_TABLES)
SEED_MODELS = tuple(MODEL[t] for t in SEED_TABLES)
MODELS = tuple(MODEL.values())

# The SQL layer decodes these by name in any row it reads (``sql.fetch_rows``); a name is one kind
# of column in every table.
JSON_COLUMNS = frozenset(s.name for t in TABLES for s in specs(t.record) if s.column.json)
BOOL_COLUMNS = frozenset(s.name for t in TABLES for s in specs(t.record) if s.type is bool)
assert not JSON_COLUMNS & {s.name for t in TABLES for s in specs(t.record) if not s.column.json}, \
    "a column name is JSON in one table and not in another"

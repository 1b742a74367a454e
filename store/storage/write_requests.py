"""A write's recorded outcome (PostgreSQL): the ``write_request`` table, read and written here.

:func:`store.storage.db.run_write` gives each write a request id and records, *in the write's own
transaction*, what it returned (or the refusal it raised). A retry after a lost ``COMMIT`` looks
the id up first: when it is there the first attempt committed, and its recorded outcome is the
answer — the write is not done twice. Plain JSON values are recorded as they are; other result
types register an encoder and a decoder (:func:`register_result`; the decoder also gets the
write's own arguments). The SQL goes through :mod:`store.storage.sql` like every other statement.
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable, TypeVar

import peewee as pw

from store import errors
from store.storage import sql
from store.errors import LedgerUnavailable, WardenError
from store.jsontypes import JsonArray, JsonObject
from store.storage.models import loads

__all__ = ["PRUNE_EVERY", "REQUEST_KEEP_S", "AlreadyDone", "decode", "encode", "record", "recorded",
           "register_result"]

REQUEST_KEEP_S = 24 * 3600.0  # request ids older than this are pruned
PRUNE_EVERY = 64  # about one write in this many prunes old request ids

_T = TypeVar("_T")
# A decoder gets what its encoder recorded: JSON of the shape that encoder gives (an object for one
# result type, an array for another), so the registry, holding every type's, cannot say which.
_Decode = Callable[[Any, tuple[object, ...], dict[str, object]], object]
_CODECS: dict[str, tuple[type, Callable[[object], JsonObject | JsonArray], _Decode]] = {}


class AlreadyDone(Exception):
    """The request id is already recorded: an earlier attempt of this write committed."""


def register_result(tag: str, cls: type[_T], encode: Callable[[_T], JsonObject | JsonArray], decode: _Decode) -> None:
    """Teach :func:`store.storage.db.run_write` to record results of type ``cls`` (``decode(data, args,
    kwargs)`` rebuilds one from ``encode``'s JSON and the write's arguments)."""

    def encoded(value: object) -> JsonObject | JsonArray:
        if not isinstance(value, cls):
            raise TypeError(f"{tag} records a {cls.__name__}, not a {type(value).__name__}")
        return encode(value)

    _CODECS[tag] = (cls, encoded, decode)


def encode(value: object) -> JsonObject:
    """A write's result (or the refusal it raised) as JSON to record."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    if isinstance(value, BaseException):
        return {"raise": type(value).__name__, "message": str(value)}
    for tag, (cls, enc, _dec) in _CODECS.items():
        if isinstance(value, cls):
            return {"t": tag, "v": enc(value)}
    if isinstance(value, (list, tuple)):
        return {"seq": [encode(v) for v in value], "tuple": isinstance(value, tuple)}
    raise TypeError(f"run_write cannot record a result of type {type(value).__name__}: register_result it")


def decode(data: JsonObject, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    """What :func:`encode` recorded, rebuilt (a refusal comes back as the exception to raise)."""
    if "v" in data and "t" not in data:
        return data["v"]
    if "raise" in data:
        cls = getattr(errors, str(data["raise"]), None)
        if isinstance(cls, type) and issubclass(cls, WardenError):
            return cls(str(data["message"]))
        return RuntimeError(str(data["message"]))
    if "seq" in data:
        items = [decode(v, args, kwargs) for v in data["seq"]]
        return tuple(items) if data.get("tuple") else items
    _cls, _enc, dec = _CODECS[data["t"]]
    return dec(data["v"], args, kwargs)


def recorded(db: pw.Database, rid: str) -> JsonObject | None:
    """The recorded outcome of request ``rid`` (its JSON object), or None when it never committed.
    A damaged record is ``LedgerUnavailable`` with one line (``models.loads``), not a traceback."""
    text = sql.scalar(db, "SELECT result FROM write_request WHERE id = ?", [rid])
    if text is None:
        return None
    found = loads(text)
    if not isinstance(found, dict):
        raise LedgerUnavailable(f"the ledger's record of write request {rid} is not a JSON object (a damaged "
                                "row, or written by something other than Warden): restore it from a backup")
    return found


def record(db: pw.Database, rid: str, at: float, outcome: JsonObject) -> None:
    """Record request ``rid``'s outcome in the current transaction; :class:`AlreadyDone` when an
    earlier attempt of it committed. Now and then, prune records older than ``REQUEST_KEEP_S``."""
    # ON CONFLICT: should an earlier attempt still be in flight on a connection we gave up on
    # (its COMMIT queued on a server that has not noticed we left), this waits for it, and
    # inserts nothing if it committed — then this attempt rolls back and returns its outcome.
    row = sql.execute(db, "INSERT INTO write_request (id, at, result) VALUES (?, ?, ?) "
                          "ON CONFLICT (id) DO NOTHING RETURNING id",
                      [rid, at, json.dumps(outcome, separators=(",", ":"))]).fetchone()
    if row is None:
        raise AlreadyDone()
    if random.randrange(PRUNE_EVERY) == 0:
        sql.execute(db, "DELETE FROM write_request WHERE at < ?", [at - REQUEST_KEEP_S])

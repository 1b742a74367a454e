"""A write's recorded outcome (PostgreSQL): the ``write_request`` table, read and written here.

:func:`store.db.run_write` gives each write a request id and records, *in the write's own
transaction*, what it returned (or the refusal it raised). A retry after a lost ``COMMIT`` looks
the id up first: when it is there the first attempt committed, and its recorded outcome is the
answer — the write is not done twice. Plain JSON values are recorded as they are; other result
types register an encoder and a decoder (:func:`register_result`; the decoder also gets the
write's own arguments). The SQL goes through :mod:`store.sql` like every other statement.
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable

import peewee as pw

from . import errors, sql
from .errors import WardenError
from .models import loads

__all__ = ["PRUNE_EVERY", "REQUEST_KEEP_S", "AlreadyDone", "decode", "encode", "record", "recorded",
           "register_result"]

REQUEST_KEEP_S = 24 * 3600.0  # request ids older than this are pruned
PRUNE_EVERY = 64  # about one write in this many prunes old request ids

_Encode = Callable[[Any], Any]
_Decode = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]
_CODECS: dict[str, tuple[type, _Encode, _Decode]] = {}


class AlreadyDone(Exception):
    """The request id is already recorded: an earlier attempt of this write committed."""


def register_result(tag: str, cls: type, encode: _Encode, decode: _Decode) -> None:
    """Teach :func:`store.db.run_write` to record results of type ``cls`` (``decode(data, args,
    kwargs)`` rebuilds one from ``encode``'s JSON and the write's arguments)."""
    _CODECS[tag] = (cls, encode, decode)


def encode(value: Any) -> Any:
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


def decode(data: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
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


def recorded(db: pw.Database, rid: str) -> Any:
    """The recorded outcome of request ``rid`` (its JSON), or None when it never committed. A
    damaged record is ``LedgerUnavailable`` with one line (``models.loads``), not a traceback."""
    text = sql.scalar(db, "SELECT result FROM write_request WHERE id = ?", [rid])
    return None if text is None else loads(text)


def record(db: pw.Database, rid: str, at: float, outcome: Any) -> None:
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

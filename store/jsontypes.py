"""The JSON edge: the only place the console and the store spell ``Any``.

A value is at the JSON edge when it was decoded from JSON (an event's ``data``, a heartbeat's
metadata, a plan or audit column, a run directory's ``state.json``, an MCP or hook payload, a
``--json`` request) or is built to be encoded as JSON (``--json`` output, a journal payload, the
browser's messages). Its fields are read by name and checked where they are read, so their type
is the JSON value's, not a Python class's. Everything else is typed: a row is a NamedTuple, a
view a frozen dataclass, an untrusted argument ``object`` narrowed by a rule.

Use ``JsonObject`` for a decoded or to-be-encoded object, ``JsonMapping`` where it is only read,
``JsonArray`` for a list, ``JsonValue`` for any one JSON value whose shape the code checks
(the recursive type; narrowing it with ``isinstance`` is how a reader proves a field's type).
tests/store/test_any_edges.py fails if ``Any`` is written anywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

JsonScalar: TypeAlias = "str | int | float | bool | None"
JsonValue: TypeAlias = "JsonScalar | list[JsonValue] | dict[str, JsonValue]"
JsonObject: TypeAlias = dict[str, Any]
JsonMapping: TypeAlias = Mapping[str, Any]
JsonArray: TypeAlias = list[Any]

__all__ = ["JsonArray", "JsonMapping", "JsonObject", "JsonScalar", "JsonValue"]

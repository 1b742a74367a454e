"""How a journal event's payload is declared, encoded and decoded (the kinds themselves are listed
in :mod:`store.storage.events`).

A payload is a frozen, keyword-only dataclass deriving from :class:`Payload`; the class names its
kind and the layers it is written in (``class NodeNote(Payload, kind="node.note", layer=…)``), its
fields are the payload's keys. A field's annotation says how it is stored:

* ``x: int`` — the key ``x``, always written; a stored payload without it does not fit its kind.
* ``x: Maybe[int] = None`` — written only when it has a value (read back as None when missing).
* ``x: str | None`` — always written, null allowed.
* ``x: Part[Commit]`` — a part of the payload (a dataclass with ``to_json`` / ``from_json`` of its
  own, usually a :class:`Payload` without a kind) whose keys stand beside the payload's own;
  ``Part[Observed | None] = None`` for one that may be missing.
* ``x: Carried[str] = ""`` — not a key: the event carries it another way (its kind, its row).
* ``from_: Annotated[str, Key("from")]`` — a key that is not a Python name.

One pair of methods serves every kind: :meth:`Payload.to_json` is what ``LedgerCore.journal``
stores; :meth:`Payload.from_json` reads a stored payload back, each key checked against its field's
JSON type (a float field takes an integer and makes it a float). A payload that does not fit its
kind (a damaged row, a key a required field lacks) raises :class:`Undecodable`, and
:func:`store.storage.events.payload_of` then hands out :class:`store.storage.events.Unknown` with the stored JSON,
so a reader skips what it cannot read instead of failing. The JSON a person sees (``warden events
--json``) is the stored payload itself, key for key.
"""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, dataclass, fields
from typing import Annotated, ClassVar, Literal, Mapping, Protocol, Sequence, TypeAlias, TypeVar, Union

from store.jsontypes import JsonMapping, JsonObject

Layer = Literal["decision", "execution", "operator", "system"]
LAYERS: tuple[Layer, ...] = ("decision", "execution", "operator", "system")

_T = TypeVar("_T")
_P = TypeVar("_P", bound="Payload")


class _Marker:
    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return self.what


_ABSENT, _PART, _CARRIED = _Marker("absent"), _Marker("part"), _Marker("carried")

Maybe: TypeAlias = Annotated[_T | None, _ABSENT]
"""A key written only when its value is not None."""
Part: TypeAlias = Annotated[_T, _PART]
"""A part of the payload whose keys stand beside the payload's own."""
Carried: TypeAlias = Annotated[_T, _CARRIED]
"""Not a key: the event carries it another way."""


@dataclass(frozen=True)
class Key:
    """The spelling of a field's key when it is not the field's name (``Annotated[str, Key("from")]``)."""

    name: str


class Undecodable(ValueError):
    """A stored payload that does not fit its kind's declaration."""


class _Part(Protocol):
    def to_json(self) -> JsonObject: ...

    @classmethod
    def from_json(cls, raw: JsonMapping) -> _Part | None: ...


class _Spec:
    """One field as the codec reads it: its key, whether it is left out while None, whether it is
    required when decoding, the JSON types it takes (None: any), whether it is a float, and its
    part's class when it is one."""

    __slots__ = ("name", "key", "omit", "required", "accepts", "is_float", "part")

    def __init__(self, name: str, key: str, omit: bool, required: bool, accepts: tuple[type, ...] | None,
                 is_float: bool, part: type[_Part] | None) -> None:
        self.name, self.key, self.omit, self.required = name, key, omit, required
        self.accepts, self.is_float, self.part = accepts, is_float, part


_SPECS: dict[type, tuple[_Spec, ...]] = {}


def _json_types(tp: object) -> tuple[tuple[type, ...] | None, bool]:
    """The runtime types a stored value of annotation ``tp`` may have (None: any JSON value), and
    whether it is a float (an integer is then taken and made a float)."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _json_types(typing.get_args(tp)[0])
    if origin in (Union, types.UnionType):
        found: list[type] = []
        is_float = False
        for arg in typing.get_args(tp):
            got, f = _json_types(arg)
            if got is None:
                return None, False
            found.extend(got)
            is_float = is_float or f
        return tuple(found), is_float
    if tp is type(None):
        return (type(None),), False
    if tp is float:
        return (int, float), True
    if tp is int:
        return (int,), False
    if tp is str:
        return (str,), False
    if tp is bool:
        return (bool,), False
    if origin in (list, Sequence, tuple) or tp is list:
        return (list,), False
    if origin in (dict, Mapping) or tp is dict or typing.is_typeddict(tp):
        return (dict,), False
    return None, False  # JsonValue and the like: any JSON value


def _spec(name: str, hint: object, has_default: bool) -> _Spec | None:
    marks = typing.get_args(hint)[1:] if typing.get_origin(hint) is Annotated else ()
    if _CARRIED in marks:
        return None
    key = next((m.name for m in marks if isinstance(m, Key)), name)
    inner = typing.get_args(hint)[0] if marks else hint
    if _PART in marks:
        options = [a for a in typing.get_args(inner) if a is not type(None)] or [inner]
        optional = type(None) in typing.get_args(inner)
        return _Spec(name, key, True, not optional, None, False, options[0])
    accepts, is_float = _json_types(inner)
    return _Spec(name, key, _ABSENT in marks, not has_default, accepts, is_float, None)


def _specs(cls: type) -> tuple[_Spec, ...]:
    got = _SPECS.get(cls)
    if got is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        specs = [_spec(f.name, hints[f.name], f.default is not MISSING or f.default_factory is not MISSING)
                 for f in fields(cls)]
        got = _SPECS[cls] = tuple(s for s in specs if s is not None)
        keys = [k for s in got for k in ((s.key,) if s.part is None else _part_keys(s.part))]
        if len(keys) != len(set(keys)):
            raise TypeError(f"{cls.__name__}: a key declared twice ({sorted(k for k in keys if keys.count(k) > 1)})")
    return got


def _part_keys(part: type) -> tuple[str, ...]:
    """The keys a part declares (a part that encodes itself, like ``Observed``, declares none here)."""
    return tuple(s.key for s in _specs(part)) if issubclass(part, Payload) else ()


@dataclass(frozen=True, kw_only=True)
class Payload:
    """The base of every payload: its kind, its layers and what it tells a reader that follows the
    journal, declared with the class (``class X(Payload, kind=…, layer=…, names_nodes=True)``).

    * ``layer``: the layers an event of this kind is written in, the usual one first.
    * ``names_nodes``: every node change the event makes is named by it (its ``node`` and the keys
      :meth:`node_keys` gives) and it changes nothing else of a node's status or attempts: a reader
      keeping node counts reads just those nodes (``store/tally.py``), else the task's nodes whole.
    * ``status_neutral``: it names a node without changing its status or attempts.
    * ``task_wide``: it may change the task itself or any of its nodes (an analysis following the
      journal reads the task again and looks at every node).
    """

    KIND: ClassVar[str] = ""
    LAYERS: ClassVar[tuple[Layer, ...]] = ()
    NAMES_NODES: ClassVar[bool] = False
    STATUS_NEUTRAL: ClassVar[bool] = False
    TASK_WIDE: ClassVar[bool] = False

    def __init_subclass__(cls, *, kind: str = "", layer: Layer | tuple[Layer, ...] = (), names_nodes: bool = False,
                          status_neutral: bool = False, task_wide: bool = False) -> None:
        super().__init_subclass__()
        if kind:
            cls.KIND = kind
            cls.LAYERS = (layer,) if isinstance(layer, str) else layer
            assert cls.LAYERS and set(cls.LAYERS) <= set(LAYERS), (kind, cls.LAYERS)
            cls.NAMES_NODES, cls.STATUS_NEUTRAL, cls.TASK_WIDE = names_nodes, status_neutral, task_wide

    def event_kind(self) -> str:
        """The kind this payload is journalled as (a family of kinds says which one)."""
        return self.KIND

    def to_json(self) -> JsonObject:
        """The payload as stored: one key per field (see the module's docstring)."""
        out: JsonObject = {}
        for s in _specs(type(self)):
            v = getattr(self, s.name)
            if v is None and s.omit:
                continue
            if s.part is not None:
                out.update(v.to_json())
            else:
                out[s.key] = list(v) if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_json(cls: type[_P], raw: JsonMapping) -> _P:
        """A stored payload as this class (``Undecodable`` when it does not fit)."""
        kw: dict[str, object] = {}
        for s in _specs(cls):
            if s.part is not None:
                try:
                    got = s.part.from_json(raw)
                except Undecodable:
                    if s.required:
                        raise
                    got = None
                if got is None and s.required:
                    raise Undecodable(f"{cls.KIND or cls.__name__}: no {s.name}")
                kw[s.name] = got
                continue
            if s.key not in raw:
                if s.required:
                    raise Undecodable(f"{cls.KIND or cls.__name__}: no {s.key!r}")
                continue
            v = raw[s.key]
            if s.accepts is not None and (not isinstance(v, s.accepts)
                                          or (isinstance(v, bool) and bool not in s.accepts)):
                raise Undecodable(f"{cls.KIND or cls.__name__}: {s.key!r} is {type(v).__name__}")
            kw[s.name] = float(v) if s.is_float and isinstance(v, int) and not isinstance(v, bool) else v
        return cls(**kw)

    def node_keys(self) -> tuple[str, ...]:
        """The node keys the payload names besides the event's own ``node``: its field ``nodes``
        (the journal's rule: an event names every node it changed, a list of keys there)."""
        nodes = getattr(self, "nodes", None)
        return tuple(nodes) if nodes else ()


__all__ = ["LAYERS", "Carried", "Key", "Layer", "Maybe", "Part", "Payload", "Undecodable"]

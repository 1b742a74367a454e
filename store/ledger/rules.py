"""The argument rules of the public API: each checks one value of one argument against the value
rules (``store/validate.py``) and raises :class:`~store.errors.InvalidValue` — one line naming the
method and the argument — or returns the value.

``store/checked.py`` applies them to every public ``Ledger`` method; an operator action
names the rules of its own plan arguments (``arguments`` on its params class, store/actions/),
so a new action brings its checks with it. This module sits low (it imports no part of the
ledger) so both can use it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Callable

from store import validate as v
from store.storage.db import Backoff
from store.errors import NotFound
from store.jsontypes import JsonObject
from store.mind import rules as mind
from store.storage.models import FAILURE_CLASSES, HANDOFF_KINDS, HANDOFF_STATUSES
from store.views import DECLARED_CLASSES, Budget, Claim, NodeSpec, check_node_spec


class Ctx:
    """Where a value is checked: the method (for the message) and whether the backend is PostgreSQL."""

    __slots__ = ("where", "pg")

    def __init__(self, where: str, pg: bool) -> None:
        self.where = where
        self.pg = pg


Rule = Callable[[Ctx, str, object], object]
"""A rule: the value ``x`` of argument ``a`` comes from an API caller (untrusted); the rule returns it checked."""


# ---------------------------------------------------------------------- rules
def TEXT(c: Ctx, a: str, x: object) -> str | None:
    return v.text(a, x, c.where, nul=not c.pg)


def ORIGIN_OPT(c: Ctx, a: str, x: object) -> str | None:
    return v.origin(a, x, c.where)


def ERROR(c: Ctx, a: str, x: object) -> BaseException | str | None:  # an exception is taken as its message (fail(error=e))
    return x if isinstance(x, BaseException) else v.text(a, x, c.where, nul=not c.pg)


def TEXT_OPT(c: Ctx, a: str, x: object) -> str | None:
    return v.text(a, x, c.where, optional=True, nul=not c.pg)


def NAME(c: Ctx, a: str, x: object) -> str | None:
    return v.name(a, x, c.where)


def ACTOR(c: Ctx, a: str, x: object) -> str | None:  # "" means "not said"
    return v.name(a, x, c.where, empty=True)


def NAME_OPT(c: Ctx, a: str, x: object) -> str | None:
    return v.name(a, x, c.where, optional=True, empty=True)


def KIND(c: Ctx, a: str, x: object) -> str | None:
    return v.name(a, x, c.where, limit=v.KIND_MAX)


def NEW_TASK_ID(c: Ctx, a: str, x: object) -> str:
    return v.task_id(a, x, c.where)


def NEW_KEY(c: Ctx, a: str, x: object) -> str:
    return v.node_key(a, x, c.where)


def ID(c: Ctx, a: str, x: object) -> str | None:
    return v.lookup(a, x, c.where)


def ID_OPT(c: Ctx, a: str, x: object) -> str | None:
    return v.lookup(a, x, c.where, optional=True)


def IDS(c: Ctx, a: str, x: object) -> tuple[str, ...]:
    return v.strings(a, x, c.where, each=v.lookup, optional=False)


def IDS_OPT(c: Ctx, a: str, x: object) -> tuple[str, ...]:
    return v.strings(a, x, c.where, each=v.lookup)


def KINDS_OPT(c: Ctx, a: str, x: object) -> tuple[str, ...]:
    return v.strings(a, x, c.where, each=lambda a2, x2, w: v.name(a2, x2, w, limit=v.KIND_MAX))


def TEXTS_OPT(c: Ctx, a: str, x: object) -> tuple[str, ...]:
    return v.strings(a, x, c.where, each=lambda a2, x2, w: v.text(a2, x2, w, nul=not c.pg))


def HANDOFF(c: Ctx, a: str, x: object) -> str:
    """A handoff to look up: an int or a string; one that is not all digits cannot exist."""
    if isinstance(x, str) and not v.HANDOFF_ID_RE.fullmatch(x):
        raise NotFound(f"unknown handoff {v.show(x)}")
    return v.handoff_id(a, x, c.where)


def LEASE(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, lo=0, lo_open=True, hi=v.LEASE_S_MAX, optional=False)


def LEASE_OPT(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, lo=0, lo_open=True, hi=v.LEASE_S_MAX)


def DELAY_OPT(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, hi=v.DELAY_S_MAX)


def TOKENS(c: Ctx, a: str, x: object) -> float | None:  # None counts as 0
    return v.number(a, x, c.where, hi=v.TOKENS_MAX)


def UNITS(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, hi=v.UNITS_MAX)


def EST_WALL(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, hi=v.DURATION_S_MAX)


def EST_TOKENS(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, hi=v.TOKENS_MAX, integer=True)


def MAX_CLAIMS(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, lo=1, hi=v.COUNT_MAX, integer=True, optional=False)


def MAX_CLAIMS_OPT(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, lo=1, hi=v.COUNT_MAX, integer=True)


def COUNT0(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, hi=v.COUNT_MAX, integer=True, optional=False)


def LIMIT(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, lo=1, hi=v.COUNT_MAX, integer=True, optional=False)


def SINCE(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, hi=v.INT64_MAX, integer=True, optional=False)


def FLAG(c: Ctx, a: str, x: object) -> bool | None:
    return v.flag(a, x, c.where)


def FLAG_OPT(c: Ctx, a: str, x: object) -> bool | None:
    return v.flag(a, x, c.where, optional=True)


def JSON(c: Ctx, a: str, x: object) -> object:
    return v.json_value(a, x, c.where)


def JSON_OBJ_OPT(c: Ctx, a: str, x: object) -> object:
    return v.json_object(a, x, c.where)


def ANY(c: Ctx, a: str, x: object) -> object:  # checked by the method itself (documented there)
    return x


def CLAIM(c: Ctx, a: str, x: object) -> Claim:
    if not isinstance(x, Claim):
        raise v.refuse(a, "must be the Claim that Ledger.claim returned", x, where=c.where)
    return x


def BUDGET_OPT(c: Ctx, a: str, x: object) -> Budget | None:
    if x is None:
        return x
    if not isinstance(x, Budget):
        raise v.refuse(a, "must be a store.Budget", x, where=c.where)
    Budget(x.tokens, x.wall_s, x.soft_ratio, getattr(x, "density_limit", None))  # re-checked: forgeable
    return x


def SPECS(c: Ctx, a: str, x: object) -> list[NodeSpec]:
    if isinstance(x, (str, bytes, Mapping, NodeSpec)) or not isinstance(x, Iterable):
        raise v.refuse(a, "must be a list of store.NodeSpec", x, where=c.where)
    specs: list[NodeSpec] = []
    for i, s in enumerate(list(x)):
        if not isinstance(s, NodeSpec):
            raise v.refuse(f"{a}[{i}]", "must be a store.NodeSpec", s, where=c.where)
        check_node_spec(s, f"{c.where}: {a}[{i}]")
        specs.append(s)
    return specs


def ARTIFACT_OPT(c: Ctx, a: str, x: object) -> tuple[object, ...] | None:
    if x is None:
        return x
    if not isinstance(x, tuple) or len(x) != 2:
        raise v.refuse(a, "must be a (name, bytes) pair", x, where=c.where)
    v.text(f"{a} name", x[0], c.where, nonblank=True, nul=not c.pg)
    if not isinstance(x[1], (bytes, bytearray, memoryview)):
        raise v.refuse(f"{a} data", "must be bytes", x[1], where=c.where)
    return x


def OPTIONS(c: Ctx, a: str, x: object) -> list[Mapping[object, object]]:
    """Handoff options: a list of {"id", "label"?, "consequence"?} (an int id is taken as its digits)."""
    if isinstance(x, (str, bytes, Mapping)) or not isinstance(x, Iterable):
        raise v.refuse(a, 'must be a list of {"id", "label", "consequence"} dicts', x, where=c.where)
    given = list(x)
    if len(given) > 100:
        raise v.refuse(a, "has more than 100 options", given, where=c.where)
    opts: list[Mapping[object, object]] = []
    for i, o in enumerate(given):
        at = f"{a}[{i}]"
        if not isinstance(o, Mapping):
            raise v.refuse(at, 'must be a dict with "id" (and "label", "consequence")', o, where=c.where)
        opts.append(o)
        if "id" not in o:
            raise v.refuse(at, 'needs an "id"', where=c.where)
        oid = o["id"]
        if not (isinstance(oid, int) and not isinstance(oid, bool)):
            v.name(f"{at}.id", oid, c.where)
        for field in ("label", "consequence"):
            if o.get(field) is not None:
                v.text(f"{at}.{field}", o[field], c.where, nul=not c.pg)
    return opts


def UNTIL(c: Ctx, a: str, x: object) -> str | float | None:
    """``until``: None, a time in epoch seconds, or text (a duration like ``2h`` or an ISO time)."""
    if x is None or isinstance(x, str):
        return TEXT_OPT(c, a, x)
    return v.number(a, x, c.where, hi=v.TIME_MAX)


def HANDOFF_STATUS_OPT(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, HANDOFF_STATUSES, c.where, optional=True, what="handoff status")


def FAILURE_CLASS(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, FAILURE_CLASSES, c.where)


def HANDOFF_KIND(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, HANDOFF_KINDS, c.where, what="handoff kind")


def NOTE_LAYER(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, ("decision", "execution"), c.where, what="note layer")


def TARGET(c: Ctx, a: str, x: object) -> str | os.PathLike[str]:  # the path or URL is checked by store.storage.db (LedgerUnavailable)
    if not isinstance(x, (str, os.PathLike)):
        raise v.refuse(a, "must be a path or a URL", x, where=c.where)
    return x


def WAITING_ON_OPT(c: Ctx, a: str, x: object) -> str | None:  # what a declared wait waits on: one line
    return v.name(a, x, c.where, optional=True)


def WAIT_S_OPT(c: Ctx, a: str, x: object) -> float | None:  # (wait_s without waiting_on: store/ledger/observe.py)
    return v.number(a, x, c.where, lo=0, lo_open=True, hi=v.WAIT_S_MAX)


def WAKE_ON_OPT(c: Ctx, a: str, x: object) -> object:
    """Wake conditions: None, one string or a list of them, each one line (a ``file:`` path with a
    line break or NUL cannot be watched); what each says is checked by store/parks/conditions.py."""
    if x is None:
        return x
    items = [x] if isinstance(x, str) else v.strings(a, x, c.where)
    if len(items) > v.CONDITIONS_MAX:
        raise v.refuse(a, f"has more than {v.CONDITIONS_MAX} conditions", items, where=c.where)
    for i, item in enumerate(items):
        at = a if isinstance(x, str) else f"{a}[{i}]"
        v.text(at, item, c.where)
        if item.strip():  # a blank one is skipped (the console's "a, , b")
            v.name(at, item.strip(), c.where, limit=v.CONDITION_MAX)
    return x


def TIMEOUT(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, lo=0, lo_open=True, hi=v.DELAY_S_MAX, optional=False)


def APP_NAME(c: Ctx, a: str, x: object) -> str | None:  # PostgreSQL keeps 63 bytes of it
    return v.name(a, x, c.where, limit=63)


def BACKOFF_OPT(c: Ctx, a: str, x: object) -> Backoff | None:
    if x is not None and not isinstance(x, Backoff):
        raise v.refuse(a, "must be a store.storage.db.Backoff", x, where=c.where)
    return x


def CLOCK_OPT(c: Ctx, a: str, x: object) -> Callable[..., object] | None:
    if x is not None and not callable(x):
        raise v.refuse(a, "must be a callable returning epoch seconds", x, where=c.where)
    return x


# ---------------------------------------------------------------------- the task's mind (store/mind/rules.py)
def REQUIREMENTS(c: Ctx, a: str, x: object) -> list[dict[str, str]]:
    return mind.requirements(a, x, c.where, nul=not c.pg)


def SERVES(c: Ctx, a: str, x: object) -> tuple[str, ...]:
    return mind.serves(a, x, c.where)


def MIND_COUNT(c: Ctx, a: str, x: object) -> float | None:  # drift_after / alignment_every: 0 turns it off
    return v.number(a, x, c.where, hi=v.COUNT_MAX, integer=True, optional=False)


def ALIGNMENT_BY(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, mind.ALIGNMENT_BY, c.where, what="alignment answerer")


def ENTRY_TEXT(c: Ctx, a: str, x: object) -> str | None:
    return mind.bounded(a, x, c.where, mind.ENTRY_TEXT_MAX, nonblank=True, nul=not c.pg)


def SOURCE_OPT(c: Ctx, a: str, x: object) -> str | None:  # a file, a command: one line
    return mind.bounded(a, x, c.where, mind.SOURCE_MAX, optional=True, one_line=True)


def REASON_OPT(c: Ctx, a: str, x: object) -> str | None:
    return mind.bounded(a, x, c.where, mind.REASON_MAX, optional=True, nul=not c.pg)


def REASON(c: Ctx, a: str, x: object) -> str | None:
    return mind.bounded(a, x, c.where, mind.REASON_MAX, nonblank=True, nul=not c.pg)


def ENTRY_KIND(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, mind.ENTRY_KINDS, c.where, what="conclusion kind")


def MEMORY_TEXT(c: Ctx, a: str, x: object) -> str | None:
    return mind.bounded(a, x, c.where, mind.MEMORY_TEXT_MAX, nonblank=True, nul=not c.pg)


def MEMORY_SCOPE(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, mind.MEMORY_SCOPES, c.where, what="memory scope")


def MEMORY_STATUS_OPT(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, ("pending", "confirmed", "rejected"), c.where, optional=True, what="memory status")


def MEMORY_ID(c: Ctx, a: str, x: object) -> int | str:
    """A memory to look up: an int or digits; anything else cannot exist."""
    if isinstance(x, int) and not isinstance(x, bool) and 0 < x <= v.INT64_MAX:
        return x
    if isinstance(x, str) and v.HANDOFF_ID_RE.fullmatch(x):
        return x
    raise NotFound(f"unknown memory {v.show(x)}")


def DECISION(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, ("confirm", "reject"), c.where, what="memory decision")


def NODE_KEYS(c: Ctx, a: str, x: object) -> tuple[str, ...]:
    return mind.keys(a, x, c.where)


def NARROW(c: Ctx, a: str, x: object) -> JsonObject | None:
    return mind.narrow(a, x, c.where, nul=not c.pg)


def TRIGGER(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, mind.TRIGGERS, c.where, what="replan trigger")


def IN_FLIGHT(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, mind.IN_FLIGHT, c.where, what="in-flight handling")


def REPLAN_SPECS(c: Ctx, a: str, x: object) -> list[NodeSpec]:
    specs = SPECS(c, a, x)
    if len(specs) > mind.REPLAN_NODES_MAX:
        raise v.refuse(a, f"adds more than {mind.REPLAN_NODES_MAX} nodes", specs, where=c.where)
    return specs


COMMIT_RULES: dict[str, Rule] = {
    "output": JSON, "output_ref": TEXT_OPT, "tokens": TOKENS, "artifact": ARTIFACT_OPT, "units_done": UNITS,
    "next_nodes": SPECS, "repair": FLAG, "summary": TEXT_OPT, "repair_from": IDS_OPT,
}


def COMMITS(c: Ctx, a: str, x: object) -> list[tuple[Claim, Mapping[object, object]]]:
    if isinstance(x, (str, bytes, Mapping)) or not isinstance(x, Iterable):
        raise v.refuse(a, "must be a list of (Claim, {commit arguments}) pairs", x, where=c.where)
    items: list[tuple[Claim, Mapping[object, object]]] = []
    for i, item in enumerate(list(x)):
        at = f"{a}[{i}]"
        if not isinstance(item, tuple) or len(item) != 2 or not isinstance(item[1], Mapping):
            raise v.refuse(at, "must be a (Claim, {commit arguments}) pair", item, where=c.where)
        claim, arguments = CLAIM(c, f"{at} claim", item[0]), item[1]
        items.append((claim, arguments))
        for key, value in arguments.items():
            rule = COMMIT_RULES.get(key) if isinstance(key, str) else None
            if rule is None:  # like commit(nonsense=1): a programming error, not a value
                raise TypeError(f"{c.where}: {at} has an unknown commit argument {v.show(key)}: one of "
                                f"{', '.join(sorted(COMMIT_RULES))}")
            rule(c, f"{at}.{key}", value)
    return items


def DECLARED_CLASS(c: Ctx, a: str, x: object) -> str | None:  # what a node is declared to be
    if x is None:
        return None
    return v.one_of(a, x, DECLARED_CLASSES, c.where)


def QUOTA_NAME(c: Ctx, a: str, x: object) -> str | None:
    return v.name(a, x, c.where, limit=v.KIND_MAX)


def CAPACITY(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, lo=1, hi=v.COUNT_MAX, integer=True, optional=False)


def WINDOW_OPT(c: Ctx, a: str, x: object) -> float | None:
    return v.number(a, x, c.where, lo=0, lo_open=True, hi=366 * 86400.0)

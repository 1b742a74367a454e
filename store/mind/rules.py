"""The value rules and bounds of the task's mind: everything here is agent-written (requirement
text, conclusions, sources, reasons, memories), so it is bounded when written and shown escaped.

Every rule raises :class:`~store.errors.InvalidValue` with one line naming the argument, like
``store/validate.py``'s (which they build on); ``store/checked.py`` applies them to the
public ``Ledger`` methods. The bounds are documented in docs/agents.md ("The task's mind").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from store import validate as v
from store.jsontypes import JsonObject

REQUIREMENTS_MAX = 64  # requirements of one task
REQUIREMENT_TEXT_MAX = 2000  # characters of one requirement
SERVES_MAX = 64  # requirement ids one node serves
ENTRY_TEXT_MAX = 4000  # characters of a conclusion or a rejected path
SOURCE_MAX = 500  # characters of a source (a file, a command): one line
REASON_MAX = 2000  # characters of a reason
MEMORY_TEXT_MAX = 2000  # characters of a proposed memory
ENTRIES_PER_NODE = 200  # conclusions and rejected paths one node may write (all its attempts)
PENDING_PER_TASK = 50  # memories one task may have waiting for a person
REPLAN_NODES_MAX = 10_000  # nodes one replan may add, remove or reorder
GOAL_MAX = 2000  # characters of a narrowed goal

REQ_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
TRIGGERS = ("evidence_conflict", "pattern", "diminishing_returns", "operator")
IN_FLIGHT = ("wait", "cancel", "discard")
ENTRY_KINDS = ("finding", "rejected")
MEMORY_SCOPES = ("kind", "workflow")
ALIGNMENT_BY = ("human", "agent")
VERDICTS = ("aligned", "drifting")


def bounded(arg: str, value: object, where: str, limit: int, *, optional: bool = False, nonblank: bool = False,
            nul: bool = True, one_line: bool = False) -> str | None:
    """Text of at most ``limit`` characters (``one_line``: a name-like line)."""
    if value is None and optional:
        return None
    if one_line:
        return v.name(arg, value, where, limit=limit, optional=optional)
    s = v.text(arg, value, where, nonblank=nonblank, nul=nul)
    assert s is not None
    if len(s) > limit:
        raise v.refuse(arg, f"is longer than {limit} characters", s, where=where)
    return s


def requirement_id(arg: str, value: object, where: str = "") -> str:
    if not isinstance(value, str) or not REQ_ID_RE.fullmatch(value):
        raise v.refuse(arg, "is not a requirement id (1-64 of A-Z a-z 0-9 . _ -)", value, where=where)
    return value


def requirements(arg: str, value: object, where: str = "", *, nul: bool = True) -> list[dict[str, str]]:
    """``[{"id": "r1", "text": "..."}, ...]``: distinct ids, non-blank bounded text, at most
    :data:`REQUIREMENTS_MAX`. None is an empty list."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise v.refuse(arg, 'must be a list of {"id", "text"} dicts', value, where=where)
    items = list(value)
    if len(items) > REQUIREMENTS_MAX:
        raise v.refuse(arg, f"has more than {REQUIREMENTS_MAX} requirements", items, where=where)
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        at = f"{arg}[{i}]"
        if not isinstance(item, Mapping) or "id" not in item or "text" not in item:
            raise v.refuse(at, 'must be a dict with "id" and "text"', item, where=where)
        extra = sorted(str(k) for k in item if k not in ("id", "text"))
        if extra:
            raise v.refuse(at, f'has unknown keys {", ".join(v.show(k) for k in extra[:3])} (only "id" and "text")',
                           where=where)
        rid = requirement_id(f"{at}.id", item["id"], where)
        if rid in seen:
            raise v.refuse(f"{at}.id", "is listed twice", rid, where=where)
        seen.add(rid)
        text = bounded(f"{at}.text", item["text"], where, REQUIREMENT_TEXT_MAX, nonblank=True, nul=nul)
        out.append({"id": rid, "text": str(text)})
    return out


def serves(arg: str, value: object, where: str = "") -> tuple[str, ...]:
    """Requirement ids a node serves: at most :data:`SERVES_MAX`, duplicates dropped."""
    ids = v.strings(arg, value, where, each=requirement_id)
    if len(ids) > SERVES_MAX:
        raise v.refuse(arg, f"names more than {SERVES_MAX} requirements", ids, where=where)
    return tuple(dict.fromkeys(ids))


def keys(arg: str, value: object, where: str = "") -> tuple[str, ...]:
    """Node keys of a replan (remove / reorder): looked up, at most :data:`REPLAN_NODES_MAX`."""
    found = v.strings(arg, value, where, each=v.lookup)
    if len(found) > REPLAN_NODES_MAX:
        raise v.refuse(arg, f"names more than {REPLAN_NODES_MAX} nodes", found, where=where)
    return found


def narrow(arg: str, value: object, where: str = "", *, nul: bool = True) -> JsonObject | None:
    """A replan's narrowed goal: ``{"drop": [requirement ids], "goal": "the narrower goal"}``,
    either key optional but not both missing. None: the goal is not narrowed."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise v.refuse(arg, 'must be a dict {"drop": [requirement ids], "goal": text}', value, where=where)
    extra = sorted(str(k) for k in value if k not in ("drop", "goal"))
    if extra:
        raise v.refuse(arg, f'has unknown keys {", ".join(v.show(k) for k in extra[:3])} (only "drop" and "goal")',
                       where=where)
    drop = v.strings(f"{arg}.drop", value.get("drop"), where, each=requirement_id)
    goal = bounded(f"{arg}.goal", value.get("goal"), where, GOAL_MAX, optional=True, nonblank=True, nul=nul)
    if not drop and goal is None:
        raise v.refuse(arg, 'narrows nothing: give "drop" (requirement ids) and/or "goal" (text)', where=where)
    return {"drop": list(dict.fromkeys(drop)), "goal": goal}

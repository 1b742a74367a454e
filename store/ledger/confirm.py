"""Irreversible work waits for a person (ordering, paying, deleting resources — a human
confirmation node is mandatory; an action that cannot say "I intend to do this" and be checked
afterwards is not automated).

A node's work is irreversible when it was added with ``failure_class="irreversible_write"`` or
``retryable=False``, or when its kind is one the task lists (``create_task(confirm_kinds=
["payment"])``). Such a node cannot ``intend_effect`` a key until a person has confirmed that
effect: an ordinary ``confirm`` handoff of the task whose context carries the effect —
``{"effect": {"key": K, "details": {...}}}`` — resolved with the option ``proceed`` by an operator
who is not an agent of the task (store/actions/identity.py; the resolve is audited like every
action). ``request_effect_confirmation`` opens exactly that handoff, with its context, each
option's consequence and the recommendation; ``warden mcp``'s ``intend_effect`` opens it on its own.
The intended effect's journal event names the confirmation (``confirmed_by``).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from store.errors import Refused
from store.jsontypes import JsonMapping, JsonObject, JsonValue
from store.storage import sql
from store.storage.core import LedgerCore
from store.storage.tables import NodeRecord

PROCEED = "proceed"
STOP = "stop"
IRREVERSIBLE = "irreversible_write"


def options(key: str) -> list[JsonObject]:
    return [
        {"id": PROCEED, "label": "Do it",
         "consequence": f"the agent performs {key}; it cannot be undone (only compensated, if at all)"},
        {"id": STOP, "label": "Do not do it",
         "consequence": f"{key} is not performed; the step is told no and must finish without it or fail"},
    ]


def set_kinds(core: LedgerCore, task_id: str, kinds: Sequence[str]) -> None:
    rows = [(task_id, k) for k in sorted(set(kinds))]
    if rows:
        sql.execute_many(core.db, "INSERT INTO confirm_kind (task_id, kind) VALUES (?, ?)", rows)


def kinds(core: LedgerCore, task_id: str) -> list[str]:
    return [r[0] for r in sql.fetch_all(core.db, "SELECT kind FROM confirm_kind WHERE task_id = ? ORDER BY kind",
                                        [task_id])]


def irreversible(core: LedgerCore, row: NodeRecord) -> str | None:
    """Why a person confirms this node's effects first (one phrase), or None."""
    if row.kind in kinds(core, row.task_id):
        return f"its kind {row.kind!r} is one task {row.task_id} has a person confirm"
    if row.failure_class == IRREVERSIBLE:
        return "it was added as irreversible (failure_class='irreversible_write')"
    if not row.retryable:
        return "it was added as irreversible (retryable=False)"
    return None


class Confirmation(NamedTuple):
    handoff: str
    by: str
    at: float


class _Answered(NamedTuple):
    id: int
    context: JsonValue
    resolved_by: str | None
    resolved_at: float | None


def effect_of(context: JsonValue) -> str | None:
    """The effect key a handoff's context asks about (``{"effect": {"key": K, ...}}``), or None."""
    if isinstance(context, dict):
        eff = context.get("effect")
        if isinstance(eff, dict) and isinstance(eff.get("key"), str):
            return str(eff["key"])
    return None


def confirmation(core: LedgerCore, task_id: str, effect_key: str) -> Confirmation | None:
    """The person's ``proceed`` on a handoff of ``task_id`` about ``effect_key`` (the newest), or None."""
    rows = sql.fetch_rows(core.db, _Answered, f"SELECT {sql.columns(_Answered)} FROM handoff WHERE task_id = ? "
                                              "AND status = 'resolved' AND resolution_option = ? ORDER BY id DESC",
                          [task_id, PROCEED])
    for r in rows:
        if effect_of(r.context) == effect_key:
            return Confirmation(str(r.id), r.resolved_by or "", float(r.resolved_at or 0.0))
    return None


def required(core: LedgerCore, row: NodeRecord, effect_key: str) -> Confirmation | None:
    """Inside ``intend_effect``'s transaction: the confirmation this node's effect needs (None when
    it needs none); refused when it needs one and has none."""
    why = irreversible(core, row)
    if why is None:
        return None
    got = confirmation(core, row.task_id, effect_key)
    if got is None:
        raise Refused(f"node {row.key}: {why}, so a person confirms effect {effect_key!r} before it is intended: "
                      "ask with ledger.request_effect_confirmation(claim, key, details=...) (a confirm handoff "
                      "with the effect in its context), claim the node again once answered 'proceed', then "
                      "intend it")
    return got


def needed(core: LedgerCore, task_id: str, node_key: str, effect_key: str) -> str | None:
    """Why ``intend_effect`` of ``effect_key`` from this node would wait for a person (None when
    it would not: the node is reversible, the effect is already logged, or a person said proceed)."""
    row = core.node_record_or_none(task_id, node_key)
    if row is None or sql.scalar(core.db, "SELECT id FROM effect WHERE task_id = ? AND effect_key = ?",
                                 [task_id, effect_key]) is not None:
        return None
    why = irreversible(core, row)
    return why if why is not None and confirmation(core, task_id, effect_key) is None else None


def context(key: str, details: JsonMapping, *, done: str, stuck: str | None, why: str,
            extra: JsonMapping | None = None) -> JsonObject:
    """A confirmation handoff's context: the four parts of a checkpoint and the effect."""
    out: JsonObject = dict(extra or {})
    out.update({"done": done, "stuck": stuck or f"about to perform {key}, which cannot be undone",
                "why": why, "effect": {"key": key, "details": dict(details)}})
    return out


__all__ = ["IRREVERSIBLE", "PROCEED", "STOP", "Confirmation", "confirmation", "context", "effect_of",
           "irreversible", "kinds", "needed", "options", "required", "set_kinds"]

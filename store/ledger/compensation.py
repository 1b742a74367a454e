"""Compensations as work (docs/operations.md "abort").

Abort turns each confirmed effect that has a compensation (and is not compensated yet) into a
node of kind ``compensation`` with key ``compensate:<effect_key>``, chained so they run in reverse
confirmation order: the newest effect's compensation first, each next one depending on the one
before. An aborted task offers nothing else to claim, and these are claimable whatever its budget
(undoing a side effect is never held back by the budget that ran out). When a compensation node
commits, its effect becomes ``compensated``; an operator can also mark an effect compensated by
hand (``store.actions.compensated``), which abandons its compensation node if it has not run.

An effect key is the agent's own string; when ``compensate:<effect_key>`` is not a valid node key
(characters outside ``A-Za-z0-9._:/@+-``, or longer than 200), the other characters become ``_``
and ``+`` and the first 12 hex digits of the key's sha256 are appended, so it stays unique.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Sequence

from store.storage import sql
from store.jsontypes import JsonMapping, JsonObject
from store.views import Claim
from store.storage.core import NODE_KEY_RE, LedgerCore, sha256_hex
from store.storage.events import EffectCompensated

KIND = "compensation"
KEY_PREFIX = "compensate:"
_UNSAFE = re.compile(r"[^A-Za-z0-9._:/@+-]")


def node_key(effect_key: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """The compensation node's key for an effect (see the module doc), not one of ``taken``."""
    key = KEY_PREFIX + effect_key
    if not NODE_KEY_RE.fullmatch(key):  # matched whole: a trailing newline never passes
        key = f"{KEY_PREFIX}{_UNSAFE.sub('_', effect_key)[:170]}+{sha256_hex(effect_key.encode('utf-8'))[:12]}"
    base, n = key, 2
    while key in taken:
        key = f"{base[:190]}+{n}"
        n += 1
    return key


def planned(core: LedgerCore, task_id: str) -> list[JsonObject]:
    """The compensation nodes an abort of ``task_id`` would add, in the order they run (newest
    confirmed effect first), each ``after`` the one before. Effects already compensated or
    already given a compensation node, and effects without a compensation, get none."""
    found = sql.fetch_all(core.db, "SELECT e.effect_key, n.key, e.compensation, e.external_id FROM effect e "
                                   "JOIN node n ON n.id = e.node_id WHERE e.task_id = ? AND e.status = 'confirmed' "
                                   "AND e.compensation_node_id IS NULL ORDER BY e.confirmed_at DESC, e.id DESC",
                          [task_id])
    todo = [r for r in found if r[2] is not None and str(r[2]).strip()]
    if not todo:
        return []
    wanted = [node_key(r[0]) for r in todo]
    taken = set(core.ids_for_keys(task_id, wanted))
    out: list[JsonObject] = []
    after = None
    for ekey, enode, comp, ext in todo:
        key = node_key(ekey, taken)
        taken.add(key)
        out.append({"node": key, "effect_key": ekey, "effect_node": enode, "compensation": comp,
                    "external_id": ext, "after": after})
        after = key
    return out


def create(core: LedgerCore, task_id: str, items: Sequence[JsonMapping]) -> list[str]:
    """Inside an abort's write transaction: add the planned compensation nodes, their chain and
    each effect's link to its node. Returns their keys."""
    if not items:
        return []
    pos = int(sql.scalar(core.db, "SELECT MAX(position) FROM node WHERE task_id = ?", [task_id]) or 0)
    rows = []
    for i, c in enumerate(items):
        title = f"undo {c['effect_key']}: {c['compensation']}"[:500]
        rows.append((task_id, c["node"], pos + i + 1, KIND, title, "pending", "{}", None, None, True, True, None,
                     None, "[]", 1))
    sql.execute_many(
        core.db,
        "INSERT INTO node (task_id, key, position, kind, title, status, preconditions, est_wall_s, est_tokens, "
        "always_admit, retryable, units_total, max_claims, rejections, version, attempt, tokens_used, "
        "wall_used_s, claim_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, 0)", rows)
    ids = core.ids_for_keys(task_id, [c["node"] for c in items])
    edges = [(task_id, ids[c["after"]], ids[c["node"]]) for c in items if c["after"] is not None]
    if edges:
        sql.execute_many(core.db, "INSERT INTO edge (task_id, src_id, dst_id) VALUES (?, ?, ?)", edges)
    for c in items:
        sql.execute(core.db, "UPDATE effect SET compensation_node_id = ? WHERE task_id = ? AND effect_key = ?",
                    [ids[c["node"]], task_id, c["effect_key"]])
    return [c["node"] for c in items]


class _Compensated(NamedTuple):
    id: int
    effect_key: str
    status: str


def on_commit(core: LedgerCore, claim: Claim, node_id: int, now: float) -> str | None:
    """Inside a commit of a compensation node: its effect becomes ``compensated``. Returns the
    effect key (None when the node compensates nothing any more)."""
    eff = sql.fetch_row(core.db, _Compensated, f"SELECT {sql.columns(_Compensated)} FROM effect "
                                               "WHERE compensation_node_id = ?", [node_id])
    if eff is None or eff.status != "confirmed":
        return None
    sql.execute(core.db, "UPDATE effect SET status = 'compensated', compensated_at = ?, compensated_by = ?, "
                         "compensation_note = ? WHERE id = ? AND status = 'confirmed'",
                [now, claim.worker, f"compensation node {claim.node_key} committed (attempt {claim.attempt})",
                 eff.id])
    core.journal(claim.task_id, claim.node_key, claim.worker, f"{eff.effect_key} compensated by {claim.node_key}",
                 EffectCompensated(effect_key=eff.effect_key, by=claim.worker, node=claim.node_key), at=now)
    return str(eff.effect_key)


class _ToUndo(NamedTuple):
    """``Claim.inputs["effect"]`` of a compensation node (its keys are these fields)."""

    effect_key: str
    node: str
    status: str
    external_id: str | None
    compensation: str | None
    payload_digest: str | None
    confirmed_at: float | None


def effect_for_node(core: LedgerCore, node_id: int) -> JsonObject | None:
    """What a compensation node's claim carries in ``inputs["effect"]``: the effect to undo."""
    r = sql.fetch_row(core.db, _ToUndo, f"SELECT {sql.columns(_ToUndo, 'e', {'node': 'n.key'})} FROM effect e "
                                        "JOIN node n ON n.id = e.node_id WHERE e.compensation_node_id = ?", [node_id])
    return r._asdict() if r is not None else None


def tasks_compensating(core: LedgerCore, version: str | None = None) -> list[str]:
    """Aborted tasks with compensation nodes left to run (for a claim across tasks)."""
    extra, params = "", [KIND]
    if version is not None:
        extra, params = " AND t.workflow_version = ?", [KIND, version]
    return [r[0] for r in sql.fetch_all(
        core.db, "SELECT t.task_id FROM task t WHERE t.status = 'aborted' AND EXISTS (SELECT 1 FROM node n "
                 "WHERE n.task_id = t.task_id AND n.kind = ? AND n.status IN ('pending', 'running'))"
                 f"{extra} ORDER BY t.created_at", params)]

"""What the estimates and the signals read from the ledger (``store/estimation/estimates.py``,
``store/reading/signals.py``, ``store/reading/analysis.py``): typed rows, bounded reads, the statements in one
place, never as queries of their own outside the ledger.

Each function reads within the caller's transaction or snapshot; none writes.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from store.storage import sql
from store.storage.core import LedgerCore

CHUNK = 500  # ids per statement


class Claimed(NamedTuple):
    """A ``node.claimed`` event: who claimed, when."""

    actor: str | None
    at: float


class UnitTotals(NamedTuple):
    """Tokens and units over the task's succeeded nodes that reported units."""

    tokens: float
    units: float
    nodes: int


class KindGroup(NamedTuple):
    """Unfinished nodes of one kind: how many, their mean ``est_wall_s``."""

    kind: str
    nodes: int
    est_wall_s: float | None


class LeanNode(NamedTuple):
    """The columns the estimator reads of a node."""

    id: int
    key: str
    kind: str
    status: str
    position: int
    claimed_at: float | None
    units_done: float | None
    units_total: float | None
    est_wall_s: float | None
    next_retry_at: float | None
    lease_owner: str | None


class ObservationRow(NamedTuple):
    """What the stall signals read of an observation."""

    node_id: int
    id: int
    at: float
    attempt: int
    digest: str
    new_units: int
    flags: int  # 1: it showed progress; 2: made while the task was parked
    content: str | None  # the judged content's identity
    result: str | None  # the first EXCERPT_CHARS of the result (None: no result)
    action: str | None  # the first EXCERPT_CHARS of the action
    action_key: str | None


EXCERPT_CHARS = 200  # of an observation's action and result: what evidence quotes (≤ 80 shown)
OBSERVATION_SELECT = ("node_id, id, at, attempt, digest, new_units, flags, content, "
                      f"SUBSTR(result, 1, {EXCERPT_CHARS}) AS result, SUBSTR(action, 1, {EXCERPT_CHARS}) AS action, "
                      "action_key")  # ObservationRow's fields, in order (two of them cut)


def recent_claims(core: LedgerCore, task_id: str, scan: int = 500) -> list[Claimed]:
    """The newest ``scan`` claims of the task's nodes, newest first."""
    return sql.fetch_rows(core.db, Claimed, f"SELECT {sql.columns(Claimed)} FROM event WHERE task_id = ? "
                                            "AND kind = 'node.claimed' ORDER BY id DESC LIMIT ?", [task_id, int(scan)])


def unit_totals(core: LedgerCore, task_id: str) -> UnitTotals:
    row = sql.fetch_all(core.db, "SELECT SUM(tokens_used), SUM(units_done), COUNT(id) FROM node "
                                 "WHERE task_id = ? AND status = 'succeeded' AND units_done > 0", [task_id])
    tokens, units, count = row[0] if row else (0, 0, 0)
    return UnitTotals(float(tokens or 0), float(units or 0), int(count or 0))


def kind_groups(core: LedgerCore, task_id: str, statuses: Sequence[str]) -> list[KindGroup]:
    """The task's nodes in these statuses, grouped by kind."""
    if not statuses:
        return []
    return [KindGroup(k, int(n), None if e is None else float(e)) for k, n, e in sql.fetch_all(
        core.db, f"SELECT kind, COUNT(id), AVG(est_wall_s) FROM node WHERE task_id = ? AND status IN "
                 f"({sql.marks(len(statuses))}) GROUP BY kind", [task_id, *statuses])]


def lean_nodes(core: LedgerCore, task_id: str, statuses: Sequence[str]) -> list[LeanNode]:
    """The task's nodes in these statuses, in position order."""
    if not statuses:
        return []
    return sql.fetch_rows(core.db, LeanNode, f"SELECT {sql.columns(LeanNode)} FROM node WHERE task_id = ? AND "
                                             f"status IN ({sql.marks(len(statuses))}) ORDER BY position",
                          [task_id, *statuses])


def keys_in(core: LedgerCore, task_id: str, statuses: Sequence[str]) -> list[str]:
    """The keys of the task's nodes in these statuses (index on task, status)."""
    if not statuses:
        return []
    return [k for (k,) in sql.fetch_all(core.db, f"SELECT key FROM node WHERE task_id = ? AND status IN "
                                                 f"({sql.marks(len(statuses))})", [task_id, *statuses])]


def dependencies(core: LedgerCore, node_ids: Sequence[int]) -> list[tuple[int, int]]:
    """(dependent id, dependency id) of every edge into these nodes."""
    out: list[tuple[int, int]] = []
    for chunk in sql.chunks(list(node_ids), CHUNK):
        out += [(int(d), int(s)) for d, s in sql.fetch_all(
            core.db, f"SELECT dst_id, src_id FROM edge WHERE dst_id IN ({sql.marks(len(chunk))})", chunk)]
    return out


def last_observations(core: LedgerCore, node_ids: Sequence[int], per_node: int) -> list[ObservationRow]:
    """The last ``per_node`` observations of each node, oldest first: one statement per 200 nodes."""
    out: list[ObservationRow] = []
    if not node_ids or per_node <= 0:
        return out
    ids = list(dict.fromkeys(node_ids))
    for i in range(0, len(ids), 200):
        chunk = ids[i:i + 200]
        arm = (f"SELECT * FROM (SELECT {OBSERVATION_SELECT} FROM observation "
               f"WHERE node_id = ? ORDER BY id DESC LIMIT {int(per_node)}) AS o")
        statement = " UNION ALL ".join(arm for _ in chunk)
        out += sorted(sql.fetch_rows(core.db, ObservationRow, statement, chunk), key=lambda r: r.id)
    return out


__all__ = ["Claimed", "KindGroup", "LeanNode", "ObservationRow", "UnitTotals", "dependencies", "keys_in",
           "kind_groups", "last_observations", "lean_nodes", "recent_claims", "unit_totals"]

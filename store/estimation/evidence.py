"""What the estimates and the signals read from the ledger (``store/estimation/estimates.py``,
``store/reading/signals.py``, ``store/reading/analysis.py``): typed rows, bounded reads, the statements in one
place, never as queries of their own outside the ledger.

Each function reads within the caller's transaction or snapshot; none writes.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from store.storage import rows, sql
from store.storage.core import LedgerCore
from store.storage.events import NodeClaimed
from store.views import Observed

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


rows.node_projection(LeanNode)


class ObservationRow(NamedTuple):
    """What the stall signals read of an observation: when, by which attempt, and what it brought
    (``rows.observed``: the decoder every reader of an observation shares)."""

    node_id: int
    id: int
    at: float
    attempt: int
    seen: Observed


def recent_claims(core: LedgerCore, task_id: str, scan: int = 500) -> list[Claimed]:
    """The newest ``scan`` claims of the task's nodes, newest first."""
    return sql.fetch_rows(core.db, Claimed, f"SELECT {sql.columns(Claimed)} FROM event WHERE task_id = ? "
                                            "AND kind = ? ORDER BY id DESC LIMIT ?", [task_id, NodeClaimed.KIND, int(scan)])


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
        arm = (f"SELECT * FROM (SELECT o.node_id AS node_id, o.id AS id, o.at AS at, o.attempt AS attempt, "
               f"{rows.OBSERVED_COLUMNS} FROM observation o WHERE o.node_id = ? ORDER BY o.id DESC "
               f"LIMIT {int(per_node)}) AS arm")
        statement = " UNION ALL ".join(arm for _ in chunk)
        found = sorted(sql.fetch_all(core.db, statement, chunk), key=lambda r: r[1])
        out += [ObservationRow(r[0], r[1], r[2], r[3], seen) for r in found if (seen := rows.observed(*r[4:]))]
    return out


__all__ = ["Claimed", "KindGroup", "LeanNode", "ObservationRow", "UnitTotals", "dependencies", "keys_in",
           "kind_groups", "last_observations", "lean_nodes", "recent_claims", "unit_totals"]

"""What healthy nodes of a kind normally do, kept in the ledger (``store/judges/norms.py`` judges).

* :func:`fold_commit` — inside a commit's write transaction: the node's final attempt (its last
  ``FOLD_OBSERVATIONS`` observations, the lean columns) folded into its kind's norm, for its agent
  and over every agent: one read, one statement per 100 counters (``INSERT … ON CONFLICT DO UPDATE
  count = count + n``, so concurrent commits of one kind add up on both backends).
* :func:`fold_mark` — the ``healthy`` action: an alarm an operator marked healthy, folded in as a
  healthy stretch of its kind.
* :func:`read_norms` — the norms of some kinds (one statement), for the loop alarms.
* :func:`marked` — the kinds whose alarms operators marked healthy (``warden status``).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from store.judges.norms import ANY_AGENT, BUCKETS, KindNorm, bucket, fold
from store.storage import sql
from store.storage.core import LedgerCore
from store.storage.tables import NodeRecord

FOLD_OBSERVATIONS = 200  # observations of a finished attempt read to fold it


def _add(core: LedgerCore, kind: str, worker: str | None, counts: Mapping[tuple[str, int], int]) -> None:
    workers = dict.fromkeys([worker or ANY_AGENT, ANY_AGENT])
    rows = [(kind, w, what, length, n) for w in workers for (what, length), n in counts.items() if n]
    for chunk in sql.chunks(rows, 100):
        values = ", ".join(["(?, ?, ?, ?, ?)"] * len(chunk))
        sql.execute(core.db, f"INSERT INTO kind_norm (kind, worker, what, length, count) VALUES {values} "
                             "ON CONFLICT (kind, worker, what, length) DO UPDATE SET count = kind_norm.count + excluded.count",
                    [x for r in chunk for x in r])


def fold_commit(core: LedgerCore, row: NodeRecord, worker: str | None) -> None:
    """A committed node's final attempt, folded into its kind's norm (module doc). Nothing for an
    attempt that made no observation (it says nothing of how often news comes)."""
    obs = sql.fetch_all(core.db, "SELECT new_units, flags, digest FROM observation WHERE node_id = ? AND attempt = ? "
                                 "ORDER BY id DESC LIMIT ?", [row.id, row.attempt, FOLD_OBSERVATIONS])
    if not obs:
        return
    f = fold((int(n or 0), int(fl or 0), str(d)) for n, fl, d in reversed(obs))
    _add(core, row.kind, worker, {("nodes", 0): 1, ("observations", 0): f.observations, ("news", 0): f.news,
                                  ("quiet", bucket(f.quiet)): 1, ("repeat", bucket(f.repeat)): 1})


def fold_mark(core: LedgerCore, kind: str, worker: str | None, quiet: int, repeat: int) -> None:
    """A loop alarm marked healthy: its node's quiet stretch and repeat, folded in as a healthy
    node's of its kind."""
    _add(core, kind, worker, {("marked", 0): 1, ("quiet", bucket(quiet)): 1, ("repeat", bucket(repeat)): 1})


def read_norms(core: LedgerCore, kinds: Iterable[str]) -> dict[tuple[str, str], KindNorm]:
    """The norms of these kinds, by (kind, worker) — ``ANY_AGENT`` for the kind over every agent."""
    wanted = sorted(set(kinds))
    found: dict[tuple[str, str], dict[str, dict[int, int]]] = {}
    for chunk in sql.chunks(wanted):
        for kind, worker, what, length, count in sql.fetch_all(
                core.db, f"SELECT kind, worker, what, length, count FROM kind_norm WHERE kind IN ({sql.marks(len(chunk))})",
                list(chunk)):
            slot = found.setdefault((str(kind), str(worker)), {})
            slot.setdefault(str(what), {})[bucket(int(length))] = int(count)
    out = {}
    for (kind, worker), slot in found.items():
        def one(what: str) -> int:
            return sum(slot.get(what, {}).values())

        def hist(what: str) -> tuple[int, ...]:
            h = slot.get(what, {})
            return tuple(h.get(i, 0) for i in range(BUCKETS))

        out[(kind, worker)] = KindNorm(kind, worker, one("nodes"), one("observations"), one("news"), one("marked"),
                                       hist("quiet"), hist("repeat"))
    return out


def marked(core: LedgerCore) -> list[tuple[str, int, int]]:
    """The kinds whose loop alarms an operator marked healthy: (kind, marks, finished nodes folded),
    over every agent, most marks first."""
    rows = sql.fetch_all(core.db, "SELECT kind, what, count FROM kind_norm WHERE worker = ? AND length = 0 AND "
                                  "what IN ('marked', 'nodes')", [ANY_AGENT])
    by: dict[str, dict[str, int]] = {}
    for kind, what, count in rows:
        by.setdefault(str(kind), {})[str(what)] = int(count)
    return sorted(((k, v.get("marked", 0), v.get("nodes", 0)) for k, v in by.items() if v.get("marked")),
                  key=lambda x: (-x[1], x[0]))


__all__ = ["FOLD_OBSERVATIONS", "fold_commit", "fold_mark", "marked", "read_norms"]

"""``failure_pattern``: sibling nodes failing the same way suggest the plan, not the step, is wrong
(several nodes in a row with results of one shape — recognise the pattern, replan).

Siblings are the nodes of a task with the same dependencies (the same set of nodes before them;
the roots are siblings of each other). A node counts while it is ``failed`` (a failure with a
retry scheduled does not: a rate limit several siblings wait out is not a wrong plan). Two failures have **the same shape** when
their failure class (``transient``, ``spec``, …) and their error's first line, normalised as
heartbeats are (numbers ``#``, drawn ids ``*``, temporary paths ``<tmp>``, case folded:
store/judges/units.py, then any digits left `#`), are equal — so ``ConnectionError: refused by 10.0.0.7:5432 after 3
tries`` and ``… 10.0.0.9:5432 after 5 tries`` are one shape; the error class (``ConnectionError``)
is part of that line.

``PATTERN_MIN`` (3) or more siblings of one shape raise one ``failure_pattern`` (warn) naming the
nodes (up to ``SHOWN``), the class and one of the errors as written, and suggesting a replan
(``Ledger.replan(..., trigger="pattern")``: the trigger that names it). It is gone once fewer
than ``PATTERN_MIN`` of those nodes are failed: a replan removed or replaced them, a rewind or a
retry made them succeed. Read in one statement, at most ``READ_MAX`` failed nodes per task.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from store.judges.units import normalise_line
from store.storage import sql
from store.storage.core import LedgerCore

KIND = "failure_pattern"
PATTERN_MIN = 3  # siblings failed the same way
SHOWN = 12  # nodes named in the evidence
READ_MAX = 2000  # failed nodes of one task read
SHAPE_CHARS = 300  # characters of the normalised first line that make the shape
ERROR_SHOWN = 200  # characters of the sample error in the evidence

SignalTuple = tuple[str, str, "str | None", "float | None", str, str]

_DIGITS = re.compile(r"\d+")  # every number is a field of the shape (the normaliser keeps a lone 0 or 1)
_FAILED = "n.status = 'failed'"


class _Failed(NamedTuple):
    id: int
    key: str
    failure_class: str | None
    error: str | None
    finished_at: float | None


class Pattern(NamedTuple):
    failure_class: str
    shape: str
    nodes: list[str]
    error: str  # one of the errors as written
    since: float | None  # the earliest failure


def shape_of(failure_class: str | None, error: str) -> tuple[str, str]:
    first = error.strip().split("\n", 1)[0]
    return failure_class or "", _DIGITS.sub("#", normalise_line(first))[:SHAPE_CHARS]


def patterns(core: LedgerCore, task_id: str) -> list[Pattern]:
    """The task's failure patterns, the largest first."""
    rows = sql.fetch_rows(core.db, _Failed, "SELECT n.id, n.key, n.failure_class, n.error, n.finished_at FROM node n "
                                            f"WHERE n.task_id = ? AND n.error IS NOT NULL AND {_FAILED} "
                                            "ORDER BY n.id DESC LIMIT ?", [task_id, READ_MAX])
    if len(rows) < PATTERN_MIN:
        return []
    deps: dict[int, list[int]] = {}
    for dst, src in sql.fetch_all(core.db, "SELECT e.dst_id, e.src_id FROM edge e JOIN node n ON n.id = e.dst_id "
                                           f"WHERE n.task_id = ? AND n.error IS NOT NULL AND {_FAILED}", [task_id]):
        deps.setdefault(int(dst), []).append(int(src))
    groups: dict[tuple[tuple[int, ...], str, str], list[_Failed]] = {}
    for r in sorted(rows, key=lambda r: r.id):
        fc, shape = shape_of(r.failure_class, r.error or "")
        if shape:
            groups.setdefault((tuple(sorted(deps.get(r.id, ()))), fc, shape), []).append(r)
    out = [Pattern(fc, shape, [r.key for r in rs], (rs[-1].error or "").strip().split("\n", 1)[0],
                   min((r.finished_at for r in rs if r.finished_at is not None), default=None))
           for (_, fc, shape), rs in groups.items() if len(rs) >= PATTERN_MIN]
    return sorted(out, key=lambda p: (-len(p.nodes), p.nodes[0]))


def evidence(p: Pattern) -> str:
    shown = ", ".join(p.nodes[:SHOWN]) + (f" and {len(p.nodes) - SHOWN} more" if len(p.nodes) > SHOWN else "")
    error = p.error if len(p.error) <= ERROR_SHOWN else p.error[:ERROR_SHOWN] + "…"
    return (f"{len(p.nodes)} sibling nodes failed the same way ({p.failure_class or 'unclassified'}: {error!r}): "
            f"{shown} — the plan may be wrong, not the steps: replan (trigger 'pattern') rather than retry each")


def signals(core: LedgerCore, task_id: str) -> list[SignalTuple]:
    return [(KIND, task_id, None, p.since, "warn", evidence(p)) for p in patterns(core, task_id)]


__all__ = ["KIND", "PATTERN_MIN", "Pattern", "evidence", "patterns", "shape_of", "signals"]

"""Whether an artifact passed the check that read it (at the final step, check that
what is published is still the very draft that was verified — a draft that failed verification
is not the deliverable).

A draft is checked by the nodes that depend on the node that committed it (a ``verify`` after a
``draft``, the repair loop's rounds: store/ledger/repair.py). For an artifact:

* ``failed`` — a node depending on its node failed (a verification whose repairs ran out fails
  the check and the task), or its node was sent back by a failing check (``repair``: the verdict)
  and has not committed again;
* ``passed`` — its node's result stands (the attempt that made it succeeded) and a node depending
  on it succeeded;
* ``unchecked`` — nothing read it yet (or its node was rewound since: superseded).

``warden export`` refuses a ``failed`` draft unless ``--unverified`` (then marked in the file);
``warden report`` shows the status with the best artifact.
"""

from __future__ import annotations

from typing import NamedTuple

from store.clock import iso
from store.jsontypes import JsonObject, JsonValue
from store.storage import sql
from store.storage.core import LedgerCore
from store.storage.models import dumps
from store.views import ArtifactView

FAILED = "failed"
PASSED = "passed"
UNCHECKED = "unchecked"
VERDICT_CHARS = 300


class _Made(NamedTuple):
    id: int
    status: str
    attempt: int
    repair: JsonValue


def _one_line(value: object) -> str:
    text = " ".join((value if isinstance(value, str) else dumps(value)).split())
    return text if len(text) <= VERDICT_CHARS else text[: VERDICT_CHARS - 1] + "…"


def verification(core: LedgerCore, artifact: ArtifactView) -> JsonObject:
    """``{"status": failed|passed|unchecked, "by": node | null, "verdict": text | null, "at": iso | null}``."""
    made = sql.fetch_row(core.db, _Made, f"SELECT {sql.columns(_Made)} FROM node WHERE task_id = ? AND key = ?",
                         [artifact.task_id, artifact.node])
    if made is None:
        return {"status": UNCHECKED, "by": None, "verdict": None, "at": None}
    current = made.status == "succeeded" and int(made.attempt) == int(artifact.attempt)
    if not current:
        repair = made.repair if isinstance(made.repair, dict) else None
        if repair is not None and made.status != "succeeded":
            return {"status": FAILED, "by": repair.get("by"), "verdict": _one_line(repair.get("verdict")),
                    "at": repair.get("at")}
        return {"status": UNCHECKED, "by": None, "verdict": None, "at": None}
    checks = sql.fetch_all(core.db, "SELECT d.key, d.status, d.error, d.output, d.finished_at FROM edge e "
                                    "JOIN node d ON d.id = e.dst_id WHERE e.src_id = ? "
                                    "AND d.status IN ('failed', 'succeeded') ORDER BY d.finished_at DESC, d.id DESC",
                           [made.id])
    for key, status, error, output, at in checks:
        if status == "failed":
            verdict = sql.json_value(output) if output is not None else error
            return {"status": FAILED, "by": key, "verdict": _one_line(verdict if verdict is not None else error),
                    "at": iso(at)}
    if checks:
        key, _status, _error, _output, at = checks[0]
        return {"status": PASSED, "by": key, "verdict": None, "at": iso(at)}
    return {"status": UNCHECKED, "by": None, "verdict": None, "at": None}


def marker(artifact: ArtifactView, v: JsonObject, at: float) -> str:
    """The first line an ``--unverified`` export writes above a draft that failed verification."""
    return (f"UNVERIFIED DRAFT: {artifact.name} (node {artifact.node}, attempt {artifact.attempt}) failed "
            f"verification by node {v.get('by')}: {v.get('verdict')}. Exported with warden export --unverified "
            f"at {iso(at)}; sha256 of the draft below: {artifact.sha256}")


__all__ = ["FAILED", "PASSED", "UNCHECKED", "marker", "verification"]

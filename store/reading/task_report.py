"""``warden report TASK``: what a task leaves behind — at any time, and above all at the stop gate
or after an abort, when nothing more will run (the best result so far and the list
of what is unfinished). A pure read, in one snapshot.

JSON keys (contract): ``best_artifact`` (name, sha256, node, at — the newest artifact whose node's
result still stands, else the newest at all, marked ``current: false``; null when none; its
``verification``: ``{"status": failed|passed|unchecked, "by", "verdict", "at"}``, store/reading/verified.py
— a draft that failed verification is never ``current``),
``unfinished`` (every node not succeeded or abandoned, with its status), ``budget`` (used against
the caps, the gate, and for each gate the figures at which it starts and whether it is reached),
``handoffs_open``, ``effects_unconfirmed`` (intended, never confirmed: check whether they
happened). More keys: ``task_id``, ``title``, ``status``, ``progress``, ``effects_to_compensate``
(confirmed, not compensated, with the compensation node's status), ``at``.
"""

from __future__ import annotations

from typing import NamedTuple

from store.judges import budget as budget_mod
from store.storage import sql
from store.clock import iso
from store.storage.db import read_tx, run_read
from store.facade import Ledger
from store.storage.core import UNFINISHED_SQL
from store.jsontypes import JsonObject
from store.reading.cli_json import budget_json
from store.reading import verified
from store.views import ArtifactView, TaskView


def task_report(ledger: Ledger, task_id: str) -> JsonObject:
    """The deliverable of ``task_id`` now (see the module doc); re-read after a lost connection."""
    return run_read(ledger.db, lambda: _task_report(ledger, task_id))


def _task_report(ledger: Ledger, task_id: str) -> JsonObject:
    db = ledger.db
    with read_tx(db):
        task = ledger.task(task_id)
        now = ledger.now()
        best = _best_artifact(ledger, task_id)
        unfinished = [{"key": k, "kind": kind, "title": title, "status": status, "always_admit": bool(aa),
                       "error": err}
                      for k, kind, title, status, aa, err in sql.fetch_all(
                          db, "SELECT key, kind, title, status, always_admit, error FROM node WHERE task_id = ? "
                              f"AND status IN {UNFINISHED_SQL} ORDER BY position", [task_id])]
        handoffs = [{"id": h.id, "node": h.node, "kind": h.kind, "question": h.question,
                     "recommendation": h.recommendation, "opened_at": iso(h.opened_at),
                     "age_s": round(max(0.0, now - h.opened_at), 3)}
                    for h in ledger.handoffs(status="open", task_id=task_id)]
        effects = ledger.effects(task_id)
        comp_status = dict(sql.fetch_all(db, "SELECT key, status FROM node WHERE task_id = ? AND kind = ?",
                                         [task_id, "compensation"]))
    return {
        "task_id": task.task_id,
        "title": task.title,
        "status": task.status,
        "at": iso(now),
        "progress": {"done": task.done, "total": task.total, "counts": dict(task.counts)},
        "best_artifact": best,
        "unfinished": unfinished,
        "budget": {**budget_json(task), "gates": _gates(task)},
        "handoffs_open": handoffs,
        "effects_unconfirmed": [{"node": e.node, "effect_key": e.effect_key, "intended_at": iso(e.intended_at)}
                                for e in effects if e.status == "intended"],
        "effects_to_compensate": [{"node": e.node, "effect_key": e.effect_key, "external_id": e.external_id,
                                   "compensation": e.compensation, "compensation_node": e.compensation_node,
                                   "compensation_node_status": comp_status.get(e.compensation_node or "")}
                                  for e in effects if e.status == "confirmed"],
    }


class _BestArtifact(NamedTuple):
    id: int
    name: str
    sha256: str
    size: int
    at: float
    attempt: int
    node: str
    current: int  # 1: made by the attempt that succeeded


_BEST_ARTIFACT = sql.columns(_BestArtifact, "a", {
    "node": "n.key", "current": "CASE WHEN n.status = 'succeeded' AND a.attempt = n.attempt THEN 1 ELSE 0 END"})


def _best_artifact(ledger: Ledger, task_id: str) -> JsonObject | None:
    row = sql.fetch_row(ledger.db, _BestArtifact, f"SELECT {_BEST_ARTIFACT} FROM artifact a JOIN node n "
                                                  "ON n.id = a.node_id WHERE a.task_id = ? ORDER BY current DESC, "
                                                  "a.id DESC LIMIT 1", [task_id])
    if row is None:
        return None
    check = verified.verification(ledger, ArtifactView(row.id, task_id, row.node, int(row.attempt), row.name,
                                                       row.sha256, int(row.size), None, row.at))
    return {"name": row.name, "sha256": row.sha256, "node": row.node, "at": iso(row.at),
            "bytes": int(row.size), "attempt": int(row.attempt),
            # a draft that failed verification is not the current result, whatever its node's status
            "current": bool(row.current) and check["status"] != verified.FAILED, "verification": check}


def _gates(task: TaskView) -> dict[str, JsonObject]:
    """For each gate: the tokens and wall-clock seconds at which it starts, and whether it is reached."""
    ratio = budget_mod.usage_ratio(task.tokens_used, task.token_cap, task.wall_used_s, task.wall_cap_s)
    out: dict[str, JsonObject] = {}
    for name, at in (("soft", task.soft_ratio), ("hard", budget_mod.HARD_RATIO), ("stop", budget_mod.STOP_RATIO)):
        out[name] = {"tokens": round(task.token_cap * at) if task.token_cap else None,
                     "wall_s": round(task.wall_cap_s * at, 3) if task.wall_cap_s else None,
                     "reached": bool((task.token_cap or task.wall_cap_s) and ratio >= at)}
    return out

"""The mind's rows, written inside the caller's write transaction: requirements (at task
creation), conclusions and rejected paths (an agent's, and those written for it by failures,
rewinds, escalations and replans), and proposed memories. No fencing here: the agent's calls
(``store/mind/agent.py``) fence first, the operator actions and the ledger's own writes call these
inside their transactions."""

from __future__ import annotations

from typing import Mapping, Sequence

from store.storage import sql
from store.errors import Refused
from store.jsontypes import JsonObject
from store.storage.core import LedgerCore, sha256_hex
from store.storage.models import dumps
from store.storage.tables import NodeRecord
from store.views import NodeSpec
from store.mind.rules import ENTRIES_PER_NODE, ENTRY_TEXT_MAX, PENDING_PER_TASK, REASON_MAX, SOURCE_MAX
from store.mind.views import MindState


def write_requirements(core: LedgerCore, task_id: str, items: Sequence[Mapping[str, str]], now: float) -> None:
    """Insert a new task's requirements (already checked by ``rules.requirements``)."""
    if items:
        sql.execute_many(core.db, "INSERT INTO requirement (task_id, rid, text, position, status, created_at) "
                                  "VALUES (?, ?, ?, ?, 'active', ?)",
                         [(task_id, r["id"], r["text"], i + 1, now) for i, r in enumerate(items)])


def initial_mind(requirements: int, drift_after: int, alignment_every: int, alignment_by: str) -> JsonObject:
    return MindState(requirements=requirements, drift_after=drift_after, alignment_every=alignment_every,
                     alignment_by=alignment_by).to_json()


def check_serves(core: LedgerCore, task_id: str, specs: Sequence[NodeSpec]) -> None:
    """Refuse a node that serves a requirement the task does not have (or a replan dropped)."""
    wanted = {r for s in specs for r in (getattr(s, "serves", None) or ())}
    if not wanted:
        return
    have = dict(sql.fetch_all(core.db, "SELECT rid, status FROM requirement WHERE task_id = ?", [task_id]))
    for s in specs:
        for r in getattr(s, "serves", None) or ():
            if r not in have:
                known = ", ".join(sorted(have)) or "none"
                raise Refused(f"node {s.key!r} serves unknown requirement {r!r} (the task's requirements: {known})")
            if have[r] != "active":
                raise Refused(f"node {s.key!r} serves requirement {r!r}, which a replan dropped")


def entries_of(core: LedgerCore, node_id: int) -> int:
    return int(sql.scalar(core.db, "SELECT COUNT(*) FROM conclusion WHERE node_id = ?", [node_id]) or 0)


def entry(core: LedgerCore, task_id: str, node_id: int | None, node_key: str | None, attempt: int, kind: str,
          text: str, *, source: str | None, reason: str | None, origin: str, actor: str, now: float,
          strict: bool = False) -> int | None:
    """Insert a conclusion or a rejected path; returns its id. Past :data:`ENTRIES_PER_NODE` of one
    node it is refused (``strict``: an agent's own call) or left out (what the ledger writes for
    it: the failure stays in the journal)."""
    if node_id is not None and entries_of(core, node_id) >= ENTRIES_PER_NODE:
        if strict:
            raise Refused(f"node {node_key} already has {ENTRIES_PER_NODE} conclusions and rejected paths: "
                          "keep the ones that would change a later choice")
        return None
    cur = sql.execute(core.db, "INSERT INTO conclusion (task_id, node_id, node_key, attempt, kind, text, source, "
                               "reason, origin, actor, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                      [task_id, node_id, node_key, int(attempt), kind, text[:ENTRY_TEXT_MAX],
                       None if source is None else source[:SOURCE_MAX],
                       None if reason is None else reason[:REASON_MAX], origin, actor or "", now])
    return int(cur.fetchone()[0])


def rewound(core: LedgerCore, task_id: str, node_id: int, reason: str, *, actor: str, now: float) -> int:
    """A rewind's rejected path on the rewound node, with the operator's reason whole: the one place
    that reason is stored (each node the rewind reset lists this row's id in its ``rejections``, and
    its next claim is handed the reason from here: ``inputs["rejections"]`` and, with the rest of
    its rejected paths, ``inputs["memory"]["rejected"]``). Written past ``ENTRIES_PER_NODE`` too: an
    operator's rewind is never left out. Returns its id."""
    key, attempt, status = sql.fetch_all(core.db, "SELECT key, attempt, status FROM node WHERE id = ?", [node_id])[0]
    cur = sql.execute(core.db, "INSERT INTO conclusion (task_id, node_id, node_key, attempt, kind, text, source, "
                               "reason, origin, actor, at) VALUES (?, ?, ?, ?, 'rejected', ?, ?, ?, 'rewind', ?, ?) "
                               "RETURNING id",
                      [task_id, node_id, key, int(attempt), f"{key} (attempt {attempt}, {status}) was {_verb('rewind')}",
                       f"operator {actor} (rewind)"[:SOURCE_MAX], reason, actor or "", now])
    return int(cur.fetchone()[0])


def rejected_for_nodes(core: LedgerCore, task_id: str, ids: Sequence[int], reason: str, *, origin: str,
                       actor: str, now: float, text: str | None = None, source: str | None = None) -> None:
    """A rejected path on each of these nodes (an operator's rewind or escalation, a replan's
    removal): what the node had done is the path, ``reason`` why it was rejected."""
    for chunk in sql.chunks(list(ids)):
        for node_id, key, attempt, status in sql.fetch_all(
                core.db, f"SELECT id, key, attempt, status FROM node WHERE id IN ({sql.marks(len(chunk))})", chunk):
            what = text or f"{key} (attempt {attempt}, {status}) was {_verb(origin)}"
            entry(core, task_id, node_id, key, attempt, "rejected", what, source=source, reason=reason,
                  origin=origin, actor=actor, now=now)


def _verb(origin: str) -> str:
    return {"rewind": "rewound by an operator", "escalate": "escalated to a person by an operator",
            "replan": "removed from the plan"}.get(origin, origin)


def on_fail(core: LedgerCore, task_id: str, node: NodeRecord, attempt: int, error: str,
            failure_class: str, actor: str, now: float, retry: bool) -> None:
    """A failed attempt is always written as a rejected path, with its error as the reason."""
    what = f"attempt {attempt} of {node.key} failed ({failure_class}; {'will retry' if retry else 'no retry'})"
    entry(core, task_id, node.id, node.key, attempt, "rejected", what, source=f"attempt {attempt}",
          reason=error, origin="fail", actor=actor, now=now)


def propose(core: LedgerCore, task_id: str, workflow: str, node_key: str, node_kind: str, attempt: int, text: str,
            scope: str, worker: str, now: float, source: str) -> tuple[str, bool]:
    """A proposed memory (pending until a person confirms it). The same scope, workflow, kind and
    text again returns the existing memory whatever its status (a rejected one is not asked again).
    Returns (id, whether it is new)."""
    kind = node_kind if scope == "kind" else None
    digest = sha256_hex(dumps([scope, workflow, kind, text]).encode("utf-8"))
    found = sql.scalar(core.db, "SELECT id FROM memory WHERE digest = ? ORDER BY id LIMIT 1", [digest])
    if found is not None:
        return str(found), False
    waiting = int(sql.scalar(core.db, "SELECT COUNT(*) FROM memory WHERE task_id = ? AND status = 'pending'",
                             [task_id]) or 0)
    if waiting >= PENDING_PER_TASK:
        raise Refused(f"task {task_id} already has {PENDING_PER_TASK} memories waiting for a person: "
                      "propose the ones a later task would act on")
    cur = sql.execute(core.db, "INSERT INTO memory (scope, workflow, kind, text, digest, task_id, node_key, attempt, "
                               "proposed_by, proposed_at, status, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                               "'pending', ?) RETURNING id",
                      [scope, workflow, kind, text, digest, task_id, node_key, int(attempt), worker, now,
                       source[:SOURCE_MAX]])
    return str(cur.fetchone()[0]), True

"""State-driven retrieval: what the scheduler hands a node at claim time, ``Claim.inputs["memory"]``
("the system knows what it should know") — not what the model remembers to look up.

```
{"constraints":  [{"text", "at", "source"}],                 the task's must-keep rules, all of them
 "requirements": [{"id", "text", "serves", "at", "source"}],  the task's requirement (serves: this node's)
 "rejected":     [ENTRY],  rejected paths of this node and its ancestors, and the task's own (replans)
 "conclusions":  [ENTRY],  findings of the nodes it depends on (directly)
 "memories":     [{"id", "text", "scope", "at", "source"}],   confirmed memories of its kind / workflow
 "open_problems": [PROBLEM], what the task has not solved: its open handoffs and failed nodes
 "alignment":    {"verdict", "at"} | null,                    the task's latest alignment verdict
 "omitted":      {"rejected": n, "conclusions": n, "memories": n, "open_problems": n, "constraints": n,
                  "requirements": n},
                                                              left out by the bounds below
 "limits":       {...the bounds...}}
ENTRY = {"id", "node", "kind", "text", "reason", "source", "origin", "at"}   (source: where it came from —
        a file, a command — or, when the writer named none, the step that wrote it)
PROBLEM = {"kind": "handoff", "id", "node", "handoff_kind", "question", "at"}   a question open to a person
        | {"kind": "failed", "node", "error", "failure_class", "at"}           a node that failed for good
```

Every list is newest first; ``at`` is ISO-8601 UTC and ``source`` says where it came from, so an
agent can judge a stale one. Bounds (:data:`LIMITS`): at most 20 rejected paths, 20 conclusions
10 memories and 20 open problems, each text cut to 1000 characters, and the whole block at most
48 KB of JSON — past that the oldest conclusions, then rejected paths, then memories, then open
problems are left out (counted in ``omitted``; what survives a compaction keeps the
unsolved problems, so they go after the history). Constraints and requirements are handed out whole while they fit; when they alone
pass the 48 KB, their longest texts are cut to 1000 characters (``cut`` in the entry: how many
characters went; the whole texts stay in the task), then requirements this node does not serve,
the others, and last constraints are left out from the end (counted in ``omitted``). A pending
or rejected memory is never handed out.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, Sequence

from store.storage import sql
from store.clock import iso
from store.jsontypes import JsonObject
from store.storage.core import LedgerCore
from store.storage.models import dumps
from store.storage.tables import NodeRecord, TaskRecord
from store.mind.alignment import KIND as ALIGNMENT, material
from store.mind.views import MindState

LIMITS = {"rejected": 20, "conclusions": 20, "memories": 10, "open_problems": 20, "text_chars": 1000,
          "bytes": 48 * 1024}


class _Counted(Protocol):
    @property
    def total(self) -> int: ...


class _EntryRow(NamedTuple):
    """A conclusion handed out, with how many the statement found (``COUNT(*) OVER ()``)."""

    id: int
    node_key: str | None
    kind: str
    text: str
    reason: str | None
    source: str | None
    origin: str
    at: float
    attempt: int
    actor: str
    total: int


class _MemoryRow(NamedTuple):
    """A confirmed memory handed out, with how many the statement found."""

    id: int
    text: str
    scope: str
    kind: str | None
    decided_at: float | None
    task_id: str
    node_key: str
    decided_by: str | None
    source: str | None
    total: int


_ENTRY = sql.columns(_EntryRow, "c", {"total": "COUNT(*) OVER ()"})


def _entry(r: _EntryRow) -> JsonObject:
    """One entry; without a source of its own, its source is the step that wrote it."""
    cut = LIMITS["text_chars"]
    source = r.source or (f"node {r.node_key}, attempt {r.attempt} ({r.actor})" if r.node_key
                          else f"task ({r.actor or r.origin})")
    return {"id": int(r.id), "node": r.node_key, "kind": r.kind, "text": _cut(r.text, cut),
            "reason": _cut(r.reason, cut), "source": source, "origin": r.origin, "at": iso(r.at)}


def _cut(text: str | None, n: int) -> str | None:
    return text if text is None or len(text) <= n else text[: n - 1] + "…"


def memory_inputs(core: LedgerCore, task: TaskRecord, node: NodeRecord,
                  dep_ids: list[int]) -> JsonObject:
    """``Claim.inputs["memory"]`` for ``node`` of ``task`` (rows), inside the claim's transaction."""
    db = core.db
    state = MindState.of(task.mind)
    tid = task.task_id
    created = iso(task.created_at)
    constraints = [{"text": c, "at": created, "source": f"task {tid} constraints"} for c in task.constraints or ()]
    serves = set(node.serves or ())
    requirements = []
    if state.requirements:
        requirements = [{"id": r, "text": t, "serves": r in serves, "at": iso(at), "source": f"task {tid} requirements"}
                        for r, t, at in sql.fetch_all(db, "SELECT rid, text, created_at FROM requirement WHERE "
                                                          "task_id = ? AND status = 'active' ORDER BY position", [tid])]
    n_rej, n_con, n_mem = LIMITS["rejected"], LIMITS["conclusions"], LIMITS["memories"]
    rejected: list[_EntryRow] = []
    if sql.fetch_all(db, "SELECT 1 FROM conclusion WHERE task_id = ? AND kind = 'rejected' LIMIT 1", [tid]):
        rejected = sql.fetch_rows(
            db, _EntryRow,
            "WITH RECURSIVE up(id) AS (SELECT CAST(? AS INTEGER) UNION SELECT e.src_id FROM edge e JOIN up ON e.dst_id = up.id) "
                f"SELECT {_ENTRY} FROM conclusion c WHERE c.task_id = ? AND c.kind = 'rejected' AND "
                "(c.node_id IS NULL OR c.node_id IN (SELECT id FROM up)) ORDER BY c.id DESC LIMIT ?",
            [node.id, tid, n_rej])
    conclusions: list[_EntryRow] = []
    if dep_ids:
        conclusions = sql.fetch_rows(
            db, _EntryRow, f"SELECT {_ENTRY} FROM conclusion c WHERE c.node_id IN ({sql.marks(len(dep_ids[:500]))}) "
                "AND c.kind = 'finding' ORDER BY c.id DESC LIMIT ?", [*dep_ids[:500], n_con])
    memories = sql.fetch_rows(
        db, _MemoryRow, f"SELECT {sql.columns(_MemoryRow, '', {'total': 'COUNT(*) OVER ()'})} FROM memory "
            "WHERE status = "
            "'confirmed' AND workflow = ? AND (scope = 'workflow' OR kind = ?) ORDER BY decided_at DESC, id DESC "
            "LIMIT ?", [task.workflow or "", node.kind, n_mem])
    problems, n_problems = _open_problems(core, tid, node.id)
    out: JsonObject = {
        "constraints": constraints,
        "requirements": requirements,
        "rejected": [_entry(r) for r in rejected],
        "conclusions": [_entry(r) for r in conclusions],
        "memories": [{"id": str(m.id), "text": _cut(m.text, LIMITS["text_chars"]), "scope": m.scope,
                      "kind": m.kind, "at": iso(m.decided_at),
                      "source": (f"{m.source}; " if m.source else "")
                      + f"proposed by task {m.task_id} node {m.node_key}, confirmed by {m.decided_by}"}
                     for m in memories],
        "open_problems": problems,
        "alignment": ({"verdict": state.verdict, "at": iso(state.checked_at)} if state.verdict else None),
        "omitted": {"rejected": _left(rejected), "conclusions": _left(conclusions), "memories": _left(memories),
                    "open_problems": n_problems - len(problems),
                    "constraints": 0, "requirements": 0},
        "limits": dict(LIMITS),
    }
    _fit(out)
    return out


def _open_problems(core: LedgerCore, task_id: str, node_id: int) -> tuple[list[JsonObject], int]:
    """The task's open handoffs and failed nodes (but the claimed node's own), newest first, at
    most the bound; and how many there are in all."""
    n = LIMITS["open_problems"]
    cut = LIMITS["text_chars"]
    out: list[tuple[JsonObject, float]] = []
    for hid, key, kind, question, at in sql.fetch_all(
            core.db, "SELECT h.id, n.key, h.kind, h.question, h.opened_at FROM handoff h JOIN node n ON n.id = h.node_id "
                     "WHERE h.task_id = ? AND h.status = 'open' AND h.node_id <> ? ORDER BY h.id DESC LIMIT ?",
            [task_id, node_id, n]):
        out.append(({"kind": "handoff", "id": str(hid), "node": key, "handoff_kind": kind,
                     "question": _cut(question, cut), "at": iso(at)}, float(at)))
    for key, error, fclass, at in sql.fetch_all(
            core.db, "SELECT key, error, failure_class, finished_at FROM node WHERE task_id = ? AND status = 'failed' "
                     "AND id <> ? ORDER BY finished_at DESC, id DESC LIMIT ?", [task_id, node_id, n]):
        out.append(({"kind": "failed", "node": key, "error": _cut(error, cut), "failure_class": fclass,
                     "at": iso(at)}, float(at or 0.0)))
    out.sort(key=lambda p: p[1], reverse=True)
    total = int(sql.scalar(core.db, "SELECT COUNT(*) FROM handoff WHERE task_id = ? AND status = 'open' "
                                    "AND node_id <> ?", [task_id, node_id]) or 0) \
        + int(sql.scalar(core.db, "SELECT COUNT(*) FROM node WHERE task_id = ? AND status = 'failed' AND id <> ?",
                         [task_id, node_id]) or 0)
    return [p for p, _ in out[:n]], total


def _left(found: Sequence[_Counted]) -> int:
    """How many rows the LIMIT left out (each row carries the total, ``COUNT(*) OVER ()``)."""
    return int(found[0].total) - len(found) if found else 0


def _size(value: object) -> int:
    return len(dumps(value).encode("utf-8"))


def _fit(out: JsonObject) -> None:
    """Make the block at most ``LIMITS["bytes"]`` of JSON: leave out the oldest conclusions, then
    rejected paths, then memories; if the task's own constraints and requirements are still too
    big, cut their longest texts to ``LIMITS["text_chars"]`` (the entry's ``cut`` says how many
    characters went), then leave out requirements this node does not serve, the others, and last
    constraints, from the end of each list. Everything left out is counted in ``omitted``."""
    limit = LIMITS["bytes"]
    size = _size(out)
    for part in ("conclusions", "rejected", "memories", "open_problems"):
        items = out[part]
        while items and size > limit:
            gone = items.pop()
            size -= _size(gone) + 1
            out["omitted"][part] += 1
    if size <= limit:
        return
    keep = LIMITS["text_chars"]
    rules = [e for part in ("requirements", "constraints") for e in out[part]]
    for e in sorted(rules, key=lambda e: len(e["text"]), reverse=True):
        if size <= limit or len(e["text"]) <= keep:
            break
        before = _size(e)
        e["cut"] = len(e["text"]) - (keep - 1)
        e["text"] = _cut(e["text"], keep)
        size -= before - _size(e)
    for part, which in (("requirements", False), ("requirements", True), ("constraints", None)):
        items = out[part]
        for e in reversed(list(items)):
            if size <= limit:
                return
            if which is None or e["serves"] is which:
                items.remove(e)
                size -= _size(e) + 1
                out["omitted"][part] += 1


def alignment_inputs(core: LedgerCore, task: TaskRecord, node: NodeRecord) -> JsonObject | None:
    """``Claim.inputs["alignment"]`` for a node of kind ``alignment``: the requirements, the plan
    ahead and the work done since the last check (what a person sees in the handoff)."""
    if node.kind != ALIGNMENT:
        return None
    state = MindState.of(task.mind)
    out = material(core, task.task_id, state, state.checked_at)
    out["answer"] = 'commit(claim, output={"verdict": "aligned" | "drifting", "notes": "..."})'
    return out

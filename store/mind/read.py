"""Reading the task's mind: one task's requirements and what serves them, its conclusions and
rejected paths, its plan history and its proposed memories (:func:`mind`); the memories across
tasks (:func:`memories`, :func:`memory`); a node's requirements and memory inputs (``node_mind``).
Bounded: a requirement lists its first ``SERVING_SHOWN`` nodes, the nodes serving none their first
``UNSERVING_SHOWN``, the entries their newest ``ENTRIES_SHOWN`` of each kind."""

from __future__ import annotations

from typing import NamedTuple

from store.storage import sql
from store.storage.db import read_tx
from store.errors import NotFound
from store.storage.core import LedgerCore
from store.mind import replan
from store.mind.recall import memory_inputs
from store.mind.state import UNCOUNTED_KINDS
from store.mind.views import (
    MemoryView,
    MindEntry,
    MindState,
    MindView,
    NodeMind,
    Requirement,
    RequirementUse,
    TaskMindRow,
)

SERVING_SHOWN = 50
UNSERVING_SHOWN = 50
ENTRIES_SHOWN = 100
MEMORIES_SHOWN = 500


class EntryRow(NamedTuple):
    """A ``conclusion`` row as the mind shows it."""

    id: int
    task_id: str
    node_key: str | None
    attempt: int | None
    kind: str
    text: str
    source: str | None
    reason: str | None
    origin: str
    actor: str | None
    at: float


class MemoryRow(NamedTuple):
    """A ``memory`` row (every column but its digest): the mind's reads and the memory actions."""

    id: int
    scope: str
    workflow: str | None
    kind: str | None
    text: str
    status: str
    task_id: str
    node_key: str
    attempt: int | None
    proposed_by: str | None
    proposed_at: float
    decided_by: str | None
    decided_at: float | None
    decision_reason: str | None
    source: str | None


_ENTRY = sql.columns(EntryRow)
MEMORY_SELECT = sql.columns(MemoryRow)  # a whole memory row (the memory actions read it too)


def entry_view(r: EntryRow) -> MindEntry:
    return MindEntry(int(r.id), r.task_id, r.node_key, int(r.attempt or 0), r.kind, r.text, r.source, r.reason,
                     r.origin, r.actor or "", r.at)


def memory_view(r: MemoryRow) -> MemoryView:
    return MemoryView(str(r.id), r.scope, r.workflow or "", r.kind, r.text, r.status, r.task_id, r.node_key,
                      int(r.attempt or 0), r.proposed_by or "", r.proposed_at, r.decided_by, r.decided_at,
                      r.decision_reason, r.source)


def requirements(core: LedgerCore, task_id: str) -> list[Requirement]:
    return [Requirement(r, t, s, d, p, at) for r, t, s, d, p, at in sql.fetch_all(
        core.db, "SELECT rid, text, status, dropped_in, position, created_at FROM requirement WHERE task_id = ? "
                 "ORDER BY position", [task_id])]


def task_mind_row(core: LedgerCore, task_id: str) -> TaskMindRow:
    row = sql.fetch_row(core.db, TaskMindRow, f"SELECT {sql.columns(TaskMindRow)} FROM task WHERE task_id = ?",
                        [task_id])
    if row is None:
        raise NotFound(f"unknown task {task_id!r}")
    return row


def entries(core: LedgerCore, task_id: str, kind: str, limit: int = ENTRIES_SHOWN,
            node: str | None = None) -> list[MindEntry]:
    """The task's conclusions (``finding``) or rejected paths, newest first (``node``: of one node)."""
    where, params = "", [task_id, kind]
    if node is not None:
        where, params = " AND node_key = ?", [task_id, kind, node]
    return [entry_view(r) for r in sql.fetch_rows(
        core.db, EntryRow, f"SELECT {_ENTRY} FROM conclusion WHERE task_id = ? AND kind = ?{where} ORDER BY id DESC "
                           "LIMIT ?",
        [*params, limit])]


def mind(core: LedgerCore, task_id: str) -> MindView:
    """What the Mind screen and ``warden mind`` show (one read snapshot)."""
    with read_tx(core.db):
        task = task_mind_row(core, task_id)
        state = MindState.of(task.mind)
        reqs = requirements(core, task_id)
        serving: dict[str, list[tuple[str, str]]] = {r.id: [] for r in reqs}
        totals: dict[str, list[int]] = {r.id: [0, 0] for r in reqs}
        unserving: list[tuple[str, str]] = []
        unserving_total = 0
        counts: dict[str, int] = {}
        for key, status, kind, serves in sql.fetch_all(
                core.db, "SELECT key, status, kind, serves FROM node WHERE task_id = ? ORDER BY position", [task_id]):
            counts[status] = counts.get(status, 0) + 1
            ids = sql.json_value(serves) or ()
            if not ids:
                if kind not in UNCOUNTED_KINDS and status != "abandoned":
                    unserving_total += 1
                    if len(unserving) < UNSERVING_SHOWN:
                        unserving.append((key, status))
                continue
            if status == "abandoned":  # out of the plan (a replan, a narrow, an abort): serves nothing now
                continue
            for rid in ids:
                if rid in serving:
                    totals[rid][0] += 1
                    totals[rid][1] += status == "succeeded"
                    if len(serving[rid]) < SERVING_SHOWN:
                        serving[rid].append((key, status))
        uses = tuple(RequirementUse(r, tuple(serving[r.id]), totals[r.id][0], totals[r.id][1]) for r in reqs)
        found = entries(core, task_id, "finding")
        rejected = entries(core, task_id, "rejected")
        plans = replan.versions(core, task_id)
        mems = [memory_view(r) for r in sql.fetch_rows(
            core.db, MemoryRow, f"SELECT {MEMORY_SELECT} FROM memory WHERE task_id = ? ORDER BY id DESC LIMIT ?",
            [task_id, MEMORIES_SHOWN])]
    return MindView(task_id=task_id, title=task.title, status=task.status, state=state,
                    constraints=tuple(task.constraints or ()), requirements=uses, unserving=tuple(unserving),
                    unserving_total=unserving_total, conclusions=tuple(found), rejected=tuple(rejected),
                    plans=tuple(plans), memories=tuple(mems), created_at=task.created_at, counts=counts)


def memories(core: LedgerCore, status: str | None = None, limit: int = MEMORIES_SHOWN) -> list[MemoryView]:
    """Memories across tasks, newest first (``status``: only pending, confirmed or rejected ones)."""
    where, params = ("", []) if status is None else (" WHERE status = ?", [status])
    with read_tx(core.db):
        return [memory_view(r) for r in sql.fetch_rows(
            core.db, MemoryRow, f"SELECT {MEMORY_SELECT} FROM memory{where} ORDER BY id DESC LIMIT ?", [*params, limit])]


def memory(core: LedgerCore, memory_id: str) -> MemoryView:
    if not str(memory_id).isdigit() or len(str(memory_id)) > 18:
        raise NotFound(f"unknown memory {memory_id!r}")
    row = sql.fetch_row(core.db, MemoryRow, f"SELECT {MEMORY_SELECT} FROM memory WHERE id = ?", [int(memory_id)])
    if row is None:
        raise NotFound(f"unknown memory {memory_id!r}")
    return memory_view(row)


def node_mind(core: LedgerCore, task_id: str, key: str) -> NodeMind:
    """A node's place in the mind: the requirements it serves (id, text, status), the memory a
    claim of it would be handed now (``Claim.inputs["memory"]``), and its own entries."""
    with read_tx(core.db):
        task = core.task_record(task_id)
        node = core.node_record(task_id, key)
        deps = [i for (i,) in sql.fetch_all(core.db, "SELECT src_id FROM edge WHERE dst_id = ?", [node.id])]
        reqs = {r.id: r for r in requirements(core, task_id)}
        serves = [{"id": r, "text": reqs[r].text if r in reqs else None,
                   "status": reqs[r].status if r in reqs else "unknown"} for r in node.serves or ()]
        mem = memory_inputs(core, task, node, deps)
        own = [entry_view(r) for r in sql.fetch_rows(
            core.db, EntryRow, f"SELECT {_ENTRY} FROM conclusion WHERE node_id = ? ORDER BY id DESC LIMIT ?",
            [node.id, ENTRIES_SHOWN])]
    return NodeMind(tuple(serves), mem, tuple(own), node.removed_in, node.removed_mode,
                    MindState.of(task.mind).requirements)


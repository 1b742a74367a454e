"""Plan versions (``Ledger.replan``): a task's plan changes as one recorded version — its diff, what
set it off, and what it did with the nodes in flight — so "why does hour five work differently
from hour two" has an answer. The semantics (docs/agents.md "Replanning"):

* ``add`` — new nodes (``NodeSpec``s; their dependencies may name existing nodes or each other),
  pending. Re-adding a node that exists with the same dependencies is a no-op (a retried replan).
* ``remove`` — node keys that leave the plan: they become ``abandoned`` (kept for audit; the ledger
  never deletes). A succeeded node cannot be removed (its result stands: rewind it if it is
  wrong); an abandoned one is skipped. A pending node that depended on a removed one runs without
  it (an abandoned dependency counts as met): remove it too if it should not.
* ``reorder`` — node keys not yet started (pending, failed, blocked, parked), in the order they
  should run: positions are renumbered so each comes as early as its dependencies allow, its
  unfinished ancestors with it; claims take ready nodes in position order. A list that puts a
  node before one it depends on is refused.
* ``narrow`` — ``{"drop": [requirement ids], "goal": text}``: dropped requirements leave the goal
  (kept, marked dropped in this version); unfinished nodes that serve only dropped requirements
  are removed with the rest.
* ``in_flight`` — what happens to a *running* node the version removes: ``wait`` (the default)
  lets its attempt finish and keeps its result (a failure abandons it instead of a retry);
  ``discard`` lets it finish and abandons it with its output kept for audit only (dependents do
  not get it; its ``next_nodes`` are not added); ``cancel`` revokes its lease now (its agent's
  next write raises ``LeaseLost``) and abandons it. A removed running node whose lease expires is
  abandoned by the next claim that finds it, never reclaimed. Blocked nodes removed are abandoned
  and their open handoffs withdrawn, whatever the mode. Running nodes the version keeps go on.

Every version bumps the task revision (so an operator's preview made before it is stale),
journals one ``graph.replanned`` event (decision layer, the actor, every node it changed in
``payload["nodes"]``), resets a ``drifting`` alignment verdict (the replan is the answer to it),
and, when it removed nodes, writes one task-level rejected path (origin ``replan``) with its
reason: every later claim's ``inputs["memory"]["rejected"]`` carries it. A replan that would change
nothing makes no version and returns the current one. ``trigger`` says what set it off:
``evidence_conflict``, ``pattern``, ``diminishing_returns``, or ``operator`` — a person's
instruction the agent carries out (name the person in the reason). An operator acting directly
uses the operator actions (narrow, rewind, park, abort), which have previews and audit rows.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import NamedTuple, Sequence

from store.storage import sql
from store.storage.db import read_tx, retry_write, run_read, write_tx
from store.errors import NotFound, Refused
from store.jsontypes import JsonArray, JsonMapping, JsonObject, JsonValue
from store.storage import budget_clock
from store.ledger.build import add_nodes_tx
from store.storage.core import NODE_COLUMNS, TASK_LOCKS, UNFINISHED_SQL, LedgerCore
from store.storage.models import dumps
from store.storage.sql import Inc
from store.storage.tables import NodeRecord, TaskRecord
from store.views import NodeSpec
from store.mind import record, state as mind_state
from store.mind.views import MindState, PlanVersionView
from store.storage.events import GraphReplanned, NodeAbandoned


UNSTARTED = ("pending", "failed", "blocked", "parked")


class TaskState(NamedTuple):
    """What a replan reads of its task (under the task row's lock)."""

    status: str
    mind: JsonValue
LISTED = 50  # keys named in a journal summary or a diff's list of kept dependents
FATE = {"wait": "finishes; result kept", "discard": "finishes; result discarded", "cancel": "cancelled"}


def replan(core: LedgerCore, task_id: str, *, add: Sequence[NodeSpec], remove: Sequence[str],
           reorder: Sequence[str], narrow: JsonMapping | None, trigger: str, in_flight: str, reason: str,
           actor: str) -> PlanVersionView:
    """Change the task's plan as one new version (see the module's docstring); returns it (or the
    current version when nothing would change)."""
    version = _replan(core, task_id, add, remove, reorder, narrow, trigger, in_flight, reason, actor)
    return next(v for v in run_read(core.db, lambda: versions(core, task_id)) if v.version == version)


@retry_write
def _replan(core: LedgerCore, task_id: str, add: Sequence[NodeSpec], remove: Sequence[str], reorder: Sequence[str],
            narrow: JsonMapping | None, trigger: str, in_flight: str, reason: str, actor: str) -> int:
    """The replan's one write transaction; returns the version it made (or the current one)."""
    now = core.now()
    with write_tx(core.db):
        task = sql.fetch_row(core.db, TaskState, f"SELECT {sql.columns(TaskState)} FROM task WHERE task_id = ?"
                                                 f"{sql.lock(core.db, TASK_LOCKS['update'])}", [task_id])
        if task is None:
            raise NotFound(f"unknown task {task_id!r}")
        if task.status == "aborted":
            raise Refused(f"task {task_id} is aborted: it has no plan to change")
        state = MindState.of(task.mind)
        version = state.plan_version + 1
        removing, dropped = _removals(core, task_id, list(remove), narrow, state)
        existing = core.ids_for_keys(task_id, [s.key for s in add])
        added = [s.key for s in add if s.key not in existing]  # a retried replan re-adds nothing
        if add:
            add_nodes_tx(core, task_id, list(add), actor=actor)
        order_ids = _check_reorder(core, task_id, list(reorder), removing)  # may name the nodes just added
        fates = _remove(core, task_id, removing, in_flight, version, now)
        reordered = _reorder(core, task_id, order_ids) if order_ids else []
        goal = (narrow or {}).get("goal")
        if not (added or removing or reordered or dropped or goal):
            return state.plan_version  # nothing changed: no version (a retried replan finds its work done)
        removed = [n.key for n in removing]
        if dropped:
            sql.execute(core.db, f"UPDATE requirement SET status = 'dropped', dropped_in = ? WHERE task_id = ? AND "
                                 f"rid IN ({sql.marks(len(dropped))})", [version, task_id, *dropped])
        state = replace(state, plan_version=version, requirements=max(0, state.requirements - len(dropped)),
                        verdict=None if state.verdict == "drifting" else state.verdict)
        mind_state.save(core, task_id, state)
        narrowed = {"dropped": dropped, "goal": goal} if (dropped or goal) else None
        kept_dependents = _dependents_kept(core, task_id, [n.id for n in removing])
        diff = {"added": added, "removed": removed, "reordered": reordered, "narrowed": narrowed,
                "dependents_kept": kept_dependents}
        fields: dict[str, object] = {}
        if task.status == "failed" and added:
            fields.update(status="active", finished_at=None)
        core.bump_task(task_id, fields)
        revision = int(sql.scalar(core.db, "SELECT revision FROM task WHERE task_id = ?", [task_id]))
        sql.execute(core.db, "INSERT INTO plan_version (task_id, version, at, actor, cause, in_flight, reason, diff, "
                             "in_flight_nodes, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [task_id, version, now, actor, trigger, in_flight, reason, dumps(diff), dumps(fates), revision])
        if removed:
            record.entry(core, task_id, None, None, 0, "rejected",
                         f"plan version {version} removed {len(removed)} node(s): {_names(removed)}",
                         source=f"replan v{version} ({trigger})", reason=reason, origin="replan", actor=actor, now=now)
        changed = list(dict.fromkeys(added + removed + reordered))
        core.journal(task_id, None, actor,
                     f"plan v{version} ({trigger}): {_summary(diff, fates)} — {' '.join(reason.split())[:200]}",
                     GraphReplanned(version=version, trigger=trigger, in_flight=in_flight, reason=reason, diff=diff,
                                    in_flight_nodes=fates, nodes=changed), at=now)
        if fields:
            budget_clock.settle(core.db, task_id, now)
        core.maybe_complete_task(task_id, now)
        core.maybe_fail_task(task_id, now)
        return version


# ---------------------------------------------------------------------- removal
def _removals(core: LedgerCore, task_id: str, keys: list[str], narrow: JsonMapping | None,
              state: MindState) -> tuple[list[NodeRecord], list[str]]:
    """The node rows the version removes (named, and those serving only dropped requirements) and
    the requirement ids it drops; refused when one cannot be."""
    rows: dict[str, NodeRecord] = {}
    for key in dict.fromkeys(keys):
        row = core.node_record_or_none(task_id, key)
        if row is None:
            raise NotFound(f"unknown node {key!r} in task {task_id!r}")
        if row.status == "succeeded":
            raise Refused(f"node {key} already succeeded: a replan does not undo finished work (rewind it if its "
                          "result is wrong)")
        if row.status != "abandoned":
            rows[key] = row
    dropped: list[str] = []
    if narrow and narrow.get("drop"):
        have = dict(sql.fetch_all(core.db, "SELECT rid, status FROM requirement WHERE task_id = ?", [task_id]))
        for rid in narrow["drop"]:
            if rid not in have:
                raise Refused(f"narrow drops unknown requirement {rid!r} (the task's: {', '.join(sorted(have)) or 'none'})")
            if have[rid] == "active":
                dropped.append(rid)
        if dropped and len(dropped) >= state.requirements:
            raise Refused("narrow would drop every requirement the task has left: abort the task instead")
        gone = set(dropped)
        serving_only_gone: list[tuple[str, int]] = []  # (key, id), in plan order
        for node_id, key, serves in sql.fetch_all(core.db, f"SELECT id, key, serves FROM node WHERE task_id = ? AND "
                                                           f"status IN {UNFINISHED_SQL} AND serves IS NOT NULL "
                                                           "ORDER BY position", [task_id]):
            ids = set(sql.json_value(serves) or ())
            if ids and ids <= gone and key not in rows:
                serving_only_gone.append((key, int(node_id)))
        found: dict[int, NodeRecord] = {}
        for chunk in sql.chunks([i for _, i in serving_only_gone]):
            found.update((r.id, r) for r in sql.fetch_rows(
                core.db, NodeRecord, f"SELECT {NODE_COLUMNS} FROM node WHERE id IN ({sql.marks(len(chunk))})", chunk))
        rows.update((key, found[i]) for key, i in serving_only_gone)
    return list(rows.values()), dropped


def _remove(core: LedgerCore, task_id: str, rows: list[NodeRecord], in_flight: str, version: int,
            now: float) -> list[JsonObject]:
    """Abandon the removed nodes (running ones as ``in_flight`` says); returns what happened to
    the nodes in flight (running or blocked)."""
    fates: list[JsonObject] = []
    blocked: list[int] = []
    for row in rows:
        if row.status == "running" and in_flight != "cancel":
            core.update_node(row.id, {"removed_in": version, "removed_mode": in_flight})
            fates.append({"node": row.key, "was": "running", "fate": FATE[in_flight], "owner": row.lease_owner})
            continue
        fields: dict[str, object] = {"status": "abandoned", "finished_at": now, "lease_token": None, "lease_until": None,
                                  "next_retry_at": None, "parked_at": None, "park_reason": None, "park_until": None,
                                  "wake_on": None, "removed_in": version, "version": Inc(1)}
        core.update_node(row.id, fields)
        if row.status == "running":
            fates.append({"node": row.key, "was": "running", "fate": FATE["cancel"], "owner": row.lease_owner})
        elif row.status == "blocked":
            blocked.append(row.id)
            fates.append({"node": row.key, "was": "blocked", "fate": "abandoned; its open handoff withdrawn"})
    for chunk in sql.chunks(blocked):
        sql.execute(core.db, f"UPDATE handoff SET status = 'withdrawn', resolved_at = ?, resolved_by = 'replan' "
                             f"WHERE status = 'open' AND node_id IN ({sql.marks(len(chunk))})", [now, *chunk])
    return fates


def _dependents_kept(core: LedgerCore, task_id: str, ids: list[int]) -> list[str]:
    """Unfinished nodes not removed that depend on a removed one (they run without it)."""
    out: list[str] = []
    for chunk in sql.chunks(ids):
        out.extend(k for (k,) in sql.fetch_all(
            core.db, f"SELECT DISTINCT d.key FROM edge e JOIN node d ON d.id = e.dst_id WHERE e.src_id IN "
                     f"({sql.marks(len(chunk))}) AND d.status IN {UNFINISHED_SQL}", chunk))
    return sorted(set(out))[:LISTED]


@retry_write
def end_removed(core: LedgerCore, task_id: str, node_id: int, worker: str) -> None:
    """A node a replan removed while it ran, whose lease has expired: abandoned (never reclaimed),
    in its own transaction (called by a claim that found it)."""
    with write_tx(core.db):
        now = core.now()
        core.task_record(task_id, lock="update")
        row = core.node_record_by_id(node_id, lock=" FOR NO KEY UPDATE")
        if row is None or row.status != "running" or row.removed_in is None:
            return
        if row.lease_until is not None and row.lease_until > now:
            return
        core.update_node(node_id, {"status": "abandoned", "finished_at": now, "lease_token": None,
                                   "lease_until": None, "version": Inc(1)})
        budget_clock.settle(core.db, task_id, now, agent_write=True)
        core.journal(task_id, row.key, worker, f"{row.key} abandoned: plan v{row.removed_in} removed it and its lease expired",
                     NodeAbandoned(removed_in=row.removed_in, previous_owner=row.lease_owner), at=now)
        core.maybe_complete_task(task_id, now)


# ---------------------------------------------------------------------- reorder
def _check_reorder(core: LedgerCore, task_id: str, keys: list[str], removing: list[NodeRecord]) -> list[int]:
    if not keys:
        return []
    if len(set(keys)) != len(keys):
        raise Refused("reorder lists a node twice")
    gone = {r.key for r in removing}
    ids = []
    for key in keys:
        row = core.node_record_or_none(task_id, key)
        if row is None:
            raise NotFound(f"unknown node {key!r} in task {task_id!r}")
        if key in gone:
            raise Refused(f"node {key} is both removed and reordered")
        if row.status not in UNSTARTED:
            raise Refused(f"node {key} is {row.status}: reorder names work not started yet")
        ids.append(int(row.id))
    return ids


def _reorder(core: LedgerCore, task_id: str, listed: list[int]) -> list[str]:
    """Renumber positions so the listed nodes (and their unfinished ancestors) come as early as
    their dependencies allow, in the listed order; returns the keys whose position moved."""
    nodes = {i: (k, p, s) for i, k, p, s in sql.fetch_all(
        core.db, "SELECT id, key, position, status FROM node WHERE task_id = ? ORDER BY position", [task_id])}
    parents: dict[int, list[int]] = {}
    children: dict[int, list[int]] = {}
    for src, dst in sql.fetch_all(core.db, "SELECT src_id, dst_id FROM edge WHERE task_id = ?", [task_id]):
        parents.setdefault(dst, []).append(src)
        children.setdefault(src, []).append(dst)
    rank = {nid: i for i, nid in enumerate(listed)}
    prio: dict[int, int] = {}
    for i, nid in enumerate(listed):
        stack, seen = [nid], {nid}
        while stack:
            cur = stack.pop()
            if cur != nid and rank.get(cur, -1) > i:
                raise Refused(f"reorder puts {nodes[nid][0]} before {nodes[cur][0]}, but {nodes[nid][0]} depends "
                              f"on {nodes[cur][0]}")
            if nodes[cur][2] in UNSTARTED:
                prio[cur] = min(prio.get(cur, i), i)
            for p in parents.get(cur, ()):
                if p not in seen:
                    seen.add(p)
                    stack.append(p)

    def key(nid: int) -> tuple[int, int, int]:
        k, pos, status = nodes[nid]
        if status not in UNSTARTED:
            return (0, 0, pos)  # finished and running work keeps its place, first
        if nid in prio:
            return (1, prio[nid], pos)
        return (2, 0, pos)

    indegree = {nid: len(parents.get(nid, ())) for nid in nodes}
    heap = [(key(nid), nid) for nid, d in indegree.items() if d == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        _, nid = heapq.heappop(heap)
        order.append(nid)
        for c in children.get(nid, ()):
            indegree[c] -= 1
            if indegree[c] == 0:
                heapq.heappush(heap, (key(c), c))
    slots = sorted(p for _, p, _ in nodes.values())
    moved = [(nid, pos) for nid, pos in zip(order, slots) if nodes[nid][1] != pos]
    if moved:
        sql.execute_many(core.db, "UPDATE node SET position = ? WHERE id = ?", [(pos, nid) for nid, pos in moved])
    return [nodes[nid][0] for nid, _ in moved if nid in rank]


# ---------------------------------------------------------------------- reading versions
def _names(keys: Sequence[str]) -> str:
    return ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")


def _summary(diff: JsonMapping, fates: Sequence[JsonMapping]) -> str:
    parts = []
    for label in ("added", "removed", "reordered"):
        if diff[label]:
            parts.append(f"{len(diff[label])} {label}")
    if diff["narrowed"]:
        dropped = diff["narrowed"]["dropped"]
        parts.append(f"goal narrowed{' (dropped ' + ', '.join(dropped) + ')' if dropped else ''}")
    running = [f for f in fates if f["was"] == "running"]
    if running:
        parts.append(f"{len(running)} in flight {running[0]['fate'].split(';')[0]}")
    return ", ".join(parts) or "no change"


class VersionRecord(NamedTuple):
    """A ``plan_version`` row."""

    version: int
    at: float
    actor: str
    cause: str
    in_flight: str | None
    reason: str
    diff: JsonObject | None
    in_flight_nodes: JsonArray | None
    revision: int | None


def version_view(task_id: str, r: VersionRecord) -> PlanVersionView:
    diff = r.diff or {}
    return PlanVersionView(
        task_id=task_id, version=int(r.version), at=r.at, actor=r.actor, trigger=r.cause,
        in_flight=r.in_flight, reason=r.reason, added=tuple(diff.get("added") or ()),
        removed=tuple(diff.get("removed") or ()), reordered=tuple(diff.get("reordered") or ()),
        narrowed=diff.get("narrowed"), in_flight_nodes=tuple(r.in_flight_nodes or ()),
        revision=r.revision, dependents_kept=tuple(diff.get("dependents_kept") or ()))


def initial(core: LedgerCore, task: TaskRecord) -> PlanVersionView:
    """Version 1: the plan as first built (create_task, add_node(s), commits' next_nodes)."""
    return PlanVersionView(task_id=task.task_id, version=1, at=task.created_at, actor="", trigger="initial",
                           in_flight=None, reason="the plan as first built", revision=None)


def versions(core: LedgerCore, task_id: str) -> list[PlanVersionView]:
    """Every version of the task's plan, oldest first (version 1 is the plan as first built)."""
    with read_tx(core.db):
        task = core.task_record(task_id)
        found = sql.fetch_rows(core.db, VersionRecord, f"SELECT {sql.columns(VersionRecord)} FROM plan_version "
                                                       "WHERE task_id = ? ORDER BY version", [task_id])
    return [initial(core, task)] + [version_view(task_id, r) for r in found]


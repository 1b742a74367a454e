"""The repair loop: draft → verify → (not good enough) → draft again → verify again …,
and only a verified result goes on. A step whose check fails commits its verdict with
``repair=True``; the ledger counts the round against the task's ``max_repairs`` and sends the work
back, so nothing downstream of the failing check ever runs on it:

* **in place** (no ``next_nodes`` that depend on it): the nodes to run again — ``repair_from``, by
  default the node's direct dependencies (the draft it checked) — and everything downstream of
  them, the committing node included, go back to ``pending`` (running ones revoked, blocked ones'
  handoffs withdrawn, parked and abandoned ones kept), each with ``repair`` = ``{"round", "of",
  "by", "verdict", "at"}`` for its next claim (``Claim.inputs["repair"]``: the verdict to address).
  The committing node's verdict is kept as its output (and in the journal) until it commits again.
* **unrolled** (its ``next_nodes`` include nodes that depend on it, e.g. ``draft.r1`` →
  ``verify.r1``): the node succeeds with its verdict, the new nodes are added, and the nodes that
  already depended on it (a ``finalize`` declared up front) now depend on the new round's last
  nodes instead — they run on the verified result, never on the failing verdict.

**Budget.** A repair asked for when ``repair_count`` has reached ``max_repairs`` is not made: the
node fails (class ``conclusion``, its verdict kept as output) and the **task is marked failed** at
once, whatever else it has left. An operator may rewind the node (a retry) to go on. The commit
itself is not refused: its verdict is a fact, recorded.
"""

from __future__ import annotations

from typing import Sequence

from store.storage import sql
from store.clock import iso
from store.errors import Refused
from store.jsontypes import JsonObject
from store.storage.sql import Inc
from store.storage.tables import NodeRecord, TaskRecord
from store.views import NodeSpec
from store.storage import budget_clock
from store.storage.core import LedgerCore
from store.storage.events import Commit, NodeFailed, NodeRepair, TaskFailed

IN_PLACE = "in_place"
UNROLLED = "unrolled"
EXHAUSTED = "exhausted"


def mode(core: LedgerCore, task: TaskRecord, row: NodeRecord, next_nodes: Sequence[NodeSpec],
         repair_from: Sequence[str]) -> str:
    """How this repair commit goes (checked before anything is written; a bad ``repair_from`` is
    refused)."""
    key = row.key
    unrolled = [s for s in next_nodes if _descends(s, key, next_nodes)]
    if repair_from and unrolled:
        raise Refused("repair_from is for a repair in place: a repair with next_nodes that depend on "
                      f"{key} runs those instead")
    if repair_from:
        ancestors = _ancestor_keys(core, row.id)
        bad = [k for k in repair_from if k not in ancestors]
        if bad:
            raise Refused(f"repair_from {', '.join(map(repr, bad))}: not upstream of {key} "
                          "(a repair runs again what the checked result came from)")
    if task.repair_count >= task.max_repairs:
        return EXHAUSTED
    return UNROLLED if unrolled else IN_PLACE


def _descends(spec: NodeSpec, key: str, specs: Sequence[NodeSpec]) -> bool:
    """Whether a next_node depends (through other next_nodes) on the committing node ``key``."""
    by_key = {s.key: s for s in specs}
    todo, seen = [spec], set()
    while todo:
        s = todo.pop()
        if s.key in seen:
            continue
        seen.add(s.key)
        for d in s.deps:
            if d == key:
                return True
            if d in by_key:
                todo.append(by_key[d])
    return False


def _ancestor_keys(core: LedgerCore, node_id: int) -> set[str]:
    seed, param = sql.id_array(core.db, [node_id])
    return {k for (k,) in sql.fetch_all(
        core.db, f"WITH RECURSIVE up(id) AS ({seed} UNION SELECT e.src_id FROM edge e JOIN up u ON e.dst_id = u.id) "
                 "SELECT n.key FROM node n JOIN up ON n.id = up.id WHERE n.id <> ?", [param, node_id])}


def record(task: TaskRecord, row: NodeRecord, output: object, now: float) -> JsonObject:
    """What the reruns of a repair round are handed (``Claim.inputs["repair"]``)."""
    return {"round": int(task.repair_count) + 1, "of": int(task.max_repairs), "by": row.key,
            "verdict": output, "at": iso(now), "at_ts": now}


# ---------------------------------------------------------------------- in place
def in_place_fields(task: TaskRecord, row: NodeRecord, output: object, now: float) -> dict[str, object]:
    """The committing node's update: pending again, its verdict kept as output."""
    return dict(status="pending", lease_token=None, lease_until=None, finished_at=None, next_retry_at=None,
                claim_count=0, step_deadline=None, density=None, repair=record(task, row, output, now))


def in_place(core: LedgerCore, task: TaskRecord, row: NodeRecord, worker: str, output: object,
             repair_from: Sequence[str], attempt: int, done: Commit, now: float) -> int:
    """Send the round back (see the module docstring); returns the journal event id."""
    task_id, key = task.task_id, row.key
    starts = list(repair_from) or [k for (k,) in sql.fetch_all(
        core.db, "SELECT s.key FROM edge e JOIN node s ON s.id = e.src_id WHERE e.dst_id = ? ORDER BY s.position",
        [row.id])]
    ids = core.ids_for_keys(task_id, starts)
    seed, param = sql.id_array(core.db, [*ids.values(), row.id])
    closure = sql.fetch_all(
        core.db, f"WITH RECURSIVE down(id) AS ({seed} UNION SELECT e.dst_id FROM edge e JOIN down d ON e.src_id = d.id) "
                 "SELECT n.id, n.key, n.status FROM node n JOIN down ON n.id = down.id ORDER BY n.position", [param])
    again = record(task, row, output, now)
    reset, revoked, kept, waiting = [], [], [], []
    for node_id, k, status in closure:
        if node_id == row.id:
            continue  # the committing node: its own update (in_place_fields)
        if status == "pending":
            waiting.append(k)  # never ran on the rejected result: it just waits on
        elif status in ("succeeded", "failed", "running", "blocked"):
            core.update_node(node_id, dict(status="pending", lease_token=None, lease_until=None, finished_at=None,
                                           next_retry_at=None, claim_count=0, step_deadline=None, density=None,
                                           repair=again, version=Inc(1)))
            reset.append(k)
            if status == "running":
                revoked.append(k)
            if status == "blocked":
                sql.execute(core.db, "UPDATE handoff SET status = 'withdrawn', resolved_by = 'warden', resolved_at = ? "
                                     "WHERE node_id = ? AND status = 'open'", [now, node_id])
        else:
            kept.append(k)
    sql.execute(core.db, "UPDATE task SET repair_count = repair_count + 1 WHERE task_id = ?", [task_id])
    budget_clock.settle(core.db, task_id, now, agent_write=True)
    again_keys = [k for k in starts if k in ids]
    waits = [k for k in reset if k not in again_keys] + waiting
    return core.journal(task_id, key, worker,
                        f"{key} asks for repair round {again['round']} of {again['of']}: "
                        f"{', '.join(again_keys + [key]) if again_keys else key} run again"
                        + (f"; {', '.join(waits)} wait for it" if waits else ""),
                        NodeRepair(attempt=attempt, commit=done, repair=again["round"], max_repairs=again["of"], mode=IN_PLACE,
                                   again=again_keys, nodes=[key, *reset], reset=reset, revoked=revoked, kept=kept,
                                   waiting=waiting), at=now)


# ---------------------------------------------------------------------- unrolled
def rewire(core: LedgerCore, task_id: str, row: NodeRecord, next_nodes: Sequence[NodeSpec]) -> dict[str, list[str]]:
    """The nodes that depended on the failing node now depend on the repair round's last nodes
    (the next_nodes that descend from it and that no other next_node depends on). Returns
    ``{dependent: [its new dependencies]}``."""
    key = row.key
    round_keys = {s.key for s in next_nodes if _descends(s, key, next_nodes)}
    inner = {d for s in next_nodes if s.key in round_keys for d in s.deps}
    ends = [s.key for s in next_nodes if s.key in round_keys and s.key not in inner]
    dependents = [(i, k) for i, k in sql.fetch_all(
        core.db, "SELECT n.id, n.key FROM edge e JOIN node n ON n.id = e.dst_id WHERE e.src_id = ? "
                 "AND n.status IN ('pending', 'parked', 'blocked') ORDER BY n.position", [row.id])
        if k not in round_keys]
    if not dependents or not ends:
        return {}
    ids = core.ids_for_keys(task_id, ends)
    # a dependent upstream of a round's end would make a cycle: refused (nothing is written)
    upstream = set().union(*(_ancestor_keys(core, ids[e]) for e in ends))
    for _dep_id, dep_key in dependents:
        if dep_key in upstream:
            raise Refused(f"repair next_nodes depend on {dep_key}, which depends on {key}: a cycle")
    out: dict[str, list[str]] = {}
    for dep_id, dep_key in dependents:
        sql.execute(core.db, "DELETE FROM edge WHERE src_id = ? AND dst_id = ?", [row.id, dep_id])
        have = {s for (s,) in sql.fetch_all(core.db, "SELECT src_id FROM edge WHERE dst_id = ?", [dep_id])}
        new = [(task_id, ids[e], dep_id) for e in ends if ids[e] not in have]
        if new:
            sql.execute_many(core.db, "INSERT INTO edge (task_id, src_id, dst_id) VALUES (?, ?, ?)", new)
        core.update_node(dep_id, {"version": Inc(1)})
        out[dep_key] = list(ends)
    core.bump_task(task_id, {})  # the graph's shape changed
    return out


# ---------------------------------------------------------------------- the budget spent
def exhausted_fields(task: TaskRecord, now: float) -> dict[str, object]:
    """The committing node's update when the repair budget is spent: failed, verdict kept."""
    return dict(status="failed", failure_class="conclusion", lease_token=None, lease_until=None, finished_at=now,
                step_deadline=None, density=None,
                error=(f"repair budget exhausted ({task.repair_count}/{task.max_repairs} rounds): the result still "
                       "fails its check; the task is failed — a person decides (rewind this node to try again)"))


def exhaust(core: LedgerCore, task: TaskRecord, row: NodeRecord, worker: str,
            attempt: int, done: Commit, now: float) -> int:
    """Journal the refused round and mark the task failed; returns the node's event id."""
    task_id, key = task.task_id, row.key
    event_id = core.journal(task_id, key, worker,
                            f"{key} failed: repair budget exhausted ({task.repair_count}/{task.max_repairs}); "
                            "its result still fails its check",
                            NodeFailed(attempt=attempt, commit=done, repair_refused=True, repair_count=task.repair_count,
                                       max_repairs=task.max_repairs, failure_class="conclusion", retry=False), at=now)
    if task.status == "active":
        core.bump_task(task_id, {"status": "failed", "finished_at": now})
        budget_clock.settle(core.db, task_id, now)
        core.journal(task_id, None, "warden",
                     f"task {task_id} failed: repair budget exhausted ({task.repair_count}/{task.max_repairs}) "
                     f"at {key}", TaskFailed(node=key, repair_count=task.repair_count, max_repairs=task.max_repairs),
                     at=now)
    return event_id

"""Claiming ready work: find a ready node, take its lease, hand the agent its inputs.

Ready: pending, every dependency succeeded or abandoned, ``next_retry_at`` passed, task active.
A running node whose lease has expired (``lease_until <= now``) is reclaimed first. On PostgreSQL
claims take ``FOR NO KEY UPDATE ... SKIP LOCKED`` on the node and only KEY SHARE on the task row,
so claims of different nodes of one task proceed concurrently.

Admission (docs/estimates.md "Admission by estimate"): under a token or wall cap a pending node
whose ``est_tokens`` × 1.2 or ``est_wall_s`` × 1.5 exceeds what is left is passed over (the
``budget_insufficient`` signal names it); ``always_admit`` nodes — the closing steps — are
admitted on the budget gate alone, at any gate — the closing whitelist admits them
even past ``stop``. An aborted task offers only its compensation nodes, whatever its budget. A
claim whose ``workflow_version`` is not the task's gets None — a claim naming none only takes tasks
created without one — journalled once per (task, worker, version) per open ledger.

The seed rules held here (docs/agents.md "Rules the ledger holds"): an expired node whose work
cannot safely run twice is never reclaimed (``store/ledger/unsafe.py`` fails it and asks a human,
in its own transaction); a task with a node on cost-density ``hold`` dispatches nothing new
(``store/ledger/cost.py``); a claim with ``max_step_s`` records its step deadline, past which the
lease is never extended and every write is refused (``fenced.fence``).

A take-back is a renewal, not a new attempt: a worker that takes back by key its own lapsed claim
(``renew`` = that claim's lease token, still the node's: nobody claimed it since) gets the same
attempt under a new lease — no claim spent from ``max_claims``, the attempt's heartbeat figures
kept, the step deadline unchanged; journalled as a ``node.heartbeat`` with ``lapsed_s``. The token
is the compare-and-set: a claim in between changed it, and then the take-back is an ordinary claim.
"""

from __future__ import annotations

from dataclasses import replace

import secrets
from functools import partial
from typing import Callable, Mapping, NamedTuple, Sequence

from store.judges import budget as budget_mod
from store.storage import checkpoints
from store.storage import sql
from store.clock import iso
from store.storage.db import read_tx, register_result, retry_write, run_read, write_tx
from store.errors import NotFound, Refused
from store.jsontypes import JsonMapping, JsonObject
from store.mind import recall, replan
from store.storage.sql import Inc
from store.storage.tables import NodeRecord, TaskRecord
from store.views import Claim
from store.ledger import compensation, cost, quotas, unsafe
from store.storage import budget_clock
from store.storage.core import LedgerCore, digest_json
from store.ledger.observe import ATTEMPT_RESET
from store.storage import rows
from store.storage.rows import wall_used
from store.storage.events import NodeClaimed, NodeFailed, NodeHeartbeat, VersionMismatch

CLAIM_ROUNDS = 1000  # each round either claims, fails an over-claimed node, or ends
QUOTA_PASSES = 100  # ready nodes one round passes over when their quota filled since its first look


def admit(core: LedgerCore, task_id: str, node_key: str) -> str:
    """The budget governor for one node: ``admit | admit_degraded | deny_hard``."""
    with read_tx(core.db):
        task = core.task_record(task_id)
        node = core.node_record(task_id, node_key)
    return budget_mod.admit(core.task_gate(task, core.now()), bool(node.always_admit))


def claim(core: LedgerCore, task_id: str | None, worker: str, lease_s: float,
          kinds: Sequence[str] | None, key: str | None = None, workflow_version: str | None = None,
          max_step_s: float | None = None, renew: str | None = None) -> Claim | None:
    """Claim a ready node of ``task_id`` (or of any active task when None), or None.

    With ``key`` only that node is considered: it is claimed when it is ready (or running with an
    expired lease), otherwise None; an unknown key raises NotFound. ``renew`` (with ``key``): the
    token of the worker's own lapsed claim of that node, renewed when it is still the node's."""
    if not worker:
        raise Refused("a claim needs a worker name")
    if lease_s <= 0:
        raise Refused("lease_s must be positive")
    if key is not None:
        if task_id is None:
            raise Refused("claim(key=...) needs the task id (a key names a node within one task)")
        if core.node_record_or_none(task_id, key) is None:
            core.task_record(task_id)  # an unknown task says so first
            raise NotFound(f"unknown node {key!r} in task {task_id!r}")
    if max_step_s is not None and max_step_s <= 0:
        raise Refused("max_step_s must be positive")
    if renew is not None and key is None:
        raise Refused("claim(renew=...) needs the node's key")
    # A worker that names no version knows none: it only takes tasks created without one.
    version = "" if workflow_version is None else str(workflow_version)
    if task_id is not None and _wrong_version(core, task_id, worker, version):
        return None
    step = None if max_step_s is None else float(max_step_s)
    for _ in range(CLAIM_ROUNDS):
        result = _claim_round(core, task_id, worker, float(lease_s), kinds, key, version, step, renew)
        if isinstance(result, _Judge):  # a node to settle in its own transaction first, then go again
            _SETTLE[result.why](core, result.task_id, result.node_id, worker)
            continue
        return result
    return None


class _Judge(NamedTuple):
    """A claim round met a node it must not hand out: over its ``max_claims``, expired with work
    that cannot safely run twice (``unsafe``), or expired after a replan removed it (``removed``)."""

    why: str
    task_id: str
    node_id: int


register_result("claim_judge", _Judge, lambda j: list(j), lambda data, _args, _kwargs: _Judge(*data))


def _wrong_version(core: LedgerCore, task_id: str, worker: str, version: str) -> bool:
    """True when the task runs another workflow version than the worker's: journalled the first
    time this open ledger sees that (task, worker, version), not on every poll."""
    have = run_read(core.db, lambda: core.task_record(task_id).workflow_version)
    if have == version:
        return False
    seen = (task_id, worker, version)
    if seen not in core.version_refusals:
        _journal_version(core, task_id, worker, version, have or "")
        core.version_refusals.add(seen)
    return True


@retry_write
def _journal_version(core: LedgerCore, task_id: str, worker: str, version: str, have: str) -> None:
    with write_tx(core.db):
        core.journal(task_id, None, worker,
                     f"{worker} runs workflow version {version or '(none)'}, task {task_id} is version "
                     f"{have or '(none)'}: nothing claimed",
                     VersionMismatch(worker=worker, workflow_version=version, task_workflow_version=have))


def _task_ids(core: LedgerCore, kinds: Sequence[str] | None, version: str, now: float) -> list[str]:
    """The tasks a claim without a task looks at: the active ones of ``version`` ("" for a claim
    naming none) that
    have something to claim now — a running node whose lease expired, or a pending node past its
    retry time whose dependencies are all done (of ``kinds`` when given) — oldest first; then, only
    when ``kinds`` asks for compensations, aborted ones with compensations to run.

    One statement, not a look at each active task in turn: past 490 active tasks with nothing ready,
    that took 1.6-2.8 s on PostgreSQL (three round trips a task) and held SQLite's write lock
    120-200 ms (a fleet of 500 tasks). Budgets and admission are still judged task by
    task (``_claim_round``) on these candidates only."""
    kind = f" AND n.kind IN ({sql.marks(len(kinds))})" if kinds else ""
    kind_params = list(kinds) if kinds else []
    ids = [r[0] for r in sql.fetch_all(
        core.db,
        "SELECT t.task_id FROM task t WHERE t.status = 'active' AND t.workflow_version = ? AND ("
        f"EXISTS (SELECT 1 FROM node n WHERE n.task_id = t.task_id AND n.status = 'running' AND n.lease_until <= ?{kind}) "
        f"OR EXISTS (SELECT 1 FROM node n WHERE n.task_id = t.task_id AND n.status = 'pending'{kind} "
        "AND (n.next_retry_at IS NULL OR n.next_retry_at <= ?) "
        "AND NOT EXISTS (SELECT 1 FROM edge e JOIN node d ON d.id = e.src_id "
        "WHERE e.dst_id = n.id AND d.status NOT IN ('succeeded', 'abandoned')))) ORDER BY t.created_at, t.task_id",
        [version, now, *kind_params, *kind_params, now])]
    if kinds and compensation.KIND in kinds:
        ids += compensation.tasks_compensating(core, version)
    return ids


@retry_write
def _claim_round(core: LedgerCore, task_id: str | None, worker: str, lease_s: float,
                 kinds: Sequence[str] | None, key: str | None = None,
                 version: str = "", max_step_s: float | None = None,
                 renew: str | None = None) -> Claim | _Judge | None:
    """One write transaction: a Claim, None, or a node to settle first (:class:`_Judge`)."""
    with write_tx(core.db):
        now = core.now()
        if task_id is not None:
            task_ids = [task_id]  # an unknown task: NotFound from its locked read below
        else:
            task_ids = _task_ids(core, kinds, version, now)
        for tid in task_ids:
            # KEY SHARE: claims of one task never wait for each other; an operator action (FOR
            # UPDATE) waits for this claim to commit, and a claim behind it sees its result.
            task = core.task_record(tid, lock="share")
            if (task.workflow_version or "") != version:
                continue
            if task.status == "aborted":  # only its compensations, whatever the budget
                if kinds and compensation.KIND not in kinds:
                    continue
                full = quotas.full_names(core, tid, now)
                finder = partial(_find_claimable, core, tid, now, False, [compensation.KIND], key, worker, None, full)
                gate = "ok"
            elif task.status != "active":
                continue
            else:
                if cost.holding(core, tid, now):  # a node on cost-density hold: nothing new is dispatched
                    continue
                gate = core.task_gate(task, now)
                fit = budget_mod.left(task.tokens_used, task.token_cap, wall_used(task, now), task.wall_cap_s)
                # past the hard gate (stop included) only the closing whitelist: always_admit nodes;
                # a node drawing on a full quota waits (store/ledger/quotas.py)
                full = quotas.full_names(core, tid, now)
                finder = partial(_find_claimable, core, tid, now, gate in ("hard", "stop"), kinds, key, worker, fit,
                                 full)
            row = finder([])
            if row is None:
                continue
            if _renewable(core, row, worker, renew, now):
                why = _not_handed_out(core, task, row, renewal=True)
                if why is not None:
                    return _Judge(why, tid, row.id)
                return _renew(core, task, row, worker, lease_s, now, gate)
            why = _not_handed_out(core, task, row)
            if why is not None:
                return _Judge(why, tid, row.id)
            token = secrets.token_hex(16)
            drawn = quotas.draw(core, tid, row.id, token, now)
            passed: list[int] = []
            while drawn is None and len(passed) < QUOTA_PASSES:  # its quota filled since the first look
                passed.append(row.id)
                row = finder(passed)
                if row is None:
                    break
                why = _not_handed_out(core, task, row)
                if why is not None:
                    return _Judge(why, tid, row.id)
                drawn = quotas.draw(core, tid, row.id, token, now)
            if row is None or drawn is None:
                continue
            return _take(core, task, row, worker, lease_s, now, gate, max_step_s, token, [u.name for u in drawn])
        return None


def _not_handed_out(core: LedgerCore, task: TaskRecord, row: NodeRecord, renewal: bool = False) -> str | None:
    """Why a claimable node must be settled instead of handed out (a :data:`_SETTLE` key), or None:
    expired after a replan removed it, expired with work that cannot safely run twice, or over
    its ``max_claims`` (a renewal spends no claim: never that)."""
    if row.status == "running" and row.removed_in is not None:
        return "removed"
    if row.status == "running" and unsafe.unsafe_to_reclaim(core, row):
        return "unsafe"
    if renewal:
        return None
    limit = row.max_claims if row.max_claims is not None else task.max_claims
    if limit is not None and row.claim_count >= limit:
        return "max_claims"
    return None


def _find_claimable(core: LedgerCore, task_id: str, now: float, only_admit: bool,
                    kinds: Sequence[str] | None, key: str | None = None, worker: str = "",
                    fit: tuple[float | None, float | None] | None = None, full: Sequence[str] = (),
                    passed: Sequence[int] = ()) -> NodeRecord | None:
    """The next claimable node: an expired lease first, else the first ready pending node (under
    ``fit`` = (tokens left, wall seconds left), one whose estimate fits or that is always_admit);
    none drawing on a ``full`` quota, none of the ``passed`` ids."""
    extra = ""
    params: list[object] = []
    if full:
        extra += (" AND NOT EXISTS (SELECT 1 FROM node_quota q WHERE q.node_id = n.id "
                  f"AND q.name IN ({sql.marks(len(full))}))")
        params.extend(full)
    if passed:
        extra += f" AND n.id NOT IN ({sql.marks(len(passed))})"
        params.extend(passed)
    held = ""
    held_params: list[object] = []
    if key is not None:
        extra += " AND n.key = ?"
        params.append(key)
        # A key claim also counts a dependency running under this worker's own live lease as met:
        # a framework driving a loop holds the loop's nodes while it goes round.
        held = " AND NOT (d.status = 'running' AND d.lease_owner = ? AND d.lease_until > ?)"
        held_params = [worker, now]
    if only_admit:
        extra += f" AND n.always_admit = {sql.true(core.db)}"
    if kinds:
        extra += f" AND n.kind IN ({sql.marks(len(kinds))})"
        params.extend(kinds)
    elif key is None:  # an alignment check is answered only by a claim that asks for it (store/mind/alignment.py)
        extra += " AND n.kind <> ?"
        params.append(recall.ALIGNMENT)
    admit = ""
    admit_params: list[object] = []
    for column, margin, room in (("est_tokens", budget_mod.TOKEN_MARGIN, fit and fit[0]),
                                 ("est_wall_s", budget_mod.WALL_MARGIN, fit and fit[1])):
        if fit is not None and room is not None and not only_admit:
            admit += (f" AND (n.always_admit = {sql.true(core.db)} OR n.{column} IS NULL "
                      f"OR n.{column} * {margin} <= ?)")
            admit_params.append(float(room))
    # NO KEY UPDATE, not UPDATE: foreign-key checks (KEY SHARE) of concurrent inserts that
    # reference this node must not wait for a claim.
    lock = sql.lock(core.db, " FOR NO KEY UPDATE OF n SKIP LOCKED")
    # Reclaim first: a running node whose lease expired has been waited on longest.
    r = sql.execute(core.db, "SELECT n.id FROM node n WHERE n.task_id = ? AND n.status = 'running' "
                             f"AND n.lease_until <= ?{extra} ORDER BY n.position LIMIT 1{lock}",
                    [task_id, now, *params]).fetchone()
    if r is None:
        r = sql.execute(core.db, "SELECT n.id FROM node n WHERE n.task_id = ? AND n.status = 'pending' "
                                 f"AND (n.next_retry_at IS NULL OR n.next_retry_at <= ?){extra}{admit} "
                                 "AND NOT EXISTS (SELECT 1 FROM edge e JOIN node d ON d.id = e.src_id "
                                 f"WHERE e.dst_id = n.id AND d.status NOT IN ('succeeded', 'abandoned'){held}) "
                                 f"ORDER BY n.position LIMIT 1{lock}",
                        [task_id, now, *params, *admit_params, *held_params]).fetchone()
    if r is None:
        return None
    return core.node_record_by_id(r[0])


@retry_write
def _fail_over_claimed(core: LedgerCore, task_id: str, node_id: int, worker: str) -> None:
    """Fail a node claimed ``max_claims`` times, in its own transaction taking the task row
    before the node (a claim holds only KEY SHARE on the task; failing may fail the task)."""
    with write_tx(core.db):
        now = core.now()
        task = core.task_record(task_id, lock="update")
        row = core.node_record_by_id(node_id, lock=" FOR NO KEY UPDATE")
        if row is None or row.status not in ("pending", "running"):
            return
        if row.status == "running" and (row.lease_until is None or row.lease_until > now):
            return  # somebody holds it
        limit = row.max_claims if row.max_claims is not None else task.max_claims
        if limit is None or row.claim_count < limit:
            return
        err = f"claimed {row.claim_count} times, the limit is {limit}: not claimed again"
        core.update_node(row.id, dict(
            status="failed", failure_class=row.failure_class or "transient", retryable=False, error=err,
            lease_owner=None, lease_token=None, lease_until=None, finished_at=now, version=Inc(1),
        ))
        budget_clock.settle(core.db, task.task_id, now, agent_write=True)
        core.journal(task.task_id, row.key, worker, f"{row.key} failed: max claims reached",
                     NodeFailed(error=err, max_claims=limit), layer="system")
        core.maybe_fail_task(task.task_id, now)


# How each node a claim round will not hand out is settled, in its own write transaction (the task
# row before the node's: a claim holds only KEY SHARE on the task, and settling may fail the task).
_SETTLE: dict[str, Callable[[LedgerCore, str, int, str], object]] = {
    "removed": replan.end_removed,  # abandoned, not reclaimed (store/mind/replan.py)
    "unsafe": unsafe.fail_unsafe,  # failed, a human asked (store/ledger/unsafe.py)
    "max_claims": _fail_over_claimed,
}


def _renewable(core: LedgerCore, row: NodeRecord, worker: str, renew: str | None, now: float) -> bool:
    """Is this claim round's node the worker's own lapsed claim (``renew``: its token), nobody
    having claimed it since, within its step deadline, still holding its draw on each quota it
    draws on (a lapsed draw may have been given to another node: then it is an ordinary claim)?"""
    if not (renew is not None and row.status == "running" and row.lease_token == renew
            and row.lease_owner == worker and (row.step_deadline is None or row.step_deadline > now)):
        return False
    names = quotas.node_quota_names(core, row.id)
    held = sql.scalar(core.db, "SELECT COUNT(DISTINCT name) FROM quota_draw WHERE node_id = ? AND token = ?",
                      [row.id, renew]) if names else 0
    return int(held or 0) >= len(names)


def _renew(core: LedgerCore, task: TaskRecord, row: NodeRecord, worker: str, lease_s: float,
           now: float, gate: str) -> Claim:
    """The worker's own lapsed lease taken back: the same attempt under a new token."""
    token = secrets.token_hex(16)
    until = now + lease_s if row.step_deadline is None else min(now + lease_s, row.step_deadline)
    n = core.update_node(row.id, dict(lease_token=token, lease_until=until, heartbeat_at=now, version=Inc(1)),
                         " AND version = ? AND lease_token = ? AND status = 'running'", [row.version, row.lease_token])
    if n != 1:  # cannot happen under the write lock; refuse rather than hand out a lease twice
        raise RuntimeError("take-back lost its row under the write lock")
    # its quota draws move to the new token (a window's draw keeps its time: no unit spent again)
    sql.execute(core.db, "UPDATE quota_draw SET token = ? WHERE node_id = ? AND token = ?", [token, row.id, row.lease_token])
    lapsed = max(0.0, now - (row.lease_until or now))
    core.journal(task.task_id, row.key, worker,
                 f"{row.key} taken back by {worker} {lapsed:.1f}s after its lease lapsed "
                 f"(attempt {row.attempt} goes on)", NodeHeartbeat(lease_until=until, lapsed_s=lapsed))
    inputs = _claim_inputs(core, task, replace(row, attempt=int(row.attempt) - 1))
    return Claim(
        task_id=task.task_id, node_key=row.key, kind=row.kind, worker=worker, token=token,
        attempt=int(row.attempt), lease_until=until, inputs=inputs,
        admission=budget_mod.admit(gate, bool(row.always_admit)), lease_s=lease_s, step_deadline=row.step_deadline,
    )


def _take(core: LedgerCore, task: TaskRecord, row: NodeRecord, worker: str, lease_s: float,
          now: float, gate: str, max_step_s: float | None, token: str, drawn: Sequence[str]) -> Claim:
    # The step's deadline: the lease never reaches past it, and every write after it is
    # refused (fenced.fence), however diligently the step heartbeats.
    deadline = None if max_step_s is None else now + max_step_s
    until = now + lease_s if deadline is None else min(now + lease_s, deadline)
    reclaim = row.status == "running"
    attempt = int(row.attempt) + 1
    inputs = _claim_inputs(core, task, row)
    input_digest = digest_json({"task": task.inputs, "deps": {k: v.get("digest") for k, v in inputs["deps"].items()}})
    budget_clock.claim_lock(core.db, task.task_id)
    n = core.update_node(row.id, dict(
        status="running", lease_owner=worker, lease_token=token, lease_until=until,
        heartbeat_at=now, claimed_at=now, claim_count=Inc(1), attempt=attempt,
        input_digest=input_digest, started_at=row.started_at if row.started_at is not None else now,
        next_retry_at=None, version=Inc(1), step_deadline=deadline, density=None, **ATTEMPT_RESET,
    ), " AND version = ?", [row.version])
    if n != 1:  # cannot happen under the write lock; refuse rather than double-claim
        raise RuntimeError("claim lost its row under the write lock")
    checkpoints.reach("claim.locked", task.task_id, row.key)
    # No write to the task row on a claim (it would serialise every claim of the task): the
    # task's claim count is the sum of its nodes' attempts; only the first claim stamps
    # started_at (later claims match no row and take no lock).
    if task.started_at is None:
        sql.execute(core.db, "UPDATE task SET started_at = ? WHERE task_id = ? AND started_at IS NULL",
                    [now, task.task_id])
    budget_clock.end_on_claim(core.db, task, now)  # a clock stopped while the task waited runs again
    core.journal(task.task_id, row.key, worker,
                 f"{row.key} claimed by {worker} (attempt {attempt}){' after lease expiry' if reclaim else ''}",
                 NodeClaimed(worker=worker, attempt=attempt, lease_until=until, reclaimed=reclaim,
                             step_deadline=deadline, max_step_s=None if deadline is None else max_step_s,
                             previous_owner=row.lease_owner if reclaim else None, quotas=list(drawn) or None))
    return Claim(
        task_id=task.task_id, node_key=row.key, kind=row.kind, worker=worker, token=token,
        attempt=attempt, lease_until=until, inputs=inputs,
        admission=budget_mod.admit(gate, bool(row.always_admit)), lease_s=lease_s, step_deadline=deadline,
    )


class _Resolved(NamedTuple):
    """The node's latest resolved handoff (``Claim.inputs["resolution"]``)."""

    id: int
    kind: str
    question: str
    resolution_option: str | None
    resolution_answer: str | None
    resolved_by: str | None
    resolved_at: float | None


def _claim_inputs(core: LedgerCore, task: TaskRecord, row: NodeRecord) -> JsonObject:
    """The task inputs, the dependencies' outputs, the rejections and the latest resolution."""
    deps = {}
    dep_ids: list[int] = []
    for dep_id, key, output, ref, dig, status, finished in sql.fetch_all(
            core.db, "SELECT s.id, s.key, s.output, s.output_ref, s.output_digest, s.status, s.finished_at FROM edge e "
                     "JOIN node s ON s.id = e.src_id WHERE e.dst_id = ? ORDER BY s.position", [row.id]):
        dep_ids.append(dep_id)
        deps[key] = {
            "output": sql.json_value(output),
            "output_ref": ref, "digest": dig, "status": status,
            # when the output was committed: how old what this step reads is
            "committed_at": iso(finished) if status == "succeeded" else None,
        }
    h = sql.fetch_row(core.db, _Resolved, f"SELECT {sql.columns(_Resolved)} FROM handoff WHERE node_id = ? "
                                          "AND status = 'resolved' ORDER BY id DESC LIMIT 1", [row.id])
    resolution = None
    if h is not None:
        resolution = {
            "handoff": str(h.id), "status": "resolved", "kind": h.kind, "question": h.question,
            "option": h.resolution_option, "answer": h.resolution_answer,
            "by": h.resolved_by, "at": iso(h.resolved_at), "at_ts": h.resolved_at,
        }
    out = {
        "task": task.inputs,
        "constraints": list(task.constraints or []),
        "preconditions": dict(task.preconditions or {}),
        "node_preconditions": dict(row.preconditions or {}),
        "deps": deps,
        # the reasons of the rewinds that reset it: stored once, as rejected paths (``memory``'s
        # ``rejected`` hands them too, with the rest of its rejected paths)
        "rejections": list(rows.rejections(row.rejections, core.rejection_reasons([row.rejections]))),
        "resolution": resolution,
        "attempt": int(row.attempt) + 1,
        "repair": row.repair,
        "memory": recall.memory_inputs(core, task, row, dep_ids),  # the task's mind (store/mind/recall.py)
    }
    if row.kind == recall.ALIGNMENT:
        out["alignment"] = recall.alignment_inputs(core, task, row)
    if row.kind == compensation.KIND:
        out["effect"] = compensation.effect_for_node(core, row.id)
    return out


# ---------------------------------------------------------------------- a claim's record
# A claim whose COMMIT answer was lost (PostgreSQL) is returned from its request record: the lease
# it took (token and all), its inputs read again from the ledger as they were handed out.
def _claim_record(c: Claim) -> JsonObject:
    return {"task_id": c.task_id, "node_key": c.node_key, "kind": c.kind, "worker": c.worker, "token": c.token,
            "attempt": c.attempt, "lease_until": c.lease_until, "admission": c.admission, "lease_s": c.lease_s,
            "step_deadline": c.step_deadline}


def _claim_replayed(data: JsonMapping, args: tuple[object, ...], kwargs: Mapping[str, object]) -> Claim:
    core = args[0]
    if not isinstance(core, LedgerCore):
        raise TypeError(f"claim was given {type(core).__name__}, not a LedgerCore")
    with read_tx(core.db):
        task = core.task_record(data["task_id"])
        row = core.node_record(data["task_id"], data["node_key"])
    row = replace(row, attempt=int(data["attempt"]) - 1)  # the inputs as they were when it was claimed
    return Claim(inputs=_claim_inputs(core, task, row), **data)


register_result("claim", Claim, _claim_record, _claim_replayed)

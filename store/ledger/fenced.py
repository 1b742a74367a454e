"""The agent's writes under its lease: heartbeat, commit, fail, request_human, effects, notes.

Every one is a compare-and-set on (node, lease token, status running, ``lease_until > now``)
judged with the injected clock at write time (:func:`fence`, :func:`cas_update`); when it does not
match, ``LeaseLost`` is raised and nothing is written. Lock order on PostgreSQL: the task row,
then the node row, then the journal's advisory lock.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, NamedTuple, Sequence, TypedDict

from store.storage import checkpoints, sql
from store.ledger import checkpoint
from store.judges import novelty
from store.judges import density as density_rule
from store.storage.db import retry_write, write_tx
from store.errors import LeaseLost, Refused, WardenError
from store.clock import iso
from store.jsontypes import JsonMapping
from store.storage.models import FAILURE_CLASSES, HANDOFF_KINDS, Artifact, Effect, Handoff, dumps
from store.storage.sql import Inc
from store.storage.tables import NodeRecord, TaskRecord
from store.views import Claim, NodeSpec, Pulse
from store.parks import wake
from store.mind import alignment as mind_alignment
from store.mind import record as mind_record
from store.mind import state as mind_state
from store.ledger import compensation as compensations
from store.ledger import confirm, cost, lost
from store.storage import budget_clock
from store.ledger import repair as repairs
from store.ledger.build import add_nodes_tx
from store.ledger import norms, observe, stall
from store.storage.core import NODE_COLUMNS, LedgerCore, digest_json, retry_delay, sha256_hex
from store.ledger.observe import OBSERVATION_TEXT_CAP  # noqa: F401  (its old home)
from store.storage.events import (ArtifactJson, Commit, ConfirmedBy, EffectConfirmed, EffectIntended, GraphRewired, HandoffOpened, NodeCommitted,
                      NodeDiscarded, NodeFailed, NodeNote)
OUTPUT_CAP = 64 * 1024
ARTIFACT_INLINE_CAP = 64 * 1024 * 1024
COMMIT_ARGS = frozenset({"output", "output_ref", "tokens", "artifact", "units_done", "next_nodes", "repair",
                         "summary", "repair_from"})


class CommitArgs(TypedDict, total=False):
    """One step's :func:`commit` arguments in a group commit (``Ledger.commit_many``)."""

    output: object
    output_ref: str | None
    tokens: float | None
    artifact: tuple[str, bytes] | None
    units_done: float | None
    next_nodes: Sequence[NodeSpec]
    repair: bool
    summary: str | None
    repair_from: Sequence[str] | None


# ---------------------------------------------------------------------- the fence
def fence(core: LedgerCore, claim: Claim, now: float, *, lock: bool = False) -> NodeRecord:
    """Inside a write transaction: the node row if the claim still holds, else LeaseLost.

    Writes that end in a compare-and-set on the node (heartbeat, commit, fail, request_human)
    need no lock here. Writes that do not update the node (intend/confirm effect, note) pass
    ``lock=True``: on PostgreSQL the node row is then held (NO KEY UPDATE) until commit, so an
    operator's revocation cannot slip in between this check and the commit (SQLite's
    BEGIN IMMEDIATE already excludes it)."""
    clause = sql.lock(core.db, " FOR NO KEY UPDATE") if lock else ""
    row = sql.fetch_row(core.db, NodeRecord, f"SELECT {NODE_COLUMNS} FROM node WHERE task_id = ? AND key = ?{clause}",
                        [claim.task_id, claim.node_key])
    if row is None:
        raise LeaseLost(f"lease lost on {claim.task_id}/{claim.node_key}: the node no longer exists")
    if row.lease_token != claim.token or row.status != "running":
        status = sql.scalar(core.db, "SELECT status FROM task WHERE task_id = ?", [claim.task_id])
        why = lost.reason(core, row, claim, None if status is None else str(status), now)
        raise LeaseLost(f"lease lost on {claim.task_id}/{claim.node_key}: {why}")
    late = step_limit_why(row, now)
    if late:
        raise LeaseLost(f"lease lost on {claim.task_id}/{claim.node_key}: {late}")
    if row.lease_until is None or row.lease_until <= now:
        raise LeaseLost(
            f"lease lost on {claim.task_id}/{claim.node_key}: expired "
            f"{now - (row.lease_until or now):.1f}s ago; the node may be reclaimed"
        )
    return row


def step_limit_why(row: NodeRecord, now: float) -> str:
    """Why a write past the claim's step deadline (``claim(max_step_s=)``) is refused; "" while it
    has not come."""
    deadline = row.step_deadline
    if deadline is None or deadline > now:
        return ""
    limit = deadline - (row.claimed_at if row.claimed_at is not None else deadline)
    return (f"the step ran past its time limit of {limit:.0f}s (max_step_s; reached {now - deadline:.1f}s ago): "
            "its result is refused however it heartbeats; the node may be reclaimed")


def cas_update(core: LedgerCore, row: NodeRecord, claim: Claim, now: float, **fields: object) -> None:
    """Update the fenced node only while the claim still holds (checked by row count)."""
    n = core.update_node(row.id, fields, " AND lease_token = ? AND status = 'running' AND lease_until > ?",
                         [claim.token, now])
    if n != 1:
        # PostgreSQL (Read Committed): an operator action committed between our fence read and
        # this update; say what it did, as the fence would have.
        fence(core, claim, now)
        raise LeaseLost(f"lease lost on {claim.task_id}/{claim.node_key}: changed under the write")


def _add_tokens(core: LedgerCore, claim: Claim, tokens: float | None) -> int:
    t = int(tokens or 0)
    if t < 0:
        raise Refused("tokens must not be negative")
    if t:
        sql.execute(core.db, "UPDATE task SET tokens_used = tokens_used + ? WHERE task_id = ?", [t, claim.task_id])
    return t


# ---------------------------------------------------------------------- heartbeat
@retry_write
def heartbeat(core: LedgerCore, claim: Claim, *, units_done: float | None, units_total: float | None,
              tokens: float | None, observation: str | None, lease_s: float | None,
              waiting_on: str | None = None, wait_s: float | None = None, action: str | None = None,
              result: str | None = None, max_step_s: float | None = None) -> Pulse:
    """Extend the lease and record progress (see ``Ledger.heartbeat``)."""
    now = core.now()
    lease = float(lease_s or claim.lease_s)
    wait = observe.check_wait(waiting_on, wait_s)
    # what the report brings is judged before the write lock is taken (bounded, pure work and reads)
    report = observe.judge_report(core, claim.task_id, claim.node_key, claim.attempt,
                                  None if observation is None else str(observation),
                                  None if action is None else str(action), None if result is None else str(result),
                                  units_done)
    with write_tx(core.db):
        row = fence(core, claim, now)
        t = _add_tokens(core, claim, tokens)
        task = core.task_record(claim.task_id)  # after the tokens: the gate the Pulse says includes them
        parked = task.status == "parked"
        new_units = None
        until = _step_lease(row, claim, now, now + lease, max_step_s)
        fields: dict[str, object] = {"lease_until": until, "heartbeat_at": now}
        if max_step_s is not None:  # LeaseKeeper's limit: the ledger holds it from now on
            fields["step_deadline"] = _step_deadline(row, now, max_step_s)
        if t:
            fields["tokens_used"] = Inc(t)
        if units_done is not None:
            fields["units_done"] = float(units_done)
        if units_total is not None:
            fields["units_total"] = float(units_total)
        if report is not None:
            new_units = report.verdict.new_units
        beat = observe.beat_fields(row, now, units_done, wait, new_units,
                                   report is not None and report.prepared.text_progress)
        flags = observe.observation_flags(beat, parked, report)
        seen = None if report is None else observe.record_observation(core, row.id, claim.attempt, report, flags, now)
        judged = cost.judge(core, claim.task_id, *cost.after_beat(row, t, units_done, units_total), task=task)
        if judged.verdict == density_rule.ABORT:
            return _stopped(core, claim, row, judged, now, {**fields, **beat})
        if judged.verdict != (row.density or density_rule.CONTINUE):
            fields["density"] = None if judged.verdict == density_rule.CONTINUE else judged.verdict
            cost.journal_change(core, row, judged, claim.worker, now)
        cas_update(core, row, claim, now, **fields, **beat)
        summary = f"{claim.node_key} heartbeat"
        if report is not None:
            left_out = novelty.left_out(report.prepared)
            summary += f" (+{new_units} new" + (f"; {left_out})" if left_out else ")")
        if wait is not None:
            summary += f", waiting on {wait[0]}"
        payload = observe.beat_payload(row, beat, lease_until=until, units_done=units_done, units_total=units_total,
                                       tokens=t or None, report=report)
        core.journal(claim.task_id, claim.node_key, claim.worker, summary, payload, at=now, observation=seen)
    looped = None if parked else stall.judge_stall(core, stall.after_beat(row, now, beat), claim.worker)
    return Pulse(lease_until=until, parked=parked, new_units=new_units, gate=core.task_gate(task, now),
                 density=judged.verdict, stall=looped.kind if looped else None,
                 stall_evidence=looped.evidence if looped else None)


def _step_deadline(row: NodeRecord, now: float, max_step_s: float | None) -> float | None:
    """The step's deadline after this heartbeat: the claim's, or one ``max_step_s`` from the claim
    (LeaseKeeper's limit), whichever is earlier."""
    deadline = row.step_deadline
    if max_step_s is not None:
        limit = (row.claimed_at if row.claimed_at is not None else now) + float(max_step_s)
        deadline = limit if deadline is None else min(deadline, limit)
    return deadline


def _step_lease(row: NodeRecord, claim: Claim, now: float, until: float, max_step_s: float | None) -> float:
    """The lease a heartbeat gives: never past the step's deadline; at or past it, refused."""
    deadline = _step_deadline(row, now, max_step_s)
    if deadline is None:
        return until
    late = step_limit_why(replace(row, step_deadline=deadline), now)
    if late:
        raise LeaseLost(f"lease lost on {claim.task_id}/{claim.node_key}: {late}")
    return min(until, deadline)


def _stopped(core: LedgerCore, claim: Claim, row: NodeRecord, judged: density_rule.Judgement, now: float,
             beat: Mapping[str, object]) -> Pulse:
    """A heartbeat showing a cost density over 3 × the limit: the ledger stops the node (store/ledger/cost.py)."""
    task = core.task_record(claim.task_id, lock="update")  # the task row first (lock order): the task may fail
    keep = {k: v for k, v in beat.items() if k in ("tokens_used", "units_done", "units_total", "heartbeat_at")}
    cas_update(core, row, claim, now, **keep, **cost.abort_fields(row, judged, now))
    budget_clock.settle(core.db, claim.task_id, now, agent_write=True, task=task)
    cost.journal_change(core, row, judged, claim.worker, now)
    core.journal(claim.task_id, claim.node_key, "warden",
                 f"{claim.node_key} stopped by the ledger: cost density over {density_rule.ABORT_FACTOR:g}× its limit",
                 NodeFailed(error=f"stopped by the ledger for its cost density: {judged.evidence(claim.node_key)}",
                            failure_class="conclusion", retry=False, attempt=claim.attempt,
                            cost_density=judged.verdict), at=now, layer="system")
    core.maybe_fail_task(claim.task_id, now)
    return Pulse(lease_until=now, parked=task.status == "parked", gate=core.task_gate(task, now),
                 density=judged.verdict)


# ---------------------------------------------------------------------- commit
def prepare_commit(output: object, artifact: tuple[str, bytes] | None) -> tuple[str, bytes, str] | None:
    """Check a commit's payload before any transaction; returns (name, bytes, sha256) or None."""
    out_text = dumps(output)
    if len(out_text.encode("utf-8")) > OUTPUT_CAP:
        raise Refused(f"output is {len(out_text)} bytes, over {OUTPUT_CAP}: store it as an artifact")
    if artifact is None:
        return None
    name, data = artifact
    if not isinstance(data, (bytes, bytearray)):
        raise Refused("an artifact is (name, bytes)")
    if len(data) > ARTIFACT_INLINE_CAP:
        raise Refused("artifact over 64 MiB: keep it in the run directory and pass output_ref")
    return (str(name), bytes(data), sha256_hex(bytes(data)))


@retry_write
def commit(core: LedgerCore, claim: Claim, *, output: object, output_ref: str | None, tokens: float | None,
           artifact: tuple[str, bytes] | None, units_done: float | None, next_nodes: Sequence[NodeSpec],
           repair: bool, summary: str | None, repair_from: Sequence[str] = ()) -> int:
    """Record the step's result atomically (see ``Ledger.commit``). Returns the event id."""
    now = core.now()
    art = prepare_commit(output, artifact)
    with write_tx(core.db):
        return commit_tx(core, claim, now, output, output_ref, tokens, art, units_done, next_nodes, repair, summary,
                         repair_from)


@retry_write
def commit_many(core: LedgerCore, commits: Sequence[tuple[Claim, CommitArgs]]) -> list[int | WardenError]:
    """Several steps' commits in ONE write transaction (see ``Ledger.commit_many``)."""
    now = core.now()
    prepared = []
    for claim, kw in commits:
        bad = set(kw) - COMMIT_ARGS
        if bad:
            raise TypeError(f"commit_many: unknown commit arguments {sorted(bad)}")
        prepared.append((claim, kw, prepare_commit(kw.get("output"), kw.get("artifact"))))
    results: list[int | WardenError] = []
    with write_tx(core.db):
        for claim, kw, art in prepared:
            try:
                with core.db.atomic():  # a savepoint per step, inside the one IMMEDIATE transaction
                    results.append(commit_tx(
                        core, claim, now, kw.get("output"), kw.get("output_ref"), kw.get("tokens", 0), art,
                        kw.get("units_done"), kw.get("next_nodes", ()), kw.get("repair", False),
                        kw.get("summary"), kw.get("repair_from") or ()))
            except (LeaseLost, Refused) as e:
                results.append(e)
    return results


def commit_tx(core: LedgerCore, claim: Claim, now: float, output: object, output_ref: str | None,
              tokens: float | None, art: tuple[str, bytes, str] | None, units_done: float | None,
              next_nodes: Sequence[NodeSpec], repair: bool, summary: str | None,
              repair_from: Sequence[str] = ()) -> int:
    """One fenced commit inside the caller's write transaction. ``repair`` sends the work back
    (store/ledger/repair.py); the node's cost density decides whether its successors are
    dispatched (store/ledger/cost.py)."""
    task = core.task_record(claim.task_id, lock="update")  # the task row first (lock order)
    row = fence(core, claim, now)
    how = repairs.mode(core, task, row, next_nodes, repair_from) if repair else None
    if row.kind == mind_alignment.KIND:
        mind_alignment.check_output(output)  # an alignment check commits its verdict
    discard = row.removed_in is not None and row.removed_mode == "discard"  # a replan removed it (mind/replan.py)
    t = _add_tokens(core, claim, tokens)
    wall = now - (row.claimed_at or now)
    fields: dict[str, object] = dict(
        status="abandoned" if discard else "succeeded", output=output, output_ref=output_ref, output_digest=digest_json(output),
        lease_owner=row.lease_owner, lease_token=None, lease_until=None, finished_at=now,
        wall_used_s=Inc(wall), version=Inc(1), error=None, failure_class=None, repair=None,
    )
    if how == repairs.IN_PLACE:
        fields.update(repairs.in_place_fields(task, row, output, now))
    elif how == repairs.EXHAUSTED:
        fields.update(repairs.exhausted_fields(task, now))
    if t:
        fields["tokens_used"] = Inc(t)
    if units_done is not None:
        fields["units_done"] = float(units_done)
    cas_update(core, row, claim, now, **fields)
    if not discard and how != repairs.EXHAUSTED:
        norms.fold_commit(core, row, claim.worker)  # a healthy node of its kind: what is normal for it
    artifact = None
    if art is not None:
        core.bind(Artifact.insert(task=claim.task_id, node=row.id, attempt=claim.attempt, name=art[0],
                                  sha256=art[2], size=len(art[1]), content=art[1], ref=output_ref,
                                  at=now)).execute()
        artifact = ArtifactJson(name=art[0], sha256=art[2], bytes=len(art[1]))
    done = Commit(output_digest=digest_json(output), wall_s=round(wall, 3), output_ref=output_ref or None,
                  tokens=t or None, artifact=artifact)
    if how == repairs.EXHAUSTED:  # the round is not made: the node and the task fail
        budget_clock.settle(core.db, claim.task_id, now, agent_write=True, task=task)
        return repairs.exhaust(core, task, row, claim.worker, claim.attempt, done, now)
    if how == repairs.IN_PLACE:
        event_id = repairs.in_place(core, task, row, claim.worker, output, repair_from, claim.attempt, done, now)
        if next_nodes:
            add_nodes_tx(core, claim.task_id, list(next_nodes), actor=claim.worker)
        return event_id
    budget_clock.settle(core.db, claim.task_id, now, agent_write=True, task=task)
    unrolled = how == repairs.UNROLLED
    if unrolled:
        sql.execute(core.db, "UPDATE task SET repair_count = repair_count + 1 WHERE task_id = ?", [claim.task_id])
    round_ = task.repair_count + 1 if unrolled else None  # an unrolled round: its number, budget and mode
    budget = task.max_repairs if unrolled else None
    mode = repairs.UNROLLED if unrolled else None
    if discard:  # its result is kept for audit only: dependents do not get it, follow-ups are not added
        discarded = core.journal(claim.task_id, claim.node_key, claim.worker,
                                 f"{claim.node_key} finished; result discarded (plan v{row.removed_in} removed it)",
                                 NodeDiscarded(attempt=claim.attempt, commit=done, repair=round_, max_repairs=budget, mode=mode,
                                               removed_in=row.removed_in,
                                               next_nodes_dropped=[s.key for s in next_nodes]), at=now)
        core.maybe_complete_task(claim.task_id, now)
        return discarded
    event_id = core.journal(claim.task_id, claim.node_key, claim.worker,
                            summary or f"{claim.node_key} succeeded (attempt {claim.attempt})",
                            NodeCommitted(attempt=claim.attempt, commit=done, repair=round_, max_repairs=budget,
                                          mode=mode), at=now)
    if row.kind == compensations.KIND:
        compensations.on_commit(core, claim, row.id, now)
    if next_nodes:
        add_nodes_tx(core, claim.task_id, list(next_nodes), actor=claim.worker)
    if how == repairs.UNROLLED:
        rewired = repairs.rewire(core, claim.task_id, row, next_nodes)
        if rewired:
            core.journal(claim.task_id, claim.node_key, "warden",
                         f"repair round {task.repair_count + 1}: {', '.join(rewired)} now wait for "
                         f"{', '.join(next(iter(rewired.values())))} instead of {claim.node_key}",
                         GraphRewired(nodes=sorted(rewired), rewired=rewired, from_=claim.node_key), at=now)
    _successors_by_cost(core, claim, task, row, t, units_done, now)
    mind_state.on_commit(core, task, row, output, now, claim.worker)  # drift run, alignment checks
    core.maybe_complete_task(claim.task_id, now)
    if task.wake_state:
        wake.check_tx(core, claim.task_id, now)
    return event_id


def _successors_by_cost(core: LedgerCore, claim: Claim, task: TaskRecord, row: NodeRecord, t: int,
                        units_done: float | None, now: float) -> None:
    """A node committing over its cost-density limit (or still without progress) finishes, and its
    successors are parked (store/ledger/cost.py). ``task``: its row, read under the commit's lock."""
    judged = cost.judge(core, claim.task_id, *cost.after_beat(row, t, units_done, None), task=task)
    if judged.verdict == density_rule.CONTINUE:
        if row.density:
            cost.journal_change(core, row, judged, claim.worker, now)
        return
    if judged.verdict != density_rule.FINISH_NO_SUCCESSOR:
        judged = replace(judged, verdict=density_rule.FINISH_NO_SUCCESSOR)
    parked = cost.park_successors(core, row, judged, now)
    core.update_node(row.id, {"density": density_rule.FINISH_NO_SUCCESSOR})
    cost.journal_change(core, row, judged, claim.worker, now, parked)
    if parked:
        budget_clock.settle(core.db, claim.task_id, now, agent_write=True)


# ---------------------------------------------------------------------- fail
@retry_write
def fail(core: LedgerCore, claim: Claim, *, error: str, failure_class: str, retryable: bool | None,
         retry_after_s: float | None, tokens: float | None) -> int:
    """Record a failed step (see ``Ledger.fail``). Returns the event id."""
    if failure_class not in FAILURE_CLASSES:
        raise Refused(f"unknown failure class {failure_class!r}: one of {', '.join(FAILURE_CLASSES)}")
    now = core.now()
    with write_tx(core.db):
        task = core.task_record(claim.task_id, lock="update")  # the task row first (lock order)
        row = fence(core, claim, now)
        t = _add_tokens(core, claim, tokens)
        wall = now - (row.claimed_at or now)
        can_retry = row.retryable if retryable is None else bool(retryable)
        limit = row.max_claims if row.max_claims is not None else task.max_claims
        exhausted = limit is not None and row.claim_count >= limit
        removed = row.removed_in is not None  # a replan removed it while it ran: no retry (mind/replan.py)
        common: dict[str, object] = dict(lease_token=None, lease_until=None, error=str(error),
                                      failure_class=failure_class, wall_used_s=Inc(wall), version=Inc(1))
        if t:
            common["tokens_used"] = Inc(t)
        # A failed attempt is always written as a rejected path, its error the reason.
        mind_record.on_fail(core, claim.task_id, row, claim.attempt, str(error), failure_class, claim.worker, now,
                            retry=can_retry and not exhausted and not removed)
        if removed:
            cas_update(core, row, claim, now, status="abandoned", finished_at=now, **common)
            budget_clock.settle(core.db, claim.task_id, now, agent_write=True, task=task)
            eid = core.journal(claim.task_id, claim.node_key, claim.worker,
                               f"{claim.node_key} failed ({failure_class}); abandoned: plan v{row.removed_in} "
                               "removed it", NodeFailed(error=str(error)[:2000], failure_class=failure_class,
                                                        retry=False, removed_in=row.removed_in,
                                                        attempt=claim.attempt), at=now)
            core.maybe_complete_task(claim.task_id, now)
            return eid
        if can_retry and not exhausted:
            delay = float(retry_after_s) if retry_after_s is not None else retry_delay(claim.attempt)
            cas_update(core, row, claim, now, status="pending", next_retry_at=now + delay, **common)
            budget_clock.settle(core.db, claim.task_id, now, agent_write=True, task=task)
            return core.journal(claim.task_id, claim.node_key, claim.worker,
                                f"{claim.node_key} failed ({failure_class}); retry in {delay:.0f}s",
                                NodeFailed(error=str(error)[:2000], failure_class=failure_class, retry=True,
                                           retryable=True, next_retry_at=now + delay, attempt=claim.attempt),
                                at=now)
        cas_update(core, row, claim, now, status="failed", finished_at=now, **common)
        budget_clock.settle(core.db, claim.task_id, now, agent_write=True, task=task)
        why = "retries exhausted" if (can_retry and exhausted) else "not retryable"
        eid = core.journal(claim.task_id, claim.node_key, claim.worker,
                           f"{claim.node_key} failed ({failure_class}, {why})",
                           NodeFailed(error=str(error)[:2000], failure_class=failure_class, retry=False,
                                      retryable=bool(can_retry), exhausted=bool(can_retry and exhausted),
                                      attempt=claim.attempt), at=now)
        core.maybe_fail_task(claim.task_id, now)
    return eid


# ---------------------------------------------------------------------- handoff
@retry_write
def request_human(core: LedgerCore, claim: Claim, *, kind: str, question: str, options: Sequence[JsonMapping],
                  recommendation: str | None, context: JsonMapping | None, tokens: float | None) -> str:
    """Open a needs_human handoff; the node becomes blocked. Returns the handoff id."""
    if kind not in HANDOFF_KINDS:
        raise Refused(f"unknown handoff kind {kind!r}: one of {', '.join(HANDOFF_KINDS)}")
    if not str(question).strip():
        raise Refused("a handoff needs a question")
    opts = []
    for o in options:
        if "id" not in o:
            raise Refused("every handoff option needs an id")
        opts.append({"id": str(o["id"]), "label": str(o.get("label", o["id"])),
                     "consequence": str(o.get("consequence", ""))})
    ids = [o["id"] for o in opts]
    if len(set(ids)) != len(ids):
        raise Refused("handoff option ids must be distinct")
    if recommendation is not None and recommendation not in ids:
        raise Refused(f"recommendation {recommendation!r} is not one of the options")
    checkpoint.check(kind, opts, recommendation, context)
    ctx = dict(context or {})
    dumps(ctx)
    now = core.now()
    with write_tx(core.db):
        task = core.task_record(claim.task_id, lock="update")  # the task row first (lock order): the clock may stop
        row = fence(core, claim, now)
        t = _add_tokens(core, claim, tokens)
        wall = now - (row.claimed_at or now)
        fields: dict[str, object] = dict(status="blocked", lease_token=None, lease_until=None,
                                      wall_used_s=Inc(wall), version=Inc(1))
        if t:
            fields["tokens_used"] = Inc(t)
        cas_update(core, row, claim, now, **fields)
        budget_clock.settle(core.db, claim.task_id, now, agent_write=True, task=task)
        hid = core.bind(Handoff.insert(task=claim.task_id, node=row.id, kind=kind, question=str(question),
                                       context=ctx, options=opts, recommendation=recommendation, status="open",
                                       opened_at=now, opened_by=claim.worker, attempt=claim.attempt)).execute()
        core.journal(claim.task_id, claim.node_key, claim.worker,
                     f"{claim.node_key} asks a human ({kind}): {str(question)[:120]}",
                     HandoffOpened(handoff=str(hid), kind=kind, options=ids, recommendation=recommendation),
                     at=now)
    return str(hid)


# ---------------------------------------------------------------------- effects and notes
class _Effect(NamedTuple):
    id: int
    status: str
    compensation: str | None


def _effect(core: LedgerCore, task_id: str, effect_key: str) -> _Effect | None:
    return sql.fetch_row(core.db, _Effect, f"SELECT {sql.columns(_Effect)} FROM effect WHERE task_id = ? "
                                           "AND effect_key = ?", [task_id, effect_key])


@retry_write
def intend_effect(core: LedgerCore, claim: Claim, effect_key: str, *, payload: object,
                  compensation: str | None) -> None:
    """Log an intended side effect (idempotent on ``effect_key`` within the task)."""
    if not effect_key:
        raise Refused("an effect needs a key")
    now = core.now()
    with write_tx(core.db):
        row = fence(core, claim, now, lock=True)
        checkpoints.reach("effect.fenced", claim.task_id, claim.node_key)
        existing = _effect(core, claim.task_id, effect_key)
        if existing is None:
            person = confirm.required(core, row, effect_key)  # irreversible: a person said proceed first
            pd = digest_json(payload) if payload is not None else None
            core.bind(Effect.insert(task=claim.task_id, node=row.id, effect_key=effect_key, status="intended",
                                    payload_digest=pd, compensation=compensation, attempt=claim.attempt,
                                    intended_at=now)).execute()
            confirmed = None
            if person is not None:
                confirmed = ConfirmedBy(handoff=person.handoff, by=person.by, at=iso(person.at))
            core.journal(claim.task_id, claim.node_key, claim.worker, f"{claim.node_key} intends {effect_key}"
                         + (f" (confirmed by {person.by}, handoff {person.handoff})" if person else ""),
                         EffectIntended(effect_key=effect_key, confirmed_by=confirmed), at=now)


@retry_write
def confirm_effect(core: LedgerCore, claim: Claim, effect_key: str, *, external_id: str | None,
                   compensation: str | None) -> None:
    """Record that an intended effect happened (with its external id and how to undo it)."""
    now = core.now()
    with write_tx(core.db):
        task = core.task_record(claim.task_id, lock="update")  # the task row first (lock order): a park may wake
        fence(core, claim, now, lock=True)
        existing = _effect(core, claim.task_id, effect_key)
        if existing is None:
            raise Refused(f"effect {effect_key!r} was never intended: call intend_effect first")
        if existing.status != "confirmed":
            fields: dict[str, object] = dict(status="confirmed", external_id=external_id, confirmed_at=now)
            if compensation is not None:
                fields["compensation"] = compensation
            sets, values = sql.set_clause(fields)
            sql.execute(core.db, f"UPDATE effect SET {sets} WHERE id = ?", [*values, existing.id])
            core.journal(claim.task_id, claim.node_key, claim.worker,
                         f"{claim.node_key} confirmed {effect_key}" + (f" ({external_id})" if external_id else ""),
                         EffectConfirmed(effect_key=effect_key, external_id=external_id,
                                         compensation=compensation or existing.compensation), at=now)
            if task.wake_state:
                wake.check_tx(core, claim.task_id, now)


@retry_write
def note(core: LedgerCore, claim: Claim, text: str, *, layer: str, data: JsonMapping | None = None) -> int:
    """Journal a note from the agent (a decision, an observation worth keeping); ``data``: keys
    added to the event's payload beside ``text`` (``warden run``'s ``process``)."""
    as_layer = next((x for x in NodeNote.LAYERS if x == layer), None)
    if as_layer is None:
        raise Refused("an agent note's layer is decision or execution")
    said = NodeNote(text=str(text)[:8000], data=dict(data or {}))
    if len(dumps(said.to_json())) > 16 * 1024:
        raise Refused("a note's data is over 16 KiB")
    now = core.now()
    with write_tx(core.db):
        fence(core, claim, now, lock=True)
        return core.journal(claim.task_id, claim.node_key, claim.worker, str(text)[:2000], said, at=now,
                            layer=as_layer)

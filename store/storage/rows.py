"""Database rows → the frozen views the store hands out (``views.py``). Pure functions, no I/O.

Two node shapes: the whole :class:`NodeView` (detail, signals, dialogs) and the lean
:class:`NodeRow` a graph list shows (a plain tuple: a 100k-node graph as NodeViews took 250 MB).
Both are read with the raw column lists below (``NODE_VIEW_COLUMNS``, ``NODE_ROW_SELECT``) and
decoded here; the lease shows only while a token is held.
"""

from __future__ import annotations

import sys
from dataclasses import fields as dataclass_fields
from typing import Final, Mapping, NamedTuple, Protocol, Sequence, TypeAlias

from store.judges import budget
from store.storage import sql
from store.jsontypes import JsonArray, JsonObject, JsonValue
from store.storage.sql import json_value
from store.mind.views import MindState
from store.storage.tables import TaskRecord
from store.views import (
    ActionView,
    ArtifactView,
    EffectView,
    EventView,
    HandoffView,
    NodeRow,
    NodeView,
    ObservationView,
    TaskView,
)


def wall_used(task: TaskRecord, now: float) -> float:
    """A task row's wall-clock time of work: from its first claim to its end (or now), less the
    time its clock stood still while it waited (``budget.wall_used``)."""
    return budget.wall_used(task.started_at, task.finished_at, task.paused_s or 0.0, task.paused_since, now)


def task_origin(r: TaskRecord) -> str:
    """Which integration made the task: its recorded ``origin``, else (a task made before schema 4
    recorded it) ``langgraph`` for the LangGraph adapter's workflow and ``python`` for the rest."""
    if r.origin:
        return str(r.origin)
    return "langgraph" if r.workflow == "langgraph" else "python"


def task_view(r: TaskRecord, now: float, counts: Mapping[str, int], handoffs_open: int) -> TaskView:
    used = wall_used(r, now)
    span = 0.0 if r.started_at is None else (r.finished_at if r.finished_at is not None else now) - r.started_at
    return TaskView(
        task_id=r.task_id, title=r.title, workflow=r.workflow, workflow_version=r.workflow_version,
        status=r.status, revision=int(r.revision), inputs=r.inputs, constraints=tuple(r.constraints or ()),
        preconditions=dict(r.preconditions or {}), token_cap=r.token_cap, wall_cap_s=r.wall_cap_s,
        soft_ratio=r.soft_ratio, tokens_used=int(r.tokens_used), started_at=r.started_at,
        wall_used_s=used, max_claims=r.max_claims, max_repairs=r.max_repairs,
        repair_count=r.repair_count, claim_count=r.claim_count, parked_at=r.parked_at,
        park_reason=r.park_reason, park_until=r.park_until, wake_on=r.wake_on, created_at=r.created_at,
        updated_at=r.updated_at, finished_at=r.finished_at, counts=dict(counts), handoffs_open=int(handoffs_open),
        paused_s=float(r.paused_s or 0.0), paused_since=r.paused_since, wake_state=r.wake_state,
        density_limit=r.density_limit,
        waited_s=max(0.0, span - used), origin=task_origin(r), mind=MindState.of(r.mind),
    )


# ---------------------------------------------------------------------- the whole node
class NodeViewRow(NamedTuple):
    """A node row as read for a NodeView (``NODE_VIEW_COLUMNS``), its JSON columns still as stored
    (``json_value`` decodes them, sharing one copy of a repeated text); made from the database
    row by ``tuple.__new__`` (C code: a graph reads up to 100k of them)."""

    id: int
    task_id: str
    key: str
    kind: str
    title: str
    status: str
    lease_token: str | None
    position: int
    preconditions: JsonValue
    input_digest: str | None
    output: JsonValue
    output_ref: str | None
    output_digest: str | None
    attempt: int
    retryable: bool | int
    failure_class: str | None
    error: str | None
    est_tokens: int | None
    est_wall_s: float | None
    always_admit: bool | int
    max_claims: int | None
    tokens_used: int
    wall_used_s: float
    units_done: float | None
    units_total: float | None
    lease_owner: str | None
    lease_until: float | None
    heartbeat_at: float | None
    claimed_at: float | None
    claim_count: int
    next_retry_at: float | None
    rejections: JsonValue
    parked_at: float | None
    park_reason: str | None
    park_until: float | None
    wake_on: str | None
    started_at: float | None
    finished_at: float | None
    version: int
    beat_interval_s: float | None
    units_at: float | None
    wait_on: str | None
    wait_since: float | None
    wait_until: float | None
    progress_at: float | None
    beat_long_s: float | None
    paused_s: float | None
    serves: JsonValue
    removed_in: int | None
    removed_mode: str | None


# Column order of the raw node reads; node_view turns one such row into a NodeView.
NODE_VIEW_COLUMNS = ", ".join(NodeViewRow._fields)
_NODE_VIEW_FIELDS = tuple(f.name for f in dataclass_fields(NodeView))


def node_view(r: NodeViewRow, deps: tuple[str, ...], cache: dict[str, object] | None = None) -> NodeView:
    """A NODE_VIEW_COLUMNS row and its dependency keys → NodeView (``cache``: see ``json_value``)."""
    (id_, task_id, key, kind, title, status, token, position, pre, input_digest, output, output_ref, output_digest,
     attempt, retryable, failure_class, error, est_tokens, est_wall_s, always_admit, max_claims, tokens_used,
     wall_used_s, units_done, units_total, lease_owner, lease_until, heartbeat_at, claimed_at, claim_count,
     next_retry_at, rejections, parked_at, park_reason, park_until, wake_on, started_at, finished_at, version,
     beat_interval_s, units_at, wait_on, wait_since, wait_until, progress_at, beat_long_s, paused_s, serves, removed_in,
     removed_mode) = r
    return _fast_node_view((
        id_, task_id, key, kind, title, status, deps, position, json_value(pre, cache) or {}, input_digest,
        json_value(output),
        output_ref, output_digest, attempt, bool(retryable), failure_class, error, est_tokens, est_wall_s,
        bool(always_admit), max_claims, int(tokens_used), float(wall_used_s), units_done, units_total,
        lease_owner if token else None, lease_until if token else None, heartbeat_at, claimed_at, claim_count,
        next_retry_at, tuple(json_value(rejections) or ()), parked_at, park_reason, park_until, wake_on, started_at,
        finished_at, int(version), beat_interval_s, units_at, wait_on, wait_since, wait_until, progress_at,
        beat_long_s, paused_s, tuple(json_value(serves, cache) or ()), removed_in, removed_mode,
    ))


def _fast_node_view(values: tuple[object, ...]) -> NodeView:
    """Build a NodeView without its generated ``__init__``: a frozen dataclass sets each of its 39
    fields through ``object.__setattr__``, which made reading a 100k-node graph take seconds. The
    result is an ordinary, equal, frozen NodeView (it has no ``__post_init__`` or defaults to run)."""
    view = object.__new__(NodeView)
    view.__dict__.update(zip(_NODE_VIEW_FIELDS, values))
    return view


# ---------------------------------------------------------------------- the lean node
# NodeRow's fields as SQL over the node table, in NodeRow's order (its last field, ``deps``, is
# read from the edge table).
_NODE_ROW_SQL = {
    "lease_owner": "CASE WHEN lease_token IS NOT NULL THEN lease_owner END",
    "lease_until": "CASE WHEN lease_token IS NOT NULL THEN lease_until END",
}
NODE_ROW_SELECT = "SELECT " + ", ".join(_NODE_ROW_SQL.get(f, f) for f in NodeRow._fields[:-1]) + " FROM node"
NODE_ROW_POSITION: Final = 5
_KIND, _STATUS = NodeRow._fields.index("kind"), NodeRow._fields.index("status")
assert (_KIND, _STATUS, NodeRow._fields.index("position")) == (2, 4, NODE_ROW_POSITION)
RawNodeRow: TypeAlias = "tuple[int, str, str, str, str, int, *tuple[object, ...]]"
"""A NODE_ROW_SELECT row as the database gives it: NodeRow's fields but ``deps``."""


class NodeRowCursor(Protocol):
    """A cursor over NODE_ROW_SELECT (a graph read page by page)."""

    def fetchmany(self, size: int) -> list[RawNodeRow]: ...


def node_rows(rows: Sequence[RawNodeRow], deps: Mapping[int, list[str]], words: dict[str, str]) -> tuple[NodeRow, ...]:
    """NODE_ROW_SELECT rows and their dependency keys by node id → NodeRows, built by C code
    (``tuple.__new__``); ``words`` keeps one string object per kind and status, not one per row."""
    make = tuple.__new__
    none: tuple[str, ...] = ()
    key = sys.intern  # a dependency names a node by key: one string object for both (5 MB at 100k nodes)
    return tuple(make(NodeRow, (r[0], key(r[1]), words.setdefault(r[2], r[2]), r[3], words.setdefault(r[4], r[4]))
                      + r[5:] + (tuple(map(key, deps[r[0]])) if r[0] in deps else none,)) for r in rows)


# ---------------------------------------------------------------------- the rest
# Each read into a NamedTuple whose fields are its columns (docs/architecture.md "Reading rows");
# a field from a joined table has its expression in the *_SELECT list (``n.key AS node_key``).
class EventRecord(NamedTuple):
    id: int
    at: float
    task_id: str | None
    node: str | None
    layer: str
    kind: str
    actor: str
    summary: str
    payload: JsonObject | None


EVENT_SELECT = f"SELECT {sql.columns(EventRecord)} FROM event"


def event_view(r: EventRecord) -> EventView:
    return EventView(int(r.id), r.at, r.task_id, r.node, r.layer, r.kind, r.actor, r.summary, r.payload or {})


class EffectRecord(NamedTuple):
    id: int
    task_id: str
    node_key: str
    effect_key: str
    status: str
    payload_digest: str | None
    external_id: str | None
    compensation: str | None
    attempt: int
    intended_at: float
    confirmed_at: float | None
    compensation_node_key: str | None
    compensated_at: float | None
    compensated_by: str | None
    compensation_note: str | None


# Effects with the key of the node that made each and of its compensation node (if any).
EFFECT_SELECT = (f"SELECT {sql.columns(EffectRecord, 'e', {'node_key': 'n.key', 'compensation_node_key': 'c.key'})} "
                 "FROM effect e JOIN node n ON n.id = e.node_id LEFT JOIN node c ON c.id = e.compensation_node_id")


def effect_view(r: EffectRecord) -> EffectView:
    return EffectView(*r)


class HandoffRecord(NamedTuple):
    id: int
    task_id: str
    node_key: str
    kind: str
    question: str
    context: JsonObject | None
    options: JsonArray | None
    recommendation: str | None
    status: str
    opened_at: float
    opened_by: str
    attempt: int
    resolution_option: str | None
    resolution_answer: str | None
    resolved_by: str | None
    resolved_at: float | None


HANDOFF_SELECT = f"SELECT {sql.columns(HandoffRecord, 'h', {'node_key': 'n.key'})} FROM handoff h JOIN node n ON n.id = h.node_id"


def handoff_view(r: HandoffRecord) -> HandoffView:
    return HandoffView(
        id=str(r.id), task_id=r.task_id, node=r.node_key, kind=r.kind, question=r.question,
        context=r.context or {}, options=tuple(r.options or ()), recommendation=r.recommendation,
        status=r.status, opened_at=r.opened_at, opened_by=r.opened_by, attempt=r.attempt,
        resolution_option=r.resolution_option, resolution_answer=r.resolution_answer,
        resolved_by=r.resolved_by, resolved_at=r.resolved_at,
    )


class ArtifactRecord(NamedTuple):
    id: int
    task_id: str
    node_key: str
    attempt: int
    name: str
    sha256: str
    size: int
    ref: str | None
    at: float


ARTIFACT_SELECT = f"SELECT {sql.columns(ArtifactRecord, 'a', {'node_key': 'n.key'})} FROM artifact a JOIN node n ON n.id = a.node_id"


def artifact_view(r: ArtifactRecord) -> ArtifactView:
    return ArtifactView(*r)


class ObservationRecord(NamedTuple):
    id: int
    at: float
    attempt: int
    text: str
    digest: str
    new_units: int
    lines: int
    action: str | None
    result: str | None
    flags: int | None


OBSERVATION_SELECT = f"SELECT {sql.columns(ObservationRecord)} FROM observation"


def observation_view(o: ObservationRecord) -> ObservationView:
    return ObservationView(o.id, o.at, o.attempt, o.text, o.digest, o.new_units, o.lines, o.action, o.result,
                           int(o.flags or 0))


class ActionRecord(NamedTuple):
    id: int
    at: float
    operator: str
    action: str
    task_id: str | None
    target: str
    reason: str
    plan: JsonObject | None
    result: str
    refused_why: str | None
    revision_before: int | None
    revision_after: int | None


ACTION_SELECT = f"SELECT {sql.columns(ActionRecord)} FROM action"


def action_view(r: ActionRecord) -> ActionView:
    return ActionView(r.id, r.at, r.operator, r.action, r.task_id, r.target, r.reason, r.plan or {}, r.result,
                      r.refused_why, r.revision_before, r.revision_after)

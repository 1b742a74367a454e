"""Every table of the ledger, declared once: a frozen dataclass whose fields are its columns, each
with its type and what the database needs of it (``store/columns.py``). The columns a view shows
as they are stored are that view's base in ``store/views.py`` (``TaskColumns``, ``NodeColumns``,
``EventColumns``, ``ObservationColumns``, ``ActionView``); the records here add the ledger's own.

Derived from these, never written again: the Peewee models and so the DDL (``models.py``), the
JSON and boolean columns the SQL layer decodes (``sql.JSON_COLUMNS``), the SELECT list of a row
read into one of these classes (``sql.columns``), the SQL of a column a migration adds
(``schema.py``). A record is what ``LedgerCore.task_record`` / ``node_record`` read: the ledger's
writes read ``task.status`` / ``node.lease_token``, so a renamed or misspelt column is a mypy
error at each use (docs/architecture.md "Reading rows").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from store.columns import AUTO, BIG, BIG_AUTO, Char, Column, Default, Json, Ref
from store.jsontypes import JsonArray, JsonMapping, JsonObject
from store.views import ActionView, EventColumns, NodeColumns, ObservationColumns, TaskColumns


@dataclass(frozen=True)
class Table:
    """A table: its name, its record class, its composite primary key (by column, when it has
    one) and its indexes (columns, unique)."""

    name: str
    record: type
    primary: tuple[str, ...] = ()
    indexes: tuple[tuple[tuple[str, ...], bool], ...] = ()


# ---------------------------------------------------------------------- the graph
@dataclass(frozen=True, kw_only=True)
class TaskRecord(TaskColumns):
    """A ``task`` row (``SELECT {sql.columns(TaskRecord)} FROM task``)."""

    constraints: Annotated[JsonArray, Json(list)]  # shown verbatim, as a TaskView's tuple
    # Which integration made the task: python, langgraph, mcp, run, claude... None on a task made
    # before it was recorded (TaskView.origin derives one).
    origin: Annotated[str | None, Char(32)] = None
    # The task's mind (store/mind/state.py): requirement count, drift and alignment settings and
    # counters, the plan version. JSON or None (None: the defaults, no requirements).
    mind: Annotated[JsonObject | None, Json()] = None


@dataclass(frozen=True, kw_only=True)
class NodeRecord(NodeColumns):
    """A ``node`` row (``SELECT {sql.columns(NodeRecord)} FROM node``); the task is ``task_id``."""

    lease_token: Annotated[str | None, Char(64)]  # never shown
    rejections: Annotated[JsonArray, Json(list)]  # the operators' reasons from rewinds
    # The last heartbeat gaps of the running attempt (its rhythm; reset by every claim).
    beat_gaps: str | None = None
    # The seed rules (docs/agents.md): the running step's deadline when its claim set
    # ``max_step_s`` (heartbeats never extend the lease past it; writes after it are refused); the
    # ledger's cost-density verdict on the running attempt (``hold`` / ``finish_no_successor``,
    # None: nothing to act on); and the repair request a repair commit handed to this node's rerun
    # (``Claim.inputs["repair"]``), cleared when it commits.
    step_deadline: float | None = None
    density: Annotated[str | None, Char(32)] = None
    repair: Annotated[JsonObject | None, Json()] = None
    serves: Annotated[JsonArray | None, Json()] = None  # the task's requirement ids it serves (store/mind/)


@dataclass(frozen=True)
class EdgeRecord:
    """``dst`` depends on ``src``."""

    task_id: Annotated[str, Ref("task", "task_id")]
    src_id: Annotated[int, Ref("node")]
    dst_id: Annotated[int, Ref("node")]


# ---------------------------------------------------------------------- the journal and what it saw
@dataclass(frozen=True, slots=True)
class EventRecord(EventColumns):
    """An ``event`` row: the journal's columns and the observation a heartbeat made (what its report
    brought is stored there only; the event is read with it: ``rows.EVENT_SELECT``)."""

    observation_id: int | None = None


@dataclass(frozen=True, kw_only=True)
class ObservationRecord(ObservationColumns):
    """What a heartbeat saw; the view's columns and the judgement's identities (store/judges/novelty.py):
    the action's key, the judged content's identity and the line keys with their concepts."""

    node_id: Annotated[int, Ref("node")]
    action_key: Annotated[str | None, Char(32)] = None
    content: Annotated[str | None, Char(64)] = None
    concepts: str | None = None


@dataclass(frozen=True)
class SeenLineRecord:
    """The distinct normalised observation lines a node has produced (the new-information memory)."""

    node_id: Annotated[int, Ref("node")]
    digest: Annotated[str, Char(32)]


# ---------------------------------------------------------------------- effects, artifacts, people
@dataclass(frozen=True)
class OfANode:
    """The first columns of a row that a node of a task made (an effect, an artifact, a handoff):
    its id, and the task and node it belongs to (deleted with them)."""

    id: Annotated[int, AUTO]
    task_id: Annotated[str, Ref("task", "task_id")]
    node_id: Annotated[int, Ref("node")]


@dataclass(frozen=True)
class EffectRecord(OfANode):
    effect_key: str
    status: Annotated[str, Char(16, "intended")]
    payload_digest: Annotated[str | None, Char(64)]
    external_id: str | None
    compensation: str | None
    attempt: Annotated[int, Default(0)]
    intended_at: float
    confirmed_at: float | None
    # Compensation (store/ledger/compensation.py): the node that undoes it (made by abort), and
    # who marked it compensated, when and why (that node's commit, or an operator by hand).
    compensation_node_id: int | None
    compensated_at: float | None
    compensated_by: str | None
    compensation_note: str | None


@dataclass(frozen=True)
class ArtifactRecord(OfANode):
    attempt: Annotated[int, Default(0)]
    name: str
    sha256: Annotated[str, Char(64)]
    size: Annotated[int, BIG]
    content: bytes | None
    ref: str | None
    at: float


@dataclass(frozen=True)
class HandoffRecord(OfANode):
    kind: Annotated[str, Char(16)]
    question: str
    context: Annotated[JsonMapping, Json(dict)]
    options: Annotated[JsonArray, Json(list)]
    recommendation: str | None
    status: Annotated[str, Char(16, "open")]
    opened_at: float
    opened_by: Annotated[str, Default("")]
    attempt: Annotated[int, Default(0)]
    resolution_option: str | None
    resolution_answer: str | None
    resolved_by: str | None
    resolved_at: float | None


ActionRecord = ActionView


@dataclass(frozen=True)
class WriteRequestRecord:
    """A write's request id and its result (PostgreSQL): recorded in the write's own transaction,
    so a retry after a lost COMMIT can tell whether it happened and return what it returned
    (``store.storage.db.run_write``). Pruned after a day."""

    id: Annotated[str, Char(32, key=True)]
    at: Annotated[float, Column(index=True)]
    result: str


@dataclass(frozen=True)
class MetaRecord:
    key: Annotated[str, Char(64, key=True)]
    value: str


# ---------------------------------------------------------------------- the task's mind
@dataclass(frozen=True)
class RequirementRecord:
    """An item of the task's requirement (``create_task(requirements=...)``): kept, shown on its
    own and handed back to every claim; ``dropped`` when a replan narrowed the goal."""

    id: Annotated[int, AUTO]
    task_id: Annotated[str, Ref("task", "task_id")]
    rid: Annotated[str, Char(64)]
    text: str
    position: int
    status: Annotated[str, Char(16, "active")]  # active | dropped
    dropped_in: int | None  # the plan version that dropped it
    created_at: float


@dataclass(frozen=True)
class ConclusionRecord:
    """Episodic memory: what a node found (``finding``) or tried and abandoned (``rejected``, with
    its reason), when, and from what source. Written by ``Ledger.conclude`` and, for rejected
    paths, by failures, rewinds, escalations and replans."""

    id: Annotated[int, BIG_AUTO]
    task_id: Annotated[str, Ref("task", "task_id")]
    node_id: Annotated[int | None, Ref("node")]
    node_key: Annotated[str | None, Char(200)]
    attempt: Annotated[int, Default(0)]
    kind: Annotated[str, Char(16)]  # finding | rejected
    text: str
    source: str | None
    reason: str | None
    origin: Annotated[str, Char(16)]  # agent | fail | rewind | escalate | replan | alignment
    actor: Annotated[str, Default("")]
    at: float


@dataclass(frozen=True)
class PlanVersionRecord:
    """One replan: the version it made, its diff, what set it off and what it did with the nodes
    in flight (store/mind/replan.py)."""

    id: Annotated[int, AUTO]
    task_id: Annotated[str, Ref("task", "task_id")]
    version: int
    at: float
    actor: Annotated[str, Default("")]
    cause: Annotated[str, Char(32)]  # the trigger
    in_flight: Annotated[str, Char(16)]
    reason: Annotated[str, Default("")]
    diff: Annotated[JsonObject, Json(dict)]
    in_flight_nodes: Annotated[JsonArray, Json(list)]
    revision: Annotated[int, BIG]


@dataclass(frozen=True)
class MemoryRecord:
    """Semantic memory across tasks: proposed by an agent, used only once a person confirmed it.
    ``scope`` kind: nodes of ``kind`` in tasks of ``workflow``; workflow: every node of them."""

    id: Annotated[int, AUTO]
    scope: Annotated[str, Char(16)]
    workflow: Annotated[str, Default("")]
    kind: Annotated[str | None, Char(64)]
    text: str
    digest: Annotated[str, Char(64)]
    task_id: Annotated[str, Char(64)]
    node_key: Annotated[str, Char(200)]
    attempt: Annotated[int, Default(0)]
    proposed_by: Annotated[str, Default("")]
    proposed_at: float
    status: Annotated[str, Char(16, "pending")]  # pending | confirmed | rejected
    decided_by: str | None
    decided_at: float | None
    decision_reason: str | None
    source: str | None = None  # where it came from (a file, a command's output)


# ---------------------------------------------------------------------- shared quotas, people first
@dataclass(frozen=True)
class QuotaRecord:
    """A shared external quota (an API's rate limit, a licence, a GPU) that nodes draw on
    (store/ledger/quotas.py). ``scope`` "" is the whole ledger, else the task id it belongs to;
    ``window_s`` None: at most ``capacity`` nodes hold it at once; else at most ``capacity``
    claims start in any ``window_s`` seconds."""

    scope: Annotated[str, Char(64)]
    name: Annotated[str, Char(64)]
    capacity: int
    window_s: float | None
    declared_at: float
    declared_by: Annotated[str, Default("")]


@dataclass(frozen=True)
class NodeQuotaRecord:
    """A quota a node draws on (``add_node(..., quotas=[...])``)."""

    node_id: Annotated[int, Ref("node")]
    name: Annotated[str, Char(64)]


@dataclass(frozen=True)
class QuotaDrawRecord:
    """One claim's draw on a quota: counted in the window, or while that lease is held."""

    id: Annotated[int, BIG_AUTO]
    scope: Annotated[str, Char(64)]
    name: Annotated[str, Char(64)]
    node_id: Annotated[int, Ref("node")]
    token: Annotated[str, Char(32)]
    at: float


@dataclass(frozen=True)
class ConfirmKindRecord:
    """A node kind whose effects a person confirms first in this task (``create_task(confirm_kinds=)``)."""

    task_id: Annotated[str, Ref("task", "task_id")]
    kind: Annotated[str, Char(64)]


# ---------------------------------------------------------------------- what is normal for a kind
@dataclass(frozen=True)
class KindNormRecord:
    """One counter of what healthy nodes of a kind do (store/judges/norms.py, store/ledger/norms.py):
    ``worker`` the agent ("" over every agent), ``what`` nodes | observations | news | marked | quiet |
    repeat; for ``quiet`` and ``repeat`` a histogram bucket by ``length`` (0 for the others)."""

    kind: Annotated[str, Char(64)]
    worker: Annotated[str, Char(200)]
    what: Annotated[str, Char(16)]
    length: int
    count: Annotated[int, BIG, Default(0)]


TABLES: tuple[Table, ...] = (
    Table("meta", MetaRecord),
    Table("task", TaskRecord),
    Table("node", NodeRecord, indexes=((("task_id", "key"), True), (("task_id", "status", "position"), False),
                                       (("kind", "status"), False))),  # the estimator's per-kind history
    Table("edge", EdgeRecord, primary=("dst_id", "src_id"), indexes=((("src_id",), False),)),
    Table("event", EventRecord, indexes=((("task_id", "id"), False),)),
    Table("observation", ObservationRecord, indexes=((("node_id", "id"), False),)),
    Table("seen_line", SeenLineRecord, primary=("node_id", "digest")),
    Table("effect", EffectRecord, indexes=((("task_id", "effect_key"), True),)),
    Table("artifact", ArtifactRecord),
    Table("handoff", HandoffRecord, indexes=((("status", "opened_at"), False),)),
    Table("action", ActionRecord),
    Table("write_request", WriteRequestRecord),
    Table("requirement", RequirementRecord, indexes=((("task_id", "rid"), True),)),
    Table("conclusion", ConclusionRecord, indexes=((("task_id", "kind", "id"), False), (("node_id", "id"), False))),
    Table("plan_version", PlanVersionRecord, indexes=((("task_id", "version"), True),)),
    Table("memory", MemoryRecord, indexes=((("status", "workflow"), False), (("digest",), False))),
    Table("quota", QuotaRecord, primary=("scope", "name")),
    Table("node_quota", NodeQuotaRecord, primary=("node_id", "name")),
    Table("quota_draw", QuotaDrawRecord, indexes=((("scope", "name", "at"), False),)),
    Table("confirm_kind", ConfirmKindRecord, primary=("task_id", "kind")),
    Table("kind_norm", KindNormRecord, primary=("kind", "worker", "what", "length")),
)
TABLE = {t.name: t for t in TABLES}
MIND_TABLES = ("requirement", "conclusion", "plan_version", "memory")
SEED_TABLES = ("quota", "node_quota", "quota_draw", "confirm_kind")

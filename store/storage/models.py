"""Peewee models of the ledger.

The models are declared without a database; every query is bound to the ledger's database with
``.bind(db)`` so that several ledgers can be open in one process (tests, the demo, the console).
Times are float seconds since the epoch (UTC), produced by the ledger's injected clock.
"""

from __future__ import annotations

import json

import peewee as pw

from store.errors import LedgerUnavailable
from store.jsontypes import JsonValue

TASK_STATUSES = ("active", "parked", "completed", "failed", "aborted")
NODE_STATUSES = ("pending", "running", "blocked", "parked", "succeeded", "failed", "abandoned")
FINISHED_NODE_STATUSES = ("succeeded", "abandoned")
FAILURE_CLASSES = ("transient", "idempotent_write", "irreversible_write", "conclusion", "spec")
LAYERS = ("decision", "execution", "operator", "system")
# ``permission``: an agent asks leave to use a tool (Claude Code's PermissionRequest hook);
# ``alignment``: does the plan still serve the requirement? (store/mind/alignment.py).
HANDOFF_KINDS = ("confirm", "direction", "exception", "acceptance", "permission", "alignment")
HANDOFF_STATUSES = ("open", "resolved", "withdrawn", "expired")
EFFECT_STATUSES = ("intended", "confirmed", "compensated")


def dumps(value: object) -> str:
    """Canonical JSON used for storage and digests: sorted keys, no NaN, compact."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def loads(text: str) -> JsonValue:
    """A stored JSON value. Text that is not JSON (a damaged row, a ledger written by something
    else) is ``LedgerUnavailable`` with one line, not a ``JSONDecodeError``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise LedgerUnavailable("the ledger holds a value that is not JSON (a damaged row, or written by "
                                "something other than Warden): restore it from a backup") from None


class JSONField(pw.TextField):
    """A JSON value stored as canonical text."""

    def db_value(self, value: object) -> str | None:
        return None if value is None else dumps(value)

    def python_value(self, value: str | None) -> JsonValue:
        return None if value is None else loads(value)


class BaseModel(pw.Model):
    class Meta:
        database = None
        legacy_table_names = False


class Meta(BaseModel):
    key = pw.CharField(primary_key=True, max_length=64)
    value = pw.TextField()


class Task(BaseModel):
    task_id = pw.CharField(primary_key=True, max_length=64)
    title = pw.TextField(default="")
    workflow = pw.TextField(default="")
    workflow_version = pw.TextField(default="")
    status = pw.CharField(max_length=16, default="active")
    inputs = JSONField(default=dict)
    constraints = JSONField(default=list)
    preconditions = JSONField(default=dict)
    token_cap = pw.BigIntegerField(null=True)
    wall_cap_s = pw.DoubleField(null=True)
    soft_ratio = pw.DoubleField(default=0.7)
    tokens_used = pw.BigIntegerField(default=0)
    started_at = pw.DoubleField(null=True)
    max_claims = pw.IntegerField(default=5)
    max_repairs = pw.IntegerField(default=3)
    repair_count = pw.IntegerField(default=0)
    claim_count = pw.IntegerField(default=0)
    parked_at = pw.DoubleField(null=True)
    park_reason = pw.TextField(null=True)
    park_until = pw.DoubleField(null=True)
    wake_on = pw.TextField(null=True)
    # The budget clock (docs/ledger.md "Waiting is not work"): seconds it stood still so far, and
    # since when it stands still now (None while it runs). Kept in the transactions that change
    # what the task waits on; ``rows.wall_used`` derives wall_used_s from them.
    paused_s = pw.DoubleField(default=0.0)
    paused_since = pw.DoubleField(null=True)
    # Wake conditions of the task's park and of its parked nodes (store/parks/wake.py), JSON or None.
    wake_state = JSONField(null=True)
    # Which integration made the task (schema 4 part "origin"): python, langgraph, mcp, run,
    # claude... None on a task made before it was recorded (TaskView.origin derives one).
    origin = pw.CharField(max_length=32, null=True)
    # Tokens per unit of progress a node may spend (``Budget(density_limit=)``; None: the
    # ledger judges nothing — store/judges/density.py).
    density_limit = pw.DoubleField(null=True)
    # The task's mind (store/mind/state.py): requirement count, drift and alignment settings and
    # counters, the plan version. JSON or None (None: the defaults, no requirements).
    mind = JSONField(null=True)
    revision = pw.BigIntegerField(default=1)
    created_at = pw.DoubleField()
    updated_at = pw.DoubleField()
    finished_at = pw.DoubleField(null=True)


class Node(BaseModel):
    id = pw.AutoField()
    task = pw.ForeignKeyField(Task, column_name="task_id", field="task_id", on_delete="CASCADE")
    key = pw.CharField(max_length=200)
    position = pw.IntegerField()  # insertion order; a topological order by construction
    kind = pw.CharField(max_length=64, default="tool")
    title = pw.TextField(default="")
    status = pw.CharField(max_length=16, default="pending")
    preconditions = JSONField(default=dict)
    input_digest = pw.CharField(max_length=64, null=True)
    output = JSONField(null=True)
    output_ref = pw.TextField(null=True)
    output_digest = pw.CharField(max_length=64, null=True)
    attempt = pw.IntegerField(default=0)
    retryable = pw.BooleanField(default=True)
    failure_class = pw.CharField(max_length=32, null=True)
    error = pw.TextField(null=True)
    est_tokens = pw.BigIntegerField(null=True)
    est_wall_s = pw.DoubleField(null=True)
    always_admit = pw.BooleanField(default=False)
    max_claims = pw.IntegerField(null=True)  # None: the task's max_claims
    tokens_used = pw.BigIntegerField(default=0)
    wall_used_s = pw.DoubleField(default=0.0)
    units_done = pw.DoubleField(null=True)
    units_total = pw.DoubleField(null=True)
    lease_owner = pw.TextField(null=True)
    lease_token = pw.CharField(max_length=64, null=True)
    lease_until = pw.DoubleField(null=True)
    heartbeat_at = pw.DoubleField(null=True)
    claimed_at = pw.DoubleField(null=True)
    claim_count = pw.IntegerField(default=0)
    next_retry_at = pw.DoubleField(null=True)
    rejections = JSONField(default=list)
    parked_at = pw.DoubleField(null=True)
    park_reason = pw.TextField(null=True)
    park_until = pw.DoubleField(null=True)
    wake_on = pw.TextField(null=True)
    started_at = pw.DoubleField(null=True)
    finished_at = pw.DoubleField(null=True)
    version = pw.BigIntegerField(default=1)
    # What the running attempt's own heartbeats say (schema 3; reset by every claim): its usual
    # heartbeat interval, when its units_done last moved, and the wait it declared.
    beat_interval_s = pw.DoubleField(null=True)
    units_at = pw.DoubleField(null=True)
    wait_on = pw.TextField(null=True)
    wait_since = pw.DoubleField(null=True)
    wait_until = pw.DoubleField(null=True)
    # Schema 4, part "novelty" (reset by every claim): when the attempt last showed
    # progress (units_done rose, or a number moved toward its stated total), its last heartbeat
    # gaps and its usual long gap (the rhythm ``heartbeat_stale`` learns), and the seconds it
    # spent under a park (its clocks stood still meanwhile).
    progress_at = pw.DoubleField(null=True)
    beat_gaps = pw.TextField(null=True)
    beat_long_s = pw.DoubleField(null=True)
    paused_s = pw.DoubleField(null=True)
    # The seed rules (schema 4 part "seed rules", docs/agents.md): the running step's deadline when
    # its claim set ``max_step_s`` (heartbeats never extend the lease past it; writes after it are
    # refused); the ledger's cost-density verdict on the running attempt (``hold`` /
    # ``finish_no_successor``, None: nothing to act on); and the repair request a repair commit
    # handed to this node's rerun (``Claim.inputs["repair"]``), cleared when it commits.
    step_deadline = pw.DoubleField(null=True)
    density = pw.CharField(max_length=32, null=True)
    repair = JSONField(null=True)
    # The task's mind (schema 4, store/mind/): the requirement ids the node serves (JSON list or
    # None), and the plan version that removed it while it ran, with what happens to it then.
    serves = JSONField(null=True)
    removed_in = pw.IntegerField(null=True)
    removed_mode = pw.CharField(max_length=16, null=True)

    class Meta:
        indexes = (
            (("task", "key"), True),
            (("task", "status", "position"), False),
            (("kind", "status"), False),  # the estimator's per-kind duration history
        )


class Edge(BaseModel):
    """``dst`` depends on ``src``."""

    task = pw.ForeignKeyField(Task, column_name="task_id", field="task_id", on_delete="CASCADE")
    src = pw.ForeignKeyField(Node, column_name="src_id", on_delete="CASCADE")
    dst = pw.ForeignKeyField(Node, column_name="dst_id", on_delete="CASCADE")

    class Meta:
        primary_key = pw.CompositeKey("dst", "src")
        indexes = ((("src",), False),)


class Event(BaseModel):
    id = pw.BigAutoField()
    at = pw.DoubleField()
    task_id = pw.CharField(max_length=64, null=True)
    node = pw.CharField(max_length=200, null=True)
    layer = pw.CharField(max_length=16)
    kind = pw.CharField(max_length=64)
    actor = pw.TextField(default="")
    summary = pw.TextField(default="")
    payload = JSONField(default=dict)

    class Meta:
        indexes = ((("task_id", "id"), False),)


class Observation(BaseModel):
    id = pw.BigAutoField()
    node = pw.ForeignKeyField(Node, column_name="node_id", on_delete="CASCADE")
    at = pw.DoubleField()
    attempt = pw.IntegerField(default=0)
    text = pw.TextField(default="")
    digest = pw.CharField(max_length=64)
    new_units = pw.IntegerField(default=0)
    lines = pw.IntegerField(default=0)
    # Schema 4, part "novelty": what the step did and what it learned (``heartbeat(
    # action=, result=)``), the action's and the judged content's identities, flags (1: progress,
    # 2: made while the task was parked) and the line keys with their concepts (store/judges/novelty.py).
    action = pw.TextField(null=True)
    result = pw.TextField(null=True)
    action_key = pw.CharField(max_length=32, null=True)
    content = pw.CharField(max_length=64, null=True)
    flags = pw.IntegerField(default=0)
    concepts = pw.TextField(null=True)

    class Meta:
        indexes = ((("node", "id"), False),)


class SeenLine(BaseModel):
    """The distinct normalised observation lines a node has produced (the new-information memory)."""

    node = pw.ForeignKeyField(Node, column_name="node_id", on_delete="CASCADE")
    digest = pw.CharField(max_length=32)

    class Meta:
        primary_key = pw.CompositeKey("node", "digest")


class Effect(BaseModel):
    id = pw.AutoField()
    task = pw.ForeignKeyField(Task, column_name="task_id", field="task_id", on_delete="CASCADE")
    node = pw.ForeignKeyField(Node, column_name="node_id", on_delete="CASCADE")
    effect_key = pw.TextField()
    status = pw.CharField(max_length=16, default="intended")
    payload_digest = pw.CharField(max_length=64, null=True)
    external_id = pw.TextField(null=True)
    compensation = pw.TextField(null=True)
    attempt = pw.IntegerField(default=0)
    intended_at = pw.DoubleField()
    confirmed_at = pw.DoubleField(null=True)
    # Compensation (store/ledger/compensation.py): the node that undoes it (made by abort), and
    # who marked it compensated, when and why (that node's commit, or an operator by hand).
    compensation_node_id = pw.IntegerField(null=True)
    compensated_at = pw.DoubleField(null=True)
    compensated_by = pw.TextField(null=True)
    compensation_note = pw.TextField(null=True)

    class Meta:
        indexes = ((("task", "effect_key"), True),)


class Artifact(BaseModel):
    id = pw.AutoField()
    task = pw.ForeignKeyField(Task, column_name="task_id", field="task_id", on_delete="CASCADE")
    node = pw.ForeignKeyField(Node, column_name="node_id", on_delete="CASCADE")
    attempt = pw.IntegerField(default=0)
    name = pw.TextField()
    sha256 = pw.CharField(max_length=64)
    size = pw.BigIntegerField()
    content = pw.BlobField(null=True)
    ref = pw.TextField(null=True)
    at = pw.DoubleField()


class Handoff(BaseModel):
    id = pw.AutoField()
    task = pw.ForeignKeyField(Task, column_name="task_id", field="task_id", on_delete="CASCADE")
    node = pw.ForeignKeyField(Node, column_name="node_id", on_delete="CASCADE")
    kind = pw.CharField(max_length=16)
    question = pw.TextField()
    context = JSONField(default=dict)
    options = JSONField(default=list)
    recommendation = pw.TextField(null=True)
    status = pw.CharField(max_length=16, default="open")
    opened_at = pw.DoubleField()
    opened_by = pw.TextField(default="")
    attempt = pw.IntegerField(default=0)
    resolution_option = pw.TextField(null=True)
    resolution_answer = pw.TextField(null=True)
    resolved_by = pw.TextField(null=True)
    resolved_at = pw.DoubleField(null=True)

    class Meta:
        indexes = ((("status", "opened_at"), False),)


class Action(BaseModel):
    id = pw.AutoField()
    at = pw.DoubleField()
    operator = pw.TextField()
    action = pw.CharField(max_length=16)
    task_id = pw.CharField(max_length=64, null=True)
    target = pw.TextField()
    reason = pw.TextField(default="")
    plan = JSONField(default=dict)
    result = pw.CharField(max_length=16)
    refused_why = pw.TextField(null=True)
    revision_before = pw.BigIntegerField(null=True)
    revision_after = pw.BigIntegerField(null=True)


class WriteRequest(BaseModel):
    """A write's request id and its result (PostgreSQL): recorded in the write's own transaction,
    so a retry after a lost COMMIT can tell whether it happened and return what it returned
    (``store.storage.db.run_write``). Pruned after a day."""

    id = pw.CharField(primary_key=True, max_length=32)
    at = pw.DoubleField(index=True)
    result = pw.TextField()


class Requirement(BaseModel):
    """An item of the task's requirement (``create_task(requirements=...)``): kept, shown on its
    own and handed back to every claim; ``dropped`` when a replan narrowed the goal."""

    id = pw.AutoField()
    task = pw.ForeignKeyField(Task, column_name="task_id", field="task_id", on_delete="CASCADE")
    rid = pw.CharField(max_length=64)
    text = pw.TextField()
    position = pw.IntegerField()
    status = pw.CharField(max_length=16, default="active")  # active | dropped
    dropped_in = pw.IntegerField(null=True)  # the plan version that dropped it
    created_at = pw.DoubleField()

    class Meta:
        indexes = ((("task", "rid"), True),)


class Conclusion(BaseModel):
    """Episodic memory: what a node found (``finding``) or tried and abandoned (``rejected``, with
    its reason), when, and from what source. Written by ``Ledger.conclude`` and, for rejected
    paths, by failures, rewinds, escalations and replans."""

    id = pw.BigAutoField()
    task = pw.ForeignKeyField(Task, column_name="task_id", field="task_id", on_delete="CASCADE")
    node = pw.ForeignKeyField(Node, column_name="node_id", null=True, on_delete="CASCADE")
    node_key = pw.CharField(max_length=200, null=True)
    attempt = pw.IntegerField(default=0)
    kind = pw.CharField(max_length=16)  # finding | rejected
    text = pw.TextField()
    source = pw.TextField(null=True)
    reason = pw.TextField(null=True)
    origin = pw.CharField(max_length=16)  # agent | fail | rewind | escalate | replan | alignment
    actor = pw.TextField(default="")
    at = pw.DoubleField()

    class Meta:
        indexes = ((("task", "kind", "id"), False), (("node", "id"), False))


class PlanVersion(BaseModel):
    """One replan: the version it made, its diff, what set it off and what it did with the nodes
    in flight (store/mind/replan.py)."""

    id = pw.AutoField()
    task = pw.ForeignKeyField(Task, column_name="task_id", field="task_id", on_delete="CASCADE")
    version = pw.IntegerField()
    at = pw.DoubleField()
    actor = pw.TextField(default="")
    cause = pw.CharField(max_length=32)  # the trigger
    in_flight = pw.CharField(max_length=16)
    reason = pw.TextField(default="")
    diff = JSONField(default=dict)
    in_flight_nodes = JSONField(default=list)
    revision = pw.BigIntegerField()

    class Meta:
        indexes = ((("task", "version"), True),)


class Memory(BaseModel):
    """Semantic memory across tasks: proposed by an agent, used only once a person confirmed it.
    ``scope`` kind: nodes of ``kind`` in tasks of ``workflow``; workflow: every node of them."""

    id = pw.AutoField()
    scope = pw.CharField(max_length=16)
    workflow = pw.TextField(default="")
    kind = pw.CharField(max_length=64, null=True)
    text = pw.TextField()
    digest = pw.CharField(max_length=64)
    task_id = pw.CharField(max_length=64)
    node_key = pw.CharField(max_length=200)
    attempt = pw.IntegerField(default=0)
    proposed_by = pw.TextField(default="")
    proposed_at = pw.DoubleField()
    status = pw.CharField(max_length=16, default="pending")  # pending | confirmed | rejected
    decided_by = pw.TextField(null=True)
    decided_at = pw.DoubleField(null=True)
    decision_reason = pw.TextField(null=True)
    source = pw.TextField(null=True)  # where it came from (a file, a command's output); schema 5

    class Meta:
        indexes = ((("status", "workflow"), False), (("digest",), False))


class Quota(BaseModel):
    """A shared external quota (an API's rate limit, a licence, a GPU) that nodes draw on
    (store/ledger/quotas.py). ``scope`` "" is the whole ledger, else the task id it belongs to;
    ``window_s`` None: at most ``capacity`` nodes hold it at once; else at most ``capacity``
    claims start in any ``window_s`` seconds."""

    scope = pw.CharField(max_length=64)
    name = pw.CharField(max_length=64)
    capacity = pw.IntegerField()
    window_s = pw.DoubleField(null=True)
    declared_at = pw.DoubleField()
    declared_by = pw.TextField(default="")

    class Meta:
        primary_key = pw.CompositeKey("scope", "name")


class NodeQuota(BaseModel):
    """A quota a node draws on (``add_node(..., quotas=[...])``)."""

    node = pw.ForeignKeyField(Node, column_name="node_id", on_delete="CASCADE")
    name = pw.CharField(max_length=64)

    class Meta:
        primary_key = pw.CompositeKey("node", "name")


class QuotaDraw(BaseModel):
    """One claim's draw on a quota: counted in the window, or while that lease is held."""

    id = pw.BigAutoField()
    scope = pw.CharField(max_length=64)
    name = pw.CharField(max_length=64)
    node = pw.ForeignKeyField(Node, column_name="node_id", on_delete="CASCADE")
    token = pw.CharField(max_length=32)
    at = pw.DoubleField()

    class Meta:
        indexes = ((("scope", "name", "at"), False),)


class ConfirmKind(BaseModel):
    """A node kind whose effects a person confirms first in this task (``create_task(confirm_kinds=)``)."""

    task = pw.ForeignKeyField(Task, column_name="task_id", field="task_id", on_delete="CASCADE")
    kind = pw.CharField(max_length=64)

    class Meta:
        primary_key = pw.CompositeKey("task", "kind")


MIND_MODELS = (Requirement, Conclusion, PlanVersion, Memory)
SEED_MODELS = (Quota, NodeQuota, QuotaDraw, ConfirmKind)
MODELS = (Meta, Task, Node, Edge, Event, Observation, SeenLine, Effect, Artifact, Handoff, Action, WriteRequest,
          *MIND_MODELS, *SEED_MODELS)

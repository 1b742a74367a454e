"""The task and node tables' rows, typed: what ``LedgerCore.task_record`` / ``node_record`` read.

Every column, in the models' order, as a NamedTuple field (docs/architecture.md "Reading rows"):
the ledger's writes read ``task.status`` / ``node.lease_token``, so a renamed or misspelt column
is a mypy error at each use, not a ``KeyError`` on the one path a test happened not to take. JSON
and boolean columns arrive decoded (``sql.fetch_row``). ``tests/store/test_store_api.py`` checks
the fields against ``store/storage/models.py``: a column added there is added here.
"""

from __future__ import annotations

from typing import NamedTuple

from store.jsontypes import JsonArray, JsonObject, JsonValue


class TaskRecord(NamedTuple):
    """A ``task`` row (``SELECT {sql.columns(TaskRecord)} FROM task``)."""

    task_id: str
    title: str
    workflow: str
    workflow_version: str
    status: str
    inputs: JsonValue
    constraints: JsonArray | None
    preconditions: JsonObject | None
    token_cap: int | None
    wall_cap_s: float | None
    soft_ratio: float
    tokens_used: int
    started_at: float | None
    max_claims: int
    max_repairs: int
    repair_count: int
    claim_count: int
    parked_at: float | None
    park_reason: str | None
    park_until: float | None
    wake_on: str | None
    paused_s: float | None
    paused_since: float | None
    wake_state: JsonObject | None
    origin: str | None
    density_limit: float | None
    mind: JsonObject | None
    revision: int
    created_at: float
    updated_at: float
    finished_at: float | None


class NodeRecord(NamedTuple):
    """A ``node`` row (``SELECT {sql.columns(NodeRecord)} FROM node``); the task is ``task_id``."""

    id: int
    task_id: str
    key: str
    position: int
    kind: str
    title: str
    status: str
    preconditions: JsonObject | None
    input_digest: str | None
    output: JsonValue
    output_ref: str | None
    output_digest: str | None
    attempt: int
    retryable: bool
    failure_class: str | None
    error: str | None
    est_tokens: int | None
    est_wall_s: float | None
    always_admit: bool
    max_claims: int | None
    tokens_used: int
    wall_used_s: float
    units_done: float | None
    units_total: float | None
    lease_owner: str | None
    lease_token: str | None
    lease_until: float | None
    heartbeat_at: float | None
    claimed_at: float | None
    claim_count: int
    next_retry_at: float | None
    rejections: JsonArray | None
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
    beat_gaps: str | None
    beat_long_s: float | None
    paused_s: float | None
    step_deadline: float | None
    density: str | None
    repair: JsonObject | None
    serves: JsonArray | None
    removed_in: int | None
    removed_mode: str | None

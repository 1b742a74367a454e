"""Frozen dataclasses the store hands out: plain values, never live model rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from store import validate as v
from store.clock import duration_text
from store.jsontypes import JsonMapping, JsonValue
from store.mind import rules as mind_rules
from store.mind.views import MindState, NodeMind


@dataclass(frozen=True)
class Budget:
    """A task's caps: ``tokens`` (a whole number ≥ 1), ``wall_s`` (seconds > 0), either None for no
    cap; ``soft_ratio`` in (0, 1]; ``density_limit``: tokens per unit of progress a node may spend
    (> 0; None: judged against the task's own norm, store/judges/density.py). Checked when built: a bad
    value raises ``InvalidValue``."""

    tokens: int | None = None
    wall_s: float | None = None
    soft_ratio: float = 0.7
    density_limit: float | None = None

    def __post_init__(self) -> None:
        w = "Budget"
        object.__setattr__(self, "tokens", v.number("tokens", self.tokens, w, lo=1, hi=v.TOKENS_MAX, integer=True))
        object.__setattr__(self, "wall_s", v.number("wall_s", self.wall_s, w, lo=0, lo_open=True,
                                                    hi=v.DURATION_S_MAX))
        object.__setattr__(self, "soft_ratio", v.number("soft_ratio", self.soft_ratio, w, lo=0, lo_open=True, hi=1,
                                                        optional=False))
        object.__setattr__(self, "density_limit", v.number("density_limit", self.density_limit, w, lo=0,
                                                           lo_open=True, hi=v.TOKENS_MAX))


@dataclass(frozen=True)
class NodeSpec:
    """A node to add (``Ledger.add_nodes`` or ``commit(..., next_nodes=...)``)."""

    key: str
    kind: str = "tool"
    deps: tuple[str, ...] = ()
    title: str = ""
    preconditions: JsonMapping | None = None
    est_wall_s: float | None = None
    est_tokens: int | None = None
    always_admit: bool = False
    retryable: bool = True
    units_total: float | None = None
    max_claims: int | None = None
    serves: tuple[str, ...] = ()  # the task's requirement ids this node serves
    quotas: tuple[str, ...] = ()  # the shared quotas its claims draw on (store/ledger/quotas.py)
    # "irreversible_write": its effects cannot be undone (implies retryable=False): a person
    # confirms each effect before it is intended (store/ledger/confirm.py)
    failure_class: str | None = None

    def __post_init__(self) -> None:
        """Check every field (``InvalidValue`` names the bad one); ``deps`` and ``serves`` become tuples."""
        check_node_spec(self)
        object.__setattr__(self, "deps", tuple(self.deps))
        object.__setattr__(self, "quotas", tuple(self.quotas or ()))
        object.__setattr__(self, "serves", mind_rules.serves("serves", self.serves, "NodeSpec"))


# What a node may be declared to be: "irreversible_write" — its work cannot safely run twice
# (retryable=False), and each effect it intends waits for a person's confirmation.
DECLARED_CLASSES = ("irreversible_write",)


def check_node_spec(spec: NodeSpec, where: str = "NodeSpec") -> None:
    """The rules of a node to add (also run on specs handed to ``add_nodes`` / ``next_nodes``)."""
    def f(name: str) -> object:  # a forged spec may lack a field
        return getattr(spec, name, None)

    v.node_key("key", f("key"), where)
    v.name("kind", f("kind"), where, limit=v.KIND_MAX)
    v.strings("deps", f("deps"), where, each=v.lookup, optional=False)
    v.text("title", f("title"), where)
    v.json_object("preconditions", f("preconditions"), where)
    v.number("est_wall_s", f("est_wall_s"), where, hi=v.DURATION_S_MAX)
    v.number("est_tokens", f("est_tokens"), where, hi=v.TOKENS_MAX, integer=True)
    v.flag("always_admit", f("always_admit"), where)
    v.flag("retryable", f("retryable"), where)
    v.number("units_total", f("units_total"), where, hi=v.UNITS_MAX)
    v.number("max_claims", f("max_claims"), where, lo=1, hi=v.COUNT_MAX, integer=True)
    mind_rules.serves("serves", f("serves"), where)
    v.strings("quotas", f("quotas"), where, each=lambda a, x, w: v.name(a, x, w, limit=v.KIND_MAX))
    if f("failure_class") is not None and f("failure_class") not in DECLARED_CLASSES:
        raise v.refuse("failure_class", f"declared on a node must be one of {', '.join(DECLARED_CLASSES)}",
                       f("failure_class"), where=where)


@dataclass(frozen=True)
class Claim:
    task_id: str
    node_key: str
    kind: str
    worker: str
    token: str
    attempt: int
    lease_until: float
    inputs: JsonMapping
    admission: str = "admit"  # admit | admit_degraded (the budget governor's word)
    lease_s: float = 30.0
    step_deadline: float | None = None  # claim(max_step_s=): every write after it is refused

    def __repr__(self) -> str:  # never print the token
        return f"Claim({self.task_id}/{self.node_key}, worker={self.worker!r}, attempt={self.attempt})"


@dataclass(frozen=True)
class Pulse:
    """What a heartbeat tells the agent."""

    lease_until: float
    parked: bool = False
    new_units: int | None = None
    gate: str = "ok"
    # The ledger's cost-density verdict on the step (store/judges/density.py): ``continue``, ``hold``,
    # ``finish_no_successor`` or ``abort`` (the ledger stopped the node: drop the step).
    density: str = "continue"


@dataclass(frozen=True)
class TaskView:
    task_id: str
    title: str
    workflow: str
    workflow_version: str
    status: str
    revision: int
    inputs: JsonValue
    constraints: tuple[str, ...]
    preconditions: JsonMapping
    token_cap: int | None
    wall_cap_s: float | None
    soft_ratio: float
    tokens_used: int
    started_at: float | None
    wall_used_s: float
    max_claims: int
    max_repairs: int
    repair_count: int
    claim_count: int
    parked_at: float | None
    park_reason: str | None
    park_until: float | None
    wake_on: str | None
    created_at: float
    updated_at: float
    finished_at: float | None
    counts: Mapping[str, int] = field(default_factory=dict)
    handoffs_open: int = 0
    paused_s: float = 0.0  # seconds the budget clock stood still (waiting is not work)
    paused_since: float | None = None  # the clock stands still since then (None: it runs)
    waited_s: float = 0.0  # all the time the clock stood still, the current stop included (at read time)
    wake_state: JsonMapping | None = None  # wake conditions of parks (store/parks/wake.py)
    origin: str = "python"  # which integration made it: python, langgraph, mcp, run, claude (rows.task_origin)
    density_limit: float | None = None  # tokens per unit a node may spend (Budget(density_limit=))
    mind: MindState = MindState()  # requirements, drift and alignment counters, plan version (store/mind/)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        return self.counts.get("succeeded", 0) + self.counts.get("abandoned", 0)

    @property
    def paused_for(self) -> str | None:
        """Why the budget clock stands still now: ``parked``, ``handoff`` (a node waits on a
        human and nothing runs), ``parked node``; None while it runs (or the task is finished)."""
        if self.paused_since is None or self.status not in ("active", "parked"):
            return None
        if self.status == "parked":
            return "parked"
        return "handoff" if self.counts.get("blocked") or self.handoffs_open else "parked node"


@dataclass(frozen=True)
class NodeView:
    id: int
    task_id: str
    key: str
    kind: str
    title: str
    status: str
    deps: tuple[str, ...]
    position: int
    preconditions: JsonMapping
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
    lease_until: float | None
    heartbeat_at: float | None
    claimed_at: float | None
    claim_count: int
    next_retry_at: float | None
    rejections: tuple[str, ...]
    parked_at: float | None
    park_reason: str | None
    park_until: float | None
    wake_on: str | None
    started_at: float | None
    finished_at: float | None
    version: int
    beat_interval_s: float | None = None  # the running attempt's usual heartbeat interval
    units_at: float | None = None  # when its units_done last moved
    wait_on: str | None = None  # what it declared it is waiting on (``heartbeat(waiting_on=…)``) …
    wait_since: float | None = None
    wait_until: float | None = None  # … and until when (past it: ``overdue``)
    progress_at: float | None = None  # when the attempt last showed progress (loops are judged after it)
    beat_long_s: float | None = None  # its usual long gap between heartbeats (``heartbeat_stale``)
    paused_s: float | None = None  # seconds the attempt spent under a park (its clocks stood still)
    serves: tuple[str, ...] = ()  # the requirement ids it serves (store/mind/)
    removed_in: int | None = None  # the plan version that removed it while it ran …
    removed_mode: str | None = None  # … and what happens when it ends (wait | discard)

    @property
    def has_lease(self) -> bool:
        return self.status == "running" and self.lease_until is not None


class NodeRow(NamedTuple):
    """A node as a graph list shows it: the subset of NodeView's attributes a row and the
    estimates need, on a plain tuple built by C code from the database row (a 100k-node graph
    as NodeViews took 250 MB). Whatever needs the whole node (detail, signals, dialogs) reads
    the NodeView by key."""

    id: int
    key: str
    kind: str
    title: str
    status: str
    position: int
    attempt: int
    claimed_at: float | None
    units_done: float | None
    units_total: float | None
    est_wall_s: float | None
    next_retry_at: float | None
    lease_owner: str | None
    lease_until: float | None
    heartbeat_at: float | None
    parked_at: float | None
    park_until: float | None
    started_at: float | None
    finished_at: float | None
    version: int
    deps: tuple[str, ...]

    @property
    def has_lease(self) -> bool:
        return self.status == "running" and self.lease_until is not None


GraphRow = NodeView | NodeRow
"""A node of a graph as a caller holds it: the whole view, or a graph list's lean row (the
attributes both have: what the estimates and the task-level signals read)."""


@dataclass(frozen=True)
class EventView:
    id: int
    at: float
    task_id: str | None
    node: str | None
    layer: str
    kind: str
    actor: str
    summary: str
    payload: JsonMapping


@dataclass(frozen=True)
class ObservationView:
    id: int
    at: float
    attempt: int
    text: str
    digest: str
    new_units: int
    lines: int
    action: str | None = None  # what the step did (``heartbeat(action=)``)
    result: str | None = None  # what it learned (``heartbeat(result=)``): the judged text
    flags: int = 0  # 1: it showed progress; 2: made while the task was parked


@dataclass(frozen=True)
class EffectView:
    id: int
    task_id: str
    node: str
    effect_key: str
    status: str
    payload_digest: str | None
    external_id: str | None
    compensation: str | None
    attempt: int
    intended_at: float
    confirmed_at: float | None
    compensation_node: str | None = None  # the node of kind "compensation" that undoes it (abort)
    compensated_at: float | None = None
    compensated_by: str | None = None  # the compensation node's worker, or the operator who marked it
    compensation_note: str | None = None  # why (an operator's reason, or the node that did it)


@dataclass(frozen=True)
class ArtifactView:
    id: int
    task_id: str
    node: str
    attempt: int
    name: str
    sha256: str
    size: int
    ref: str | None
    at: float


@dataclass(frozen=True)
class HandoffView:
    id: str
    task_id: str
    node: str
    kind: str
    question: str
    context: JsonMapping
    options: tuple[JsonMapping, ...]
    recommendation: str | None
    status: str
    opened_at: float
    opened_by: str
    attempt: int
    resolution_option: str | None
    resolution_answer: str | None
    resolved_by: str | None
    resolved_at: float | None


@dataclass(frozen=True)
class ActionView:
    id: int
    at: float
    operator: str
    action: str
    task_id: str | None
    target: str
    reason: str
    plan: JsonMapping
    result: str
    refused_why: str | None
    revision_before: int | None
    revision_after: int | None


@dataclass(frozen=True)
class GraphView:
    task: TaskView
    nodes: tuple[NodeView, ...]  # topological order (insertion order)


@dataclass(frozen=True)
class GraphPage:
    """A run of a task's nodes in topological order, from one snapshot reflecting journal id ``at``.

    ``start`` is the position in that order of the page's first node; ``total`` the task's node
    count in the snapshot; ``last`` marks the final page."""

    task: TaskView
    nodes: tuple[NodeRow, ...]
    start: int
    total: int
    at: int
    last: bool


@dataclass(frozen=True)
class NodeDetail:
    node: NodeView
    dependents: tuple[str, ...]
    observations: tuple[ObservationView, ...]
    effects: tuple[EffectView, ...]
    artifacts: tuple[ArtifactView, ...]
    handoffs: tuple[HandoffView, ...]
    events: tuple[EventView, ...]  # decision layer first, then the rest, each newest first
    failure: EventView | None = None  # the node's last ``node.failed`` event (its own class and flags)
    mind: NodeMind | None = None  # what it serves, what its next claim is handed (store/mind/read.py)

QUOTA_LEDGER = ""  # the scope of a quota every task of the ledger shares


@dataclass(frozen=True)
class QuotaUse:
    """A quota as it stands now: its declaration, how much of it is in use and, for a windowed
    one, when the oldest draw in the window leaves it (when a place frees)."""

    scope: str  # "" the ledger, else the task id
    name: str
    capacity: int
    window_s: float | None
    in_use: int
    frees_at: float | None

    @property
    def full(self) -> bool:
        return self.in_use >= self.capacity

    def describe(self) -> str:
        where = "ledger" if self.scope == QUOTA_LEDGER else f"task {self.scope}"
        if self.window_s is None:
            return f"{self.in_use} of {self.capacity} held at once ({where} quota)"
        return (f"{self.in_use} of {self.capacity} claims in the last {duration_text(self.window_s)} "
                f"({where} quota)")

"""Frozen dataclasses the store hands out: plain values, never live model rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Mapping, NamedTuple

from store import validate as v
from store.clock import duration_text
from store.columns import AUTO, BIG, BIG_AUTO, Char, Default, Json, Ref
from store.jsontypes import JsonMapping, JsonObject, JsonValue
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
    # The node judged looping or bringing nothing new on this heartbeat (``repeating`` /
    # ``no_new_info``, the same judgement as the operator's stall signal of that kind), with the
    # signal's evidence line: the agent should change course. None: neither holds.
    stall: str | None = None
    stall_evidence: str | None = None


@dataclass(frozen=True, kw_only=True)
class TaskColumns:
    """The ``task`` table's columns a :class:`TaskView` shows as they are stored, each declared
    once here with what the database needs of it (store/columns.py); the table is these and the
    ledger's own (``store/storage/tables.py`` ``TaskRecord``)."""

    task_id: Annotated[str, Char(64, key=True)]
    title: Annotated[str, Default("")]
    workflow: Annotated[str, Default("")]
    workflow_version: Annotated[str, Default("")]
    status: Annotated[str, Char(16, "active")]
    inputs: Annotated[JsonValue, Json(dict)]
    preconditions: Annotated[JsonMapping, Json(dict)]
    token_cap: Annotated[int | None, BIG]
    wall_cap_s: float | None
    soft_ratio: Annotated[float, Default(0.7)]
    tokens_used: Annotated[int, BIG, Default(0)]
    started_at: float | None
    max_claims: Annotated[int, Default(5)]
    max_repairs: Annotated[int, Default(3)]
    repair_count: Annotated[int, Default(0)]
    claim_count: Annotated[int, Default(0)]
    parked_at: float | None
    park_reason: str | None
    park_until: float | None
    wake_on: str | None
    # The budget clock (docs/ledger.md "Waiting is not work"): seconds it stood still so far, and
    # since when it stands still now (None while it runs). Kept in the transactions that change
    # what the task waits on; ``rows.wall_used`` derives wall_used_s from them.
    paused_s: Annotated[float, Default(0.0)] = 0.0
    paused_since: float | None = None
    # Wake conditions of the task's park and of its parked nodes (store/parks/wake.py), JSON or None.
    wake_state: Annotated[JsonMapping | None, Json()] = None
    # Tokens per unit of progress a node may spend (``Budget(density_limit=)``; None: the ledger
    # judges nothing — store/judges/density.py).
    density_limit: float | None = None
    revision: Annotated[int, BIG, Default(1)]
    created_at: float
    updated_at: float
    finished_at: float | None


@dataclass(frozen=True, kw_only=True)
class TaskView(TaskColumns):
    constraints: tuple[str, ...]
    wall_used_s: float  # the wall clock of work: from the first claim to the end (or now), less the waits
    counts: Mapping[str, int] = field(default_factory=dict)
    handoffs_open: int = 0
    waited_s: float = 0.0  # all the time the clock stood still, the current stop included (at read time)
    origin: str = "python"  # which integration made it: python, langgraph, mcp, run, claude (rows.task_origin)
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


@dataclass(frozen=True, kw_only=True)
class NodeColumns:
    """The ``node`` table's columns a :class:`NodeView` shows as they are stored (the lease's
    owner and end only while a token is held), each declared once here; the table is these and the
    ledger's own (``store/storage/tables.py`` ``NodeRecord``)."""

    id: Annotated[int, AUTO]
    task_id: Annotated[str, Ref("task", "task_id")]
    key: Annotated[str, Char(200)]
    position: int  # insertion order; a topological order by construction
    kind: Annotated[str, Char(64, "tool")]
    title: Annotated[str, Default("")]
    status: Annotated[str, Char(16, "pending")]
    preconditions: Annotated[JsonMapping, Json(dict)]
    input_digest: Annotated[str | None, Char(64)]
    output: Annotated[JsonValue | None, Json()]
    output_ref: str | None
    output_digest: Annotated[str | None, Char(64)]
    attempt: Annotated[int, Default(0)]
    retryable: Annotated[bool, Default(True)]
    failure_class: Annotated[str | None, Char(32)]
    error: str | None
    est_tokens: Annotated[int | None, BIG]
    est_wall_s: float | None
    always_admit: Annotated[bool, Default(False)]
    max_claims: int | None  # None: the task's max_claims
    tokens_used: Annotated[int, BIG, Default(0)]
    wall_used_s: Annotated[float, Default(0.0)]
    units_done: float | None
    units_total: float | None
    lease_owner: str | None
    lease_until: float | None
    heartbeat_at: float | None
    claimed_at: float | None
    claim_count: Annotated[int, Default(0)]
    next_retry_at: float | None
    parked_at: float | None
    park_reason: str | None
    park_until: float | None
    wake_on: str | None
    started_at: float | None
    finished_at: float | None
    version: Annotated[int, BIG, Default(1)]
    # What the running attempt's own heartbeats say (reset by every claim): its usual heartbeat
    # interval, when its units_done last moved, and the wait it declared (``heartbeat(waiting_on=…)``;
    # past ``wait_until``: overdue).
    beat_interval_s: float | None = None
    units_at: float | None = None
    wait_on: str | None = None
    wait_since: float | None = None
    wait_until: float | None = None
    # When the attempt last showed progress (loops are judged after it), its usual long gap between
    # heartbeats (``heartbeat_stale``) and the seconds it spent under a park (its clocks stood still).
    progress_at: float | None = None
    beat_long_s: float | None = None
    paused_s: float | None = None
    # The plan version that removed it while it ran, and what happens when it ends (wait | discard).
    removed_in: int | None = None
    removed_mode: Annotated[str | None, Char(16)] = None
    # When an operator marked the running attempt's loop alarm healthy (the ``healthy`` action): its
    # loops are judged from then on. Reset by every claim.
    healthy_at: float | None = None


@dataclass(frozen=True, kw_only=True)
class NodeView(NodeColumns):
    deps: tuple[str, ...]  # the keys of the nodes it depends on
    rejections: tuple[str, ...]  # the operators' reasons from rewinds that reset it
    serves: tuple[str, ...] = ()  # the requirement ids it serves (store/mind/)

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


@dataclass(frozen=True, slots=True)
class EventColumns:
    """The journal's columns (the ``event`` table), as an :class:`EventView` shows them."""

    id: Annotated[int, BIG_AUTO]
    at: float
    task_id: Annotated[str | None, Char(64)]
    node: Annotated[str | None, Char(200)]
    layer: Annotated[str, Char(16)]
    kind: Annotated[str, Char(64)]
    actor: Annotated[str, Default("")]
    summary: Annotated[str, Default("")]
    payload: Annotated[JsonMapping, Json(dict)]  # its kind's declaration reads it (store/storage/events.py)


# an observation's flags (``store/ledger/observe.py`` sets them; the loop judgements read them)
FLAG_PROGRESS = 1  # the attempt showed progress with this observation …
FLAG_PARKED = 2  # made while the task was parked
FLAG_RESULT = 4  # what was judged is a tool's output (a result, or a plain report's output)
FLAG_UNITS_ONLY = 8  # … by its units_done alone, beside the same step measuring the same: not counted
FLAG_FAILED = 16  # what was judged says the step failed or found nothing


@dataclass(frozen=True, kw_only=True)
class Observed:
    """What a heartbeat's report was judged to bring, as the journal shows it: the figures of its
    observation row (store/judges/novelty.py), the action and the result as one line of at most 80
    characters. A heartbeat event shows these keys in its payload (``to_json``)."""

    new_units: int
    digest: str
    lines: int
    flags: int = 0  # 1: it showed progress; 2: made while the task was parked (key left out when 0)
    action_key: str | None = None
    action: str | None = None  # with an action only
    content: str | None = None  # the judged result's identity: with a result (FLAG_RESULT) only
    result: str | None = None  # None: what was judged was no tool's output

    def to_json(self) -> JsonObject:
        out: JsonObject = {"new_units": self.new_units, "digest": self.digest, "lines": self.lines}
        if self.action_key is not None:
            out.update(action_key=self.action_key, action=self.action)
        if self.result is not None:
            out.update(content=self.content, result=self.result)
        if self.flags:
            out["flags"] = self.flags
        return out

    @classmethod
    def from_json(cls, raw: JsonMapping) -> Observed | None:
        """From a heartbeat payload written before the observation was stored once (its keys in
        the payload); None when it has none."""
        digest, flags, new, lines = raw.get("digest"), raw.get("flags") or 0, raw.get("new_units") or 0, raw.get("lines") or 0
        if not isinstance(digest, str) or not all(isinstance(x, int) for x in (flags, new, lines)):
            return None

        def text(key: str) -> str | None:
            v = raw.get(key)
            return v if isinstance(v, str) else None
        return cls(new_units=new, digest=digest, lines=lines, flags=flags, action_key=text("action_key"),
                   action=text("action"), content=text("content"), result=text("result"))


@dataclass(frozen=True, slots=True)
class EventView(EventColumns):
    # A heartbeat's observation, read with it (the observation row the event names); None for
    # every other event.
    observation: Observed | None = None


@dataclass(frozen=True)
class ObservationColumns:
    """The ``observation`` table's columns an :class:`ObservationView` shows (what a heartbeat
    reported, capped, and how it was judged); the table adds the ledger's own."""

    id: Annotated[int, BIG_AUTO]
    at: float
    attempt: Annotated[int, Default(0)]
    text: Annotated[str, Default("")]
    digest: Annotated[str, Char(64)]
    new_units: Annotated[int, Default(0)]
    lines: Annotated[int, Default(0)]
    action: str | None = None  # what the step did (``heartbeat(action=)``)
    result: str | None = None  # what it learned (``heartbeat(result=)``): the judged text
    flags: Annotated[int, Default(0)] = 0  # 1: it showed progress; 2: made while the task was parked


@dataclass(frozen=True)
class ObservationView(ObservationColumns):
    pass


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
    """An operator action as audited: the ``action`` table's row, declared here once."""

    id: Annotated[int, AUTO]
    at: float
    operator: str
    action: Annotated[str, Char(16)]
    task_id: Annotated[str | None, Char(64)]
    target: str
    reason: Annotated[str, Default("")]
    plan: Annotated[JsonMapping, Json(dict)]
    result: Annotated[str, Char(16)]
    refused_why: str | None
    revision_before: Annotated[int | None, BIG]
    revision_after: Annotated[int | None, BIG]


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

"""Every kind of journal event, declared once: its layers, what it tells a reader following the
journal, and its payload (the fields are the payload's keys; :mod:`store.payloads` encodes and
decodes them). ``LedgerCore.journal`` takes one of these, and readers turn an ``EventView`` back
into one with :func:`payload_of` and read its attributes::

    match payload_of(event):
        case NodeHeartbeat() as beat: ...
        case NodeFailed(failure_class=cls): ...

Adding a kind is one class below (docs/ledger.md "The journal's events"): ``kind=`` and
``layer=``, the flags that say what it changes (``names_nodes``, ``status_neutral``,
``task_wide``), and its fields (``Maybe[...] = None`` for a key written only when it has a value:
:mod:`store.payloads` says how each is stored). Adding a key to a kind is one field. ``EVENTS`` is
built from the classes, so nothing else lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Annotated, TypedDict

from store.jsontypes import JsonMapping, JsonObject, JsonValue
from store.storage.payloads import Carried, Key, Maybe, Part, Payload, Undecodable
from store.views import EventView, Observed

# ---------------------------------------------------------------------- nested shapes


class WaitJson(TypedDict):
    """A declared wait as a heartbeat carries it."""

    on: str | None
    since: float | None
    until: float | None


class ArtifactJson(TypedDict):
    name: str
    sha256: str
    bytes: int


class ConfirmedBy(TypedDict):
    """The person whose ``proceed`` let an irreversible effect be intended (store/ledger/confirm.py)."""

    handoff: str
    by: str
    at: str | None  # ISO 8601


class RevokedLease(TypedDict):
    node: str
    owner: str


# ---------------------------------------------------------------------- the task
@dataclass(frozen=True, kw_only=True)
class TaskCreated(Payload, kind="task.created", layer="system", names_nodes=True, task_wide=True):
    workflow: str
    workflow_version: str
    origin: str = "python"
    requirements: list[str] = field(default_factory=list)  # the requirement ids (store/mind/)
    confirm_kinds: Maybe[list[str]] = None  # kinds whose effects a person confirms first (sorted)


@dataclass(frozen=True, kw_only=True)
class TaskCompleted(Payload, kind="task.completed", layer="system", names_nodes=True, task_wide=True):
    pass


@dataclass(frozen=True, kw_only=True)
class TaskFailed(Payload, kind="task.failed", layer="system", names_nodes=True, task_wide=True):
    node: Maybe[str] = None  # the node whose repair budget ran out, with its figures
    repair_count: Maybe[int] = None
    max_repairs: Maybe[int] = None


# ---------------------------------------------------------------------- a node's life
@dataclass(frozen=True, kw_only=True)
class NodeClaimed(Payload, kind="node.claimed", layer="execution", names_nodes=True):
    worker: str
    attempt: int
    lease_until: float
    reclaimed: bool = False
    step_deadline: Maybe[float] = None  # claim(max_step_s=)
    max_step_s: Maybe[float] = None
    previous_owner: Maybe[str] = None  # a reclaim: whose lease had expired
    quotas: Maybe[list[str]] = None  # the shared quotas the claim drew on (store/ledger/quotas.py)


@dataclass(frozen=True, kw_only=True)
class NodeHeartbeat(Payload, kind="node.heartbeat", layer="execution", names_nodes=True, status_neutral=True):
    """The lease renewed and what the heartbeat said: the figures it moved (absent: unchanged) and
    the node's own heartbeat figures (store/ledger/observe.py), so a reader follows the node
    without reading it again."""

    lease_until: float
    units_done: Maybe[float] = None
    units_total: Maybe[float] = None
    tokens: Maybe[int] = None
    beat_interval_s: Maybe[float] = None
    units_at: Maybe[float] = None
    progress_at: Maybe[float] = None
    beat_long_s: Maybe[float] = None
    wait: Maybe[WaitJson] = None
    paraphrases: Maybe[int] = None  # lines old only as paraphrases
    unexamined_lines: Maybe[int] = None  # what was left out of the judgement (bounded work)
    cut_lines: Maybe[int] = None
    # A take-back by the lease's own holder after it lapsed (store/ledger/claims.py): how long it
    # had lapsed. A renewal, not a new attempt.
    lapsed_s: Maybe[float] = None
    # What its report brought: stored once, as the observation row the event's ``observation_id``
    # names; read with the event (``EventView.observation``). None: it reported nothing.
    observation: Carried[Observed | None] = None


@dataclass(frozen=True, kw_only=True)
class Commit(Payload):
    """What a commit journals, whatever becomes of it (committed, discarded, a repair round, a
    spent repair budget): a part of those payloads (each has its ``attempt``)."""

    output_digest: str
    wall_s: float
    output_ref: Maybe[str] = None
    tokens: Maybe[int] = None
    artifact: Maybe[ArtifactJson] = None


@dataclass(frozen=True, kw_only=True)
class NodeCommitted(Payload, kind="node.committed", layer="execution", names_nodes=True):
    attempt: int
    commit: Part[Commit]
    repair: Maybe[int] = None  # an unrolled repair round: its number, the budget, the mode
    max_repairs: Maybe[int] = None
    mode: Maybe[str] = None


@dataclass(frozen=True, kw_only=True)
class NodeDiscarded(Payload, kind="node.discarded", layer="execution"):
    """A node a replan removed finished: its result is kept for audit only."""

    attempt: int
    commit: Part[Commit]
    repair: Maybe[int] = None
    max_repairs: Maybe[int] = None
    mode: Maybe[str] = None
    removed_in: int | None
    next_nodes_dropped: list[str]


@dataclass(frozen=True, kw_only=True)
class NodeRepair(Payload, kind="node.repair", layer="execution"):
    """A commit whose check failed sent its round back in place (store/ledger/repair.py)."""

    attempt: int
    commit: Part[Commit]
    repair: int
    max_repairs: int
    mode: str
    again: list[str]
    nodes: list[str]
    reset: list[str]
    revoked: list[str]
    kept: list[str]
    waiting: list[str]


@dataclass(frozen=True, kw_only=True)
class NodeFailed(Payload, kind="node.failed", layer=("execution", "system"), names_nodes=True):
    """A failure as it was recorded. Which keys it has depends on who failed the node: the agent
    (``fail``), the ledger (a lost worker whose work cannot run twice, max claims, the cost
    density, a spent repair budget) — and on when it was written (``retryable`` came later)."""

    error: Maybe[str] = None
    failure_class: Maybe[str] = None
    retry: Maybe[bool] = None  # it will be retried (then next_retry_at)
    retryable: Maybe[bool] = None
    exhausted: Maybe[bool] = None
    next_retry_at: Maybe[float] = None
    attempt: Maybe[int] = None
    removed_in: Maybe[int] = None  # a replan had removed it
    max_claims: Maybe[int] = None
    cost_density: Maybe[str] = None
    unsafe_rerun: Maybe[bool] = None  # a lost worker (store/ledger/unsafe.py) …
    worker: Maybe[str] = None
    effects_unconfirmed: Maybe[list[str]] = None
    handoff: Maybe[str] = None
    noticed_by: Maybe[str] = None
    advice: Maybe[dict[str, str]] = None
    commit: Part[Commit | None] = None  # a spent repair budget: the refused commit …
    repair_refused: Maybe[bool] = None
    repair_count: Maybe[int] = None
    max_repairs: Maybe[int] = None


@dataclass(frozen=True, kw_only=True)
class NodeNote(Payload, kind="node.note", layer=("execution", "decision"), names_nodes=True, status_neutral=True):
    """An agent's note: its text, and the keys its ``data`` added beside it (``Ledger.note(data=)``:
    the agent's own, JSON; ``warden run`` records its command's ``process`` there)."""

    text: str
    data: Carried[JsonObject] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        return {**self.data, **super().to_json()}

    @classmethod
    def from_json(cls, raw: JsonMapping) -> NodeNote:
        return replace(super().from_json(raw), data={k: v for k, v in raw.items() if k != "text"})


@dataclass(frozen=True, kw_only=True)
class NodeAbandoned(Payload, kind="node.abandoned", layer="system"):
    """A node a replan removed while it ran, whose lease then expired."""

    removed_in: int | None
    previous_owner: str | None


@dataclass(frozen=True, kw_only=True)
class NodeCostDensity(Payload, kind="node.cost_density", layer="system"):
    """The ledger's cost-density verdict on a node changed (store/density.py)."""

    verdict: str
    before: str
    tokens: float
    units: float | None
    density: float | None
    worker: str
    limit: Maybe[float] = None
    nodes: Maybe[list[str]] = None  # a hold that parked the node's successors …
    parked: Maybe[list[str]] = None


# ---------------------------------------------------------------------- the graph
@dataclass(frozen=True, kw_only=True)
class NodesAdded(Payload, kind="graph.nodes_added", layer="system", names_nodes=True, task_wide=True):
    nodes: list[str]


@dataclass(frozen=True, kw_only=True)
class GraphRewired(Payload, kind="graph.rewired", layer="system", task_wide=True):
    """An unrolled repair round: the dependents of the failing node wait for the round instead."""

    nodes: list[str]
    rewired: dict[str, list[str]]
    from_: Annotated[str, Key("from")]


@dataclass(frozen=True, kw_only=True)
class GraphReplanned(Payload, kind="graph.replanned", layer="decision", task_wide=True):
    version: int
    trigger: str
    in_flight: str
    reason: str
    diff: JsonObject
    in_flight_nodes: list[JsonObject]
    nodes: list[str]


# ---------------------------------------------------------------------- people, effects, claims
@dataclass(frozen=True, kw_only=True)
class HandoffOpened(Payload, kind="handoff.opened", layer="decision", names_nodes=True):
    handoff: str
    kind: str  # the handoff's kind
    options: list[str]
    recommendation: str | None


@dataclass(frozen=True, kw_only=True)
class EffectIntended(Payload, kind="effect.intended", layer="execution", names_nodes=True):
    effect_key: str
    confirmed_by: Maybe[ConfirmedBy] = None  # an irreversible node's effect: who said proceed


@dataclass(frozen=True, kw_only=True)
class EffectConfirmed(Payload, kind="effect.confirmed", layer="execution", names_nodes=True):
    effect_key: str
    external_id: str | None
    compensation: str | None


@dataclass(frozen=True, kw_only=True)
class EffectCompensated(Payload, kind="effect.compensated", layer="execution", names_nodes=True):
    effect_key: str
    by: str
    node: str


@dataclass(frozen=True, kw_only=True)
class VersionMismatch(Payload, kind="claim.version_mismatch", layer="system", names_nodes=True):
    """A worker of another workflow version asked for work: nothing claimed."""

    worker: str
    workflow_version: str
    task_workflow_version: str


@dataclass(frozen=True, kw_only=True)
class ParkWake(Payload, kind="park.wake", layer="system", names_nodes=True):
    """A park's wake condition was met (store/wake.py)."""

    condition: str
    evidence: str
    node: str | None
    auto_resume: bool


@dataclass(frozen=True, kw_only=True)
class QuotaDeclared(Payload, kind="quota.declared", layer="system"):
    """A shared quota declared or changed (store/ledger/quotas.py): on the ledger (``scope`` "") or
    on one task."""

    quota: str
    scope: str
    capacity: int
    window_s: float | None  # None: at most ``capacity`` at once; else claims per window


# ---------------------------------------------------------------------- the task's mind
@dataclass(frozen=True, kw_only=True)
class MindEntry(Payload):
    entry: int
    kind: str  # the entry's kind: finding | rejected
    source: str | None
    nodes: list[str]


@dataclass(frozen=True, kw_only=True)
class MindConcluded(MindEntry, kind="mind.concluded", layer="decision"):
    pass


@dataclass(frozen=True, kw_only=True)
class MindRejected(MindEntry, kind="mind.rejected", layer="decision"):
    pass


@dataclass(frozen=True, kw_only=True)
class MindAlignment(Payload, kind="mind.alignment", layer="decision"):
    verdict: str
    notes: str | None
    nodes: list[str]


@dataclass(frozen=True, kw_only=True)
class MemoryProposed(Payload, kind="memory.proposed", layer="decision"):
    memory: str
    scope: str
    nodes: list[str]
    source: str | None = None  # where it came from (written since memories kept one)


# ---------------------------------------------------------------------- operators
OPERATOR = "operator."


@dataclass(frozen=True, kw_only=True)
class OperatorActed(Payload, kind="operator.*", layer="operator", names_nodes=True, task_wide=True):
    """An operator action applied (store/actions/apply.py): one kind per action, ``operator.<name>``,
    every one with these keys; the action's own keys (its ``Outcome.payload``) are ``extra``."""

    action: Carried[str] = ""  # the action's name: the event's kind says it
    nodes: list[str]
    action_id: int
    reason: str
    revoked_leases: list[RevokedLease]
    handoffs_withdrawn: list[str]
    task_status: list[str]
    revision: int
    extra: Carried[JsonObject] = field(default_factory=dict)

    @staticmethod
    def kind_of(action: str) -> str:
        return OPERATOR + action

    def event_kind(self) -> str:
        return self.kind_of(self.action)

    def to_json(self) -> JsonObject:
        return {**super().to_json(), **self.extra}

    @classmethod
    def from_json(cls, raw: JsonMapping) -> OperatorActed:
        acted = super().from_json(raw)
        common = {"nodes", "action_id", "reason", "revoked_leases", "handoffs_withdrawn", "task_status", "revision"}
        return replace(acted, extra={k: v for k, v in raw.items() if k not in common})


# ---------------------------------------------------------------------- reading
@dataclass(frozen=True, kw_only=True)
class Unknown(Payload):
    """A payload this Warden cannot read as its kind: an undeclared kind, or a stored payload that
    does not fit its declaration. Readers skip it; ``raw`` is what was stored."""

    raw: Carried[JsonObject] = field(default_factory=dict)
    of: Carried[str] = ""

    def event_kind(self) -> str:
        return self.of

    def to_json(self) -> JsonObject:
        return dict(self.raw)

    def node_keys(self) -> tuple[str, ...]:
        nodes = self.raw.get("nodes")
        if isinstance(nodes, dict):  # {"reset": [...], ...}
            return tuple(k for v in nodes.values() if isinstance(v, list) for k in v if isinstance(k, str))
        return tuple(k for k in nodes if isinstance(k, str)) if isinstance(nodes, list) else ()


def _kinds() -> dict[str, type[Payload]]:
    out: dict[str, type[Payload]] = {}
    todo: list[type[Payload]] = [Payload]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.KIND and cls is not Unknown:
            assert cls.KIND not in out, f"event kind {cls.KIND} declared twice"
            out[cls.KIND] = cls
    return dict(sorted(out.items()))


EVENTS: dict[str, type[Payload]] = _kinds()
"""Every kind, by name (``operator.*`` stands for every ``operator.<action>``)."""


def kind_of(kind: str) -> type[Payload] | None:
    """The declaration of ``kind`` (None: not a kind this Warden writes)."""
    return EVENTS.get(kind) or (OperatorActed if kind.startswith(OPERATOR) else None)


def decode(kind: str, raw: JsonValue | JsonMapping) -> Payload:
    """A stored payload as its kind's class, or :class:`Unknown`."""
    raw = raw if isinstance(raw, dict) else {}
    cls = kind_of(kind)
    if cls is not None:
        try:
            got = cls.from_json(raw)
        except (Undecodable, TypeError):
            pass
        else:
            return _with_action(got, kind)
    return Unknown(raw=dict(raw), of=kind)


def _with_action(p: Payload, kind: str) -> Payload:
    if isinstance(p, OperatorActed):
        return replace(p, action=kind.removeprefix(OPERATOR))
    return p


def payload_of(e: EventView) -> Payload:
    """The event's payload, typed (:class:`Unknown` when it cannot be read as its kind); a
    heartbeat's with the observation read with it."""
    p = decode(e.kind, dict(e.payload) if not isinstance(e.payload, dict) else e.payload)
    return replace(p, observation=e.observation) if isinstance(p, NodeHeartbeat) else p


def names_nodes(kind: str) -> bool:
    cls = kind_of(kind)
    return cls is not None and cls.NAMES_NODES


def status_neutral(kind: str) -> bool:
    cls = kind_of(kind)
    return cls is not None and cls.STATUS_NEUTRAL


def task_wide(kind: str) -> bool:
    """An event of this kind may change the task or any node (an unknown kind: assume so)."""
    cls = kind_of(kind)
    return cls is None or cls.TASK_WIDE

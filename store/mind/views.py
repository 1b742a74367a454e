"""The frozen views of the task's mind: requirements and what serves them, conclusions and
rejected paths, plan versions, semantic memories, and the mind's counters on the task row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from store.jsontypes import JsonArray, JsonMapping, JsonObject, JsonValue

DRIFT_AFTER = 8  # drift_suspected: this many completed nodes in a row serve no requirement
ALIGNMENT_EVERY = 12  # alignment_due: this many completed nodes since the last alignment check
RUN_KEYS = 32  # keys of the current drift run kept on the task row (the newest)


@dataclass(frozen=True)
class MindState:
    """The mind's settings and counters, kept on the task row (``task.mind``) by the writes that
    move them, so every reader judges drift and alignment from the same figures.

    ``run`` completed nodes in a row served no requirement (the newest ``run_keys``; the first
    finished at ``run_since``); ``since_check`` countable nodes completed since the last alignment
    check was answered (at ``checked_at``, verdict ``verdict``); ``check`` the open check's node
    (made at ``due_at``)."""

    requirements: int = 0
    drift_after: int = DRIFT_AFTER
    alignment_every: int = ALIGNMENT_EVERY
    alignment_by: str = "human"  # human | agent: who answers the task's alignment checks
    plan_version: int = 1
    run: int = 0
    run_since: float | None = None
    run_keys: tuple[str, ...] = ()
    since_check: int = 0
    checked_at: float | None = None
    verdict: str | None = None
    check: str | None = None
    due_at: float | None = None
    checks: int = 0  # alignment checks made so far (names the next one)

    @classmethod
    def of(cls, data: object) -> "MindState":
        """From the task row's JSON (None or damaged parts: the defaults)."""
        if not isinstance(data, Mapping):
            return cls()
        out: JsonObject = {}
        for name, want in (("requirements", int), ("drift_after", int), ("alignment_every", int),
                           ("alignment_by", str), ("plan_version", int), ("run", int), ("run_since", float),
                           ("since_check", int), ("checked_at", float), ("verdict", str), ("check", str),
                           ("due_at", float), ("checks", int)):
            v = data.get(name)
            if isinstance(v, bool) or v is None:
                continue
            if want is float and isinstance(v, (int, float)):
                out[name] = float(v)
            elif want is int and isinstance(v, int):
                out[name] = v
            elif want is str and isinstance(v, str):
                out[name] = v
        keys = data.get("run_keys")
        if isinstance(keys, list):
            out["run_keys"] = tuple(str(k) for k in keys[-RUN_KEYS:])
        return cls(**out)

    def to_json(self) -> JsonObject:
        return {"requirements": self.requirements, "drift_after": self.drift_after,
                "alignment_every": self.alignment_every, "alignment_by": self.alignment_by,
                "plan_version": self.plan_version, "run": self.run, "run_since": self.run_since,
                "run_keys": list(self.run_keys), "since_check": self.since_check, "checked_at": self.checked_at,
                "verdict": self.verdict, "check": self.check, "due_at": self.due_at, "checks": self.checks}


class TaskMindRow(NamedTuple):
    """What the mind reads of a task row (``sql.fetch_row``: read by attribute)."""

    task_id: str
    title: str
    status: str
    workflow: str
    constraints: JsonArray | None
    created_at: float
    mind: JsonValue  # MindState.of


@dataclass(frozen=True)
class Requirement:
    id: str
    text: str
    status: str  # active | dropped
    dropped_in: int | None
    position: int
    created_at: float


@dataclass(frozen=True)
class MindEntry:
    """A conclusion (``kind`` finding) or a rejected path (``kind`` rejected, with its ``reason``).
    ``origin``: who wrote it — ``agent`` (``conclude``), ``fail`` (a failed attempt), ``rewind``
    and ``escalate`` (an operator), ``replan`` (nodes a replan removed), ``alignment`` (a check's
    verdict)."""

    id: int
    task_id: str
    node: str | None
    attempt: int
    kind: str
    text: str
    source: str | None
    reason: str | None
    origin: str
    actor: str
    at: float


@dataclass(frozen=True)
class PlanVersionView:
    """A plan version: version 1 is the plan as first built; each replan makes the next."""

    task_id: str
    version: int
    at: float
    actor: str
    trigger: str  # initial | evidence_conflict | pattern | diminishing_returns | operator
    in_flight: str | None  # wait | cancel | discard (None: version 1)
    reason: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    reordered: tuple[str, ...] = ()
    narrowed: JsonMapping | None = None  # {"dropped": [requirement ids], "goal": str | None}
    in_flight_nodes: tuple[JsonMapping, ...] = ()  # {"node", "was", "fate"}
    revision: int | None = None
    dependents_kept: tuple[str, ...] = ()  # unfinished nodes left depending on a removed one


@dataclass(frozen=True)
class MemoryView:
    id: str
    scope: str  # kind | workflow
    workflow: str
    kind: str | None
    text: str
    status: str  # pending | confirmed | rejected
    task_id: str
    node: str
    attempt: int
    proposed_by: str
    proposed_at: float
    decided_by: str | None
    decided_at: float | None
    decision_reason: str | None
    source: str | None = None  # where it came from (a file, a command's output), as its agent said


@dataclass(frozen=True)
class RequirementUse:
    """A requirement and the nodes that serve it (the first ``SERVING_SHOWN``; ``total`` all of
    them, ``done`` those succeeded); abandoned nodes left the plan and are not counted."""

    requirement: Requirement
    nodes: tuple[tuple[str, str], ...]  # (key, status)
    total: int
    done: int


@dataclass(frozen=True)
class MindView:
    """What the Mind screen and ``warden mind`` show of one task."""

    task_id: str
    title: str
    status: str
    state: MindState
    constraints: tuple[str, ...]
    requirements: tuple[RequirementUse, ...]
    unserving: tuple[tuple[str, str], ...]  # countable nodes serving no requirement: (key, status)
    unserving_total: int
    conclusions: tuple[MindEntry, ...]  # newest first
    rejected: tuple[MindEntry, ...]  # newest first
    plans: tuple[PlanVersionView, ...]  # oldest first
    memories: tuple[MemoryView, ...]  # proposed by this task, newest first
    created_at: float
    counts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeMind:
    """A node's place in the task's mind (the node detail shows it): the requirements it serves,
    what a claim of it would be handed now (``Claim.inputs["memory"]``), its own conclusions and
    rejected paths, and the replan that removed it while it ran."""

    serves: tuple[JsonMapping, ...]  # {"id", "text", "status"}
    memory: JsonMapping
    entries: tuple[MindEntry, ...]  # newest first
    removed_in: int | None = None
    removed_mode: str | None = None
    task_requirements: int = 0  # the task's active requirements (0: it judges no drift)

"""The Plan every operator action is first computed as, and the base of each action's params (the
data a plan holds; :class:`~store.actions.action.Action` adds the rest of a registered action).

A :class:`Plan` is a pure value: the exact impact of an action (node status changes, leases
revoked, handoffs withdrawn, effects not undone, warnings) and the task ``revision`` and node
``versions`` it was computed at. Its JSON shape (:meth:`Plan.to_json`) is a contract
(docs/contracts.md "JSON shapes"; the CLI's ``--json`` and the Action audit row). An applied plan is
the plan as applied, and :class:`Differed` says what it found changed since the preview
(store/actions/promise.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Mapping

from store.clock import iso
from store.jsontypes import JsonMapping, JsonObject


class ActionParams:
    """An action's own parameters: a frozen dataclass per action (``ParkParams``, ...), read by
    attribute (``plan.params.node``); :meth:`to_json` is their JSON form (the plan's ``params``)."""

    action: ClassVar[str]
    reason_required: ClassVar[bool] = True

    def to_json(self) -> JsonObject:
        raise NotImplementedError

    def node_target(self, target: str) -> str | None:
        """The node key the action targets, if it targets one node (else None)."""
        return None

    def summary_parts(self) -> list[str]:
        """What the action does beyond node changes, for :meth:`Plan.summary` (default: nothing)."""
        return []


@dataclass(frozen=True)
class Differed:
    """What an applied plan found changed since its preview — changes that kept the preview's
    promise (a refused apply says what broke it instead). Empty when nothing differed."""

    notes: tuple[str, ...] = ()  # one line each: "2 nodes finished meanwhile (left as they are): a, b"
    # one entry per node that differed: {"node", "previewed", "promised", "found", "applied"} — its
    # status at the preview (None: not there yet), what the preview said it would become, its
    # status at the apply, what the apply made it
    nodes: tuple[Mapping[str, str | None], ...] = ()
    preview: JsonMapping = field(default_factory=dict)  # {"revision", "planned_at", "summary"} of the preview

    @property
    def summary(self) -> str:
        """The notes as one line ("" when nothing differed)."""
        return "; ".join(self.notes)

    def __bool__(self) -> bool:
        return bool(self.notes or self.nodes)

    def to_json(self) -> JsonObject:
        return {"summary": self.summary, "notes": list(self.notes), "nodes": [dict(n) for n in self.nodes],
                "preview": dict(self.preview)}

    @classmethod
    def from_json(cls, data: JsonMapping) -> "Differed":
        return cls(notes=tuple(str(n) for n in data.get("notes") or ()),
                   nodes=tuple(dict(n) for n in data.get("nodes") or ()), preview=dict(data.get("preview") or {}))


@dataclass(frozen=True)
class Plan:
    """The exact impact of an operator action, computed at ``revision`` / ``versions``."""

    action: str
    task_id: str
    target: str  # a node key, a task id or a handoff id — always a string
    reason: str
    revision: int
    versions: Mapping[str, int]
    reset: tuple[str, ...] = ()  # nodes that become pending
    abandoned: tuple[str, ...] = ()  # nodes that become abandoned
    parked: tuple[str, ...] = ()  # nodes that become parked
    kept: tuple[str, ...] = ()  # nodes in the action's scope left as they are
    revoked_leases: tuple[Mapping[str, str], ...] = ()
    handoffs_withdrawn: tuple[str, ...] = ()
    resolutions_reapplied: tuple[str, ...] = ()
    effects_not_undone: tuple[JsonMapping, ...] = ()
    # abort: the compensation nodes it adds, in the order they run (newest confirmed effect first)
    compensations: tuple[JsonMapping, ...] = ()
    warnings: tuple[str, ...] = ()
    changes: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # key → (from, to)
    task_status: tuple[str, str] = ("", "")  # (before, after)
    params: ActionParams = field(kw_only=True)  # the action's typed params
    planned_at: float = 0.0
    applied: bool = False
    action_id: int | None = None
    revision_after: int | None = None
    differed: Differed | None = None  # once applied: what it found changed since the preview
    node_ids: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)
    # the status of each node in ``versions`` when planned: what the preview showed of it
    statuses: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def node_target(self) -> str | None:
        """The node key when the action targets one node (rewind, park/resume --node, resolve)."""
        return self.params.node_target(self.target)

    def to_json(self) -> JsonObject:
        """The "plan" shape of docs/contracts.md (+ changes, task_status, params, planned_at)."""
        out: JsonObject = {
            "action": self.action,
            "task_id": self.task_id,
            "target": self.target,
            "reason": self.reason,
            "revision": self.revision,
            "versions": dict(self.versions),
            "reset": list(self.reset),
            "abandoned": list(self.abandoned),
            "parked": list(self.parked),
            "kept": list(self.kept),
            "revoked_leases": [dict(r) for r in self.revoked_leases],
            "handoffs_withdrawn": list(self.handoffs_withdrawn),
            "resolutions_reapplied": list(self.resolutions_reapplied),
            "effects_not_undone": [dict(e) for e in self.effects_not_undone],
            "compensations": [dict(c) for c in self.compensations],
            "warnings": list(self.warnings),
            "changes": {k: {"from": a, "to": b} for k, (a, b) in self.changes.items()},
            "task_status": {"from": self.task_status[0], "to": self.task_status[1]},
            "params": self.params.to_json(),
            "planned_at": iso(self.planned_at),
        }
        if self.applied:
            out["applied"] = True
            out["action_id"] = self.action_id
            out["revision_after"] = self.revision_after
            out["differed"] = (self.differed or Differed()).to_json()
        return out

    def summary(self) -> str:
        """One line saying what the plan does (agent-written keys are not made safe here)."""
        parts = []
        for label, keys in (("→ pending", self.reset), ("→ abandoned", self.abandoned), ("→ parked", self.parked)):
            if keys:
                parts.append(f"{len(keys)} {'node' if len(keys) == 1 else 'nodes'} {label}")
        blocked = [k for k, (_, b) in self.changes.items() if b == "blocked"]
        if blocked:
            parts.append(f"{len(blocked)} → blocked")
        if self.revoked_leases:
            parts.append(f"{len(self.revoked_leases)} lease{'s' if len(self.revoked_leases) != 1 else ''} revoked")
        if self.handoffs_withdrawn:
            parts.append(f"{len(self.handoffs_withdrawn)} handoff(s) withdrawn")
        if self.compensations:
            parts.append(f"{len(self.compensations)} compensation node(s) added")
        a, b = self.task_status
        if a != b:
            parts.append(f"task {a} → {b}")
        parts += self.params.summary_parts()
        if not parts:
            parts.append("no node changes")
        return f"{self.action} {self.target}: " + ", ".join(parts)

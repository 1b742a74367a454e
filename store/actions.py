"""Operator actions: plan (a pure read) → preview → apply (one revision-checked transaction).

Every action is computed first as a :class:`Plan`: the exact node status changes, the leases it
revokes, the handoffs it withdraws, the effects it does *not* undo, warnings, and the task
``revision`` and node ``versions`` it was computed at. :func:`apply` applies exactly that plan in
one write transaction, or — when the task revision or any of those node versions moved — writes
only a refused Action row and raises :class:`StaleRevision`. A heartbeat never bumps a version,
so it never makes a preview stale.

Semantics (see docs/operations.md for before/after examples):

* park task: task → parked (+ parked_at, reason, until, wake_on). Without ``now`` running nodes
  keep their leases and may commit their current step (a heartbeat answers ``parked=True``);
  nothing new is claimed. With ``now`` running nodes → parked and their leases are revoked.
* park node: pending/blocked → parked; a running node needs ``now`` (its lease is revoked).
* resume task: task → active; nodes parked at or after the task's park (by ``--now`` or while it
  was parked) → pending (→ blocked when they still have an open handoff). Nodes parked on their
  own before the task park stay parked: resume them with ``node=``.
* resume node: parked → pending (→ blocked with an open handoff).
* narrow: ``set={K: V}`` and/or ``exclude=[key]``. Out of scope → abandoned (running ones
  revoked, their open handoffs withdrawn); succeeded nodes downstream of a newly abandoned node →
  pending; the task's preconditions take the new values.
* rewind: the node and its downstream closure → pending (running revoked, blocked → pending with
  the handoff withdrawn); the reason is appended to each reset node's ``rejections``; their
  ``claim_count`` restarts (a fresh ``max_claims`` allowance); abandoned and parked nodes in the
  closure are kept as they are; upstream is untouched; a completed or failed task reopens.
* abort: task → aborted; every unfinished node (not succeeded / abandoned) → abandoned; leases
  revoked; open handoffs withdrawn; confirmed effects listed newest first with compensations.
* resolve: the handoff → resolved (option, answer, by, at); its node blocked → pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from . import graph as graph_mod
from .clock import iso, parse_time
from .db import is_sqlite, read_tx, retry_write, write_tx
from .errors import NotFound, Refused, StaleRevision
from .models import Action, Handoff, Node, Task, dumps

ACTIONS = ("park", "resume", "narrow", "rewind", "abort", "resolve", "escalate")
FINISHED = ("succeeded", "abandoned")
CHUNK = 500
SUMMARY_KEYS = 8  # node keys named in a one-line summary before "and N more"


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
    effects_not_undone: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    changes: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # key → (from, to)
    task_status: tuple[str, str] = ("", "")  # (before, after)
    params: Mapping[str, Any] = field(default_factory=dict)
    planned_at: float = 0.0
    applied: bool = False
    action_id: int | None = None
    revision_after: int | None = None
    node_ids: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)

    @property
    def node_target(self) -> str | None:
        """The node key when the action targets one node (rewind, park/resume --node, resolve)."""
        if self.action in ("rewind", "escalate") or (self.action in ("park", "resume") and self.params.get("node")):
            return self.target
        if self.action == "resolve":
            return self.params.get("node")
        return None

    def to_json(self) -> dict[str, Any]:
        """The DESIGN.md "plan" shape (+ changes, task_status, params, planned_at)."""
        out: dict[str, Any] = {
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
            "warnings": list(self.warnings),
            "changes": {k: {"from": a, "to": b} for k, (a, b) in self.changes.items()},
            "task_status": {"from": self.task_status[0], "to": self.task_status[1]},
            "params": dict(self.params),
            "planned_at": iso(self.planned_at),
        }
        if self.applied:
            out["applied"] = True
            out["action_id"] = self.action_id
            out["revision_after"] = self.revision_after
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
        a, b = self.task_status
        if a != b:
            parts.append(f"task {a} → {b}")
        if not parts:
            parts.append("no node changes")
        return f"{self.action} {self.target}: " + ", ".join(parts)


# ---------------------------------------------------------------------- reads
def _ph(ledger: Any) -> str:
    return "?" if is_sqlite(ledger.db) else "%s"


def _rows(ledger: Any, sql: str, params: Sequence[Any]) -> list[tuple]:
    return list(ledger.db.execute_sql(sql, list(params)).fetchall())


def _chunks(seq: Sequence[Any], n: int = CHUNK) -> Iterable[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


_LEAN = "n.id, n.key, n.status, n.version, n.lease_owner, n.lease_token, n.position"


class _N(NamedTuple):
    """The few columns a plan needs (a tuple: plans read up to 100,000 of them)."""

    id: int
    key: str
    status: str
    version: int
    owner: str | None
    lease_token: str | None
    position: int
    extra: Any = None

    @property
    def leased(self) -> bool:
        return self.lease_token is not None


def _lean(rows: Iterable[tuple]) -> list[_N]:
    return [_N(*r) for r in rows]


def _all_nodes(ledger: Any, task_id: str, where: str = "") -> list[_N]:
    ph = _ph(ledger)
    return _lean(_rows(ledger, f"SELECT {_LEAN} FROM node n WHERE n.task_id = {ph}{where} ORDER BY n.position",
                       [task_id]))


def _closure_nodes(ledger: Any, task_id: str, start_ids: Sequence[int]) -> list[_N]:
    """The start nodes and everything downstream of them, in position order: one recursive CTE
    over the edge table's src index, so it reads only the closure. The start ids go in as one
    parameter (a JSON array on SQLite, an array on PostgreSQL), however many there are."""
    if not start_ids:
        return []
    if is_sqlite(ledger.db):
        seed, param = "SELECT value FROM json_each(?)", dumps([int(i) for i in start_ids])
    else:
        seed, param = "SELECT unnest(%s::bigint[])", [int(i) for i in start_ids]
    sql = (f"WITH RECURSIVE down(id) AS ({seed} UNION SELECT e.dst_id FROM edge e JOIN down d ON e.src_id = d.id) "
           f"SELECT {_LEAN} FROM node n JOIN down ON n.id = down.id ORDER BY n.position")
    return _lean(_rows(ledger, sql, [param]))


def _count(ledger: Any, task_id: str, where: str = "") -> int:
    ph = _ph(ledger)
    return int(_rows(ledger, f"SELECT COUNT(*) FROM node n WHERE n.task_id = {ph}{where}", [task_id])[0][0])


def _task(ledger: Any, task_id: str) -> dict[str, Any]:
    if not isinstance(task_id, str) or not task_id:
        raise NotFound(f"unknown task {task_id!r}")
    task = ledger._task_row(task_id)
    if task["status"] == "aborted":
        raise Refused(f"task {task_id} is aborted: nothing can change it")
    return task


def _node_one(ledger: Any, task_id: str, key: str) -> _N:
    ph = _ph(ledger)
    rows = _rows(ledger, f"SELECT {_LEAN}, n.parked_at FROM node n WHERE n.task_id = {ph} AND n.key = {ph}",
                 [task_id, key])
    if not rows:
        raise NotFound(f"unknown node {key!r} in task {task_id!r}")
    return _lean(rows)[0]


def _reason(reason: Any, action: str) -> str:
    text = "" if reason is None else str(reason).strip()
    if not text:
        raise Refused(f"{action} needs a reason (--reason): say why, it is recorded and shown")
    return text


def _open_handoffs(ledger: Any, task_id: str, node_ids: set[int]) -> list[str]:
    if not node_ids:
        return []
    ph = _ph(ledger)
    rows = _rows(ledger, f"SELECT id, node_id FROM handoff WHERE task_id = {ph} AND status = 'open' ORDER BY id",
                 [task_id])
    return [str(h) for h, n in rows if n in node_ids]


def _resolved_latest(ledger: Any, task_id: str, node_ids: set[int]) -> list[str]:
    """The latest resolved handoff of each of these nodes (it goes into the node's next claim)."""
    if not node_ids:
        return []
    ph = _ph(ledger)
    latest: dict[int, int] = {}
    for h, n in _rows(ledger, f"SELECT id, node_id FROM handoff WHERE task_id = {ph} AND status = 'resolved' "
                              "ORDER BY id", [task_id]):
        if n in node_ids:
            latest[n] = h
    return [str(h) for h in sorted(latest.values())]


def _effects(ledger: Any, task_id: str, node_ids: set[int] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Confirmed effects of these nodes (None: the whole task), newest first (the order to undo
    them in), and warnings for effects intended but never confirmed."""
    ph = _ph(ledger)
    rows = _rows(ledger, f"SELECT e.id, n.key, e.effect_key, e.status, e.compensation, e.external_id, e.node_id "
                         f"FROM effect e JOIN node n ON n.id = e.node_id WHERE e.task_id = {ph} "
                         "ORDER BY e.confirmed_at, e.id", [task_id])
    confirmed, warnings = [], []
    for _eid, key, ekey, status, comp, ext, nid in rows:
        if node_ids is not None and nid not in node_ids:
            continue
        if status == "confirmed":
            confirmed.append({"node": key, "effect_key": ekey, "compensation": comp, "external_id": ext})
        elif status == "intended":
            warnings.append(f"effect {ekey} of {key} was intended but never confirmed: check whether it happened")
    confirmed.reverse()
    return confirmed, warnings


def _reopened_status(ledger: Any, task: Mapping[str, Any], changes: Mapping[str, tuple[str, str]]) -> str:
    """Task status after a narrow / rewind / resolve (parked stays parked; the task completes when
    nothing unfinished is left; a completed or failed task with new work reopens)."""
    before = task["status"]
    if before == "parked":
        return before
    if not any(b == "pending" for _, b in changes.values()):
        unfinished = _count(ledger, task["task_id"],  # IN, not NOT IN: a range on the (task, status) index
                            " AND n.status IN ('pending', 'running', 'blocked', 'parked', 'failed')")
        unfinished -= sum(1 for a, b in changes.values() if a not in FINISHED and b in FINISHED)
        if unfinished == 0:
            return "completed"
    if before == "completed" or (before == "failed" and changes):
        return "active"
    return before


def _until(ledger: Any, until: Any) -> float | None:
    if until is None or until == "":
        return None
    if isinstance(until, (int, float)):
        at = float(until)
    else:
        try:
            at = parse_time(str(until), ledger.now())
        except ValueError as e:
            raise Refused(str(e)) from None
    if at <= ledger.now():
        raise Refused(f"--until {iso(at)} is not in the future")
    return at


def _mk(ledger: Any, action: str, task: Mapping[str, Any], target: str, reason: str, nodes: Sequence[_N],
        changes: dict[str, tuple[str, str]], *, kept: Sequence[str] = (), status_after: str | None = None,
        versions_of: Sequence[_N] | None = None, handoffs: Sequence[str] = (), reapplied: Sequence[str] = (),
        effects: Sequence[Mapping[str, Any]] = (), warnings: Sequence[str] = (),
        params: Mapping[str, Any] | None = None) -> Plan:
    by_key = {n.key: n for n in nodes}
    vs = versions_of if versions_of is not None else [by_key[k] for k in changes]
    revoked = tuple({"node": k, "owner": by_key[k].owner or ""} for k, (a, _) in changes.items()
                    if a == "running" and by_key[k].leased)
    return Plan(
        action=action, task_id=task["task_id"], target=str(target), reason=reason, revision=int(task["revision"]),
        versions={n.key: n.version for n in vs},
        reset=tuple(k for k, (_, b) in changes.items() if b == "pending"),
        abandoned=tuple(k for k, (_, b) in changes.items() if b == "abandoned"),
        parked=tuple(k for k, (_, b) in changes.items() if b == "parked"),
        kept=tuple(kept), revoked_leases=revoked, handoffs_withdrawn=tuple(handoffs),
        resolutions_reapplied=tuple(reapplied), effects_not_undone=tuple(effects), warnings=tuple(warnings),
        changes=dict(changes), task_status=(task["status"], status_after or task["status"]),
        params=dict(params or {}), planned_at=ledger.now(),
        node_ids={n.key: n.id for n in vs},
    )


def _names(keys: Sequence[str]) -> str:
    shown = ", ".join(keys[:SUMMARY_KEYS])
    return shown + (f" and {len(keys) - SUMMARY_KEYS} more" if len(keys) > SUMMARY_KEYS else "")


# ---------------------------------------------------------------------- plans
def plan_park(ledger: Any, task_id: str, *, reason: str, node: str | None = None, until: Any = None,
              wake_on: str | None = None, now: bool = False) -> Plan:
    """Park a task (or one node with ``node=``) until an outside signal."""
    with read_tx(ledger.db):
        task = _task(ledger, task_id)
        reason = _reason(reason, "park")
        at = _until(ledger, until)
        params = {"node": node, "until": iso(at), "until_ts": at, "wake_on": wake_on or None, "now": bool(now)}
        if node is not None:
            n = _node_one(ledger, task_id, node)
            if task["status"] == "completed":
                raise Refused(f"task {task_id} is completed: nothing to park")
            if n.status == "running" and not now:
                raise Refused(f"node {node} is running: use --now to stop it (its lease is revoked)")
            if n.status == "parked":
                raise Refused(f"node {node} is already parked")
            if n.status not in ("pending", "blocked", "running"):
                raise Refused(f"node {node} is {n.status}: nothing to park")
            warnings = []
            if n.status == "blocked":
                warnings.append(f"node {node} has an open handoff; it stays open while the node is parked")
            return _mk(ledger, "park", task, node, reason, [n], {n.key: (n.status, "parked")}, warnings=warnings,
                       params=params)
        if task["status"] == "parked":
            raise Refused(f"task {task_id} is already parked (to stop a running node: park it with --node KEY --now)")
        if task["status"] in ("completed", "failed"):
            raise Refused(f"task {task_id} is {task['status']}: nothing runs, nothing to park")
        nodes = _all_nodes(ledger, task_id)
        running = [n for n in nodes if n.status == "running"]
        changes: dict[str, tuple[str, str]] = {}
        warnings = []
        if now:
            changes = {n.key: ("running", "parked") for n in running}
        elif running:
            warnings.append(f"{len(running)} running node(s) keep their leases and may finish their current step: "
                            f"{_names([n.key for n in running])} (use --now to stop them)")
        kept = [n.key for n in nodes if n.key not in changes]
        return _mk(ledger, "park", task, task_id, reason, nodes, changes, kept=kept, status_after="parked",
                   warnings=warnings, params=params)


def plan_resume(ledger: Any, task_id: str, *, node: str | None = None, reason: str | None = None) -> Plan:
    """Undo a park. A reason is optional."""
    reason = "" if reason is None else str(reason).strip()
    with read_tx(ledger.db):
        task = _task(ledger, task_id)
        params = {"node": node}
        if node is not None:
            n = _node_one(ledger, task_id, node)
            if n.status != "parked":
                raise Refused(f"node {node} is not parked (it is {n.status})")
            to = "blocked" if _open_handoffs(ledger, task_id, {n.id}) else "pending"
            warnings = []
            if task["status"] == "parked":
                warnings.append(f"task {task_id} is still parked: nothing is claimed until it is resumed")
            return _mk(ledger, "resume", task, node, reason, [n], {n.key: ("parked", to)}, warnings=warnings,
                       params=params)
        if task["status"] != "parked":
            raise Refused(f"task {task_id} is not parked (it is {task['status']})")
        ph = _ph(ledger)
        nodes = _lean(_rows(ledger, f"SELECT {_LEAN}, n.parked_at FROM node n WHERE n.task_id = {ph} "
                                    "AND n.status = 'parked' ORDER BY n.position", [task_id]))
        since = task["parked_at"] if task["parked_at"] is not None else float("-inf")
        ours = [n for n in nodes if n.extra is not None and n.extra >= since]
        our_ids = {n.id for n in ours}
        kept = [n.key for n in nodes if n.id not in our_ids]
        with_handoff = {nid for _h, nid in _rows(
            ledger, f"SELECT id, node_id FROM handoff WHERE task_id = {ph} AND status = 'open'", [task_id])}
        changes = {n.key: ("parked", "blocked" if n.id in with_handoff else "pending") for n in ours}
        warnings = []
        if kept:
            warnings.append(f"{len(kept)} node(s) parked on their own before the task stay parked: {_names(kept)} "
                            "(resume each with --node KEY)")
        return _mk(ledger, "resume", task, task_id, reason, nodes, changes, kept=kept, status_after="active",
                   warnings=warnings, params=params)


def _in_scope(node_value: Any, value: Any) -> bool:
    if node_value == value:
        return True
    if isinstance(node_value, list) and value in node_value:
        return True
    if isinstance(value, list) and not isinstance(node_value, list) and node_value in value:
        return True
    return False


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def plan_narrow(ledger: Any, task_id: str, *, reason: str, set: Mapping[str, Any] | None = None,  # noqa: A002
                exclude: Sequence[str] = ()) -> Plan:
    """Narrow the task's scope: ``set={K: V}`` and/or ``exclude=[node keys]``."""
    assignments = dict(set or {})
    excluded = list(dict.fromkeys(exclude or ()))
    with read_tx(ledger.db):
        task = _task(ledger, task_id)
        reason = _reason(reason, "narrow")
        if not assignments and not excluded:
            raise Refused("narrow needs --set K=V or --exclude KEY")
        for k in assignments:
            if not isinstance(k, str) or not k:
                raise Refused(f"invalid precondition name {k!r}")
        dumps(assignments)
        # Only the nodes whose preconditions mention one of the names are read and parsed (the
        # stored JSON is canonical, so a name K appears as "K":), plus the excluded keys.
        ph = _ph(ledger)
        conds, params_sql = [], []
        for k in assignments:
            conds.append(f"n.preconditions LIKE {ph} ESCAPE '\\'")
            params_sql.append(f"%{_like_escape(dumps(k))}:%")
        candidates: dict[str, _N] = {}
        if conds:
            for r in _rows(ledger, f"SELECT {_LEAN}, n.preconditions FROM node n WHERE n.task_id = {ph} "
                                   f"AND ({' OR '.join(conds)})", [task_id, *params_sql]):
                candidates[r[1]] = _N(*r)
        for chunk in _chunks(excluded):
            for r in _rows(ledger, f"SELECT {_LEAN}, NULL FROM node n WHERE n.task_id = {ph} "
                                   f"AND n.key IN ({','.join([ph] * len(chunk))})", [task_id, *chunk]):
                candidates.setdefault(r[1], _N(*r))
        for k in excluded:
            if k not in candidates:
                raise NotFound(f"unknown node {k!r} in task {task_id!r}")
        import json as _json

        why: dict[str, str] = {}
        excl = {*excluded}
        for n in sorted(candidates.values(), key=lambda n: n.position):
            if n.key in excl:
                why[n.key] = "excluded"
                continue
            if n.extra is None:
                continue
            pre = _json.loads(n.extra)
            for k, v in assignments.items():
                if k in pre and not _in_scope(pre[k], v):
                    why[n.key] = f"{k}={dumps(pre[k])}"
                    break
        newly = [candidates[k] for k in why if candidates[k].status != "abandoned"]
        changes: dict[str, tuple[str, str]] = {n.key: (n.status, "abandoned") for n in newly}
        closure = _closure_nodes(ledger, task_id, [n.id for n in newly])
        still_running, kept = [], []
        for n in closure:
            if n.key in changes:
                continue
            if n.status == "succeeded":
                changes[n.key] = ("succeeded", "pending")
            else:
                kept.append(n.key)
                if n.status == "running":
                    still_running.append(n.key)
        old_pre = dict(task["preconditions"] or {})
        new_pre = {**old_pre, **assignments}
        if not changes and new_pre == old_pre:
            raise Refused("this narrow changes nothing: every node is already in that scope")
        all_by_key = {n.key: n for n in closure}
        for n in newly:
            all_by_key.setdefault(n.key, n)
        ab_ids = {all_by_key[k].id for k, (_, b) in changes.items() if b == "abandoned"}
        reset_ids = {all_by_key[k].id for k, (_, b) in changes.items() if b == "pending"}
        effects, ewarn = _effects(ledger, task_id, ab_ids | reset_ids)
        warnings = [f"{len(still_running)} running node(s) downstream of abandoned work keep running on their old "
                    f"inputs: {_names(still_running)}"] if still_running else []
        warnings += ewarn
        after = _reopened_status(ledger, task, changes)
        if after == "completed" and task["status"] != "completed":
            warnings.append("every node is then succeeded or abandoned: the task completes")
        params = {"set": assignments, "exclude": excluded, "preconditions_before": old_pre,
                  "preconditions_after": new_pre,
                  "out_of_scope": {n.key: why[n.key] for n in newly},
                  "unaffected": _count(ledger, task_id) - len(changes) - len(kept)}
        return _mk(ledger, "narrow", task, task_id, reason, list(all_by_key.values()), changes, kept=kept,
                   status_after=after, versions_of=list(all_by_key.values()),
                   handoffs=_open_handoffs(ledger, task_id, ab_ids),
                   reapplied=_resolved_latest(ledger, task_id, reset_ids), effects=effects, warnings=warnings,
                   params=params)


def plan_rewind(ledger: Any, task_id: str, node: str, *, reason: str) -> Plan:
    """Rewind a node: it and everything downstream → pending, the reason fed back to the agent."""
    with read_tx(ledger.db):
        task = _task(ledger, task_id)
        reason = _reason(reason, "rewind")
        n = _node_one(ledger, task_id, node)
        if n.status == "pending":
            raise Refused(f"node {node} is pending: nothing to rewind")
        if n.status == "parked":
            raise Refused(f"node {node} is parked and has nothing to rewind: resume it instead")
        if n.status == "abandoned":
            raise Refused(f"node {node} is abandoned (out of scope): it cannot be rewound")
        closure = _closure_nodes(ledger, task_id, [n.id])
        changes: dict[str, tuple[str, str]] = {}
        kept, parked = [], []
        for c in closure:
            if c.status in ("succeeded", "failed", "running", "blocked"):
                changes[c.key] = (c.status, "pending")
            else:
                kept.append(c.key)
                if c.status == "parked":
                    parked.append(c.key)
        ids = {c.id for c in closure if c.key in changes}
        blocked_ids = {c.id for c in closure if changes.get(c.key, ("",))[0] == "blocked"}
        effects, ewarn = _effects(ledger, task_id, ids)
        warnings = []
        if parked:
            warnings.append(f"parked node(s) downstream stay parked: {_names(parked)}")
        warnings += ewarn
        after = _reopened_status(ledger, task, changes)
        return _mk(ledger, "rewind", task, node, reason, closure, changes, kept=kept, status_after=after,
                   versions_of=closure, handoffs=_open_handoffs(ledger, task_id, blocked_ids),
                   reapplied=_resolved_latest(ledger, task_id, ids), effects=effects, warnings=warnings,
                   params={"node": node})


def plan_abort(ledger: Any, task_id: str, *, reason: str) -> Plan:
    """Abort a task: every unfinished node abandoned, leases revoked, open handoffs withdrawn."""
    with read_tx(ledger.db):
        task = _task(ledger, task_id)
        reason = _reason(reason, "abort")
        nodes = _all_nodes(ledger, task_id)
        changes = {n.key: (n.status, "abandoned") for n in nodes if n.status not in FINISHED}
        kept = [n.key for n in nodes if n.key not in changes]
        ph = _ph(ledger)
        handoffs = [str(r[0]) for r in _rows(ledger, f"SELECT id FROM handoff WHERE task_id = {ph} AND status = 'open' "
                                                     "ORDER BY id", [task_id])]
        effects, warnings = _effects(ledger, task_id, None)
        if task["status"] == "completed":
            warnings.insert(0, f"task {task_id} is completed: aborting only marks it aborted")
        if effects:
            warnings.insert(0, f"{len(effects)} confirmed effect(s) are not undone: compensate them newest first")
        return _mk(ledger, "abort", task, task_id, reason, nodes, changes, kept=kept, status_after="aborted",
                   handoffs=handoffs, effects=effects, warnings=warnings, params={})


def plan_resolve(ledger: Any, handoff_id: str, *, option: str | None = None, answer: str | None = None) -> Plan:
    """Resolve a needs_human handoff with one of its options (and an optional answer)."""
    with read_tx(ledger.db):
        h = _handoff_row(ledger, handoff_id)
        hid = str(h["id"])
        task = _task(ledger, h["task"])
        if h["status"] != "open":
            raise Refused(_not_open(h))
        offered = [str(o.get("id")) for o in (h["options"] or [])]
        option = None if option is None or str(option) == "" else str(option)
        answer = None if answer is None or str(answer).strip() == "" else str(answer)
        if offered:
            if option is None:
                raise Refused(f"handoff {hid} needs --option: one of {', '.join(offered)}")
            if option not in offered:
                raise Refused(f"option {option!r} is not offered by handoff {hid}: one of {', '.join(offered)}")
        elif option is not None:
            raise Refused(f"handoff {hid} offers no options: answer it with --answer TEXT")
        elif answer is None:
            raise Refused(f"handoff {hid} offers no options: answer it with --answer TEXT")
        reason = " — ".join(x for x in (option, answer) if x)
        ph = _ph(ledger)
        n = _lean(_rows(ledger, f"SELECT {_LEAN} FROM node n WHERE n.id = {ph}", [h["node"]]))[0]
        changes: dict[str, tuple[str, str]] = {}
        warnings = []
        if n.status == "blocked":
            changes[n.key] = ("blocked", "pending")
        elif n.status == "parked":
            warnings.append(f"node {n.key} is parked: it stays parked until resumed, then runs with this resolution")
        else:
            warnings.append(f"node {n.key} is {n.status}: the resolution is recorded for its next claim")
        after = _reopened_status(ledger, task, changes)
        return _mk(ledger, "resolve", task, hid, reason, [n], changes, status_after=after, versions_of=[n],
                   warnings=warnings,
                   params={"handoff": hid, "node": n.key, "option": option, "answer": answer,
                           "question": h["question"]})


ESCALATE_OPTIONS = (
    {"id": "replay", "label": "Replay as a new attempt",
     "consequence": "the node runs again from its inputs under a new attempt; nothing of the earlier run is reused"},
    {"id": "continue", "label": "Continue with my answer",
     "consequence": "the node runs again and its agent reads the answer (e.g. what was fixed or done by hand)"},
)


def plan_escalate(ledger: Any, task_id: str, node: str, *, reason: str, question: str | None = None,
                  context: Mapping[str, Any] | None = None) -> Plan:
    """Raise a needs_human handoff on a node from the operator's side (e.g. the recovery wizard
    found a run linked to it whose evidence is incomplete): the node → blocked, a running lease is
    revoked, and an ``exception`` handoff asks what should happen. Resolving it makes the node
    pending again, with the resolution in its next claim's inputs."""
    with read_tx(ledger.db):
        task = _task(ledger, task_id)
        reason = _reason(reason, "escalate")
        n = _node_one(ledger, task_id, node)
        if n.status == "blocked":
            raise Refused(f"node {node} is already waiting for a human (see `warden handoffs`)")
        if n.status in ("succeeded", "abandoned", "parked"):
            raise Refused(f"node {node} is {n.status}: "
                          + ("rewind it first if its result is in doubt" if n.status == "succeeded"
                             else "there is nothing to ask about"))
        q = (question or "").strip() or f"What should happen to node {node}?"
        ctx = dict(context or {})
        dumps(ctx)
        warnings = []
        if n.status == "running":
            warnings.append(f"node {node} is running: its lease ({n.owner or 'unknown'}) is revoked; "
                            "the agent's next write is refused")
        changes = {n.key: (n.status, "blocked")}
        return _mk(ledger, "escalate", task, node, reason, [n], changes, versions_of=[n], warnings=warnings,
                   params={"node": node, "question": q, "context": ctx, "kind": "exception",
                           "options": [dict(o) for o in ESCALATE_OPTIONS], "recommendation": "replay"})


def _handoff_row(ledger: Any, handoff_id: Any) -> dict[str, Any]:
    try:
        hid = int(str(handoff_id))
    except ValueError:
        raise NotFound(f"unknown handoff {handoff_id!r}") from None
    row = ledger._q(Handoff.select().where(Handoff.id == hid)).dicts().first()
    if row is None:
        raise NotFound(f"unknown handoff {handoff_id!r}")
    return row


def _not_open(h: Mapping[str, Any]) -> str:
    if h["status"] == "resolved":
        return (f"handoff {h['id']} was already resolved by {h['resolved_by']} at {iso(h['resolved_at'])} "
                f"(option {h['resolution_option']})")
    if h["status"] == "withdrawn":
        return f"handoff {h['id']} was withdrawn by {h['resolved_by'] or 'an operator'} at {iso(h['resolved_at'])}"
    return f"handoff {h['id']} is {h['status']}"


# ---------------------------------------------------------------------- apply
@retry_write
def apply(ledger: Any, plan: Plan, *, operator: str) -> Plan:
    """Apply exactly ``plan`` in one write transaction, or raise ``StaleRevision`` (writing only a
    refused Action row) when the ledger changed since the plan was computed."""
    if not isinstance(plan, Plan):
        raise Refused("apply needs a Plan from ledger.plan_*")
    if plan.applied:
        raise Refused(f"this plan was already applied (action {plan.action_id})")
    operator = (operator or "").strip()
    if not operator:
        raise Refused("an operator name is required (who acts)")
    if plan.action in ("park", "narrow", "rewind", "abort", "escalate"):
        _reason(plan.reason, plan.action)
    stale: str | None = None
    current_rev: int | None = None
    with write_tx(ledger.db):
        now = ledger.now()
        # FOR UPDATE on PostgreSQL: the task row first (the one lock order), excluding claims (KEY
        # SHARE) and agent writes (NO KEY UPDATE) while the revision is checked and the plan applied.
        task = ledger._task_row(plan.task_id, for_update=True)
        current_rev = int(task["revision"])
        stale = _stale(ledger, plan, task)
        if stale is None:
            result = _execute(ledger, plan, task, operator, now)
    if stale is not None:
        with write_tx(ledger.db):
            ledger._q(Action.insert(
                at=ledger.now(), operator=operator, action=plan.action, task_id=plan.task_id, target=plan.target,
                reason=plan.reason, plan=plan.to_json(), result="refused", refused_why=stale,
                revision_before=plan.revision, revision_after=current_rev,
            )).execute()
        raise StaleRevision(stale)
    return result


def _stale(ledger: Any, plan: Plan, task: Mapping[str, Any]) -> str | None:
    if plan.action == "resolve":
        h = ledger._q(Handoff.select().where(Handoff.id == int(plan.target))).dicts().first()
        if h is None or h["status"] != "open":
            return _not_open(h) if h is not None else f"handoff {plan.target} no longer exists"
    if task["status"] == "aborted":
        return f"task {plan.task_id} was aborted since the preview; nothing changed"
    rev = int(task["revision"])
    ids = _ids(ledger, plan)
    moved = []
    keys = list(plan.versions)
    ph = _ph(ledger)
    id_list = [ids[k] for k in keys if k in ids]
    missing = [k for k in keys if k not in ids]
    current: dict[int, int] = {}
    for chunk in _chunks(id_list):
        for i, v in _rows(ledger, f"SELECT id, version FROM node WHERE id IN ({','.join([ph] * len(chunk))})",
                          list(chunk)):
            current[i] = int(v)
    key_of = {i: k for k, i in ids.items()}
    for i in id_list:
        if current.get(i) != plan.versions[key_of[i]]:
            moved.append((key_of[i], plan.versions[key_of[i]], current.get(i)))
    if rev == plan.revision and not moved and not missing:
        return None
    detail = ""
    if moved:
        k, a, b = moved[0]
        detail = f"; node {k} version {a} → {b}" + (f" and {len(moved) - 1} more" if len(moved) > 1 else "")
    return f"the ledger changed since the preview (revision {plan.revision} → {rev}{detail}); review again"


def _ids(ledger: Any, plan: Plan) -> dict[str, int]:
    ids = dict(plan.node_ids)
    need = [k for k in list(plan.versions) + list(plan.changes) if k not in ids]
    if need:
        ids.update(ledger._ids_for_keys(plan.task_id, need))
    return ids


def _execute(ledger: Any, plan: Plan, task: Mapping[str, Any], operator: str, now: float) -> Plan:
    ids = _ids(ledger, plan)
    p = plan.params
    by_to: dict[str, list[int]] = {}
    for k, (_, to) in plan.changes.items():
        by_to.setdefault(to, []).append(ids[k])
    bump = {"version": INC}
    revoke = {"lease_token": None, "lease_until": None}
    unpark = {"parked_at": None, "park_reason": None, "park_until": None, "wake_on": None}
    for to, id_list in by_to.items():
        if to == "abandoned":
            _update(ledger, id_list, status="abandoned", finished_at=now, next_retry_at=None, **revoke, **bump)
        elif to == "parked":
            _update(ledger, id_list, status="parked", parked_at=now, park_reason=plan.reason,
                    park_until=p.get("until_ts"), wake_on=p.get("wake_on"), **revoke, **bump)
        elif to == "blocked":
            _update(ledger, id_list, status="blocked", **unpark, **revoke, **bump)
        elif to == "pending":
            if plan.action == "resume":
                _update(ledger, id_list, status="pending", **unpark, **revoke, **bump)
            elif plan.action == "resolve":
                _update(ledger, id_list, status="pending", **revoke, **bump)
            else:  # rewind, narrow: a fresh start for these nodes
                fields = dict(status="pending", finished_at=None, next_retry_at=None, claim_count=0,
                              **revoke, **bump)
                if plan.action == "rewind":
                    _append_rejections(ledger, id_list, plan.reason, fields)
                else:
                    _update(ledger, id_list, **fields)
        else:  # pragma: no cover - plans only produce the statuses above
            raise Refused(f"cannot apply a change to {to!r}")
    if plan.handoffs_withdrawn:
        hids = [int(h) for h in plan.handoffs_withdrawn]
        for chunk in _chunks(hids):
            ledger._q(Handoff.update(status="withdrawn", resolved_by=operator, resolved_at=now)
                      .where(Handoff.id.in_(list(chunk)) & (Handoff.status == "open"))).execute()
    if plan.action == "resolve":
        n = ledger._q(Handoff.update(status="resolved", resolution_option=p.get("option"),
                                     resolution_answer=p.get("answer"), resolved_by=operator, resolved_at=now)
                      .where((Handoff.id == int(plan.target)) & (Handoff.status == "open"))).execute()
        if n != 1:  # cannot happen under the write lock after _stale; refuse rather than double-resolve
            raise RuntimeError("handoff changed under the write lock")
    handoff_id = None
    if plan.action == "escalate":
        ctx = dict(p.get("context") or {})
        ctx.setdefault("why", plan.reason)
        node_id = ids[plan.target]
        attempt = ledger._fetch("SELECT attempt FROM node WHERE id = ?", [node_id])["attempt"]
        handoff_id = int(ledger._q(Handoff.insert(
            task=plan.task_id, node=node_id, kind=p.get("kind", "exception"), question=p["question"], context=ctx,
            options=list(p.get("options") or []), recommendation=p.get("recommendation"), status="open",
            opened_at=now, opened_by=operator, attempt=attempt)).execute())
    # the task row: one revision bump for the action itself
    tfields: dict[str, Any] = {}
    after = plan.task_status[1]
    if plan.action == "park" and not p.get("node"):
        tfields.update(status="parked", parked_at=now, park_reason=plan.reason, park_until=p.get("until_ts"),
                       wake_on=p.get("wake_on"))
    elif plan.action == "resume" and not p.get("node"):
        tfields.update(status="active", parked_at=None, park_reason=None, park_until=None, wake_on=None)
    elif plan.action == "abort":
        tfields.update(status="aborted", finished_at=now)
    elif plan.action in ("narrow", "rewind", "resolve"):
        if plan.action == "narrow":
            tfields["preconditions"] = dict(p.get("preconditions_after") or task["preconditions"] or {})
        if task["status"] in ("completed", "failed") and after == "active":
            tfields.update(status="active", finished_at=None)
    ledger._bump_task(plan.task_id, updated_at=now, **tfields)
    rev_after = int(task["revision"]) + 1
    shown = plan.to_json()
    action_id = int(ledger._q(Action.insert(
        at=now, operator=operator, action=plan.action, task_id=plan.task_id, target=plan.target, reason=plan.reason,
        plan=shown, result="applied", revision_before=plan.revision, revision_after=rev_after,
    )).execute())
    payload: dict[str, Any] = {
        "nodes": list(plan.changes), "action_id": action_id, "reason": plan.reason,
        "revoked_leases": [dict(r) for r in plan.revoked_leases],
        "handoffs_withdrawn": list(plan.handoffs_withdrawn),
        "task_status": list(plan.task_status), "revision": rev_after,
    }
    if plan.action == "resolve":
        payload.update(handoff=plan.target, option=p.get("option"), answer=p.get("answer"))
    if plan.action == "narrow":
        payload.update(preconditions=p.get("preconditions_after"))
    if handoff_id is not None:
        payload.update(handoff=str(handoff_id), question=p.get("question"))
    ledger._journal(plan.task_id, plan.node_target, "operator", f"operator.{plan.action}", operator,
                    _event_summary(plan), payload, at=now)
    # Consequences the action itself does not choose: the task completes or fails as the graph says.
    if plan.action in ("narrow", "rewind", "resolve"):
        ledger._maybe_complete_task(plan.task_id, now)
        ledger._maybe_fail_task(plan.task_id, now)
        final = int(ledger._q(Task.select(Task.revision).where(Task.task_id == plan.task_id)).scalar())
        if final != rev_after:
            rev_after = final
            ledger._q(Action.update(revision_after=final).where(Action.id == action_id)).execute()
    if handoff_id is not None:
        plan = replace(plan, params={**plan.params, "handoff": str(handoff_id)})
    return replace(plan, applied=True, action_id=action_id, revision_after=rev_after)


def _event_summary(plan: Plan) -> str:
    s = plan.summary()
    if plan.reason:
        s += f" — {plan.reason}"
    return s[:500]


class _Inc:
    """``column = column + 1`` in a raw update."""


INC = _Inc()
_JSON_COLUMNS = {"rejections", "preconditions", "output"}


def _update(ledger: Any, id_list: Sequence[int], **fields: Any) -> None:
    """One raw ``UPDATE node SET … WHERE id IN (…)`` per chunk (a set-based update; building the
    same query with Peewee costs more than running it at 10,000 ids)."""
    ph = _ph(ledger)
    sets, values = [], []
    for col, v in fields.items():
        if v is INC:
            sets.append(f"{col} = {col} + 1")
        else:
            sets.append(f"{col} = {ph}")
            values.append(dumps(v) if col in _JSON_COLUMNS and v is not None else v)
    head = f"UPDATE node SET {', '.join(sets)} WHERE id IN "
    for chunk in _chunks(list(id_list)):
        ledger.db.execute_sql(head + f"({','.join([ph] * len(chunk))})", [*values, *chunk])


def _append_rejections(ledger: Any, id_list: Sequence[int], reason: str, fields: Mapping[str, Any]) -> None:
    """Append ``reason`` to each node's rejections: one UPDATE per distinct current list."""
    ph = _ph(ledger)
    groups: dict[str, list[int]] = {}
    for chunk in _chunks(list(id_list)):
        for i, rej in _rows(ledger, f"SELECT id, rejections FROM node WHERE id IN ({','.join([ph] * len(chunk))})",
                            list(chunk)):
            groups.setdefault(rej or "[]", []).append(i)
    import json as _json

    for rej, members in groups.items():
        new = list(_json.loads(rej) or []) + [reason]
        _update(ledger, members, rejections=new, **fields)

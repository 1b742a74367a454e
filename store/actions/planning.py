"""What every plan reads and how it is assembled: lean node rows (a plan may read 100,000 of them),
downstream closures, open handoffs, effects, the task's status after the change, and
:func:`make_plan`. Reads only; plans run in one read snapshot (``db.read_tx``)."""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

from store.storage import sql
from store.clock import iso, parse_time
from store.errors import InvalidValue, NotFound, Refused
from store.jsontypes import JsonMapping, JsonObject, JsonValue
from store.storage.core import TASK_LOCKS, UNFINISHED_SQL, LedgerCore, TaskLock
from store.storage.core import drifting as core_drifting
from store.validate import TIME_MAX, TIME_MIN, show
from store.actions.plan import ActionParams, Plan

FINISHED = ("succeeded", "abandoned")
SUMMARY_KEYS = 8  # node keys named in a one-line summary before "and N more"
LEAN = "n.id, n.key, n.status, n.version, n.lease_owner, n.lease_token, n.position"


class TaskState(NamedTuple):
    """What an operator action reads of its task's row."""

    task_id: str
    status: str
    revision: int
    preconditions: JsonObject | None  # {name: value}
    parked_at: float | None
    wake_state: JsonObject | None  # the parks' wake conditions (store/parks/conditions.py)
    mind: JsonValue  # the task's mind counters (store/mind/views.py MindState; an alignment verdict moves them)
    origin: str | None  # which integration made the task (run, mcp, claude, codex, python…); None before schema 4


def read_task(core: LedgerCore, task_id: str, *, lock: TaskLock | None = None) -> TaskState:
    """The task's row as :class:`TaskState`; on PostgreSQL ``lock`` takes a row lock (an action
    applies under "exclusive": store/storage/core.py TASK_LOCKS)."""
    clause = sql.lock(core.db, TASK_LOCKS[lock]) if lock else ""
    row = sql.fetch_row(core.db, TaskState, f"SELECT {sql.columns(TaskState)} FROM task WHERE task_id = ?{clause}",
                        [task_id])
    if row is None:
        raise NotFound(f"unknown task {task_id!r}")
    return row


class LeanNode(NamedTuple):
    """The few columns a plan needs (a tuple: plans read up to 100,000 of them), and one extra
    column a plan may ask for (``parked_at``, ``preconditions``)."""

    id: int
    key: str
    status: str
    version: int
    owner: str | None
    lease_token: str | None
    position: int
    extra: str | float | None = None  # ``parked_at``, or ``preconditions`` as stored (JSON text)

    @property
    def leased(self) -> bool:
        return self.lease_token is not None


def lean(core: LedgerCore, statement: str, params: Sequence[object]) -> list[LeanNode]:
    """The nodes a ``SELECT {LEAN}, extra`` statement reads (``NULL`` when it needs none)."""
    return sql.fetch_rows(core.db, LeanNode, statement, params)


def all_nodes(core: LedgerCore, task_id: str) -> list[LeanNode]:
    return lean(core, f"SELECT {LEAN}, NULL FROM node n WHERE n.task_id = ? ORDER BY n.position", [task_id])


def closure_nodes(core: LedgerCore, start_ids: Sequence[int]) -> list[LeanNode]:
    """The start nodes and everything downstream of them, in position order: one recursive CTE
    over the edge table's src index, so it reads only the closure."""
    if not start_ids:
        return []
    seed, param = sql.id_array(core.db, start_ids)
    return lean(
        core, f"WITH RECURSIVE down(id) AS ({seed} UNION SELECT e.dst_id FROM edge e JOIN down d "
                 f"ON e.src_id = d.id) SELECT {LEAN}, NULL FROM node n JOIN down ON n.id = down.id ORDER BY n.position",
        [param])


def count(core: LedgerCore, task_id: str, where: str = "") -> int:
    return int(sql.fetch_all(core.db, f"SELECT COUNT(*) FROM node n WHERE n.task_id = ?{where}", [task_id])[0][0])


def open_task(core: LedgerCore, task_id: str) -> TaskState:
    """The task row of a task an action may change (not aborted)."""
    if not isinstance(task_id, str) or not task_id:
        raise NotFound(f"unknown task {task_id!r}")
    task = read_task(core, task_id)
    if task.status == "aborted":
        raise Refused(f"task {task_id} is aborted: nothing can change it")
    return task


def node_one(core: LedgerCore, task_id: str, key: str) -> LeanNode:
    found = lean(core, f"SELECT {LEAN}, n.parked_at FROM node n WHERE n.task_id = ? AND n.key = ?", [task_id, key])
    if not found:
        raise NotFound(f"unknown node {key!r} in task {task_id!r}")
    return found[0]


def node_by_id(core: LedgerCore, node_id: int) -> LeanNode:
    return lean(core, f"SELECT {LEAN}, NULL FROM node n WHERE n.id = ?", [node_id])[0]


def require_reason(reason: object, action: str) -> str:
    text = "" if reason is None else str(reason).strip()
    if not text:
        raise Refused(f"{action} needs a reason (--reason): say why, it is recorded and shown")
    return text


def open_handoffs(core: LedgerCore, task_id: str, node_ids: set[int]) -> list[str]:
    """The open handoffs of these nodes, oldest first."""
    if not node_ids:
        return []
    found = sql.fetch_all(core.db, "SELECT id, node_id FROM handoff WHERE task_id = ? AND status = 'open' ORDER BY id",
                          [task_id])
    return [str(h) for h, n in found if n in node_ids]


def nodes_with_open_handoffs(core: LedgerCore, task_id: str) -> set[int]:
    return {n for _h, n in sql.fetch_all(core.db, "SELECT id, node_id FROM handoff WHERE task_id = ? "
                                                  "AND status = 'open'", [task_id])}


def _latest_resolved(core: LedgerCore, task_id: str, node_ids: set[int]) -> dict[int, tuple[int, bool]]:
    """node id → (its latest resolved handoff, whether that handoff answered one LangGraph
    interrupt: its context names an ``interrupt_id``)."""
    latest: dict[int, tuple[int, bool]] = {}
    if not node_ids:
        return latest
    for h, n, ctx in sql.fetch_all(core.db, "SELECT id, node_id, context FROM handoff WHERE task_id = ? "
                                            "AND status = 'resolved' ORDER BY id", [task_id]):
        if n in node_ids:
            context = sql.json_value(ctx)
            latest[n] = (h, isinstance(context, dict) and context.get("interrupt_id") is not None)
    return latest


def resolved_latest(core: LedgerCore, task_id: str, node_ids: set[int]) -> list[str]:
    """The latest resolved handoff of each of these nodes that the node's rerun is given again
    (its next claim's ``inputs["resolution"]``). Not one that answered a LangGraph interrupt: a
    rerun of that node raises a new interrupt and the adapter asks again (:func:`asked_again`)."""
    return [str(h) for h, once in sorted(_latest_resolved(core, task_id, node_ids).values()) if not once]


def asked_again(core: LedgerCore, task_id: str, node_ids: set[int], keys: Mapping[int, str]) -> list[str]:
    """Warnings for the nodes whose latest answer was to a LangGraph interrupt: their rerun asks again."""
    return [f"handoff {h} answered a LangGraph interrupt of {keys.get(n, n)}: its rerun asks again (a new handoff)"
            for n, (h, once) in sorted(_latest_resolved(core, task_id, node_ids).items(), key=lambda x: x[1])
            if once]


def effects(core: LedgerCore, task_id: str, node_ids: set[int] | None) -> tuple[list[JsonObject], list[str]]:
    """Confirmed effects of these nodes (None: the whole task), newest first (the order to undo
    them in), and warnings for effects intended but never confirmed."""
    found = sql.fetch_all(core.db, "SELECT e.id, n.key, e.effect_key, e.status, e.compensation, e.external_id, "
                                   "e.node_id FROM effect e JOIN node n ON n.id = e.node_id WHERE e.task_id = ? "
                                   "ORDER BY e.confirmed_at, e.id", [task_id])
    confirmed, warnings = [], []
    for _eid, key, ekey, status, comp, ext, nid in found:
        if node_ids is not None and nid not in node_ids:
            continue
        if status == "confirmed":
            confirmed.append({"node": key, "effect_key": ekey, "compensation": comp, "external_id": ext})
        elif status == "intended":
            warnings.append(f"effect {ekey} of {key} was intended but never confirmed: check whether it happened")
    confirmed.reverse()
    return confirmed, warnings


def reopened_status(core: LedgerCore, task: TaskState, changes: Mapping[str, tuple[str, str]], *,
                    drifting: bool | None = None) -> str:
    """Task status after a narrow / rewind / resolve (parked stays parked; the task completes when
    nothing unfinished is left and no ``drifting`` alignment verdict waits for its answer — the
    task's own, or ``drifting`` as the action leaves it; a completed or failed task with new work
    reopens)."""
    before = task.status
    if before == "parked":
        return before
    drift = core_drifting(task.mind) if drifting is None else drifting
    if not drift and not any(b == "pending" for _, b in changes.values()):
        unfinished = count(core, task.task_id, f" AND n.status IN {UNFINISHED_SQL}")
        unfinished -= sum(1 for a, b in changes.values() if a not in FINISHED and b in FINISHED)
        if unfinished == 0:
            return "completed"
    if before == "completed" or (before == "failed" and changes):
        return "active"
    return before


def parse_until(core: LedgerCore, until: object) -> float | None:
    """``--until``: a time in the future (seconds, a duration like ``2h``, or an ISO time)."""
    if until is None or until == "":
        return None
    if isinstance(until, (int, float)):
        at = float(until)
    else:
        try:
            at = parse_time(str(until), core.now())
        except ValueError as e:
            raise Refused(str(e)) from None
    if not (TIME_MIN <= at <= TIME_MAX):  # NaN and infinity too ("nanh", "1e400d"); year 1 with an offset
        raise InvalidValue(f"--until {show(until)} is not a time Warden can store (years 1 to 9999, UTC)", "until")
    if at <= core.now():
        raise Refused(f"--until {iso(at)} is not in the future")
    return at


def names(keys: Sequence[str]) -> str:
    shown = ", ".join(keys[:SUMMARY_KEYS])
    return shown + (f" and {len(keys) - SUMMARY_KEYS} more" if len(keys) > SUMMARY_KEYS else "")


def make_plan(core: LedgerCore, params: ActionParams, task: TaskState, target: str, reason: str,
              nodes: Sequence[LeanNode], changes: dict[str, tuple[str, str]], *, kept: Sequence[str] = (),
              status_after: str | None = None, versions_of: Sequence[LeanNode] | None = None,
              handoffs: Sequence[str] = (), reapplied: Sequence[str] = (),
              effects: Sequence[JsonMapping] = (), warnings: Sequence[str] = ()) -> Plan:
    """The Plan of ``params.action``: ``changes`` (key → (from, to)) over ``nodes``; the versions
    checked at apply are those of ``versions_of`` (default: the changed nodes)."""
    by_key = {n.key: n for n in nodes}
    vs = versions_of if versions_of is not None else [by_key[k] for k in changes]
    revoked = tuple({"node": k, "owner": by_key[k].owner or ""} for k, (a, _) in changes.items()
                    if a == "running" and by_key[k].leased)
    return Plan(
        action=params.action, task_id=task.task_id, target=str(target), reason=reason,
        revision=int(task.revision), versions={n.key: n.version for n in vs},
        reset=tuple(k for k, (_, b) in changes.items() if b == "pending"),
        abandoned=tuple(k for k, (_, b) in changes.items() if b == "abandoned"),
        parked=tuple(k for k, (_, b) in changes.items() if b == "parked"),
        kept=tuple(kept), revoked_leases=revoked, handoffs_withdrawn=tuple(handoffs),
        resolutions_reapplied=tuple(reapplied), effects_not_undone=tuple(effects), warnings=tuple(warnings),
        changes=dict(changes), task_status=(task.status, status_after or task.status),
        params=params, planned_at=core.now(), node_ids={n.key: n.id for n in vs},
        statuses={n.key: n.status for n in vs},
    )

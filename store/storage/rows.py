"""Database rows → the frozen views the store hands out (``views.py``). Pure functions, no I/O.

Two node shapes: the whole :class:`NodeView` (detail, signals, dialogs) and the lean
:class:`NodeRow` a graph list shows (a plain tuple: a 100k-node graph as NodeViews took 250 MB).
Both are read with column lists derived from their fields (``NODE_VIEW_COLUMNS`` from
``views.NodeColumns``, ``NODE_ROW_SELECT`` from ``NodeRow``, checked at import to be node columns)
and decoded here; the lease shows only while a token is held. The other views are read straight
into their classes (``sql.fetch_rows(db, EventView, EVENT_SELECT ...)``).
"""

from __future__ import annotations

import sys
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from typing import Final, Mapping, Protocol, Sequence, TypeAlias, TypeVar, get_type_hints

from store.judges import budget
from store.judges.novelty import excerpt
from store.storage.events import NodeHeartbeat
from store.storage import sql
from store.storage.sql import json_value
from store.mind.views import MindState
from store.storage.tables import TaskRecord
from store.views import (
    FLAG_RESULT,
    ActionView,
    ArtifactView,
    EffectView,
    EventView,
    HandoffView,
    EventColumns,
    NodeColumns,
    NodeRow,
    NodeView,
    Observed,
    ObservationView,
    TaskColumns,
    TaskView,
)


def wall_used(task: TaskRecord, now: float) -> float:
    """A task row's wall-clock time of work: from its first claim to its end (or now), less the
    time its clock stood still while it waited (``budget.wall_used``)."""
    return budget.wall_used(task.started_at, task.finished_at, task.paused_s or 0.0, task.paused_since, now)


def task_origin(r: TaskRecord) -> str:
    """Which integration made the task: its recorded ``origin``, else (a task made before schema 4
    recorded it) ``langgraph`` for the LangGraph adapter's workflow and ``python`` for the rest."""
    if r.origin:
        return str(r.origin)
    return "langgraph" if r.workflow == "langgraph" else "python"


_TASK_SHOWN = tuple(f.name for f in dataclass_fields(TaskColumns))  # as stored
_TASK_MADE = ("constraints", "wall_used_s", "counts", "handoffs_open", "waited_s", "origin", "mind")
assert {f.name for f in dataclass_fields(TaskView)} == {*_TASK_SHOWN, *_TASK_MADE}, "TaskView: a field made nowhere"


def task_view(r: TaskRecord, now: float, counts: Mapping[str, int], handoffs_open: int) -> TaskView:
    """The task row as a TaskView: its shown columns as stored, and what is made from the rest."""
    used = wall_used(r, now)
    span = 0.0 if r.started_at is None else (r.finished_at if r.finished_at is not None else now) - r.started_at
    return _made(TaskView, [*(getattr(r, f) for f in _TASK_SHOWN), tuple(r.constraints or ()), used, dict(counts),
                            int(handoffs_open), max(0.0, span - used), task_origin(r), MindState.of(r.mind)],
                 _TASK_SHOWN + _TASK_MADE)


_V = TypeVar("_V")


def _made(cls: type[_V], values: Sequence[object], names: Sequence[str]) -> _V:
    """A frozen view built without its generated ``__init__`` (which sets each field through
    ``object.__setattr__``: reading a 100k-node graph took seconds). An ordinary, equal, frozen
    view (it has no ``__post_init__`` to run); ``names`` are all its fields (checked at import)."""
    view = object.__new__(cls)
    view.__dict__.update(zip(names, values))
    return view


# ---------------------------------------------------------------------- the whole node
# A NodeView is read as its shown columns as stored (the lease's owner and end only while a token
# is held), then the rejections and the requirements served; its dependencies are read apart.
_NODE_SHOWN = tuple(f.name for f in dataclass_fields(NodeColumns))
_NODE_LEASE = {f: f"CASE WHEN lease_token IS NOT NULL THEN {f} END AS {f}" for f in ("lease_owner", "lease_until")}
NODE_VIEW_COLUMNS = ", ".join([_NODE_LEASE.get(f, f) for f in _NODE_SHOWN] + ["rejections", "serves"])
_NODE_VIEW_FIELDS = (*_NODE_SHOWN, "deps", "rejections", "serves")
assert {f.name for f in dataclass_fields(NodeView)} == set(_NODE_VIEW_FIELDS), "NodeView: a field read nowhere"
_PRE, _OUT, _RETRY, _ADMIT, _WALL = (
    _NODE_SHOWN.index(f) for f in ("preconditions", "output", "retryable", "always_admit", "wall_used_s"))
assert _NODE_SHOWN[:4] == ("id", "task_id", "key", "position")
RawNodeView: TypeAlias = "tuple[int, str, str, int, *tuple[object, ...]]"
"""A NODE_VIEW_COLUMNS row as the database gives it: its id, task, key and position first, its
rejections (JSON text) next to last."""


def rejections_named(raws: Sequence[RawNodeView]) -> list[list[object]]:
    """The rejections of these rows that name something (most name nothing: ``[]``)."""
    return [json_value(r[-2]) or [] for r in raws if r[-2] not in (None, "[]")]


def rejections(values: Sequence[object], reasons: Mapping[int, str]) -> tuple[str, ...]:
    """A node's ``rejections`` as the reasons they stand for: a rejected path's id (the rewind's
    reason is stored there: ``reasons``, from ``LedgerCore.rejection_reasons``), or — written before
    reasons were stored once — the reason itself."""
    return tuple(reasons.get(x, "") if isinstance(x, int) else str(x) for x in values)


def node_view(r: RawNodeView, deps: tuple[str, ...], cache: dict[str, object] | None = None,
              reasons: Mapping[int, str] | None = None) -> NodeView:
    """A NODE_VIEW_COLUMNS row and its dependency keys → NodeView (``cache``: see ``json_value``;
    ``reasons``: the rejected paths its rejections name)."""
    v = list(r)
    serves, rejected = v.pop(), v.pop()
    v[_PRE] = json_value(v[_PRE], cache) or {}
    v[_OUT] = json_value(v[_OUT])
    v[_RETRY], v[_ADMIT] = bool(v[_RETRY]), bool(v[_ADMIT])  # SQLite's 0/1
    wall = v[_WALL]
    v[_WALL] = float(wall) if isinstance(wall, int) else wall  # a REAL column: a float on both backends
    v += (deps, rejections(json_value(rejected) or (), reasons or {}), tuple(json_value(serves, cache) or ()))
    return _made(NodeView, v, _NODE_VIEW_FIELDS)


# ---------------------------------------------------------------------- the lean node
# NodeRow's fields as SQL over the node table, in NodeRow's order (its last field, ``deps``, is
# read from the edge table).
_NODE_ROW_SQL = {
    "lease_owner": "CASE WHEN lease_token IS NOT NULL THEN lease_owner END",
    "lease_until": "CASE WHEN lease_token IS NOT NULL THEN lease_until END",
}
NODE_ROW_SELECT = "SELECT " + ", ".join(_NODE_ROW_SQL.get(f, f) for f in NodeRow._fields[:-1]) + " FROM node"
_NODE_TYPES = get_type_hints(NodeColumns, localns={"JsonValue": object})


def node_projection(row: type, *, besides: tuple[str, ...] = ()) -> type:
    """Check at import that a lean node row (a NamedTuple read for speed: ``NodeRow``, the
    estimator's ``LeanNode``) holds node columns of their declared types (``besides``: its fields
    that are not columns); returns it."""
    wrong = [f for f, t in get_type_hints(row).items() if f not in besides and _NODE_TYPES.get(f) != t]
    assert not wrong, f"{row.__name__}: {wrong} are not node columns of the same type (views.NodeColumns)"
    return row


node_projection(NodeRow, besides=("deps",))
NODE_ROW_POSITION: Final = 5
_KIND, _STATUS = NodeRow._fields.index("kind"), NodeRow._fields.index("status")
assert (_KIND, _STATUS, NodeRow._fields.index("position")) == (2, 4, NODE_ROW_POSITION)
RawNodeRow: TypeAlias = "tuple[int, str, str, str, str, int, *tuple[object, ...]]"
"""A NODE_ROW_SELECT row as the database gives it: NodeRow's fields but ``deps``."""


class NodeRowCursor(Protocol):
    """A cursor over NODE_ROW_SELECT (a graph read page by page)."""

    def fetchmany(self, size: int) -> list[RawNodeRow]: ...


def node_rows(rows: Sequence[RawNodeRow], deps: Mapping[int, list[str]], words: dict[str, str]) -> tuple[NodeRow, ...]:
    """NODE_ROW_SELECT rows and their dependency keys by node id → NodeRows, built by C code
    (``tuple.__new__``); ``words`` keeps one string object per kind and status, not one per row."""
    make = tuple.__new__
    none: tuple[str, ...] = ()
    key = sys.intern  # a dependency names a node by key: one string object for both (5 MB at 100k nodes)
    return tuple(make(NodeRow, (r[0], key(r[1]), words.setdefault(r[2], r[2]), r[3], words.setdefault(r[4], r[4]))
                      + r[5:] + (tuple(map(key, deps[r[0]])) if r[0] in deps else none,)) for r in rows)


# ---------------------------------------------------------------------- the rest
# Each read into its view, or a NamedTuple whose fields are its columns (docs/architecture.md
# "Reading rows"); a field from a joined table has its expression in the *_SELECT list
# (``n.key AS node_key``).
# ---------------------------------------------------------------------- what a heartbeat observed
# An observation is stored once, as its row; every reader of what a heartbeat brought — the
# journal's heartbeat events (EVENT_SELECT), the stall signals' evidence (estimation/evidence.py) —
# reads these columns of it and decodes them with ``observed``.
EXCERPT_CHARS = 1000  # of its action and its result, read for their one-line excerpt (≤ 80 shown)
OBSERVED_COLUMNS = ("o.digest AS digest, o.new_units AS new_units, o.lines AS lines, o.flags AS flags, "
                    f"o.action_key AS action_key, SUBSTR(o.action, 1, {EXCERPT_CHARS}) AS action, "
                    f"o.content AS content, SUBSTR(o.result, 1, {EXCERPT_CHARS}) AS result, "
                    f"SUBSTR(o.text, 1, {EXCERPT_CHARS}) AS text")


def observed(digest: str | None, new_units: int | None, lines: int | None, flags: int | None, action_key: str | None,
             action: str | None, content: str | None, result: str | None, text: str | None) -> Observed | None:
    """OBSERVED_COLUMNS as read → what the report brought (None: no observation). The result shown
    is the tool's output that was judged: the report's result, else its text when the report was
    judged as a plain report's output (FLAG_RESULT)."""
    if digest is None:
        return None
    judged = result if result is not None else text if int(flags or 0) & FLAG_RESULT else None
    return Observed(new_units=int(new_units or 0), digest=digest, lines=int(lines or 0), flags=int(flags or 0),
                    action_key=action_key, action=None if action_key is None else excerpt(action),
                    content=None if judged is None else content, result=excerpt(judged))


# The journal, each event with the observation it names (a heartbeat's).
EVENT_SELECT = (f"SELECT {sql.columns(EventColumns, 'e')}, {OBSERVED_COLUMNS} "
                "FROM event e LEFT JOIN observation o ON o.id = e.observation_id")
_EVENT_WIDTH = len(dataclass_fields(EventColumns))


def event_view(r: tuple[int, float, str | None, str | None, str, str, str, str, str | None,
                        *tuple[str | int | None, ...]]) -> EventView:
    """An EVENT_SELECT row → EventView. A heartbeat's payload shows what its observation brought,
    key for key as the journal always showed it (a heartbeat written before the observation was
    stored once carries those keys itself)."""
    payload = json_value(r[8])
    payload = payload if isinstance(payload, dict) else {}
    seen = observed(*r[_EVENT_WIDTH:])  # type: ignore[arg-type]  # OBSERVED_COLUMNS' types, in order
    if seen is not None:
        payload = dict(sorted({**payload, **seen.to_json()}.items()))
    elif r[5] == NodeHeartbeat.KIND:
        seen = Observed.from_json(payload)
    return EventView(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], payload, seen)


# Effects with the key of the node that made each and of its compensation node (if any).
EFFECT_SELECT = (f"SELECT {sql.columns(EffectView, 'e', {'node': 'n.key', 'compensation_node': 'c.key'})} "
                 "FROM effect e JOIN node n ON n.id = e.node_id LEFT JOIN node c ON c.id = e.compensation_node_id")
HANDOFF_SELECT = (f"SELECT {sql.columns(HandoffView, 'h', {'node': 'n.key', 'id': 'CAST(h.id AS TEXT)'})} "
                  "FROM handoff h JOIN node n ON n.id = h.node_id")


def handoff_view(h: HandoffView) -> HandoffView:
    """A handoff as read (HANDOFF_SELECT), its options a tuple."""
    return replace(h, options=tuple(h.options or ()), context=h.context or {})


ARTIFACT_SELECT = f"SELECT {sql.columns(ArtifactView, 'a', {'node': 'n.key'})} FROM artifact a JOIN node n ON n.id = a.node_id"
OBSERVATION_SELECT = f"SELECT {sql.columns(ObservationView)} FROM observation"
ACTION_SELECT = f"SELECT {sql.columns(ActionView)} FROM action"

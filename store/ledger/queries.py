"""Read queries: tasks, graphs (whole or in pages), nodes and their detail, the journal, handoffs,
the operator audit, effects and artifacts — each returned as frozen views (``views.py``).

Reads that must agree with one another run in one snapshot (``db.read_tx``). Graph reads are raw
SQL into tuples decoded by ``rows.py``: a 100,000-node graph through the query builder took
seconds and hundreds of megabytes.
"""

from __future__ import annotations

from dataclasses import replace

from typing import Final, Generator, Iterator, NamedTuple, Sequence

from store.storage import sql
from store.storage.db import read_tx, run_read
from store.errors import NotFound, Refused
from store.mind.read import node_mind
from store.storage.tables import TaskRecord
from store.validate import HANDOFF_ID_RE, show
from store.storage.events import NodeFailed
from store.views import (
    ActionView,
    ArtifactView,
    EffectView,
    EventView,
    GraphPage,
    GraphView,
    HandoffView,
    NodeDetail,
    NodeView,
    ObservationView,
    TaskView,
)
from store.storage import rows
from store.storage.core import TASK_COLUMNS, LedgerCore, sha256_hex

GRAPH_FIRST_PAGE = 300
GRAPH_PAGE = 2000


# ---------------------------------------------------------------------- tasks
def tasks(core: LedgerCore) -> list[TaskView]:
    with read_tx(core.db):
        task_rows = sql.fetch_rows(core.db, TaskRecord, f"SELECT {TASK_COLUMNS} FROM task ORDER BY created_at, task_id")
        claims = dict(sql.fetch_all(core.db, "SELECT task_id, COALESCE(SUM(attempt), 0) FROM node GROUP BY task_id"))
        counts = _counts(core)
        hopen = dict(sql.fetch_all(core.db, "SELECT task_id, COUNT(id) FROM handoff WHERE status = 'open' "
                                            "GROUP BY task_id"))
    now = core.now()
    return [rows.task_view(replace(r, claim_count=int(claims.get(r.task_id, 0))), now, counts.get(r.task_id, {}),
                           hopen.get(r.task_id, 0)) for r in task_rows]


def task(core: LedgerCore, task_id: str) -> TaskView:
    with read_tx(core.db):
        r = core.task_record(task_id)
        # A task's claim count is the sum of its nodes' attempts (every claim adds exactly one; a
        # rewind does not reset it), so a claim never writes the task row.
        r = replace(r, claim_count=int(sql.scalar(core.db, "SELECT COALESCE(SUM(attempt), 0) FROM node "
                                                           "WHERE task_id = ?", [task_id]) or 0))
        counts = _counts(core, task_id)
        hopen = sql.scalar(core.db, "SELECT COUNT(id) FROM handoff WHERE task_id = ? AND status = 'open'", [task_id])
    return rows.task_view(r, core.now(), counts.get(task_id, {}), int(hopen or 0))


def _counts(core: LedgerCore, task_id: str | None = None) -> dict[str, dict[str, int]]:
    where, params = (" WHERE task_id = ?", [task_id]) if task_id is not None else ("", [])
    out: dict[str, dict[str, int]] = {}
    for t, s, n in sql.fetch_all(core.db, f"SELECT task_id, status, COUNT(id) FROM node{where} GROUP BY task_id, status",
                                 params):
        out.setdefault(t, {})[s] = int(n)
    return out


# ---------------------------------------------------------------------- graphs and nodes
def graph(core: LedgerCore, task_id: str) -> GraphView:
    """The task and all its nodes in topological order, each with its dependency keys."""
    with read_tx(core.db):
        the_task = task(core, task_id)
        node_rows = sql.fetch_all(core.db, f"SELECT {rows.NODE_VIEW_COLUMNS} FROM node WHERE task_id = ? "
                                           "ORDER BY position", [task_id])
        deps = _deps_by_id(core, task_id)
        reasons = core.rejection_reasons(rows.rejections_named(node_rows))
    key_of = {r[0]: r[2] for r in node_rows}  # id → key (rows.RawNodeView)
    cache: dict[str, object] = {}
    return GraphView(task=the_task, nodes=tuple(
        rows.node_view(r, tuple(key_of[x] for x in deps[r[0]]) if r[0] in deps else (), cache, reasons)
        for r in node_rows))


def _deps_by_id(core: LedgerCore, task_id: str, dst_ids: Sequence[int] | None = None) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    if dst_ids is None:
        for d, src in sql.fetch_all(core.db, "SELECT dst_id, src_id FROM edge WHERE task_id = ?", [task_id]):
            out.setdefault(d, []).append(src)
        return out
    for chunk in sql.chunks(list(dst_ids)):
        for d, src in sql.fetch_all(core.db, f"SELECT dst_id, src_id FROM edge WHERE dst_id IN "
                                             f"({sql.marks(len(chunk))})", chunk):
            out.setdefault(d, []).append(src)
    return out


def nodes(core: LedgerCore, task_id: str, keys: Sequence[str]) -> list[NodeView]:
    """Just these nodes (for applying a feed delta), in topological order; unknown keys skipped."""
    found: list[rows.RawNodeView] = []
    with read_tx(core.db):
        for chunk in sql.chunks(list(dict.fromkeys(keys))):
            found.extend(sql.fetch_all(
                core.db, f"SELECT {rows.NODE_VIEW_COLUMNS} FROM node WHERE task_id = ? "
                         f"AND key IN ({sql.marks(len(chunk))})", [task_id, *chunk]))
        deps = _deps_by_id(core, task_id, [r[0] for r in found])
        src_ids = list({x for v in deps.values() for x in v})
        keys_of: dict[int, str] = {}
        for ids in sql.chunks(src_ids):
            keys_of.update(sql.fetch_all(core.db, f"SELECT id, key FROM node WHERE id IN ({sql.marks(len(ids))})",
                                         ids))
        reasons = core.rejection_reasons(rows.rejections_named(found))
    found.sort(key=lambda r: r[3])  # the position
    return [rows.node_view(r, tuple(keys_of[x] for x in deps.get(r[0], ())), None, reasons) for r in found]


def node(core: LedgerCore, task_id: str, key: str) -> NodeView:
    got = nodes(core, task_id, [key])
    if not got:
        core.task_record(task_id)
        raise NotFound(f"unknown node {key!r} in task {task_id!r}")
    return got[0]


def dependents(core: LedgerCore, task_id: str, key: str) -> tuple[str, ...]:
    return tuple(k for (k,) in sql.fetch_all(
        core.db, "SELECT d.key FROM edge e JOIN node d ON d.id = e.dst_id JOIN node s ON s.id = e.src_id "
                 "WHERE e.task_id = ? AND s.key = ? ORDER BY d.position", [task_id, key]))


def graph_pages(core: LedgerCore, task_id: str, *, first: int = GRAPH_FIRST_PAGE, page: int = GRAPH_PAGE,
                order: str = "id") -> Iterator[GraphPage]:
    """A task's graph as a stream of pages of lean ``NodeRow`` tuples, all from one read snapshot:
    a small first page (the rows on screen, fast), then big ones.

    The stream is in id order: a task's nodes are inserted in position order (``add_nodes``
    numbers them in its topological order under the task's write lock), so id order is position
    order, and SQLite walks the (task_id) index with no sort — the first page of a 100k-node graph
    comes after 300 rows, not after sorting 100k. Should a position ever go backwards, the stream
    starts again ordered by position (its next page has ``start`` 0: readers restart).

    SQLite reads the rows page by page inside the snapshot. PostgreSQL's driver has every row of
    the node query in hand once it has run, so the snapshot ends there, before the first page is
    handed out: a reader that pauses between pages (the console waits for each to be painted) holds
    no transaction open meanwhile — with one connection shared by the console's threads
    (``store/storage/pgshared.py``) an open one would hold up every other read. A page's dependencies are
    read afterwards: a node's edges never change once it exists."""
    assert order in ("id", "position"), order
    db = core.db
    if sql.is_sqlite(db):
        with read_tx(db):
            ordered = yield from _graph_pages(core, task_id, first, page, order)
    else:
        at, the_task, cur = run_read(db, lambda: _graph_start(core, task_id, order))
        ordered = yield from _graph_pages(core, task_id, first, page, order, (at, the_task, cur))
    if not ordered:  # out of order (see above): once more, sorted
        yield from graph_pages(core, task_id, first=first, page=page, order="position")


def _graph_start(core: LedgerCore, task_id: str, order: str) -> tuple[int, TaskView, rows.NodeRowCursor]:
    with read_tx(core.db):
        at = last_event_id(core)
        the_task = task(core, task_id)
        cur = sql.execute(core.db, rows.NODE_ROW_SELECT + f" WHERE task_id = ? ORDER BY {order}", [task_id])
    return at, the_task, cur


def _graph_pages(core: LedgerCore, task_id: str, first: int, page: int, order: str,
                 started: tuple[int, TaskView, rows.NodeRowCursor] | None = None) -> Generator[GraphPage, None, bool]:
    """The pages (see :func:`graph_pages`); returns False when ids and positions disagreed."""
    db = core.db
    pos: Final = rows.NODE_ROW_POSITION
    words: dict[str, str] = {}  # one string object per kind / status, not one per row
    at, the_task, cur = started or _graph_start(core, task_id, order)
    total = sum(the_task.counts.values())
    start = 0
    size = first
    last_pos = -1 << 62
    while True:
        batch = cur.fetchmany(size)
        if order != "position":
            ok = all(batch[i][pos] <= batch[i + 1][pos] for i in range(len(batch) - 1))
            if not ok or (batch and batch[0][pos] < last_pos):
                return False
            if batch:
                last_pos = batch[-1][pos]
        deps: dict[int, list[str]] = {}
        ids = [r[0] for r in batch]
        for chunk in sql.chunks(ids):
            for dst, key in sql.execute(db, "SELECT e.dst_id, s.key FROM edge e JOIN node s ON s.id = e.src_id "
                                            f"WHERE e.dst_id IN ({sql.marks(len(chunk))}) "
                                            "ORDER BY e.dst_id, s.position", chunk):
                deps.setdefault(dst, []).append(key)
        node_rows = rows.node_rows(batch, deps, words)
        last = len(batch) < size
        yield GraphPage(the_task, node_rows, start, max(total, start + len(node_rows)), at, last)
        if last:
            return True
        start += len(batch)
        size = page


def node_detail(core: LedgerCore, task_id: str, key: str, *, events_limit: int,
                observations_limit: int) -> NodeDetail:
    db = core.db
    with read_tx(db):
        the_node = node(core, task_id, key)
        obs = sql.fetch_rows(db, ObservationView, f"{rows.OBSERVATION_SELECT} WHERE node_id = ? "
                                                         "ORDER BY id DESC LIMIT ?", [the_node.id, observations_limit])
        obs.reverse()
        effects_ = [r for r in sql.fetch_rows(
            db, EffectView, f"{rows.EFFECT_SELECT} WHERE e.node_id = ? ORDER BY e.id", [the_node.id])]
        arts = [r for r in sql.fetch_rows(
            db, ArtifactView, f"{rows.ARTIFACT_SELECT} WHERE a.node_id = ? ORDER BY a.id", [the_node.id])]
        hand = [rows.handoff_view(r) for r in sql.fetch_rows(
            db, HandoffView, f"{rows.HANDOFF_SELECT} WHERE h.node_id = ? ORDER BY h.id", [the_node.id])]
        evs = [rows.event_view(r) for r in sql.fetch_all(
            db, f"{rows.EVENT_SELECT} WHERE e.task_id = ? AND e.node = ? ORDER BY e.id DESC LIMIT ?",
            [task_id, key, events_limit])]
        deps_on = dependents(core, task_id, key)
        failure = next((e for e in evs if e.kind == NodeFailed.KIND), None)
        if failure is None and (the_node.failure_class or the_node.error):  # older than the events read
            failure = next((rows.event_view(r) for r in sql.fetch_all(
                db, f"{rows.EVENT_SELECT} WHERE e.task_id = ? AND e.node = ? AND e.kind = ? ORDER BY e.id DESC LIMIT 1",
                [task_id, key, NodeFailed.KIND])), None)
        mind = node_mind(core, task_id, key)  # its requirements and the memory its next claim gets
    evs.sort(key=lambda e: (e.layer != "decision", -e.id))
    return NodeDetail(
        node=the_node, dependents=deps_on, observations=tuple(obs),
        effects=tuple(effects_), artifacts=tuple(arts), handoffs=tuple(hand), events=tuple(evs),
        failure=failure, mind=mind,
    )


def observations(core: LedgerCore, task_id: str, key: str, limit: int) -> list[ObservationView]:
    the_node = core.node_record(task_id, key)
    found = sql.fetch_rows(core.db, ObservationView, f"{rows.OBSERVATION_SELECT} WHERE node_id = ? "
                                                            "ORDER BY id DESC LIMIT ?", [the_node.id, limit])
    found.reverse()
    return found


# ---------------------------------------------------------------------- the journal
def events(core: LedgerCore, since: int, *, task_id: str | None, limit: int) -> list[EventView]:
    """Journal events with ``id > since`` in id order (the tail cursor)."""
    where, params = ("e.id > ? AND e.task_id = ?", [since, task_id]) if task_id is not None else ("e.id > ?", [since])
    return [rows.event_view(r) for r in sql.fetch_all(core.db, f"{rows.EVENT_SELECT} WHERE {where} ORDER BY e.id LIMIT ?",
                                                      [*params, limit])]


def last_event_id(core: LedgerCore) -> int:
    return int(sql.scalar(core.db, "SELECT MAX(id) FROM event") or 0)


# ---------------------------------------------------------------------- effects, handoffs, audit, artifacts
def effect(core: LedgerCore, task_id: str, effect_key: str) -> EffectView:
    r = sql.fetch_row(core.db, EffectView, f"{rows.EFFECT_SELECT} WHERE e.task_id = ? AND e.effect_key = ?",
                      [task_id, effect_key])
    if r is None:
        raise NotFound(f"unknown effect {effect_key!r}")
    return r


def effects(core: LedgerCore, task_id: str) -> list[EffectView]:
    return [r for r in sql.fetch_rows(core.db, EffectView,
                                      f"{rows.EFFECT_SELECT} WHERE e.task_id = ? ORDER BY e.id", [task_id])]


def handoffs(core: LedgerCore, *, status: str | None, task_id: str | None) -> list[HandoffView]:
    """Handoffs, oldest first."""
    where: list[str] = []
    params: list[object] = []
    if status is not None:
        where.append("h.status = ?")
        params.append(status)
    if task_id is not None:
        where.append("h.task_id = ?")
        params.append(task_id)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return [rows.handoff_view(r) for r in sql.fetch_rows(
        core.db, HandoffView, f"{rows.HANDOFF_SELECT}{clause} ORDER BY h.opened_at, h.id", params)]


def handoff(core: LedgerCore, handoff_id: str) -> HandoffView:
    if not HANDOFF_ID_RE.fullmatch(str(handoff_id)):  # " 5\n" is not handoff 5
        raise NotFound(f"unknown handoff {show(handoff_id)}")
    r = sql.fetch_row(core.db, HandoffView, f"{rows.HANDOFF_SELECT} WHERE h.id = ?", [int(str(handoff_id))])
    if r is None:
        raise NotFound(f"unknown handoff {handoff_id!r}")
    return rows.handoff_view(r)


def actions(core: LedgerCore, task_id: str | None, limit: int) -> list[ActionView]:
    where, params = (" WHERE task_id = ?", [task_id]) if task_id is not None else ("", [])
    return [r for r in sql.fetch_rows(
        core.db, ActionView, f"{rows.ACTION_SELECT}{where} ORDER BY id DESC LIMIT ?", [*params, limit])]


def artifacts(core: LedgerCore, task_id: str) -> list[ArtifactView]:
    return [r for r in sql.fetch_rows(
        core.db, ArtifactView, f"{rows.ARTIFACT_SELECT} WHERE a.task_id = ? ORDER BY a.id", [task_id])]


class _Stored(NamedTuple):
    content: bytes | None


def latest_artifact(core: LedgerCore, task_id: str) -> tuple[ArtifactView, bytes]:
    """The task's latest committed artifact and its bytes, after checking its sha256."""
    core.task_record(task_id)
    r = sql.fetch_row(core.db, ArtifactView, f"{rows.ARTIFACT_SELECT} WHERE a.task_id = ? ORDER BY a.id DESC "
                                                    "LIMIT 1", [task_id])
    if r is None:
        raise NotFound(f"task {task_id!r} has no committed artifact")
    stored = sql.fetch_row(core.db, _Stored, f"SELECT {sql.columns(_Stored)} FROM artifact WHERE id = ?", [r.id])
    data = bytes(stored.content or b"") if stored is not None else b""
    if sha256_hex(data) != r.sha256 or len(data) != r.size:
        raise Refused(f"artifact {r.name!r} of {task_id} does not match its recorded sha256; not exported")
    return r, data

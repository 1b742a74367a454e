"""The console's in-memory view model, updated from feed deltas on the UI thread.

Nothing here touches the database: workers fetch (``ledger.nodes(task, keys)`` for exactly the
nodes the new events name; the task rows come from ``store.reading.tally``) and the UI thread applies
the result here (the task list's model is ``console.tasklist``; the cells it shares are here). Each model is also the *row source* of a virtualised :class:`RowList`: it turns
row ``i`` into cells on demand, so only rows on screen are ever formatted. All agent-written text
goes through ``console.text.safe_line`` before it becomes a cell.
"""

from __future__ import annotations

from bisect import bisect_left

from typing import Callable, Iterable, Iterator, Mapping, Sequence, TypeAlias

from store.jsontypes import JsonMapping
from store.reading.cli_json import empty_eta
from store.views import GraphRow, GraphView, NodeRow, NodeView, TaskView

from .glyphs import MARKS, NODE_GLYPHS, duration_label, eta_label
from .text import safe_line
from .widgets.rowlist import Cell, Column

Clock = Callable[[], float]

NODE_STATUSES = tuple(NODE_GLYPHS)

#: a signal as the console gets it: ``store.reading.cli_json.signal_json``'s dict (the analysis converts once)
SignalJson: TypeAlias = JsonMapping
#: a task's or a node's estimate as ``Estimate.to_json`` gives it
EtaJson: TypeAlias = JsonMapping


def status_cell(status: str, glyphs: Mapping[str, str]) -> Cell:
    return (f"{glyphs.get(status, '?')} {safe_line(status)}", status if status in glyphs else "")


# Signals that say what a node waits on, not that something is wrong: shown where the node is
# (the graph's lease column, the node detail), never counted as a warning.
WAITS = ("quota_wait",)


def alerting(signals: Sequence[SignalJson]) -> list[SignalJson]:
    return [s for s in signals if s.get("kind") not in WAITS]


def quota_waited(signals: Sequence[SignalJson]) -> str | None:
    """The quota a node waits on (its ``quota_wait`` signal's evidence: "waiting on quota NAME (…"), or None."""
    for s in signals:
        if s.get("kind") == "quota_wait":
            words = str(s.get("evidence") or "").split()
            return words[3] if len(words) > 3 and words[:3] == ["waiting", "on", "quota"] else "?"
    return None


def signals_cell(signals: Sequence[SignalJson]) -> Cell:
    signals = alerting(signals)
    if not signals:
        return (MARKS["dash"], "dim")
    sev = {(s.get("severity") or "warn") for s in signals}
    return (f"{MARKS['signal']} {len(signals)}", "alarm" if "alarm" in sev else "warn")


def signal_text(s: SignalJson, limit: int = 200) -> str:
    """One signal on one line: its mark, kind, node, severity and evidence (at most ``limit`` characters)."""
    node = s.get("node")
    where = f" {safe_line(node)}" if node else ""
    return f"{MARKS['signal']} {safe_line(s.get('kind'))}{where} ({safe_line(s.get('severity'))}): {safe_line(s.get('evidence'), limit=limit)}"


def progress_text(counts: Mapping[str, int]) -> str:
    total = sum(counts.values())
    done = counts.get("succeeded", 0) + counts.get("abandoned", 0)
    ab = counts.get("abandoned", 0)
    return f"{done}/{total}" + (f" {NODE_GLYPHS['abandoned']}{ab}" if ab else "")


# ---------------------------------------------------------------------- task list
# At 80 columns the title and the budget gauge give way first, then the age; id, status,
# progress, P80, signals and handoffs always stay, and an id of up to 20 characters is never cut
# from 66 columns up. Narrower (60×20), the id and progress narrow so that status, P80, ⚠ and ✋
# still fit. AGE is as wide as its longest label ("3h05m ago", "in 2d04h").
TASK_COLUMNS = [
    Column("TASK", 20, shrink=12, room=32),
    Column("STATUS", 11),
    Column("DONE", 9, shrink=7),
    Column("P80", 11),
    Column("BUDGET", 16, priority=2),
    Column("SIG", 4),
    Column("HAND", 4),
    Column("AGE", 9, priority=3),
    Column("TITLE", 8, priority=4, flex=True),
]
FINISHED_TASK = ("completed", "failed", "aborted")
FINISHED_NODE = ("succeeded", "failed", "abandoned")


# ---------------------------------------------------------------------- graph
GRAPH_COLUMNS = [
    Column("NODE", 22),
    Column("STATUS", 11),
    Column("ATT", 3, priority=1, align="right"),
    Column("LEASE", 14, priority=1),
    Column("DEPS", 12, priority=2),
    Column("P80", 11),
    Column("SIG", 4),
    Column("KIND", 10, priority=3),
    Column("TITLE", 12, priority=4, flex=True),
]

MAX_INDENT = 6


class Dependents:
    """Each node's dependents, kept lean: most nodes have one (stored as the key itself), a list
    only where there are more. A list per node cost 17 MB on a 100k-node graph."""

    __slots__ = ("_by",)

    def __init__(self) -> None:
        self._by: dict[str, str | list[str]] = {}

    def add(self, dep: str, key: str) -> None:
        had = self._by.get(dep)
        if had is None:
            self._by[dep] = key
        elif isinstance(had, list):
            had.append(key)
        else:
            self._by[dep] = [had, key]

    def get(self, key: str, default: Sequence[str] = ()) -> list[str]:
        had = self._by.get(key)
        if had is None:
            return list(default)
        return list(had) if isinstance(had, list) else [had]

    def __len__(self) -> int:
        return len(self._by)


ETA_KEEP = 5000  # node P80s kept for rows scrolled away from (recomputed when they come back)

_KEY, _KIND, _TITLE, _STATUS = (NodeRow._fields.index(f) for f in ("key", "kind", "title", "status"))
_as_row = NodeRow._make


class Rows(Sequence[GraphRow]):
    """A graph's rows in order, as the model holds them: a lean row (``NodeRow``) as a plain tuple
    of its fields, a whole view (a node updated since the graph was read) as it is; read back as
    ``NodeRow`` / ``NodeView``.

    Why plain tuples: Python's cyclic garbage collector walks every container object it tracks at
    each full collection, and stops tracking a plain tuple of strings and numbers the first time it
    looks at it — but never an instance of a tuple subclass such as ``NodeRow``. Kept as
    ``NodeRow``, a 100k-node graph's rows were walked by every full collection, which then held the
    interpreter the UI draws with for 250–750 ms (a graph loading brings several); as plain tuples
    they cost the collector nothing, and a full collection walks what else the console holds."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[tuple[object, ...] | NodeView] = []

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> GraphRow:  # type: ignore[override]  # (an int: slices are not used)
        r = self._items[i]
        return r if isinstance(r, NodeView) else _as_row(r)

    def __iter__(self) -> Iterator[GraphRow]:
        for r in self._items:
            yield r if isinstance(r, NodeView) else _as_row(r)

    def __setitem__(self, i: int, v: GraphRow) -> None:
        self._items[i] = tuple(v) if type(v) is NodeRow else v

    def append(self, v: GraphRow) -> None:
        self._items.append(tuple(v) if type(v) is NodeRow else v)

    def matching(self, terms: list[tuple[str, str]], start: int = 0) -> list[int]:
        """The positions from ``start`` on of the rows that match the filter's ``terms``, read
        without making a row object each."""
        out = []
        items = self._items
        for i in range(start, len(items)):
            r = items[i]
            if isinstance(r, NodeView):
                if _matches(r.key, r.kind, r.title, r.status, terms):
                    out.append(i)
            elif _matches(r[_KEY], r[_KIND], r[_TITLE], r[_STATUS], terms):  # type: ignore[arg-type]
                out.append(i)
        return out


class GraphModel:
    """One task's nodes in topological order, patched node by node from deltas.

    A big graph arrives in pages (``store.reading.feed.graph_pages``, one snapshot at journal id
    ``loaded_at``): the model exists from the moment its screen opens (``GraphModel(task_id, clock)``), the first
    page starts it (:meth:`start`), :meth:`extend` appends the rest, and the list shows what has
    arrived while the remainder loads. A node update read at a cursor no newer than the snapshot is
    ignored (the snapshot is at least as new; a later change has a later event and is fetched
    again); an update for a node whose page has not arrived — or read before the first page — waits
    for it in the one buffer of early updates (``_early``)."""

    def __init__(self, task_id: str, clock: Clock) -> None:
        """A graph whose first page has not arrived: no task row, no nodes (see :meth:`of`)."""
        self.clock = clock
        self.task: TaskView | None = None
        self.task_id = task_id
        self.loaded_at = 0
        self.total = 0
        self.complete = False
        self.nodes = Rows()
        self.index: dict[str, int] = {}
        self.depth: list[int] = []
        self.dependents = Dependents()
        self.etas: dict[str, EtaJson] = {}
        self.signals: dict[str, list[SignalJson]] = {}
        self.task_eta: EtaJson = empty_eta()
        self.task_signals: tuple[SignalJson, ...] = ()
        self.filter_text = ""
        self._visible: list[int] | None = None
        self._early: dict[str, tuple[NodeView, int | None]] = {}  # updates waiting for their row's page

    @classmethod
    def of(cls, graph: GraphView, clock: Clock, loaded_at: int = 0, *, total: int | None = None,
           complete: bool = True) -> "GraphModel":
        """A model started from ``graph`` (its first page, or the whole graph)."""
        g = cls(graph.task.task_id, clock)
        g.start(graph.task, graph.nodes, loaded_at=loaded_at,
                total=total if total is not None else len(graph.nodes), last=complete)
        return g

    @property
    def started(self) -> bool:
        """The first page is in (the task row and the first rows)."""
        return self.task is not None

    def start(self, task: TaskView, nodes: Sequence[GraphRow], *, loaded_at: int, total: int, last: bool) -> None:
        """The first page of the snapshot taken at journal id ``loaded_at``; the updates read before
        it that are no newer than the snapshot are dropped."""
        self.task, self.loaded_at = task, loaded_at
        self.total = total
        self._early = {k: (v, at) for k, (v, at) in self._early.items() if at is None or at > loaded_at}
        self.extend(nodes, last=last)

    def _link(self, n: GraphRow) -> None:
        d = 0
        depth = self.depth
        for dep in n.deps:
            j = self.index.get(dep)
            if j is not None and j < len(depth):
                d = max(d, depth[j] + 1)
            self.dependents.add(dep, n.key)
        depth.append(d)

    def extend(self, nodes: Sequence[GraphRow], *, last: bool = False) -> bool:
        """The next page of the snapshot. Returns whether rows were added on screen."""
        early = self._early
        start = len(self.nodes)
        for n in nodes:
            if n.key in self.index:
                continue
            if early:
                waiting = early.pop(n.key, None)
                if waiting is not None:
                    n = waiting[0]
            i = len(self.nodes)
            self.index[n.key] = n.position if n.position == i else i  # its own int when equal: 2.8 MB at 100k
            self.nodes.append(n)
            self._link(n)
        if last:
            self.complete = True
            for v, _ in list(early.values()):  # added after the snapshot
                self.index[v.key] = len(self.nodes)
                self.nodes.append(v)
                self._link(v)
            early.clear()
        self.total = max(self.total, len(self.nodes))
        if self._visible is not None:
            terms = self._terms()
            self._visible.extend(self.nodes.matching(terms, start))
        return len(self.nodes) > start

    def apply(self, views: Iterable[NodeView], as_of: Mapping[str, int] | int | None = None) -> tuple[list[int], bool]:
        """Patch these nodes in. ``as_of``: the journal id each was read at (a mapping by key, or
        one id for all); reads no newer than the snapshot are skipped. Returns (changed positions
        on screen, whether the shape changed)."""
        changed: list[int] = []
        shape = False
        for v in views:
            if v.task_id != self.task_id:
                continue
            at = as_of.get(v.key) if isinstance(as_of, Mapping) else as_of
            if not self.started:
                self._early[v.key] = (v, at)  # judged against the snapshot when it arrives
                continue
            if at is not None and at <= self.loaded_at:
                continue
            i = self.index.get(v.key)
            if i is None:
                if not self.complete:
                    self._early[v.key] = (v, at)
                    continue
                self.index[v.key] = len(self.nodes)
                self.nodes.append(v)
                self._link(v)
                shape = True
                continue
            old = self.nodes[i]
            self.nodes[i] = v
            if self._visible is not None and self._matches(old) != self._matches(v):
                shape = True
            changed.append(i)
        if shape:
            self._refilter()
            return [], True
        return self.positions(changed), False

    def set_task(self, task: TaskView) -> None:
        self.task = task

    def set_analysis(self, task_eta: EtaJson | None, node_etas: Mapping[str, EtaJson],
                     signals: Sequence[SignalJson]) -> None:
        self.task_eta = task_eta or empty_eta()
        self.etas = dict(node_etas)
        self.set_signals(signals)

    def update_analysis(self, task_eta: EtaJson | None = None,
                        node_etas: Mapping[str, EtaJson] | None = None,
                        signals: Sequence[SignalJson] | None = None) -> None:
        """What one analysis run computed; None leaves that part as it was. Node figures arrive
        for the rows around the screen: they are added to those already known (at most
        ``ETA_KEEP`` kept; beyond that only the newest window is)."""
        if task_eta is not None:
            self.task_eta = task_eta or empty_eta()
        if node_etas is not None:
            if len(self.etas) + len(node_etas) > ETA_KEEP:
                self.etas = {}
            self.etas.update(node_etas)
        if signals is not None:
            self.set_signals(signals)

    def set_signals(self, signals: Sequence[SignalJson]) -> None:
        by_node: dict[str, list[SignalJson]] = {}
        for s in signals:
            node = s.get("node")
            if node:
                by_node.setdefault(node, []).append(s)
        self.signals = by_node
        self.task_signals = tuple(signals)

    # --- filter: free text, or status:X / kind:X terms
    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self._refilter()

    def _terms(self) -> list[tuple[str, str]]:
        terms = []
        for word in self.filter_text.casefold().split():
            if ":" in word:
                k, v = word.split(":", 1)
                if k in ("status", "kind", "key") and v:
                    terms.append((k, v))
                    continue
            terms.append(("", word))
        return terms

    def _matches(self, n: GraphRow, terms: list[tuple[str, str]] | None = None) -> bool:
        return _matches(n.key, n.kind, n.title, n.status, self._terms() if terms is None else terms)

    def _refilter(self) -> None:
        if not self.filter_text:
            self._visible = None
            return
        terms = self._terms()
        self._visible = self.nodes.matching(terms)

    def positions(self, rows: Iterable[int]) -> list[int]:
        if self._visible is None:
            return list(rows)
        where = {r: p for p, r in enumerate(self._visible)} if len(self._visible) < 5000 else None
        out = []
        for r in rows:
            if where is not None:
                p = where.get(r)
            else:
                import bisect

                p = bisect.bisect_left(self._visible, r)
                p = p if p < len(self._visible) and self._visible[p] == r else None
            if p is not None:
                out.append(p)
        return out

    def position_of_key(self, key: str) -> int | None:
        """Where the node ``key`` is shown (None: not, or filtered out): a bisection of the shown
        rows, not a table of them built for one look-up (a refilter asks this of up to 1,000
        neighbours of the cursor, console/widgets/rowlist.py)."""
        i = self.index.get(key)
        if i is None or self._visible is None:
            return i
        p = bisect_left(self._visible, i)
        return p if p < len(self._visible) and self._visible[p] == i else None

    def node_at(self, pos: int) -> GraphRow | None:
        if self._visible is not None:
            return self.nodes[self._visible[pos]] if 0 <= pos < len(self._visible) else None
        return self.nodes[pos] if 0 <= pos < len(self.nodes) else None

    def row_count(self) -> int:
        return len(self._visible) if self._visible is not None else len(self.nodes)

    def counts(self) -> dict[str, int]:
        """Nodes by status: the task row's counts (read with it), not a walk over every node."""
        if self.task is not None and self.task.counts:
            return dict(self.task.counts)
        out: dict[str, int] = {}
        for n in self.nodes:
            out[n.status] = out.get(n.status, 0) + 1
        return out

    def lease_text(self, n: GraphRow) -> Cell:
        if not n.has_lease:
            if n.status == "pending" and n.next_retry_at and n.next_retry_at > self.clock():
                return (f"retry {duration_label(n.next_retry_at - self.clock())}", "dim")
            quota = self.quota_wait(n.key) if n.status == "pending" else None
            if quota is not None:
                return (f"quota {safe_line(quota, limit=10)}", "dim")
            return (MARKS["dash"], "dim")
        left = (n.lease_until or 0) - self.clock()
        owner = safe_line(n.lease_owner or "?", limit=8)
        if left <= 0:
            return (f"{owner} expired", "alarm")
        return (f"{owner} {duration_label(left)}", "")

    def quota_wait(self, key: str) -> str | None:
        return quota_waited(self.signals.get(key, ()))

    def row_cells(self, pos: int) -> list[Cell]:
        n = self.node_at(pos)
        if n is None:
            return []
        i = self.index[n.key]
        indent = " " * min(MAX_INDENT, self.depth[i] if i < len(self.depth) else 0)
        deps = (f"{MARKS['left']} " + ",".join(safe_line(d) for d in n.deps)) if n.deps else MARKS["dash"]
        eta = None if n.status in FINISHED_NODE else self.etas.get(n.key)
        return [
            (indent + safe_line(n.key), "key"),
            status_cell(n.status, NODE_GLYPHS),
            (str(n.attempt), ""),
            self.lease_text(n),
            (deps, "dim" if not n.deps else ""),
            (eta_label(eta), "" if eta and eta.get("p80_s") is not None else "dim"),
            signals_cell(self.signals.get(n.key, ())),
            (safe_line(n.kind), "dim"),
            (safe_line(n.title), ""),
        ]


def _matches(key: str, kind: str, title: str, status: str, terms: list[tuple[str, str]]) -> bool:
    """A row matches every term of the filter (``status:``, ``kind:``, ``key:`` or free text)."""
    for k, v in terms:
        if k == "status":
            if not status.startswith(v):
                return False
        elif k == "kind":
            if v not in kind.casefold():
                return False
        elif k == "key":
            if v not in key.casefold():
                return False
        elif not (v in key.casefold() or v in kind.casefold() or status.startswith(v) or v in title.casefold()):
            return False
    return True

"""Incremental estimates and signals for one task: what the console's view model keeps.

``TaskAnalysis(ledger, task_id)`` reads the task once (its graph, the duration history of its
kinds, the last observations of its running nodes, its open handoffs, its recent
claims). After that the console feeds it what the change feed delivers:

```python
for event in delta.events:                      # journal events, id order
    changed = ledger.nodes(task_id, keys_named_by(event))   # the nodes the event names
    analysis.apply_event(event, changed)
eta = analysis.estimate()                          # GraphEstimate, same shape as estimates.estimate_graph
sigs = analysis.signals()                          # list[Signal], same as signals.signals_for_graph
```

``apply_event`` touches only the nodes it is given and the event's own payload (a heartbeat's
lease, units, tokens, its own interval and declared wait, observation digest and new-line count — a
heartbeat needs no re-read of its
node; a commit's duration): no query, except one for the open
handoffs after a ``handoff.*`` event and one for the task row after a task-level event when the
caller does not pass the task view. ``estimate()`` recomputes the distributions of the running
nodes (they depend on the clock) and of nodes whose kind history moved; the task figure is the
same seeded Monte Carlo as the one-shot path for up to ``mc_max_nodes`` unfinished nodes, and the
moment approximation from per-(kind, est_wall_s) counts kept up to date by ``apply_event`` above
that. ``signals()`` visits the running nodes, the open handoffs and the parked nodes only.

The console builds it from the graph rows it already holds (``rows=``, ``task=``, ``cursor=``: no
second read of the graph) and asks for ``node_estimates(keys)`` of the rows on screen.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import replace
from typing import AbstractSet, Sequence, TypedDict

from store.estimation.estimates import (
    DEFAULT_PARAMS,
    FINISHED,
    NO_ESTIMATE,
    DurationHistory,
    Estimate,
    EstimateParams,
    GraphEstimate,
    NodeDist,
    NodeState,
    approximate_estimate,
    base_dist,
    dist_estimate,
    running_elapsed,
    kind_p80,
    node_dist,
    task_estimate,
)
from store.reading import task_level
from store.facade import Ledger
from store.estimation import evidence
from store.storage.events import HandoffOpened, NodeClaimed, NodeCommitted, NodeHeartbeat, payload_of, task_wide
from store.reading.signals import (
    DEFAULT_THRESHOLDS,
    KindNorms,
    Obs,
    Signal,
    Thresholds,
    density_acted,
    node_signals,
    read_observations,
    sort_signals,
    task_signals,
)
from store.views import EventView, GraphRow, NodeView, TaskView

class BeatColumns(TypedDict, total=False):
    """The node columns a heartbeat changes, as :meth:`TaskAnalysis.apply_event` replaces them."""

    heartbeat_at: float
    lease_until: float | None
    units_done: float
    units_total: float
    tokens_used: int
    beat_interval_s: float
    units_at: float
    progress_at: float
    beat_long_s: float
    wait_on: str | None
    wait_since: float | None
    wait_until: float | None


def beat_columns(beat: NodeHeartbeat, at: float, tokens_used: int) -> BeatColumns:
    """The node columns a heartbeat event moves (``ledger/observe.beat_payload``), given the node's
    tokens before it."""
    out = BeatColumns(heartbeat_at=at, lease_until=beat.lease_until)
    if beat.units_done is not None:
        out["units_done"] = beat.units_done
    if beat.units_total is not None:
        out["units_total"] = beat.units_total
    if beat.tokens:
        out["tokens_used"] = tokens_used + beat.tokens
    if beat.beat_interval_s is not None:
        out["beat_interval_s"] = beat.beat_interval_s
    if beat.units_at is not None:
        out["units_at"] = beat.units_at
    if beat.progress_at is not None:
        out["progress_at"] = beat.progress_at
    if beat.beat_long_s is not None:
        out["beat_long_s"] = beat.beat_long_s
    if beat.wait is not None:
        out.update(BeatColumns(wait_on=beat.wait["on"], wait_since=beat.wait["since"], wait_until=beat.wait["until"]))
    return out


EST_CACHE_MAX = 2_000  # node figures kept between runs (a 100k-node task: the rows looked at last) …
BASES_MAX = 256  # … and shared distributions by kind and est_wall_s (each ~3 KB: 100 quantiles)
ROW_READ_CHUNK = 500  # running nodes re-read as whole nodes at a time (``from_rows``)


class TaskAnalysis:
    def __init__(self, ledger: Ledger, task_id: str, *, history: DurationHistory | None = None,
                 params: EstimateParams = DEFAULT_PARAMS, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                 rows: Sequence[GraphRow] | None = None, task: TaskView | None = None,
                 cursor: int | None = None) -> None:
        """Read the task once. ``rows`` (with its ``task`` view and the journal ``cursor`` they are
        as of): the task's nodes as the caller already holds them — the console's graph rows
        (``store.views.NodeRow``, which carry what the estimates read) — instead of reading the
        graph again; the running nodes are re-read as whole nodes (signals read more of them) and
        the events after ``cursor`` are the caller's to apply."""
        self.ledger = ledger
        self.task_id = task_id
        self.params = params
        self.thresholds = thresholds
        if rows is None:
            graph = ledger.graph(task_id)
            self.task = graph.task
            nodes: Sequence[GraphRow] = graph.nodes
        else:
            self.task = task if task is not None else ledger.task(task_id)
            nodes = rows
        self.nodes: dict[str, GraphRow] = {n.key: n for n in nodes}
        self._order: list[str] | None = None
        # A history loaded after ``cursor`` already holds the durations of the commits between the
        # two: those events must not add them again.
        self._history_at = ledger.last_event_id() if rows is not None else 0
        self.history = history if history is not None else DurationHistory(params.history_cap, params)
        self.history.load_kinds(ledger, {n.kind for n in nodes})
        running = [n for n in nodes if n.status == "running"]
        if rows is not None and running:
            running = []
            keys = sorted(n.key for n in nodes if n.status == "running")
            for i in range(0, len(keys), ROW_READ_CHUNK):
                running.extend(ledger.nodes(task_id, keys[i:i + ROW_READ_CHUNK]))
            for n in running:
                self.nodes[n.key] = n
        th = thresholds
        self.obs: dict[str, deque[Obs]] = {}
        by_id = read_observations(ledger, [n.id for n in running], th.observations_per_node)
        for n in running:
            self.obs[n.key] = deque(by_id.get(n.id, ()), maxlen=th.observations_per_node)
        self.handoffs = list(ledger.handoffs(task_id=task_id, status="open"))
        self.claims: dict[str, float] = {}
        for actor, at in evidence.recent_claims(ledger, task_id, 500):
            if actor and actor not in self.claims:
                self.claims[actor] = at
        # aggregates kept up to date by apply_event
        self._live: Counter[tuple[str, float | None]] = Counter()  # unfinished, not running
        self._norm = [0.0, 0.0, 0]  # tokens, units, nodes over succeeded nodes that reported units
        self._norm_stale = False  # rows without tokens_used counted: re-read the sums (``_token_sums``)
        self._running_set: set[str] = set()
        self._elapsed_now: float | None = None  # the moment ``_elapsed`` was read at (None: read again)
        self._elapsed_by: dict[str, tuple[float, ...]] = {}
        self._parked_set: set[str] = set()
        for n in self.nodes.values():
            self._count(n, +1)
        self._est_cache: dict[str, tuple[tuple[object, ...], Estimate, NodeDist | None]] = {}
        self._bases: dict[tuple[str, float | None, int], tuple[tuple[float, ...], NodeDist | None]] = {}
        self.cursor = ledger.last_event_id() if cursor is None else cursor
        if rows is None:
            self._history_at = self.cursor
        elif self._norm_stale:
            self._token_sums()

    # ------------------------------------------------------------------ bookkeeping
    def _count(self, n: GraphRow, sign: int) -> None:
        self._elapsed_now = None  # (a node's status or claim, or its kind's history, may have changed)
        for bucket, member in ((self._running_set, n.status == "running"),
                               (self._parked_set, n.status == "parked" and n.park_until is not None)):
            if member:
                (bucket.add if sign > 0 else bucket.discard)(n.key)
        if n.status not in FINISHED and n.status != "running":
            self._live[(n.kind, n.est_wall_s)] += sign
            if self._live[(n.kind, n.est_wall_s)] <= 0:
                del self._live[(n.kind, n.est_wall_s)]
        if n.status == "succeeded" and n.units_done and n.units_done > 0:
            tokens = getattr(n, "tokens_used", None)
            if tokens is None:  # a lean row: the sums are re-read when next needed
                self._norm_stale = True
                return
            self._norm[0] += sign * tokens
            self._norm[1] += sign * float(n.units_done)
            self._norm[2] += sign

    def _update_node(self, n: NodeView) -> None:
        old = self.nodes.get(n.key)
        if old is not None:
            self._count(old, -1)
        else:
            self._order = None
        self.nodes[n.key] = n
        self._count(n, +1)
        if n.status != "running":
            self.obs.pop(n.key, None)
        if n.kind not in self.history.loaded:
            self.history.load_kinds(self.ledger, [n.kind])

    def apply_event(self, event: EventView, changed_nodes: Sequence[NodeView] = (), *,
                    task: TaskView | None = None) -> AbstractSet[str]:
        """Apply one journal event and the fresh views of the nodes it changed. Returns the keys
        whose estimate or signals may have moved; a task-level change returns every key, as a
        live view of the node keys (no 100k-key copy for callers that ignore it)."""
        self._elapsed_now = None
        if event.task_id is not None and event.task_id != self.task_id:
            return set()
        fresh = event.id > self.cursor
        if not fresh and not changed_nodes:
            return set()
        self.cursor = max(self.cursor, event.id)
        changed: set[str] = set()
        for n in changed_nodes:
            self._update_node(n)
            changed.add(n.key)
        key = event.node
        p = payload_of(event)
        kind = event.kind
        before = event.id <= self._history_at  # the observations and durations read hold it already
        if isinstance(p, NodeClaimed):
            if event.actor:
                self.claims[event.actor] = max(event.at, self.claims.get(event.actor, event.at))
            if key and not before:
                self.obs[key] = deque(maxlen=self.thresholds.observations_per_node)
        elif isinstance(p, NodeHeartbeat) and key in self.nodes:
            held = self.nodes[key]
            if not changed_nodes and fresh and held.status == "running" and isinstance(held, NodeView) and (
                    held.heartbeat_at is None or held.heartbeat_at < event.at):
                # A heartbeat changes only these columns: no need to re-read the node. (A view read
                # after this heartbeat already shows it: its heartbeat_at is not older.)
                self.nodes[key] = replace(held, **beat_columns(p, event.at, held.tokens_used))
                changed.add(key)
            if p.observation is not None and not before:
                seen = self.obs.setdefault(key, deque(maxlen=self.thresholds.observations_per_node))
                o = Obs.seen(p.observation, event.at, self.nodes[key].attempt)
                if o not in seen:  # read with the node's observations already (``rows``)
                    seen.append(o)
        elif isinstance(p, NodeCommitted) and key in self.nodes and fresh:
            # The memory learns the duration once per commit event: from the node's own row when
            # it still shows this commit (exact), else from the event (rounded to the millisecond).
            held = self.nodes[key]
            if before:
                pass  # the history was loaded after this commit: it holds its duration already
            elif held.status == "succeeded" and held.finished_at == event.at and held.claimed_at is not None:
                self.history.add(held.kind, held.finished_at - held.claimed_at, self.task_id, held.position)
            else:
                self.history.add(held.kind, p.commit.wall_s, self.task_id, held.position)
        elif isinstance(p, HandoffOpened):
            self.handoffs = list(self.ledger.handoffs(task_id=self.task_id, status="open"))
        wide = task_wide(kind)
        if task is not None:
            self.task = task
        elif key is None or wide:
            self.task = self.ledger.task(self.task_id)
        if key is None or wide:
            return self.nodes.keys()
        if key:
            changed.add(key)
        return changed

    # ------------------------------------------------------------------ figures
    def _ordered(self) -> list[GraphRow]:
        if self._order is None:
            self._order = [n.key for n in sorted(self.nodes.values(), key=lambda n: n.position)]
        return [self.nodes[k] for k in self._order]

    def _dist(self, n: GraphRow, now: float) -> NodeDist | None:
        if n.status in FINISHED:
            return None
        time_bound = n.status == "running" or (n.next_retry_at is not None and n.next_retry_at > now)
        running = self._elapsed(now).get(n.kind, ())
        stamp = (n.version, n.status, n.units_done, n.units_total, n.est_wall_s, self.history.version(n.kind), running)
        hit = self._est_cache.get(n.key)
        if hit is not None and hit[0] == stamp and not time_bound:
            return hit[2]
        pooled = self.history.pooled_model() if not self.history.count(n.kind) and not n.est_wall_s else None
        d = node_dist(NodeState.of(n), now, self.history, self.params, pooled, base=self._base(n, running),
                      task_id=self.task_id, running=running)
        if not time_bound:
            if len(self._est_cache) >= EST_CACHE_MAX:
                self._est_cache.clear()
            self._est_cache[n.key] = (stamp, dist_estimate(d) if d is not None else NO_ESTIMATE, d)
        return d

    def _elapsed(self, now: float) -> dict[str, tuple[float, ...]]:
        """The running nodes' elapsed times per kind (``estimates.running_elapsed``), once per ``now``.
        A kind's tuple is the same object as long as its values are the same: the figures keyed on
        it (``_base``, ``_dist``'s stamp) compare it by identity, not its hundreds of values per node."""
        if self._elapsed_now != now:
            was = self._elapsed_by
            fresh = running_elapsed(
                ((self.nodes[k].kind, self.nodes[k].claimed_at) for k in self._running_set), now, self.history)
            self._elapsed_by = {kind: was[kind] if was.get(kind) == got else got for kind, got in fresh.items()}
            self._elapsed_now = now
        return self._elapsed_by

    def _base(self, n: GraphRow, running: tuple[float, ...] = ()) -> NodeDist | None:
        """``base_dist`` of a node whose kind has a history, shared by the nodes of the same kind and
        ``est_wall_s`` until the kind's samples or its running set change: thousands of running nodes
        of a few kinds need a few distributions, not thousands. None: ``node_dist`` works it out
        itself (no history: the prior or the pooled model; a position trend: one per node)."""
        kind = n.kind
        if not self.history.count(kind) or self.history.model(kind).pos_slope:
            return None  # (a position trend: one per node — not kept, a distribution is ~3 KB)
        key = (kind, n.est_wall_s, self.history.version(kind))
        hit = self._bases.get(key)
        if hit is not None and (hit[0] is running or hit[0] == running):
            return hit[1]
        if len(self._bases) >= BASES_MAX:
            self._bases.clear()
        d = base_dist(kind, n.est_wall_s, self.history, self.params, None, self.task_id, n.position, running)
        self._bases[key] = (running, d)
        return d

    def node_estimates(self, keys: Sequence[str], now: float | None = None) -> dict[str, Estimate]:
        """The estimates of these nodes only (the rows a screen shows): the same figures as
        ``estimate().nodes`` for them; finished and unknown keys are left out."""
        now = self.ledger.now() if now is None else now
        out: dict[str, Estimate] = {}
        for k in keys:
            n = self.nodes.get(k)
            if n is None or n.status in FINISHED:
                continue
            d = self._dist(n, now)
            hit = self._est_cache.get(k)
            out[k] = hit[1] if hit is not None and hit[2] is d else (dist_estimate(d) if d is not None else NO_ESTIMATE)
        return out

    def _token_sums(self) -> None:
        """The tokens / units sums over the succeeded nodes that reported units, read once (lean
        rows do not carry ``tokens_used``)."""
        totals = evidence.unit_totals(self.ledger, self.task_id)
        self._norm = [totals.tokens, totals.units, totals.nodes]
        self._norm_stale = False

    def workers(self, now: float) -> int:
        window = now - self.params.worker_window_s
        who = {w for w, at in self.claims.items() if at >= window}
        who.update(owner for owner in (self.nodes[k].lease_owner for k in self._running_set) if owner)
        return max(1, len(who))

    def estimate(self, now: float | None = None) -> GraphEstimate:
        """Every unfinished node's figure and the task's."""
        now = self.ledger.now() if now is None else now
        nodes = self._ordered()
        dists: dict[str, NodeDist | None] = {}
        per_node: dict[str, Estimate] = {}
        unfinished = 0
        for n in nodes:
            if n.status in FINISHED:
                continue
            unfinished += 1
            d = self._dist(n, now)
            dists[n.key] = d
            hit = self._est_cache.get(n.key)
            per_node[n.key] = hit[1] if hit is not None and hit[2] is d else (dist_estimate(d) if d is not None else NO_ESTIMATE)
        if self.task.status not in ("active", "parked"):
            return GraphEstimate(NO_ESTIMATE, per_node)
        workers = self.workers(now)
        if unfinished <= self.params.mc_max_nodes:
            states = [NodeState.of(n) for n in nodes if n.status not in FINISHED]
            return GraphEstimate(task_estimate(states, dists, workers, self.params), per_node)
        return GraphEstimate(self._approx(now, workers), per_node)

    def task_estimate(self, now: float | None = None) -> Estimate:
        """Only the task's figure: O(kinds + running nodes) on a large graph."""
        now = self.ledger.now() if now is None else now
        if self.task.status not in ("active", "parked"):
            return NO_ESTIMATE
        unfinished = sum(self._live.values()) + len(self._running_set)
        if unfinished == 0:
            return Estimate(0.0, 0.0, 0, "none")
        if unfinished <= self.params.mc_max_nodes:
            return self.estimate(now).task
        return self._approx(now, self.workers(now))

    def _running(self) -> list[GraphRow]:
        return [self.nodes[k] for k in sorted(self._running_set)]

    def _approx(self, now: float, workers: int) -> Estimate:
        pooled = None
        groups = []
        for (kind, est), count in self._live.items():
            if not self.history.count(kind) and not est and pooled is None:
                pooled = self.history.pooled_model()
            d = base_dist(kind, est, self.history, self.params, pooled, self.task_id, None,
                          self._elapsed(now).get(kind, ()))
            if d is None:
                return NO_ESTIMATE
            groups.append((d, count))
        running = []
        for n in self._running():
            d = self._dist(n, now)
            if d is None:
                return NO_ESTIMATE
            running.append(d)
        return approximate_estimate(groups, running, workers)

    def signals(self, now: float | None = None) -> list[Signal]:
        """Every signal of the task."""
        now = self.ledger.now() if now is None else now
        parked = [self.nodes[k] for k in sorted(self._parked_set)]
        out = task_signals(self.task, self.handoffs, now, thresholds=self.thresholds, parked_nodes=parked)
        extra = [Signal(*s) for s in task_level.extra(self.ledger, self.task, now, self.thresholds)]
        out += extra
        acted = density_acted(extra)
        if self.task.status != "parked":
            if self._norm_stale:
                self._token_sums()
            tokens, units, count = self._norm
            norm = tokens / units if count >= self.thresholds.cost_density_min_nodes and units > 0 else None
            p80s: dict[tuple[str, float | None], tuple[float | None, int]] = {}  # the same for a kind and est
            kinds = KindNorms(self.ledger, {r.kind for r in self._running()})
            for n in self._running():
                assert isinstance(n, NodeView), "a running node is held whole (read again in __init__)"
                p80 = p80s.get((n.kind, n.est_wall_s))
                if p80 is None:
                    p80 = p80s[(n.kind, n.est_wall_s)] = kind_p80(self.history, n.kind, n.est_wall_s, self.params)
                out.extend(kinds.judged(n, lambda own: node_signals(
                    self.task_id, n, list(self.obs.get(n.key, ())), now, thresholds=self.thresholds, kind_p80=p80,
                    token_norm=None if n.key in acted else norm, task_status=self.task.status, norm=own)))
        return sort_signals(out)

"""P80 remaining-time estimates with their sample count and confidence.

The method (``docs/estimates.md`` has the reasoning and the measured calibration):

* **Memory.** A kind's duration history is the wall time of the *last attempt* of its succeeded
  nodes, ``finished_at - claimed_at``, across the whole ledger, newest first, at most
  ``history_cap`` per kind. (``wall_used_s`` sums every attempt, failed ones included; the last
  attempt is what a running attempt is compared against.)
* **A node's remaining time** is a small deterministic set of points:
  the kind's history (``history``); without history, a log-normal around ``est_wall_s`` with
  ``prior_sigma`` (21 quantile points, ``estimate``); without either, the pooled history of all
  kinds (``pooled``). A running node keeps only the points above its elapsed time ``e`` and
  subtracts ``e`` (the conditional remaining time); past every point it assumes a log-normal
  with median ``past_history_factor × e``. With progress ``f = units_done / units_total`` each point
  ``c`` becomes ``(1 - f)·c + f·e·(1 - f)/f`` — the further along, the more the node's own rate counts.
  A pending node waiting for ``next_retry_at`` adds that wait.
* **Quantiles** of a set of points are the linear interpolation between order statistics
  (Hyndman & Fan type 7, numpy's default): ``h = (n - 1)·q``, ``x[⌊h⌋] + (h - ⌊h⌋)·(x[⌊h⌋+1] - x[⌊h⌋])``.
* **A task's remaining time** is a Monte Carlo over the dependency structure: each trial draws
  every unfinished node's remaining time (a smoothed bootstrap: a random point times
  ``exp(h·Z)``, ``h`` Silverman's bandwidth on the log scale) and list-schedules the graph on ``W``
  workers in position order (the order ``claim`` hands nodes out), running nodes first; P50/P80
  are the quantiles of the trials' makespans. ``W`` is the number of distinct workers that
  claimed a node of the task in the last ``worker_window_s`` or hold one of its leases now
  (at least 1, at least the running count). The random generator is seeded with ``seed`` so the
  same ledger gives the same figures.
* **Large graphs** (more than ``mc_max_nodes`` unfinished nodes) use a moment approximation:
  the total remaining work is normal by the central limit theorem, and the makespan is
  ``(mean + z·sd) / W``, floored by the longest running node's quantile. It ignores chain depth
  (on a graph that large, work over workers dominates unless the graph is a long chain).
* **Confidence** by sample count: ``none`` 0, ``low`` < 5, ``medium`` < 20, ``high`` ≥ 20. A task
  reports the smallest count among the kinds it still has to run.

Human waits (blocked nodes), parks and retries of future failures are not forecast: a blocked
or parked node counts as its kind's run time once it is free again.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_right, insort
from collections import deque
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Iterable, Mapping, Sequence

FINISHED = ("succeeded", "abandoned")
Z = {0.5: 0.0, 0.8: NormalDist().inv_cdf(0.8)}


# ---------------------------------------------------------------------- small pure helpers
def confidence(samples: int) -> str:
    """``none`` 0, ``low`` < 5, ``medium`` < 20, ``high`` ≥ 20 samples."""
    if samples <= 0:
        return "none"
    if samples < 5:
        return "low"
    if samples < 20:
        return "medium"
    return "high"


def quantile(sorted_values: Sequence[float], q: float) -> float | None:
    """Type-7 (linear) quantile of already sorted values; None for no values."""
    n = len(sorted_values)
    if n == 0:
        return None
    if n == 1:
        return float(sorted_values[0])
    h = (n - 1) * q
    lo = int(math.floor(h))
    hi = min(lo + 1, n - 1)
    return float(sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo]))


@dataclass(frozen=True)
class Estimate:
    p50_s: float | None
    p80_s: float | None
    samples: int
    confidence: str

    def to_json(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 1)  # noqa: E731
        return {"p50_s": r(self.p50_s), "p80_s": r(self.p80_s), "samples": self.samples, "confidence": self.confidence}


NO_ESTIMATE = Estimate(None, None, 0, "none")


@dataclass(frozen=True)
class GraphEstimate:
    task: Estimate
    nodes: Mapping[str, Estimate] = field(default_factory=dict)


@dataclass(frozen=True)
class EstimateParams:
    """Knobs of the estimator, with their documented defaults."""

    history_cap: int = 500  # newest durations kept per kind
    worker_window_s: float = 900.0  # a worker counts as active if it claimed within this window
    trials: int = 300  # Monte Carlo trials (at most)
    min_trials: int = 50
    mc_budget: int = 25_000  # trials × unfinished nodes per task estimate (about 60-100 ms here)
    mc_max_nodes: int = 500  # above this many unfinished nodes: the moment approximation
    seed: int = 80
    prior_sigma: float = 0.5  # log-normal spread assumed around est_wall_s
    past_history_factor: float = 0.3  # running past every known duration: median remaining = this × elapsed
    past_history_sigma: float = 0.8


DEFAULT_PARAMS = EstimateParams()


# ---------------------------------------------------------------------- the estimator's memory
class DurationHistory:
    """Per-kind durations, newest ``cap`` kept, with a sorted copy for quantiles.

    ``add`` is O(log n + n) worst case (the sorted list) and is what the incremental analysis
    calls on a ``node.committed`` event; ``version(kind)`` moves whenever a kind's samples change.
    """

    def __init__(self, cap: int = DEFAULT_PARAMS.history_cap) -> None:
        self.cap = cap
        self._recent: dict[str, deque[float]] = {}
        self._sorted: dict[str, list[float]] = {}
        self._version: dict[str, int] = {}
        self._bw: dict[str, float] = {}
        self.loaded: set[str] = set()
        self.all_loaded = False

    def add(self, kind: str, duration: float) -> None:
        d = max(0.0, float(duration))
        rec = self._recent.setdefault(kind, deque())
        srt = self._sorted.setdefault(kind, [])
        rec.append(d)
        insort(srt, d)
        if len(rec) > self.cap:
            old = rec.popleft()
            i = bisect_right(srt, old) - 1
            del srt[i]
        self._version[kind] = self._version.get(kind, 0) + 1
        self._bw.pop(kind, None)

    def extend_oldest_first(self, kind: str, durations: Iterable[float]) -> None:
        for d in durations:
            self.add(kind, d)

    def samples(self, kind: str) -> list[float]:
        return self._sorted.get(kind, [])

    def count(self, kind: str) -> int:
        return len(self._sorted.get(kind, ()))

    def version(self, kind: str) -> int:
        return self._version.get(kind, 0)

    def kinds(self) -> list[str]:
        return [k for k, v in self._sorted.items() if v]

    def pooled(self) -> list[float]:
        out: list[float] = []
        for v in self._sorted.values():
            out.extend(v)
        out.sort()
        return out

    def bandwidth(self, kind: str) -> float:
        """Silverman's rule on log durations (the smoothed bootstrap's kernel)."""
        bw = self._bw.get(kind)
        if bw is None:
            bw = log_bandwidth(self.samples(kind))
            self._bw[kind] = bw
        return bw

    @classmethod
    def load(cls, ledger: Any, kinds: Iterable[str] | None = None, cap: int = DEFAULT_PARAMS.history_cap) -> "DurationHistory":
        """The newest ``cap`` durations of each kind (all kinds when None), one query per kind."""
        h = cls(cap)
        h.load_kinds(ledger, kinds)
        return h

    def load_kinds(self, ledger: Any, kinds: Iterable[str] | None) -> None:
        from .models import Node

        if kinds is None:
            if self.all_loaded:
                return
            kinds = [r[0] for r in ledger._q(Node.select(Node.kind).distinct()).tuples()]
            self.all_loaded = True
        todo = sorted(set(kinds) - self.loaded)
        if not todo:
            return
        done = (Node.status == "succeeded") & Node.claimed_at.is_null(False) & Node.finished_at.is_null(False)
        got: dict[str, list[float]] = {k: [] for k in todo}
        # One walk down the newest rows for all kinds; a kind still short of `cap` when the walk
        # was cut by its limit gets its own walk.
        limit = self.cap * len(todo)
        rows = list(ledger._q(Node.select(Node.kind, Node.finished_at - Node.claimed_at)
                              .where(done & Node.kind.in_(todo)).order_by(Node.id.desc()).limit(limit)).tuples())
        for kind, d in rows:
            if len(got[kind]) < self.cap:
                got[kind].append(float(d))
        if len(rows) == limit:
            for kind in todo:
                if len(got[kind]) < self.cap:
                    got[kind] = [float(r[0]) for r in ledger._q(
                        Node.select(Node.finished_at - Node.claimed_at).where(done & (Node.kind == kind))
                        .order_by(Node.id.desc()).limit(self.cap)).tuples()]
        for kind in todo:
            ds = got[kind]
            ds.reverse()
            self.extend_oldest_first(kind, ds)
            self.loaded.add(kind)


def log_bandwidth(sorted_values: Sequence[float]) -> float:
    logs = [math.log(max(v, 1e-3)) for v in sorted_values]
    n = len(logs)
    if n < 2:
        return DEFAULT_PARAMS.prior_sigma
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    srt = sorted(logs)
    iqr = (quantile(srt, 0.75) or 0.0) - (quantile(srt, 0.25) or 0.0)
    spread = min(sd, iqr / 1.34) if iqr > 0 else sd
    return 0.9 * spread * n ** (-0.2)


# ---------------------------------------------------------------------- one node
@dataclass(frozen=True)
class NodeState:
    """What the estimator needs of a node (built from a NodeView or a lean row)."""

    key: str
    kind: str
    status: str
    position: int
    deps: tuple[str, ...] = ()
    claimed_at: float | None = None
    units_done: float | None = None
    units_total: float | None = None
    est_wall_s: float | None = None
    next_retry_at: float | None = None

    @classmethod
    def of(cls, n: Any) -> "NodeState":
        return cls(n.key, n.kind, n.status, n.position, tuple(n.deps), n.claimed_at, n.units_done, n.units_total,
                   n.est_wall_s, n.next_retry_at)


@dataclass(frozen=True)
class NodeDist:
    """A node's remaining time as sorted points, the history behind them, and the MC kernel."""

    values: tuple[float, ...]
    samples: int
    bandwidth: float
    source: str  # history | estimate | pooled

    def estimate(self) -> Estimate:
        return Estimate(quantile(self.values, 0.5), quantile(self.values, 0.8), self.samples, confidence(self.samples))

    def moments(self) -> tuple[float, float]:
        """Mean and variance of a draw (point × exp(h·Z))."""
        n = len(self.values)
        m = sum(self.values) / n
        m2 = sum(v * v for v in self.values) / n
        g1 = math.exp(self.bandwidth ** 2 / 2)
        g2 = math.exp(2 * self.bandwidth ** 2)
        mean = m * g1
        return mean, max(0.0, m2 * g2 - mean * mean)


def lognormal_grid(median: float, sigma: float, points: int = 21) -> tuple[float, ...]:
    nd = NormalDist()
    return tuple(median * math.exp(sigma * nd.inv_cdf((i + 0.5) / points)) for i in range(points))


def base_dist(kind: str, est_wall_s: float | None, history: DurationHistory,
              params: EstimateParams = DEFAULT_PARAMS, pooled: Sequence[float] | None = None) -> NodeDist | None:
    """A fresh run of this kind: its history, else the est_wall_s prior, else the pooled history."""
    hist = history.samples(kind)
    if hist:
        return NodeDist(tuple(hist), len(hist), history.bandwidth(kind), "history")
    if est_wall_s is not None and est_wall_s > 0:
        return NodeDist(lognormal_grid(float(est_wall_s), params.prior_sigma), 0, 0.0, "estimate")
    if pooled:
        return NodeDist(tuple(pooled), 0, log_bandwidth(pooled), "pooled")
    return None


def node_dist(n: NodeState, now: float, history: DurationHistory, params: EstimateParams = DEFAULT_PARAMS,
              pooled: Sequence[float] | None = None, base: NodeDist | None = None) -> NodeDist | None:
    """The remaining time of one unfinished node (None when finished or nothing is known)."""
    if n.status in FINISHED:
        return None
    if base is None:
        base = base_dist(n.kind, n.est_wall_s, history, params, pooled)
    if base is None:
        return None
    if n.status == "running" and n.claimed_at is not None:
        e = max(0.0, now - n.claimed_at)
        cond = [v - e for v in base.values if v > e] if e > 0 else list(base.values)
        bw = base.bandwidth
        if not cond:
            cond = list(lognormal_grid(max(params.past_history_factor * e, 1e-3), params.past_history_sigma))
            bw = 0.0
        f = progress(n)
        if f is not None and f > 0:
            rate = e * (1 - f) / f
            cond = [(1 - f) * c + f * rate for c in cond]
        cond.sort()
        return NodeDist(tuple(cond), base.samples, bw, base.source)
    if n.status == "pending" and n.next_retry_at is not None and n.next_retry_at > now:
        wait = n.next_retry_at - now
        return NodeDist(tuple(v + wait for v in base.values), base.samples, base.bandwidth, base.source)
    return base


def progress(n: Any) -> float | None:
    if n.units_total is None or not n.units_total or n.units_total <= 0 or n.units_done is None:
        return None
    return min(1.0, max(0.0, float(n.units_done) / float(n.units_total)))


# ---------------------------------------------------------------------- the task
@dataclass
class _Plan:
    """The unfinished part of a graph, indexed for the scheduler."""

    dists: list[NodeDist]
    running: list[int]
    deps: list[list[int]]
    dependents: list[list[int]]
    samples: int


def _plan(nodes: Sequence[NodeState], dists: Mapping[str, NodeDist | None]) -> _Plan | None:
    """None when some unfinished node has no estimate at all."""
    idx: dict[str, int] = {}
    live: list[NodeState] = []
    for n in nodes:
        if n.status in FINISHED:
            continue
        idx[n.key] = len(live)
        live.append(n)
    out_d: list[NodeDist] = []
    running: list[int] = []
    deps: list[list[int]] = [[] for _ in live]
    dependents: list[list[int]] = [[] for _ in live]
    samples: int | None = None
    for i, n in enumerate(live):
        d = dists.get(n.key)
        if d is None:
            return None
        out_d.append(d)
        samples = d.samples if samples is None else min(samples, d.samples)
        if n.status == "running":
            running.append(i)
        for k in n.deps:
            j = idx.get(k)
            if j is not None:
                deps[i].append(j)
                dependents[j].append(i)
    return _Plan(out_d, running, deps, dependents, samples or 0)


def simulate_makespans(plan: _Plan, workers: int, trials: int, seed: int) -> list[float]:
    """List scheduling in index (position) order on ``workers`` workers, running nodes first."""
    n = len(plan.dists)
    rng = random.Random(seed)
    rnd = rng.random
    gauss = rng.gauss
    running = set(plan.running)
    w = max(1, workers, len(running))
    indeg0 = [len(d) for d in plan.deps]
    dists = plan.dists
    pts = [d.values for d in dists]
    lens = [len(p) for p in pts]
    bws = [d.bandwidth for d in dists]
    dependents = plan.dependents
    unconstrained = w >= n
    out: list[float] = []
    for _ in range(trials):
        dur = [0.0] * n
        for i in range(n):
            v = pts[i][int(rnd() * lens[i])]
            b = bws[i]
            dur[i] = v * math.exp(b * gauss(0.0, 1.0)) if b else v
        if unconstrained:  # no contention: the longest path
            fin = [0.0] * n
            for i in range(n):  # indices are in topological order
                start = 0.0
                for j in plan.deps[i]:
                    if fin[j] > start:
                        start = fin[j]
                fin[i] = start + dur[i]
            out.append(max(fin) if fin else 0.0)
            continue
        indeg = indeg0[:]
        events: list[tuple[float, int]] = [(dur[i], i) for i in running]
        heapq.heapify(events)
        ready = [i for i in range(n) if indeg[i] == 0 and i not in running]
        heapq.heapify(ready)
        free = w - len(running)
        t = 0.0
        while True:
            while free > 0 and ready:
                i = heapq.heappop(ready)
                heapq.heappush(events, (t + dur[i], i))
                free -= 1
            if not events:
                break
            t, i = heapq.heappop(events)
            free += 1
            for c in dependents[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    heapq.heappush(ready, c)
        out.append(t)
    return out


def approximate_makespan(dists: Iterable[tuple[NodeDist, int]], running: Sequence[NodeDist], workers: int) -> tuple[float, float]:
    """(P50, P80) of the remaining time from moments: ``(mean + z·sd) / W``, floored by the
    slowest running node. ``dists`` yields (distribution, how many nodes share it)."""
    mean = var = 0.0
    for d, count in dists:
        m, v = d.moments()
        mean += m * count
        var += v * count
    floor50 = floor80 = 0.0
    for d in running:
        m, v = d.moments()
        mean += m
        var += v
        floor50 = max(floor50, quantile(d.values, 0.5) or 0.0)
        floor80 = max(floor80, quantile(d.values, 0.8) or 0.0)
    w = max(1, workers, len(running))
    sd = math.sqrt(var)
    return max(mean / w, floor50), max((mean + Z[0.8] * sd) / w, floor80)


def task_estimate(nodes: Sequence[NodeState], dists: Mapping[str, NodeDist | None], workers: int,
                  params: EstimateParams = DEFAULT_PARAMS) -> Estimate:
    """P50/P80 of the whole remaining time of a task's unfinished nodes."""
    unfinished = sum(1 for n in nodes if n.status not in FINISHED)
    if unfinished == 0:
        return Estimate(0.0, 0.0, 0, "none")
    if unfinished > params.mc_max_nodes:
        return _approx_from_nodes(nodes, dists, workers)
    plan = _plan(nodes, dists)
    if plan is None:
        return NO_ESTIMATE
    trials = max(params.min_trials, min(params.trials, params.mc_budget // max(1, unfinished)))
    spans = sorted(simulate_makespans(plan, workers, trials, params.seed))
    return Estimate(quantile(spans, 0.5), quantile(spans, 0.8), plan.samples, confidence(plan.samples))


def _approx_from_nodes(nodes: Sequence[NodeState], dists: Mapping[str, NodeDist | None], workers: int) -> Estimate:
    groups: dict[int, list[Any]] = {}
    running: list[NodeDist] = []
    samples: int | None = None
    for n in nodes:
        if n.status in FINISHED:
            continue
        d = dists.get(n.key)
        if d is None:
            return NO_ESTIMATE
        samples = d.samples if samples is None else min(samples, d.samples)
        if n.status == "running":
            running.append(d)
        else:
            g = groups.setdefault(id(d), [d, 0])
            g[1] += 1
    p50, p80 = approximate_makespan(((d, c) for d, c in groups.values()), running, workers)
    s = samples or 0
    return Estimate(p50, p80, s, confidence(s))


# ---------------------------------------------------------------------- reading the ledger
def recent_workers(ledger: Any, task_id: str, now: float, running_owners: Iterable[str | None] = (),
                   window_s: float = DEFAULT_PARAMS.worker_window_s, scan: int = 500) -> int:
    """Distinct workers that claimed a node of the task within ``window_s`` (from the newest
    ``scan`` claim events) or hold one of its leases now; at least 1."""
    from .models import Event

    q = (Event.select(Event.actor, Event.at)
         .where((Event.task_id == task_id) & (Event.kind == "node.claimed"))
         .order_by(Event.id.desc()).limit(scan))
    who = {a for a, at in ledger._q(q).tuples() if at is not None and at >= now - window_s and a}
    who.update(o for o in running_owners if o)
    return max(1, len(who))


def _dists_for(nodes: Sequence[NodeState], now: float, history: DurationHistory, params: EstimateParams) -> dict[str, NodeDist | None]:
    pooled_cache: list[list[float]] = []

    def pooled() -> list[float]:
        if not pooled_cache:
            pooled_cache.append(history.pooled())
        return pooled_cache[0]

    base_by_kind: dict[tuple[str, float | None], NodeDist | None] = {}
    out: dict[str, NodeDist | None] = {}
    for n in nodes:
        if n.status in FINISHED:
            continue
        bk = (n.kind, n.est_wall_s if not history.count(n.kind) else None)
        if bk not in base_by_kind:
            base_by_kind[bk] = base_dist(n.kind, n.est_wall_s, history, params,
                                         None if history.count(n.kind) or n.est_wall_s else pooled())
        out[n.key] = node_dist(n, now, history, params, base=base_by_kind[bk])
    return out


def estimate_graph(ledger: Any, graph: Any, *, params: EstimateParams = DEFAULT_PARAMS,
                   history: DurationHistory | None = None, now: float | None = None) -> GraphEstimate:
    """Every node's estimate and the task's, for ``warden graph`` and the console."""
    now = ledger.now() if now is None else now
    task = graph.task
    nodes = [NodeState.of(n) for n in graph.nodes]
    history = _ensure_history(ledger, history, nodes, params)
    dists = _dists_for(nodes, now, history, params)
    per_node = {k: (d.estimate() if d is not None else NO_ESTIMATE) for k, d in dists.items()}
    if task.status not in ("active", "parked"):
        return GraphEstimate(NO_ESTIMATE, per_node)
    owners = [n.lease_owner for n in graph.nodes if n.status == "running"]
    workers = recent_workers(ledger, task.task_id, now, owners, params.worker_window_s)
    return GraphEstimate(task_estimate(nodes, dists, workers, params), per_node)


LEAN_COLUMNS = ("id", "key", "kind", "status", "position", "claimed_at", "units_done", "units_total", "est_wall_s",
                "next_retry_at", "lease_owner")


def estimate_task(ledger: Any, task: Any, *, params: EstimateParams = DEFAULT_PARAMS,
                  history: DurationHistory | None = None, now: float | None = None) -> Estimate:
    """The task's estimate without loading its whole graph (``warden status``).

    Reads only the unfinished nodes (index on task, status) and the edges into them; above
    ``mc_max_nodes`` unfinished nodes, one aggregate per kind and the running rows.
    """
    from .models import Edge, Node

    if task.status not in ("active", "parked"):
        return NO_ESTIMATE
    now = ledger.now() if now is None else now
    counts = task.counts or {}
    unfinished = sum(v for k, v in counts.items() if k not in FINISHED)
    if unfinished == 0:
        return Estimate(0.0, 0.0, 0, "none")
    live_status = [s for s in counts if s not in FINISHED]
    if unfinished > params.mc_max_nodes:
        rows = list(ledger._q(
            Node.select(Node.kind, pw_count(Node.id), pw_avg(Node.est_wall_s))
            .where((Node.task == task.task_id) & Node.status.in_([s for s in live_status if s != "running"]))
            .group_by(Node.kind)).tuples())
        run_rows = [_lean(r) for r in ledger._q(
            Node.select(*[getattr(Node, c) for c in LEAN_COLUMNS])
            .where((Node.task == task.task_id) & (Node.status == "running"))).dicts()]
        kinds = {r[0] for r in rows} | {r.kind for r, _ in run_rows}
        if history is None:
            history = DurationHistory(params.history_cap)
        history.load_kinds(ledger, kinds)
        if any(not history.count(k) for k in kinds):
            history.load_kinds(ledger, None)
        pooled = history.pooled()
        groups = []
        samples: int | None = None
        for kind, count, est in rows:
            d = base_dist(kind, est, history, params, pooled)
            if d is None:
                return NO_ESTIMATE
            groups.append((d, int(count)))
            samples = d.samples if samples is None else min(samples, d.samples)
        running = []
        for r, _ in run_rows:
            d = node_dist(r, now, history, params, pooled)
            if d is None:
                return NO_ESTIMATE
            running.append(d)
            samples = d.samples if samples is None else min(samples, d.samples)
        workers = recent_workers(ledger, task.task_id, now, [o for _, o in run_rows], params.worker_window_s)
        p50, p80 = approximate_makespan(groups, running, workers)
        s = samples or 0
        return Estimate(p50, p80, s, confidence(s))
    rows = list(ledger._q(
        Node.select(*[getattr(Node, c) for c in LEAN_COLUMNS])
        .where((Node.task == task.task_id) & Node.status.in_(live_status)).order_by(Node.position)).dicts())
    key_of = {r["id"]: r["key"] for r in rows}
    deps: dict[int, list[str]] = {}
    ids = list(key_of)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        for d, s in ledger._q(Edge.select(Edge.dst, Edge.src).where(Edge.dst.in_(chunk))).tuples():
            if s in key_of:
                deps.setdefault(d, []).append(key_of[s])
    nodes = []
    owners = []
    for r in rows:
        st, owner = _lean(r, tuple(deps.get(r["id"], ())))
        nodes.append(st)
        owners.append(owner)
    history = _ensure_history(ledger, history, nodes, params)
    dists = _dists_for(nodes, now, history, params)
    workers = recent_workers(ledger, task.task_id, now, owners, params.worker_window_s)
    return task_estimate(nodes, dists, workers, params)


def _ensure_history(ledger: Any, history: DurationHistory | None, nodes: Sequence[NodeState],
                    params: EstimateParams) -> DurationHistory:
    """Load (once) the kinds these unfinished nodes need; every kind when one has neither history
    nor ``est_wall_s`` (the pooled fallback)."""
    if history is None:
        history = DurationHistory(params.history_cap)
    live = [n for n in nodes if n.status not in FINISHED]
    history.load_kinds(ledger, {n.kind for n in live})
    if any(not history.count(n.kind) and not n.est_wall_s for n in live):
        history.load_kinds(ledger, None)
    return history


def _lean(r: Mapping[str, Any], deps: tuple[str, ...] = ()) -> tuple[NodeState, str | None]:
    return (NodeState(r["key"], r["kind"], r["status"], r["position"], deps, r["claimed_at"], r["units_done"],
                      r["units_total"], r["est_wall_s"], r["next_retry_at"]),
            r["lease_owner"] if r["status"] == "running" else None)


def pw_count(col: Any) -> Any:
    import peewee as pw

    return pw.fn.COUNT(col)


def pw_avg(col: Any) -> Any:
    import peewee as pw

    return pw.fn.AVG(col)

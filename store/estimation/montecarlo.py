"""The task's remaining time from its nodes' distributions: a seeded Monte Carlo over the dependency
structure, and a moment approximation for graphs too large to simulate.

Each node's distribution is a set of equal-probability points (``NodeDist.values``). A trial draws
every unfinished node once and list-schedules the graph on ``W`` workers the way ``claim`` hands
work out (running nodes first, then ready nodes in position order). Nodes of one group (kind)
are drawn through a Gaussian copula with correlation ``rho``: the uncertainty about where a kind's
durations lie is shared by all its nodes, so it does not average out over a long chain.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass
from typing import Iterable, Sequence

from store.estimation.durations import Z80, quantile

_SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class NodeDist:
    """A node's remaining time as sorted equal-probability points, with what they rest on."""

    values: tuple[float, ...]
    samples: int
    label: str  # none | low | medium | high
    source: str  # history | estimate | pooled
    group: str | None = None  # nodes of one group share their location uncertainty …
    rho: float = 0.0  # … with this correlation (log scale)
    why: tuple[str, ...] = ()
    shares: tuple[float, ...] = ()  # a fresh run of a clustered kind: each cluster's share of the points, …
    shift: float = 0.0  # … the standard error of the longest one's, …
    lumpy: int = 0  # … and up to how many of its runs a sum is lumps (store/estimation/mixture.py)

    def moments(self) -> tuple[float, float]:
        """Mean and variance of a draw."""
        n = len(self.values)
        m = sum(self.values) / n
        m2 = sum(v * v for v in self.values) / n
        return m, max(0.0, m2 - m * m)

    def shared(self) -> float:
        """``exp(rho · var(log X)) - 1``: a draw's covariance with another of its group, over mean²."""
        if self.rho <= 0:
            return 0.0
        logs = [math.log(max(v, 1e-9)) for v in self.values]
        m = sum(logs) / len(logs)
        var = sum((x - m) ** 2 for x in logs) / len(logs)
        return math.expm1(self.rho * var)


@dataclass
class Plan:
    """The unfinished part of a graph, indexed for the scheduler (topological index order)."""

    dists: list[NodeDist]
    running: list[int]
    deps: list[list[int]]
    dependents: list[list[int]]


def simulate_makespans(plan: Plan, workers: int, trials: int, seed: int) -> list[float]:
    """List scheduling in index (position) order on ``workers`` workers, running nodes first."""
    n = len(plan.dists)
    rng = random.Random(seed)
    rnd = rng.random
    gauss = rng.gauss
    erf = math.erf
    running = set(plan.running)
    w = max(1, workers, len(running))
    indeg0 = [len(d) for d in plan.deps]
    dists = plan.dists
    pts = [d.values for d in dists]
    size = [len(p) for p in pts]
    last = [s - 1 for s in size]
    group_ids: dict[str, int] = {}
    grp = []
    for i, d in enumerate(dists):
        correlated = d.group is not None and d.rho > 0 and i not in running
        grp.append(group_ids.setdefault(d.group, len(group_ids)) if correlated else -1)  # type: ignore[arg-type]
    a = [math.sqrt(d.rho) if grp[i] >= 0 else 0.0 for i, d in enumerate(dists)]
    b = [math.sqrt(1.0 - d.rho) if grp[i] >= 0 else 0.0 for i, d in enumerate(dists)]
    dependents = plan.dependents
    unconstrained = w >= n
    out: list[float] = []
    for _ in range(trials):
        shared = [gauss(0.0, 1.0) for _ in group_ids]
        dur = [0.0] * n
        for i in range(n):
            g = grp[i]
            if g >= 0:
                u = 0.5 * (1.0 + erf((a[i] * shared[g] + b[i] * gauss(0.0, 1.0)) / _SQRT2))
            else:
                u = rnd()
            # each point is its slice's mean: a pick (not an interpolation) keeps the mean duration
            dur[i] = pts[i][min(int(u * size[i]), last[i])]
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
    slowest running node. ``dists`` yields (distribution, how many nodes share it); nodes of one
    group are correlated through their shared location (a one-factor model)."""
    mean = var = 0.0
    factor: dict[str | None, float] = {}
    for d, count in dists:
        m, v = d.moments()
        k = d.shared()
        mean += m * count
        var += max(0.0, v - m * m * k) * count  # the part of each draw's variance that is its own
        if k > 0:
            factor[d.group] = factor.get(d.group, 0.0) + count * m * math.sqrt(k)
    var += sum(f * f for f in factor.values())
    floor50 = floor80 = 0.0
    for d in running:
        m, v = d.moments()
        mean += m
        var += v
        floor50 = max(floor50, quantile(d.values, 0.5) or 0.0)
        floor80 = max(floor80, quantile(d.values, 0.8) or 0.0)
    w = max(1, workers, len(running))
    sd = math.sqrt(max(0.0, var))
    return max(mean / w, floor50), max((mean + Z80 * sd) / w, floor80)


def dominant(plan: Plan, keys: Sequence[str], top: int = 3) -> list[str]:
    """The nodes that weigh most on the remaining time: the biggest means on the longest path
    (by mean durations; index order is topological)."""
    n = len(plan.dists)
    if n == 0:
        return []
    means = [d.moments()[0] for d in plan.dists]
    fin = [0.0] * n
    prev = [-1] * n
    for i in range(n):
        start, p = 0.0, -1
        for j in plan.deps[i]:
            if fin[j] > start:
                start, p = fin[j], j
        fin[i] = start + means[i]
        prev[i] = p
    i = max(range(n), key=lambda k: fin[k])
    path = []
    while i >= 0:
        path.append(i)
        i = prev[i]
    path.sort(key=lambda k: -means[k])
    return [keys[k] for k in path[:top]]

"""Kinds whose durations fall in clusters (pure): finding the clusters, and the P80 of a sum of
runs of such a kind as a *mixture quantile* (docs/estimates.md, "Kinds whose runs fall in clusters").

A kind that is 10 s or 60 s has sums of a few runs that are lumps — 40 s, 90 s, 140 s, 190 s,
240 s for four runs — not the smooth hill a log-normal through them draws. What such a sum's P80
is, and how far it can be trusted, depends on the lumps:

* :func:`find_cuts` splits a kind's log durations (recency-weighted) into two or three clusters
  when they clearly are (each at least ``MIN_WEIGHT`` of the weight, the clusters' spread within
  them at most ``MAX_WITHIN`` of the whole: a normal's best split leaves 36 %, a uniform's 25 %).
* :func:`parts` gives each cluster's weight and the mean and variance of its durations.
* :func:`sum_quantile` is the quantile of the sum of ``k`` runs: the counts of runs from each
  cluster follow a Dirichlet-multinomial (the weights are known from ``n_eff`` runs, not exactly),
  each count vector's sum a log-normal fitted to its mean and variance (Fenton-Wilkinson).
* :func:`lumpy_runs`: up to how many runs a sum is still lumps (neighbouring clusters' means
  ``LUMP_SEP`` times further apart than the spread within a lump of that many runs).
* :func:`shifted` moves weight (``LUMP_SE`` standard errors of it) from the shortest cluster to the
  longest, on a set of equal-probability points: what a figure would hold if the long runs were
  more common than the history says, within what it allows (the estimator's check that a P80 does
  not sit on a lump's edge).
"""

from __future__ import annotations

import math
from typing import Sequence

MIN_WEIGHT = 0.08  # a cluster holds at least this share of the runs …
MAX_WITHIN = 0.20  # … and the split leaves at most this share of the log variance within the clusters
MIN_RUNS = 30  # fewer runs than this: no clusters (a split of a handful says nothing)
THIRD_GAIN = 0.35  # a third cluster when it leaves at most this share of two clusters' spread …
MAX_WITHIN_3 = 0.08  # … and of the whole (a normal's best split in three leaves 19 %, a uniform's 11 %)
WEIGHT_PRIOR = 0.5  # Dirichlet pseudo-count per cluster (the weights of a few runs are uncertain)
_CANDIDATES = 40  # cut candidates for three clusters (weighted quantiles)

Part = tuple[float, float, float]  # (weight, mean duration, variance of the duration)


def find_cuts(logs: Sequence[float], weights: Sequence[float]) -> tuple[float, ...]:
    """Log thresholds between the clusters of a kind's durations, ascending (``()``: one cluster)."""
    n = len(logs)
    if n < MIN_RUNS:
        return ()
    pairs = sorted(zip(logs, weights))
    xs = [x for x, _ in pairs]
    cw = [0.0]
    cx = [0.0]
    cxx = [0.0]
    for x, w in pairs:
        cw.append(cw[-1] + w)
        cx.append(cx[-1] + w * x)
        cxx.append(cxx[-1] + w * x * x)
    total_w = cw[-1]
    if total_w <= 0:
        return ()

    def ss(a: int, b: int) -> float:  # weighted sum of squares of xs[a:b] around their mean
        w = cw[b] - cw[a]
        if w <= 0:
            return 0.0
        s = cx[b] - cx[a]
        return max(0.0, cxx[b] - cxx[a] - s * s / w)

    total = ss(0, n)
    if total <= 1e-12:
        return ()
    min_w = MIN_WEIGHT * total_w

    def ok(bounds: Sequence[int]) -> bool:  # every cluster heavy enough, every cut between two values
        edges = [0, *bounds, n]
        heavy = all(cw[b] - cw[a] >= min_w for a, b in zip(edges, edges[1:]))
        return heavy and all(xs[b - 1] < xs[b] for b in bounds)

    best2: tuple[float, int] | None = None
    for i in range(1, n):
        if xs[i - 1] == xs[i] or not ok((i,)):
            continue
        within = ss(0, i) + ss(i, n)
        if best2 is None or within < best2[0]:
            best2 = (within, i)
    if best2 is None:
        return ()
    cand = sorted({min(n - 1, max(1, _index_at(cw, total_w * (j + 0.5) / _CANDIDATES))) for j in range(_CANDIDATES)})
    best3: tuple[float, int, int] | None = None
    for ai, a in enumerate(cand):
        for b in cand[ai + 1:]:
            if not ok((a, b)):
                continue
            within = ss(0, a) + ss(a, b) + ss(b, n)
            if best3 is None or within < best3[0]:
                best3 = (within, a, b)
    two = best2[0] <= MAX_WITHIN * total
    if best3 is not None and best3[0] <= MAX_WITHIN_3 * total and (not two or best3[0] <= THIRD_GAIN * best2[0]):
        _, a, b = best3
        return ((xs[a - 1] + xs[a]) / 2, (xs[b - 1] + xs[b]) / 2)
    if not two:
        return ()
    i = best2[1]
    return ((xs[i - 1] + xs[i]) / 2,)


def _index_at(cum: Sequence[float], target: float) -> int:
    lo, hi = 0, len(cum) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid + 1] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def cluster_of(x: float, cuts: Sequence[float]) -> int:
    """The cluster a log duration falls in."""
    c = 0
    while c < len(cuts) and x >= cuts[c]:
        c += 1
    return c


def parts(logs: Sequence[float], weights: Sequence[float], cuts: Sequence[float]) -> tuple[Part, ...]:
    """Each cluster's (share of the weight, mean duration, variance of its durations)."""
    k = len(cuts) + 1
    s0 = [0.0] * k
    s1 = [0.0] * k
    s2 = [0.0] * k
    for x, w in zip(logs, weights):
        c = cluster_of(x, cuts)
        d = math.exp(x)
        s0[c] += w
        s1[c] += w * d
        s2[c] += w * d * d
    return from_sums(s0, s1, s2)


def from_sums(s0: Sequence[float], s1: Sequence[float], s2: Sequence[float]) -> tuple[Part, ...]:
    """Parts from each cluster's (decayed) sums of weight, weight × duration, weight × duration²."""
    total = sum(s0)
    out = []
    for w, a, b in zip(s0, s1, s2):
        if w <= 0 or total <= 0:
            out.append((0.0, 0.0, 0.0))
            continue
        m = a / w
        out.append((w / total, m, max(0.0, b / w - m * m)))
    return tuple(out)


def _compositions(k: int, c: int) -> list[tuple[int, ...]]:
    if c == 1:
        return [(k,)]
    return [(j, *rest) for j in range(k + 1) for rest in _compositions(k - j, c - 1)]


_COMP_CACHE: dict[tuple[int, int], list[tuple[int, ...]]] = {}


def _terms(ps: Sequence[Part], k: int, n_eff: float, tau2: float) -> list[tuple[float, float, float]]:
    """(probability, log-normal μ, σ) of each count vector of ``k`` runs over the clusters."""
    live = [p for p in ps if p[0] > 0]
    key = (k, len(live))
    comps = _COMP_CACHE.get(key)
    if comps is None:
        comps = _COMP_CACHE[key] = _compositions(k, len(live))
    alpha = [max(n_eff, 1.0) * w + WEIGHT_PRIOR for w, _, _ in live]
    a0 = sum(alpha)
    base = math.lgamma(k + 1) + math.lgamma(a0) - math.lgamma(k + a0)
    # log Γ(c + α_j) - log Γ(α_j) - log c! for every count c a cluster can have
    table = [[math.lgamma(c + a) - math.lgamma(a) - math.lgamma(c + 1) for c in range(k + 1)] for a in alpha]
    out = []
    for counts in comps:
        lp = base
        mean = var = 0.0
        for j, (cnt, (_, m, v)) in enumerate(zip(counts, live)):
            lp += table[j][cnt]
            mean += cnt * m
            var += cnt * v
        if mean <= 0:
            continue
        var += mean * mean * math.expm1(tau2)
        s2 = math.log1p(var / (mean * mean))
        out.append((math.exp(lp), math.log(mean) - s2 / 2, math.sqrt(max(s2, 1e-12))))
    return out


def sum_cdf(ps: Sequence[Part], k: int, x: float, n_eff: float, tau2: float = 0.0) -> float:
    """P(the sum of ``k`` fresh runs ≤ ``x``)."""
    if x <= 0:
        return 0.0
    lx = math.log(x)
    return sum(p * 0.5 * math.erfc(-(lx - mu) / (s * math.sqrt(2.0))) for p, mu, s in _terms(ps, k, n_eff, tau2))


def sum_quantile(ps: Sequence[Part], k: int, q: float, n_eff: float, tau2: float = 0.0) -> float:
    """The ``q`` quantile of the sum of ``k`` fresh runs of a clustered kind (bisection on the log)."""
    terms = _terms(ps, k, n_eff, tau2)
    if not terms:
        return 0.0
    total = sum(p for p, _, _ in terms)
    lo = min(mu - 6 * s for _, mu, s in terms)
    hi = max(mu + 6 * s for _, mu, s in terms)
    r2 = math.sqrt(2.0)
    for _ in range(26):
        mid = (lo + hi) / 2
        got = sum(p * 0.5 * math.erfc(-(mid - mu) / (s * r2)) for p, mu, s in terms) / total
        if got < q:
            lo = mid
        else:
            hi = mid
    return math.exp(hi)


LUMP_SEP = 1.0  # a sum of k runs is lumps while neighbouring clusters' means lie this many of its sd apart
LUMP_SE = 2.0  # a lumpy figure's P80 must hold with the long cluster this many standard errors heavier


def lumpy_runs(ps: Sequence[Part]) -> int:
    """The most runs whose sum is still lumps: neighbouring clusters' mean durations at least
    ``LUMP_SEP`` times the spread a sum of that many runs has within its lumps (0: never lumps)."""
    live = [p for p in ps if p[0] > 0]
    if len(live) < 2:
        return 0
    gap = min(b[1] - a[1] for a, b in zip(live, live[1:]))
    var = sum(w * v for w, _, v in live)
    if gap <= 0:
        return 0
    if var <= 0:
        return 1_000_000
    return int((gap / LUMP_SEP) ** 2 / var)


def weight_se(ps: Sequence[Part], n_eff: float) -> float:
    """Standard error of the longest cluster's weight, known from ``n_eff`` runs."""
    w = ps[-1][0]
    return math.sqrt(max(w * (1 - w), 0.0) / max(n_eff, 1.0))


def shifted(values: Sequence[float], shares: Sequence[float], delta: float) -> tuple[float, ...]:
    """Equal-probability points (sorted) whose clusters hold ``shares`` (ascending), with ``delta``
    of weight moved from the first cluster to the last: the same number of points, re-picked."""
    n = len(values)
    if n == 0 or len(shares) < 2 or delta <= 0:
        return tuple(values)
    delta = min(delta, shares[0] / 2)
    new = [shares[0] - delta, *shares[1:-1], shares[-1] + delta]
    old_cum = [0.0]
    new_cum = [0.0]
    for a, b in zip(shares, new):
        old_cum.append(old_cum[-1] + a)
        new_cum.append(new_cum[-1] + b)
    out = []
    c = 0
    for j in range(n):
        u = (j + 0.5) / n
        while c < len(new) - 1 and u >= new_cum[c + 1]:
            c += 1
        t = (u - new_cum[c]) / new[c] if new[c] > 0 else 0.0
        old_u = (old_cum[c] + t * shares[c]) / old_cum[-1]
        out.append(values[min(n - 1, max(0, int(old_u * n)))])
    return tuple(sorted(out))

"""Distributions as sets of equal-probability points (pure): type-7 quantiles, log-normal grids,
mixtures of normals cut into slices whose points keep each slice's *mean* duration, convolution.

A set of ``k`` points stands for a distribution: each is equally likely; a draw picks one. Making
each point the mean of its slice (rather than its mid quantile) keeps the distribution's mean, and
with it the mean of a sum of many draws — what a long chain's remaining time is.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Sequence

_ND = NormalDist()
Z80 = _ND.inv_cdf(0.8)


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


def lognormal_grid(median: float, sigma: float, points: int = 21) -> tuple[float, ...]:
    return tuple(median * math.exp(sigma * _ND.inv_cdf((i + 0.5) / points)) for i in range(points))


_SUB_K = 25  # each mixture component is expanded into this many equal-probability slices
_SUB_CACHE: dict[float, tuple[float, ...]] = {}


def _sub_points(sd: float) -> tuple[float, ...]:
    """Log of the mean of ``exp(sd·Z)`` over each of ``_SUB_K`` equal-probability slices of Z:
    the expansion keeps a component's mean duration exactly (its tail included)."""
    key = round(sd, 6)
    got = _SUB_CACHE.get(key)
    if got is None:
        cuts = [-math.inf] + [_ND.inv_cdf(j / _SUB_K) for j in range(1, _SUB_K)] + [math.inf]
        out = []
        for a, b in zip(cuts, cuts[1:]):
            mass = _cdf(b - key) - _cdf(a - key)
            out.append(key * key / 2 + math.log(max(mass * _SUB_K, 1e-300)))
        if len(_SUB_CACHE) > 1024:
            _SUB_CACHE.clear()
        got = _SUB_CACHE[key] = tuple(out)
    return got


def _cdf(x: float) -> float:
    if x == math.inf:
        return 1.0
    if x == -math.inf:
        return 0.0
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def weighted_quantile(pairs: Sequence[tuple[float, float]], total: float, q: float) -> float:
    acc = 0.0
    target = q * total
    for x, w in pairs:
        acc += w
        if acc >= target:
            return x
    return pairs[-1][0]


def mixture_points(comps: Sequence[tuple[float, float, float]], k: int) -> tuple[float, ...]:
    """``k`` equal-probability points (log offsets) of a mixture of normals (centre, weight, sd).

    Each point is the log of its slice's *mean* duration, not its mid quantile: a sum of many
    draws (a long chain) depends on the mean, which mid quantiles understate for skewed shapes."""
    pts: list[tuple[float, float]] = []
    for c, w, sd in comps:
        sub = w / _SUB_K
        for o in _sub_points(sd):
            pts.append((c + o, sub))
    pts.sort()
    total = sum(w for _, w in pts)
    top = pts[-1][0]
    out: list[float] = []
    j = 0
    left = pts[0][1]  # weight of point j not yet given to a slice
    for i in range(k):
        need = total / k
        mass = acc = 0.0
        while need > 1e-15 and j < len(pts):
            take = min(left, need)
            mass += take
            acc += take * math.exp(pts[j][0] - top)
            need -= take
            left -= take
            if left <= 1e-15:
                j += 1
                left = pts[j][1] if j < len(pts) else 0.0
        out.append(math.log(acc / mass) + top if mass > 0 and acc > 0 else (out[-1] if out else 0.0))
    return tuple(out)


def convolve(offsets: Sequence[float], sd: float) -> tuple[float, ...]:
    """The offsets' distribution plus N(0, sd²), as the same number of equal-probability points."""
    if sd <= 0:
        return tuple(offsets)
    return mixture_points([(o, 1.0, sd) for o in offsets], len(offsets))



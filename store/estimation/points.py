"""Distributions as sets of equal-probability points (pure): type-7 quantiles, log-normal grids,
mixtures of normals cut into slices whose points keep each slice's *mean* duration, convolution.

A set of ``k`` points stands for a distribution: each is equally likely; a draw picks one. Making
each point the mean of its slice (rather than its mid quantile) keeps the distribution's mean, and
with it the mean of a sum of many draws — what a long chain's remaining time is.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import accumulate
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


_SUB_K = 25  # a mixture component is expanded into this many equal-probability slices …
_SUB_K_NARROW = 7  # … or this many when it is narrow (a kernel around one sample)
_NARROW = 0.25
_SUB_CACHE: dict[tuple[float, int], tuple[float, ...]] = {}


def _sub_points(sd: float, slices: int = _SUB_K) -> tuple[float, ...]:
    """Log of the mean of ``exp(sd·Z)`` over each of ``slices`` equal-probability slices of Z:
    the expansion keeps a component's mean duration exactly (its tail included)."""
    key = round(sd, 6)
    got = _SUB_CACHE.get((key, slices))
    if got is None:
        cuts = [-math.inf] + [_ND.inv_cdf(j / slices) for j in range(1, slices)] + [math.inf]
        out = []
        for a, b in zip(cuts, cuts[1:]):
            mass = _cdf(b - key) - _cdf(a - key)
            out.append(key * key / 2 + math.log(max(mass * slices, 1e-300)))
        if len(_SUB_CACHE) > 1024:
            _SUB_CACHE.clear()
        got = _SUB_CACHE[(key, slices)] = tuple(out)
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
    draws (a long chain) depends on the mean, which mid quantiles understate for skewed shapes.
    Each component is expanded into slices of its own (fewer for a narrow one), sorted once; a
    slice's mean is read off prefix sums (two bisections per output point)."""
    pts: list[tuple[float, float]] = []
    for c, w, sd in comps:
        subs = _sub_points(sd, _SUB_K if sd >= _NARROW else _SUB_K_NARROW)
        share = w / len(subs)
        pts.extend((c + o, share) for o in subs)
    pts.sort()
    top = pts[-1][0]
    cum_w = list(accumulate(w for _, w in pts))
    cum_e = list(accumulate(w * math.exp(x - top) for x, w in pts))
    total = cum_w[-1]

    def mass_below(c: float) -> float:  # Σ w·e^(x - top) over the lightest ``c`` of the weight
        j = bisect_left(cum_w, c)
        if j >= len(pts):
            return cum_e[-1]
        before_w = cum_w[j - 1] if j else 0.0
        before_e = cum_e[j - 1] if j else 0.0
        return before_e + (c - before_w) * math.exp(pts[j][0] - top)

    out: list[float] = []
    lo = 0.0
    for i in range(k):
        hi = mass_below(total * (i + 1) / k)
        acc = hi - lo
        lo = hi
        out.append(math.log(acc * k / total) + top if acc > 0 else (out[-1] if out else pts[0][0]))
    return tuple(out)


def convolve(offsets: Sequence[float], sd: float) -> tuple[float, ...]:
    """The offsets' distribution plus N(0, sd²), as the same number of equal-probability points."""
    if sd <= 0:
        return tuple(offsets)
    return mixture_points([(o, 1.0, sd) for o in offsets], len(offsets))



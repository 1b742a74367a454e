"""What a kind's history says about a fresh run of it: the model, its measured calibration, and
how a task's own runs of the kind move it (pure; the memory is ``store/estimation/durations.py``).

:func:`kind_model` builds it from the kind's durations in the order they finished, each with the
task it ran in (``docs/estimates.md`` has the reasoning and the measured figures):

* **Recency.** Sample ``i`` (age ``a`` = how many finished after it) weighs ``2^(-a / H)``; its
  weighted log mean ``m``, spread ``s`` and effective count ``n_eff = (Σw)² / Σw²`` follow.
* **Spread and location.** The within-kind log spread ``σ`` blends ``s`` with a prior ``prior_sigma``
  worth ``prior_dof`` samples. The kind's *location* is itself uncertain: variance ``σ² / n_eff``
  (few samples → wide), or, for a node with ``est_wall_s``, the precision-weighted blend of the
  samples and ``ln est_wall_s`` (whose error is ``prior_location_sigma``): the prior never drops out,
  it just weighs less as samples come.
* **Drift.** Every sample of the newest ``track_checks`` is replayed against what the samples
  before it predicted (its standardised residual and whether it fell within that P80). The mean of
  the newest ``drift_window`` residuals beyond ``drift_z`` standard errors is drift: the location
  moves to the recent level and widens by as much, and the label drops to ``low``.
* **Tasks differ.** The between-task variance ``τ²`` of the kind's level (one-way random effects
  over the tasks that ran it at least twice) widens every task's figure; a task's own finished runs
  of the kind move its level: ``store/estimation/tasklevel.py`` learns the task's speed factor from
  them against the kind's runs in other tasks, with the uncertainty it carries.
* **Confidence** is measured, not counted: ``high`` only when at least ``high_checks`` of those
  replayed P80s were checked and ``high_coverage`` of them held (and no drift); ``medium`` from
  ``medium_checks`` checks at ``medium_coverage``; otherwise ``low`` (``none`` without any sample).

A fresh node's remaining time is ``exp(μ_node + offsets)``: ``predictive_points`` equal-probability
points of the within-kind shape (the weighted, kernel-smoothed residuals plus the prior's normal)
convolved with the location's uncertainty. The task's Monte Carlo draws nodes of one kind through
a Gaussian copula with correlation ``rho = loc_var / (loc_var + σ²)``: an unlucky guess of the
kind's location makes all its nodes slower together, as it does in life.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from store.estimation import mixture
from store.estimation.points import Z80, convolve, lognormal_grid, mixture_points, quantile, weighted_quantile  # noqa: F401

LABELS = ("none", "low", "medium", "high")


@dataclass(frozen=True)
class EstimateParams:
    """Knobs of the estimator, with their documented defaults (docs/estimates.md)."""

    history_cap: int = 500  # newest durations kept per kind
    worker_window_s: float = 900.0  # a worker counts as active if it claimed within this window
    trials: int = 600  # Monte Carlo trials (at most)
    min_trials: int = 50
    mc_budget: int = 40_000  # trials × unfinished nodes per task estimate
    mc_max_nodes: int = 500  # above this many unfinished nodes: the moment approximation
    seed: int = 80
    recency_half_life: float = 40.0  # a sample's weight halves every this many newer samples
    prior_sigma: float = 0.5  # within-kind log spread assumed before samples say otherwise …
    prior_dof: float = 2.0  # … worth this many samples
    prior_location_sigma: float = 0.5  # how far off est_wall_s may be (log scale)
    location_floor: float = 0.05  # the kind's location is never known better than ±5 %
    location_inflation: float = 1.6  # × the location variance (a plug-in figure covers a little less than it says)
    location_var_max: float = 9.0  # … and at most 3² (log scale): beyond, a mean of exp() overflows and says nothing
    predictive_points: int = 101
    kernel_factor: float = 0.5  # × Silverman's bandwidth (his rule oversmooths a bimodal kind)
    shape_parametric: float = 0.0  # share of a kind's shape that is the fitted log-normal (the rest: its samples)
    track_checks: int = 100  # newest samples replayed against the samples before them …
    min_prefix: int = 5  # … that had at least this many before them
    block_size: int = 10  # the sums replayed (a chain's figure)
    block_coverage_floor: float = 0.6  # replayed sums held less often than this: low whatever the rest
    medium_checks: int = 10
    medium_coverage: float = 0.70
    high_checks: int = 20
    high_coverage: float = 0.75
    group_window: int = 300  # newest samples grouped by task (between-task variance, position trend)
    position_t: float = 3.0  # durations that follow the node's position in its task (t statistic) …
    position_min: float = 0.3  # … by at least this much (log) across the positions seen
    task_others_min: int = 10  # a task's own runs are judged against the kind's runs in other tasks, when this many …
    task_differ_prior: float = 0.5  # … a task is unlike its history this often (before its own runs say) …
    task_faster_prior: float = 0.1  # … faster than it (its first runs to finish are its quick ones) …
    task_differ_sigma: float = 0.8  # … and then its level lies this far from it (log scale: ×2.2 either way)
    task_pin_se: float = 0.35  # a task's own runs pin its speed within ±this (log, ×1.4) before any label above low;
    task_like_differs: float = 0.2  # … except medium while they leave it this unlikely to be unlike its history …
    task_like_sd: float = 0.45  # … and its level's spread is within this (log)
    task_speed_widen: float = 3.0  # a task unlike its history: its speed's variance × this (its first runs read it fast)
    task_speed_runs: int = 8  # a task unlike its history: above low from this many own runs …
    task_speed_se: float = 0.25  # … pinning its speed within ±this (×1.28) …
    task_agree_se: float = 0.1  # … and the kind's label once they pin it within ±this (×1.1)
    task_min: int = 4  # a task's own runs of a kind, from this many + 2, can show a slowdown within the task …
    task_trend_t: float = 2.5  # … (t statistic of their trend)
    drift_window: int = 8  # newest residuals tested for drift
    drift_z: float = 2.0  # their mean beyond this many standard errors …
    drift_min: float = 0.35  # … and at least this far (log scale, ×1.4) is drift
    past_history_factor: float = 0.3  # running past every point: median remaining = this × elapsed
    past_history_sigma: float = 0.8


DEFAULT_PARAMS = EstimateParams()


# ---------------------------------------------------------------------- small pure helpers
def lowest(labels: Iterable[str]) -> str:
    """The least confident of some labels (``none`` < ``low`` < ``medium`` < ``high``)."""
    return min(labels, key=LABELS.index, default="none")


# ---------------------------------------------------------------------- the model of one kind
@dataclass(frozen=True)
class KindModel:
    """What the history of one kind says about a fresh run of it (see the module doc)."""

    kind: str
    samples: int
    n_eff: float
    mean: float  # log location from the samples (the recent level when drifting)
    sigma: float  # within-kind log spread
    sample_var: float  # variance of ``mean`` as an estimate of the location (drift and floor included)
    offsets: tuple[float, ...]  # within-kind shape: sorted log offsets, zero-centred on ``mean``
    checks: int
    hits: int
    drift: float  # log ratio of the recent level to what was predicted (0: none detected)
    label: str
    blocks: int = 0  # replayed sums of block_size samples …
    block_hits: int = 0  # … and how many were within their P80
    tau2: float = 0.0  # between-task variance of the level (log scale)
    sigma_w: float = 0.0  # within-task spread (σ when tasks are not known)
    pos_slope: float = 0.0  # log change per node position within a task (0: none found) …
    pos_centre: float = 0.0  # … around this position, …
    pos_lo: float = 0.0  # … between these positions (seen in the samples): never extrapolated past
    pos_hi: float = 0.0  # them (a slope from 14 nodes once made a node at position 99,999 overflow)
    cuts: tuple[float, ...] = ()  # log thresholds between the clusters its durations fall in (``()``: one) …
    parts: tuple[mixture.Part, ...] = ()  # … and each cluster's (weight, mean duration, variance), recency-weighted

    @property
    def coverage(self) -> float | None:
        return self.hits / self.checks if self.checks else None

    def location(self, est_wall_s: float | None, params: EstimateParams = DEFAULT_PARAMS,
                 position: int | None = None) -> tuple[float, float]:
        """(log location, its variance) for a node: the samples (at the node's position within its
        task when the kind's durations follow it), blended with ``est_wall_s`` when the node has
        one (precision-weighted; drift already moved the samples' side)."""
        mean = self.mean
        if self.pos_slope and position is not None:
            mean += self.pos_slope * (min(max(position, self.pos_lo), self.pos_hi) - self.pos_centre)
        if est_wall_s is None or not est_wall_s > 0:
            return mean, self.sample_var
        pv = params.prior_location_sigma ** 2
        if self.samples == 0:
            return math.log(est_wall_s), pv
        prec = 1.0 / pv + 1.0 / self.sample_var
        mu = (math.log(est_wall_s) / pv + mean / self.sample_var) / prec
        return mu, 1.0 / prec

    def rho(self, loc_var: float) -> float:
        """Correlation (log scale) between two nodes of this kind: their shared location uncertainty."""
        return loc_var / (loc_var + self.sigma ** 2) if loc_var > 0 else 0.0

    def why(self, est_blended: bool = False) -> list[str]:
        out = []
        if self.samples:
            out.append(f"{self.samples} sample{'s' if self.samples != 1 else ''} of {self.kind}"
                       + (" + est_wall_s" if est_blended else ""))
        if self.pos_slope:
            span = math.exp(self.pos_slope * 2 * self.pos_centre) if self.pos_centre else 1.0
            out.append(f"later {self.kind} nodes of a task run {'slower' if self.pos_slope > 0 else 'faster'} "
                       f"(×{max(span, 1 / span):.1f} from first to last)")
        if self.drift:
            ratio = math.exp(self.drift)
            out.append(f"drift: recent {self.kind} runs {ratio:.1f}× slower" if ratio >= 1
                       else f"drift: recent {self.kind} runs {1 / ratio:.1f}× faster")
        if self.checks:
            sums = f"; sums of runs {self.block_hits}/{self.blocks}" if self.blocks else ""
            out.append(f"measured: {self.hits} of {self.checks} past P80s of {self.kind} held "
                       f"({100 * self.hits / self.checks:.0f} %{sums})")
        return out


def prior_model(kind: str, params: EstimateParams = DEFAULT_PARAMS) -> KindModel:
    """A kind never seen: only a node's ``est_wall_s`` can say anything (label ``none``: nothing measured)."""
    return KindModel(kind, 0, 0.0, 0.0, params.prior_sigma, params.prior_location_sigma ** 2,
                     mixture_points([(0.0, 1.0, params.prior_sigma)], params.predictive_points), 0, 0, 0.0, "none")


def kind_model(kind: str, durations: Sequence[float], params: EstimateParams = DEFAULT_PARAMS,
               tasks: Sequence[str | None] | None = None,
               positions: Sequence[int | None] | None = None) -> KindModel:
    """The model of one kind from its durations, oldest first (``tasks``: the task of each;
    ``positions``: each one's node position within its task)."""
    if not durations:
        return prior_model(kind, params)
    logs = [math.log(max(float(d), 1e-3)) for d in durations]
    n = len(logs)
    slope, centre, lo, hi = _position_trend(logs, positions, params)
    if slope:  # the rest of the model sees durations as if all ran at the centre position
        logs = [x - slope * (p - centre) if p is not None else x for x, p in zip(logs, positions or ())]
    lam = 0.5 ** (1.0 / params.recency_half_life)
    moments: list[tuple[float, float] | None] = []
    prefix = _replay(logs, lam, params, moments)  # what each sample's predecessors said, for the checks
    m, sigma, ne, loc_var = _at(prefix, n)
    # the within-kind shape: weighted residuals (kernel-smoothed) + the fitted and the prior normal
    weights = [lam ** (n - 1 - i) for i in range(n)]
    keep = max(0, n - 4 * int(params.recency_half_life) - 40)  # older weights are below 2^-4: dropped
    cuts = mixture.find_cuts(logs[keep:], weights[keep:])  # clusters (a kind that is 10 s or 60 s)
    if n >= 3:
        w_all = sum(weights[keep:])
        h = params.kernel_factor * _kernel(logs[keep:], weights[keep:], m, sigma)
        a = params.shape_parametric
        # each sample smoothed by the kernel without moving its mean duration (centre - h²/2)
        comps = [(x - m - h * h / 2, (1 - a) * w, h) for x, w in zip(logs[keep:], weights[keep:])]
        comps.append((0.0, a * w_all + params.prior_dof * w_all / max(ne, 1e-9), sigma))
    else:
        comps = [(0.0, 1.0, sigma)]
    offsets = mixture_points(comps, params.predictive_points)
    if n >= 3:  # the level's uncertainty from the shape's own spread (a bimodal kind is not a log-normal)
        ex = [math.exp(o) for o in offsets]
        mean1 = sum(ex) / len(ex)
        cv2 = max(0.0, sum(x * x for x in ex) / len(ex) / (mean1 * mean1) - 1.0)
        loc_var = _location_var(sigma, ne, params, cv2)
    # Checks, newest track_checks samples whose predecessors were at least min_prefix:
    # (a) the sample within the P80 its predecessors gave (the same shape at their location and
    # spread); (b) the sum of the block_size samples from there within that sum's P80 (a chain's
    # figure: a level that is off shows here long before single samples say so).
    c80 = (quantile(convolve(offsets, math.sqrt(loc_var)), 0.8) or 0.0) / math.sqrt(sigma ** 2 + loc_var)
    first = max(params.min_prefix, n - params.track_checks)
    resid = []
    for i in range(first, n):
        mi, si, _, li = _at(prefix, i)
        resid.append((logs[i] - mi) / math.sqrt(si ** 2 + li))
    hits = sum(1 for r in resid if r <= c80)
    cum = [0.0]
    for x in logs:
        cum.append(cum[-1] + math.exp(x))
    tau2, sigma_w = _between_tasks(logs, tasks, sigma, params)
    b = params.block_size
    blocks = block_hits = 0
    # a clustered kind's sums are lumps, and whether a window of them held swings with each lump:
    # its sums are replayed over the newest group_window samples (three times the windows)
    first_b = max(params.min_prefix, n - params.group_window) if cuts else first
    mixes = _mixture_replay(logs, lam, cuts, first_b) if cuts else {}
    for i in range(first_b, n - b + 1, 2 if cuts else 1):  # (every second window: half the time, the same lumps)
        blocks += 1
        if cuts:  # a clustered kind's sums are lumps: the mixture quantile (store/estimation/mixture.py)
            mix, ne_i = mixes[i]
            block_hits += mixture.sum_cdf(mix, b, cum[i + b] - cum[i], ne_i, tau2) <= 0.8  # within its P80
        else:
            block_hits += cum[i + b] - cum[i] <= _sum_p80(_at(prefix, i), b, tau2, moments[i])
    drift = 0.0
    recent = resid[-params.drift_window:]
    if len(recent) >= max(4, params.drift_window // 2):
        mr = sum(recent) / len(recent)
        if abs(mr) * math.sqrt(len(recent)) >= params.drift_z and abs(mr) * math.sqrt(sigma ** 2 + loc_var) >= params.drift_min:
            # the recent level: where the newest samples sit, not the decayed mean of all of them
            drift = sum(logs[-len(recent):]) / len(recent) - m
            m += drift
            loc_var += drift ** 2
    if not drift:
        # a slow, steady drift: the durations follow their order (a clear trend over the newest
        # group_window); the level is where the trend is now, not the decayed mean, which lags
        per_run, _ = _trend(list(enumerate(logs))[-params.group_window:], params.position_t, params.position_min)
        if per_run:
            tail = logs[-params.group_window:]
            ic = n - len(tail) + (len(tail) - 1) / 2
            now_level = sum(tail) / len(tail) + per_run * (n - 1 - ic)
            drift = now_level - m
            m = now_level
            loc_var += drift ** 2
    label = _label(n, len(resid), hits, blocks, block_hits, drift, params)
    parts = mixture.parts(logs[keep:], weights[keep:], cuts) if cuts else ()
    return KindModel(kind, n, ne, m, sigma, loc_var, offsets, len(resid), hits, drift, label, blocks, block_hits,
                     tau2, sigma_w, slope, centre, lo, hi, cuts, parts)


def _mixture_replay(logs: Sequence[float], lam: float, cuts: Sequence[float],
                    first: int) -> dict[int, tuple[tuple[mixture.Part, ...], float]]:
    """For i ≥ ``first``: each cluster's recency-weighted (weight, mean, variance) of the durations
    before i, and their effective count — what a replayed sum of a clustered kind is checked against."""
    k = len(cuts) + 1
    s0 = [0.0] * k
    s1 = [0.0] * k
    s2 = [0.0] * k
    tot = sq = 0.0
    out: dict[int, tuple[tuple[mixture.Part, ...], float]] = {}
    lam2 = lam * lam
    for i, x in enumerate(logs):
        if i >= first:
            out[i] = (mixture.from_sums(s0, s1, s2), tot * tot / sq if sq else 0.0)
        for j in range(k):
            s0[j] *= lam
            s1[j] *= lam
            s2[j] *= lam
        c = mixture.cluster_of(x, cuts)
        d = math.exp(x)
        s0[c] += 1.0
        s1[c] += d
        s2[c] += d * d
        tot = tot * lam + 1.0
        sq = sq * lam2 + 1.0
    return out


def _position_trend(logs: Sequence[float], positions: Sequence[int | None] | None,
                    params: EstimateParams) -> tuple[float, float, float, float]:
    """(log slope per position, centre, lowest and highest position seen) of the newest
    ``group_window`` samples' durations against their node position within their task, when it is
    clear and material (:func:`_trend`)."""
    if not positions:
        return 0.0, 0.0, 0.0, 0.0
    pairs = [(float(p), x) for x, p in list(zip(logs, positions))[-params.group_window:] if p is not None]
    slope, centre = _trend(pairs, params.position_t, params.position_min)
    if not slope:
        return 0.0, 0.0, 0.0, 0.0
    return slope, centre, min(p for p, _ in pairs), max(p for p, _ in pairs)


def least_squares(pairs: Sequence[tuple[float, float]]) -> tuple[float, float, float, float] | None:
    """(slope, its standard error, mean x, mean y) of y against x by least squares over ``(x, y)``
    pairs; None with fewer than three or when x does not vary."""
    k = len(pairs)
    if k < 3:
        return None
    pc = sum(p for p, _ in pairs) / k
    xc = sum(x for _, x in pairs) / k
    sxx = sum((p - pc) ** 2 for p, _ in pairs)
    if sxx <= 0:
        return None
    slope = sum((p - pc) * (x - xc) for p, x in pairs) / sxx
    resid = sum((x - xc - slope * (p - pc)) ** 2 for p, x in pairs) / (k - 2)
    return slope, math.sqrt(max(resid, 1e-12) / sxx), pc, xc


def _trend(pairs: Sequence[tuple[float, float]], t_min: float, effect_min: float) -> tuple[float, float]:
    """(slope, centre of x) of y against x by least squares when |t| ≥ ``t_min`` and the slope
    moves y by at least ``effect_min`` across the x seen; else (0, 0)."""
    fit = least_squares(pairs) if len(pairs) >= 12 else None
    if fit is None:
        return 0.0, 0.0
    slope, se, pc, _ = fit
    span = max(p for p, _ in pairs) - min(p for p, _ in pairs)
    if abs(slope) / se >= t_min and abs(slope) * span >= effect_min:
        return slope, pc
    return 0.0, 0.0


def _between_tasks(logs: Sequence[float], tasks: Sequence[str | None] | None, sigma: float,
                   params: EstimateParams) -> tuple[float, float]:
    """(τ², within-task σ) from the newest ``group_window`` samples grouped by task (method of
    moments over tasks with at least two runs; (0, σ) with fewer than three such tasks)."""
    if not tasks:
        return 0.0, sigma
    groups: dict[str, list[float]] = {}
    for x, t in list(zip(logs, tasks))[-params.group_window:]:
        if t is not None:
            groups.setdefault(t, []).append(x)
    means = []
    ss = 0.0
    dof = 0
    sizes = []
    for xs in groups.values():
        if len(xs) < 2:
            continue
        g = sum(xs) / len(xs)
        means.append(g)
        sizes.append(len(xs))
        ss += sum((x - g) ** 2 for x in xs)
        dof += len(xs) - 1
    if len(means) < 3 or dof < 2:
        return 0.0, sigma
    within = ss / dof
    grand = sum(means) / len(means)
    between = sum((g - grand) ** 2 for g in means) / (len(means) - 1)
    tau2 = max(0.0, between - sum(within / k for k in sizes) / len(sizes))
    return tau2, math.sqrt(within)


def _replay(logs: Sequence[float], lam: float, params: EstimateParams,
            moments: list[tuple[float, float] | None] | None = None) -> list[tuple[float, float, float, float] | None]:
    """For i in 0..n: (log mean, spread, n_eff, location variance) of the samples before i,
    recency-weighted (decayed sums, one pass) — worked out only where a check or the model needs it
    (the newest ``track_checks`` and n); None elsewhere. ``moments`` (filled when given): the
    recency-weighted mean and variance of the durations themselves before i (what a sum of them
    adds up to, whatever the kind's shape)."""
    n = len(logs)
    first = max(params.min_prefix, n - params.track_checks)
    out: list[tuple[float, float, float, float] | None] = [None] * (n + 1)
    if moments is not None:
        moments[:] = [None] * (n + 1)
    s0 = s1 = s2 = sq = e1 = e2 = 0.0
    lam2 = lam * lam
    for i, x in enumerate(logs):
        s0 = s0 * lam + 1.0
        s1 = s1 * lam + x
        s2 = s2 * lam + x * x
        sq = sq * lam2 + 1.0
        d = math.exp(x)
        e1 = e1 * lam + d
        e2 = e2 * lam + d * d
        if i + 1 >= first or i + 1 == n:
            m, var, ne = _stats(s0, s1, s2, sq)
            sigma = _sigma(var, ne, params)
            out[i + 1] = (m, sigma, ne, _location_var(sigma, ne, params))
            if moments is not None:
                mean_d = e1 / s0
                var_d = max(0.0, e2 / s0 - mean_d * mean_d) * (ne / (ne - 1) if ne > 1 else 1.0)
                moments[i + 1] = (mean_d, var_d)
    return out


def _at(prefix: Sequence[tuple[float, float, float, float] | None], i: int) -> tuple[float, float, float, float]:
    got = prefix[i]
    assert got is not None, i  # _replay works out every index a check asks for
    return got


MOMENT_PRIOR = 5.0  # samples the log-normal's moments weigh against the durations' own (a sum's figure)


def _sum_p80(stats: tuple[float, float, float, float], b: int, tau2: float = 0.0,
             moments: tuple[float, float] | None = None) -> float:
    """P80 of the sum of ``b`` fresh durations (a log-normal fitted to its mean and variance). A
    duration's mean and variance are the log-normal's (from the log mean and spread) blended with
    the durations' own (``moments``, weighing their effective count against ``MOMENT_PRIOR``): a
    bimodal kind's sums are what its durations add up to, not what a log-normal through them would."""
    m, sigma, ne, loc_var = stats
    loc_var += tau2
    one = math.exp(m + sigma ** 2 / 2)
    var_one = one * one * math.expm1(min(sigma, 3.0) ** 2)
    if moments is not None and moments[0] > 0:
        w = ne / (ne + MOMENT_PRIOR)
        one = w * moments[0] + (1 - w) * one
        var_one = w * moments[1] + (1 - w) * var_one
    mean = b * one
    var = b * var_one + (b * one) ** 2 * math.expm1(loc_var)
    s2 = math.log1p(var / (mean * mean))
    return mean * math.exp(-s2 / 2 + Z80 * math.sqrt(s2))


def _stats(s0: float, s1: float, s2: float, sq: float) -> tuple[float, float, float]:
    m = s1 / s0
    var = max(0.0, s2 / s0 - m * m)
    ne = s0 * s0 / sq
    if ne > 1:
        var *= ne / (ne - 1)  # the weighted analogue of n / (n - 1)
    return m, var, ne


def _location_var(sigma: float, n_eff: float, params: EstimateParams, cv2: float | None = None) -> float:
    """How uncertain the kind's level is (log scale): the relative variance of a mean of ``n_eff``
    durations, ``cv² / n`` (``cv²`` from the kind's shape; a log-normal's ``e^σ² - 1`` when not
    given), plus the spread's own, ``σ⁴ / 2(n - 1)``; × ``location_inflation``, at least
    ``location_floor``², at most ``location_var_max``. (With σ² / n alone -- the median's -- a long chain's P80 held 73-75 % of
    the time at σ = 1: a mean of skewed durations is more often under than over.)"""
    cv2 = math.expm1(min(sigma, 3.0) ** 2) if cv2 is None else cv2
    var = cv2 / n_eff + sigma ** 4 / (2 * max(n_eff - 1, 1.0))
    # at most location_var_max: two samples 1 ms and 1 s apart (σ 2.8) gave 2,700 and a P80 past
    # float range; a level unknown by more than a factor e³ is unknown either way (label none/low)
    return min(max(params.location_inflation * var, params.location_floor ** 2), params.location_var_max)


def _sigma(var: float, n_eff: float, params: EstimateParams) -> float:
    dof = max(0.0, n_eff - 1)
    return math.sqrt((params.prior_dof * params.prior_sigma ** 2 + dof * var) / (params.prior_dof + dof))


def _kernel(logs: Sequence[float], weights: Sequence[float], m: float, sigma: float) -> float:
    """Silverman's bandwidth on the weighted logs (robust spread: min(sd, IQR / 1.34))."""
    w = sum(weights)
    ne = w * w / sum(x * x for x in weights)
    pairs = sorted(zip(logs, weights))
    q25 = weighted_quantile(pairs, w, 0.25)
    q75 = weighted_quantile(pairs, w, 0.75)
    sd = math.sqrt(sum(wi * (x - m) ** 2 for x, wi in zip(logs, weights)) / w)
    iqr = q75 - q25
    spread = min(sd, iqr / 1.34) if iqr > 0 else sd
    return max(0.9 * spread * ne ** (-0.2), 0.05 * sigma)


def _label(samples: int, checks: int, hits: int, blocks: int, block_hits: int, drift: float,
           params: EstimateParams) -> str:
    """``high`` only when enough replayed P80s were checked and held (single samples and block
    sums alike); ``medium`` from fewer checks; ``low`` otherwise; ``none`` without samples."""
    if samples == 0:
        return "none"
    if drift or checks < params.medium_checks:
        return "low"
    cov = hits / checks
    bcov = block_hits / blocks if blocks else None
    if bcov is not None and bcov < params.block_coverage_floor:
        return "low"
    if checks >= params.high_checks and cov >= params.high_coverage and (bcov is None or bcov >= params.high_coverage):
        return "high"
    if cov >= params.medium_coverage and (bcov is None or bcov >= params.medium_coverage):
        return "medium"
    return "low"



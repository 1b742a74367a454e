"""A task's own speed: where this task's runs of a kind lie against the kind's runs in other tasks
(pure; ``docs/estimates.md`` "A task's own speed" has the reasoning and the measured figures).

A task may run its kind as its history did, or 2-4× slower (a bigger repository, a slower
machine) or faster. Its own finished runs of the kind say which, and how surely. The task's level
``θ`` (log scale, at the kind's centre position) has a prior of two parts: **like its history**,
``N(μ, v + τ²)`` — ``μ`` and ``v`` the kind's location and its uncertainty (blended with the node's
``est_wall_s``), ``τ²`` how much tasks of the kind differ —, and **unlike it**, the same widened by
``task_differ_sigma``², weighing ``task_differ_prior``. The mean of the task's ``k`` own runs,
whose error is ``σ_w² / k`` (the kind's within-task spread, or theirs when wider), updates both
parts (the unlike part's variance then widened ``task_speed_widen`` times: its first runs to
finish read a slow task fast); the posterior is a mixture of two normals, summed up by its mean (the **speed
factor** ``exp(shift)``) and its variance (which replaces the kind's location variance: the figure
widens while the task's speed is uncertain), plus the probability ``differs`` that the task is
unlike its history. A task like its history keeps the kind's figure and label; one unlike it is
estimated at its own speed, and its label says how far that rests on its own runs
(``store/estimation/estimates.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

from store.estimation.kindmodel import DEFAULT_PARAMS, EstimateParams, KindModel, least_squares

_NORMAL = NormalDist()


@dataclass(frozen=True)
class TaskLevel:
    """Where one task's runs of a kind lie: a log shift from the prior's level, the level's
    variance (the kind's location uncertainty included), and why the label must drop (or None)."""

    shift: float = 0.0
    var: float = 0.0
    contradiction: str | None = None  # the task's own runs slow down as it goes
    own: int = 0  # the task's own finished runs of the kind the level rests on
    differs: float = 0.0  # the probability that this task's level is not its history's
    se: float = math.inf  # the standard error of their mean (log scale): how closely they pin the task's level
    parts: tuple[tuple[float, float, float], ...] = ()  # the posterior's parts: (weight, shift, variance)

    def mixture(self) -> tuple[tuple[float, float, float], ...]:
        """(weight, shift, variance) of each part of the level (one part when it is a normal)."""
        return self.parts or ((1.0, self.shift, self.var),)

    @property
    def ratio(self) -> float:
        """The task's speed factor: how many times as long as its history its runs take."""
        return math.exp(self.shift)


def task_level(model: KindModel, own: Sequence[float], prior_mu: float, prior_var: float,
               params: EstimateParams = DEFAULT_PARAMS, running: Sequence[float] = ()) -> TaskLevel:
    """The posterior of a task's level from its own durations of a kind (oldest first) and the
    elapsed times of its running nodes of the kind (censored runs), the prior being the kind's level
    ``prior_mu`` (log) with variance ``prior_var`` (see the module doc)."""
    tau2 = model.tau2
    k = len(own)
    if k == 0 or model.samples == 0:
        return TaskLevel(0.0, prior_var + tau2, own=k)
    sw2 = max(model.sigma_w if model.sigma_w else model.sigma, 1e-3) ** 2
    finished = [math.log(max(d, 1e-3)) - prior_mu for d in own]
    imputed, informed = censored(finished, [math.log(e) - prior_mu if e > 0 else -math.inf for e in running],
                                 math.sqrt(sw2))
    logs = finished + imputed
    mean = sum(logs) / len(logs)
    own_var = sum((x - mean) ** 2 for x in finished) / (k - 1) if k >= 3 else 0.0
    # × location_inflation, as the kind's own level: a plug-in figure covers less than it says
    s2k = params.location_inflation * max(sw2, own_var) / (k + informed)
    like_history = prior_var + tau2
    # the first runs to finish are the quick ones: early own runs read faster than the task is,
    # so "faster than its history" is believed less readily than "slower"
    prior = params.task_differ_prior if mean > 0 else params.task_faster_prior
    parts = []
    for weight, var, widen in ((1.0 - prior, like_history, 1.0),
                               (prior, like_history + params.task_differ_sigma ** 2, params.task_speed_widen)):
        tot = var + s2k
        parts.append((weight * math.exp(-mean * mean / (2 * tot)) / math.sqrt(tot), var / tot * mean,
                      widen * var * s2k / tot))
    total = sum(w for w, _, _ in parts) or 1.0
    shift = sum(w * m for w, m, _ in parts) / total
    var = sum(w * (v + m * m) for w, m, v in parts) / total - shift * shift
    differs = parts[1][0] / total
    se = math.sqrt(s2k)
    fit = least_squares(list(enumerate(finished))) if k >= params.task_min + 2 else None
    if fit is not None:
        slope, t_se, _, fm = fit
        if slope / t_se >= params.task_trend_t:
            ahead = min(slope * k / 2, 0.7)  # where the trend points, half as many runs again (≤ ×2)
            return TaskLevel(fm + ahead, var + ahead * ahead / 2,
                             f"this task's {model.kind} runs slow down as it goes", k, differs, se)
    posterior = tuple((w / total, m, v) for w, m, v in parts)
    return TaskLevel(shift, max(var, 0.0), None, k, differs, se, posterior)


def censored(finished: Sequence[float], elapsed: Sequence[float], sigma: float) -> tuple[list[float], float]:
    """The running nodes' runs as the task's runs too: a run that has lasted ``e`` (log, as
    ``finished``; ``-inf``: just started) will take at least that long — on several workers the
    first runs to finish are the quick ones, and leaving the slow ones out reads the task fast.
    Each is counted at its expected log duration given that it lasts past ``e`` (a normal of
    spread ``sigma`` around the level, re-read three times with them: an expectation-maximisation
    of the censored normal). With them, how many finished runs they are worth in pinning the
    level: each its share of a finished run's information, ``λ(λ − a)`` (``λ`` the hazard at its
    standardised elapsed time ``a``): ~0 for a node that has just started — it says nothing yet —,
    towards 1 for one long past the level."""
    if not elapsed or not finished:
        return [], 0.0
    level = sum(finished) / len(finished)
    out: list[float] = []
    informed = 0.0
    for _ in range(3):
        out = []
        informed = 0.0
        for e in elapsed:
            a = max((e - level) / sigma, -8.0)
            hazard = _NORMAL.pdf(a) / max(1.0 - _NORMAL.cdf(a), 1e-12)
            out.append(level + sigma * hazard)
            informed += min(max(hazard * (hazard - a), 0.0), 1.0)
        level = (sum(finished) + sum(out)) / (len(finished) + len(out))
    return out, informed


def speed_why(kind: str, level: TaskLevel) -> str:
    """What the task's own runs say of its speed, for ``why``."""
    ratio = level.ratio
    what = f"{ratio:.1f}× slower" if ratio >= 1 else f"{1 / ratio:.1f}× faster"
    return f"this task's {kind} runs are {what} than its history ({level.own} so far)"

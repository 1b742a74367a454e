"""P80 remaining-time estimates that say their sample count, their measured confidence and why.

``docs/estimates.md`` has the method and the measured calibration. In short:

* **Memory and model** (``store/estimation/durations.py``): per kind, the durations of its finished nodes in the
  order they finished, weighted toward the recent; a within-kind spread and a location whose own
  uncertainty shrinks with samples (blended with a node's ``est_wall_s``, which never drops out);
  drift detection; and the kind's *measured* calibration (how often the P80s it would have shown
  held), which is what the confidence label means.
* **A node's remaining time** is a set of equal-probability points: a fresh run's predictive
  distribution (``base_dist``); a running node keeps the points above its elapsed time ``e`` minus
  ``e`` (past every point: a log-normal around ``past_history_factor × e``); with progress
  ``f = units_done / units_total`` each point ``c`` becomes ``(1 - f)·c + f·e·(1 - f)/f``; a pending
  node waiting for ``next_retry_at`` adds that wait. P50/P80 are type-7 quantiles of the points.
* **A task's remaining time** (``store/estimation/montecarlo.py``): a seeded Monte Carlo over the dependency
  structure on the recently active workers, nodes of one kind drawn with a shared location
  (a Gaussian copula); above ``mc_max_nodes`` unfinished nodes a moment approximation.
* **Confidence** of a task is the least confident kind it still has to run; ``why`` says what the
  figure rests on (samples, priors, drift, the measured coverage, the nodes that weigh most).

Human waits (blocked nodes), parks and retries of future failures are not forecast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from store.estimation.durations import (  # noqa: F401  (re-exported: the estimator's public names)
    DEFAULT_PARAMS,
    LABELS,
    DurationHistory,
    EstimateParams,
    KindModel,
    Z80,
    TaskLevel,
    convolve,
    lognormal_grid,
    lowest,
    prior_model,
    quantile,
)
from store.estimation import mixture
from store.estimation import evidence
from store.estimation.points import mixture_points
from store.estimation.tasklevel import speed_why
from store.jsontypes import JsonObject
from store.storage.core import LedgerCore
from store.estimation.montecarlo import NodeDist, Plan, approximate_makespan, dominant, simulate_makespans  # noqa: F401
from store.views import GraphRow, GraphView, TaskView

FINISHED = ("succeeded", "abandoned")


@dataclass(frozen=True)
class Estimate:
    p50_s: float | None
    p80_s: float | None
    samples: int
    confidence: str  # none | low | medium | high (measured, see docs/estimates.md)
    why: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> JsonObject:
        r = lambda v: None if v is None else round(v, 1)  # noqa: E731
        return {"p50_s": r(self.p50_s), "p80_s": r(self.p80_s), "samples": self.samples,
                "confidence": self.confidence, "why": list(self.why)}


NO_ESTIMATE = Estimate(None, None, 0, "none")


@dataclass(frozen=True)
class GraphEstimate:
    task: Estimate
    nodes: Mapping[str, Estimate] = field(default_factory=dict)


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
    def of(cls, n: GraphRow) -> "NodeState":
        return cls(n.key, n.kind, n.status, n.position, tuple(n.deps), n.claimed_at, n.units_done, n.units_total,
                   n.est_wall_s, n.next_retry_at)


def dist_estimate(d: NodeDist) -> Estimate:
    return Estimate(quantile(d.values, 0.5), quantile(d.values, 0.8), d.samples, d.label, d.why)


def base_dist(kind: str, est_wall_s: float | None, history: DurationHistory,
              params: EstimateParams = DEFAULT_PARAMS, pooled: KindModel | None = None,
              task_id: str | None = None, position: int | None = None,
              running: Sequence[float] = ()) -> NodeDist | None:
    """A fresh run of this kind in this task: its model (blended with ``est_wall_s``, moved by the
    task's own runs of it, finished and ``running``: see :func:`running_elapsed`), else the ``est_wall_s`` prior alone (label ``none``), else every kind's
    durations (label ``none``)."""
    est = float(est_wall_s) if est_wall_s is not None and est_wall_s > 0 else None
    if history.count(kind):
        model = history.model_for(kind, task_id)
        why = model.why(est_blended=est is not None)
        source = "history"
    elif est is not None:
        model = prior_model(kind, params)
        why = [f"no history of {kind}: est_wall_s {est:g}s only"]
        source = "estimate"
    elif pooled is not None:
        model, est = pooled, None
        why = [f"no history of {kind} and no est_wall_s: every kind's durations"]
        source = "pooled"
    else:
        return None
    centre, loc_var = model.location(est, params)  # the kind's level at its centre position
    level = history.level(kind, task_id, centre, loc_var, running) if source == "history" else TaskLevel(0.0, loc_var)
    mu = model.location(est, params, position)[0] + level.shift  # at the node's position, at the task's speed
    loc_var = level.var  # the level's uncertainty: the kind's and the task's speed
    within = model.sigma_w if model.tau2 > 0 else model.sigma
    scale = within / model.sigma if model.sigma > 0 and model.tau2 > 0 else 1.0
    label = model.label
    if source == "history" and task_id is not None:
        label, why = task_label(kind, label, why, level, params, clustered=bool(model.cuts))
    parts = level.mixture()
    offsets = history.remember(
        ("predictive", model.kind, history.version(kind) if source == "history" else source,
         task_id if model.samples < history.count(kind) else None, round(scale, 9),
         tuple((round(w, 9), round(m - level.shift, 9), round(v, 12)) for w, m, v in parts)),
        lambda: mixture_points([(o * scale + m - level.shift, w, math.sqrt(v)) for w, m, v in parts
                                for o in model.offsets], len(model.offsets)) if len(parts) > 1
        else convolve([o * scale for o in model.offsets], math.sqrt(loc_var)), tuple)
    values = tuple(math.exp(mu + o) for o in offsets)
    rho = loc_var / (loc_var + within ** 2) if loc_var > 0 else 0.0
    shares: tuple[float, ...] = ()
    shift = 0.0
    lumpy = 0
    if source == "history" and model.parts:
        shares = tuple(w for w, _, _ in model.parts)
        shift = mixture.weight_se(model.parts, model.n_eff)
        lumpy = mixture.lumpy_runs(model.parts)
    return NodeDist(values, model.samples, label, source, kind, rho, tuple(why), shares, shift, lumpy)


def task_label(kind: str, label: str, why: list[str], level: TaskLevel,
               params: EstimateParams = DEFAULT_PARAMS, clustered: bool = False) -> tuple[str, list[str]]:
    """A label measured on the kind's runs in other tasks, as far as this task's own runs bear it
    out (``tasklevel.task_level``; docs/estimates.md "A task's own speed"): a task unlike its
    history (``differs`` ≥ ½) is estimated at its own speed, ``low`` until ``task_speed_runs`` of
    its runs pin it within ``task_speed_se`` (then at most ``medium``, the kind's label within
    ``task_agree_se``); a task like its history keeps the kind's label once its runs pin its speed
    within ``task_pin_se``, and before that is ``low`` — but for a kind whose runs fall in clusters
    (``clustered``: its runs pin a speed only after many of them), ``medium`` at most while
    they all but rule out its being unlike it (``differs`` < ``task_like_differs``, the level's
    spread ≤ ``task_like_sd``); a task whose runs slow down as it goes, ``low``."""
    if level.contradiction:
        return lowest((label, "low")), [level.contradiction] + why
    if not level.own:
        return label, why
    if level.differs >= 0.5:
        said = [speed_why(kind, level)] + why
        if level.own < params.task_speed_runs or level.se > params.task_speed_se:
            return lowest((label, "low")), said  # not its speed yet
        return (label if level.se <= params.task_agree_se else lowest((label, "medium"))), said
    if level.se <= params.task_pin_se:
        return label, why
    unpinned = why + [f"this task's {level.own} {kind} run{'s' if level.own != 1 else ''} "
                      f"cannot yet tell its speed (±×{math.exp(level.se):.1f})"]
    if clustered and level.differs < params.task_like_differs and math.sqrt(level.var) <= params.task_like_sd:
        return lowest((label, "medium")), unpinned
    return lowest((label, "low")), unpinned


def node_dist(n: NodeState, now: float, history: DurationHistory, params: EstimateParams = DEFAULT_PARAMS,
              pooled: KindModel | None = None, base: NodeDist | None = None,
              task_id: str | None = None, running: Sequence[float] = ()) -> NodeDist | None:
    """The remaining time of one unfinished node (None when finished or nothing is known)."""
    if n.status in FINISHED:
        return None
    if base is None:
        base = base_dist(n.kind, n.est_wall_s, history, params, pooled, task_id, n.position, running)
    if base is None:
        return None
    if n.status == "running" and n.claimed_at is not None:
        e = max(0.0, now - n.claimed_at)
        cond = [v - e for v in base.values if v > e] if e > 0 else list(base.values)
        why = base.why
        if len(cond) < 2:
            cond = list(lognormal_grid(max(params.past_history_factor * e, 1e-3), params.past_history_sigma))
            why = why + (f"running {e:.0f}s: past what its kind usually takes",)
        f = progress(n)
        if f is not None and f > 0:
            rate = e * (1 - f) / f
            cond = [(1 - f) * c + f * rate for c in cond]
        cond.sort()
        return NodeDist(tuple(cond), base.samples, base.label, base.source, None, 0.0, why)
    if n.status == "pending" and n.next_retry_at is not None and n.next_retry_at > now:
        wait = n.next_retry_at - now
        return NodeDist(tuple(v + wait for v in base.values), base.samples, base.label, base.source, base.group,
                        base.rho, base.why)
    return base


def progress(n: NodeState) -> float | None:
    if n.units_total is None or not n.units_total or n.units_total <= 0 or n.units_done is None:
        return None
    return min(1.0, max(0.0, float(n.units_done) / float(n.units_total)))


# ---------------------------------------------------------------------- the task
def _plan(nodes: Sequence[NodeState], dists: Mapping[str, NodeDist | None]) -> tuple[Plan, list[str]] | None:
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
    for i, n in enumerate(live):
        d = dists.get(n.key)
        if d is None:
            return None
        out_d.append(d)
        if n.status == "running":
            running.append(i)
        for k in n.deps:
            j = idx.get(k)
            if j is not None:
                deps[i].append(j)
                dependents[j].append(i)
    return Plan(out_d, running, deps, dependents), [n.key for n in live]


def summarise(dists: Iterable[NodeDist], extra: Iterable[str] = ()) -> tuple[int, str, tuple[str, ...]]:
    """(fewest samples, least confident label, reasons) over the distributions a figure rests on;
    the least confident kinds' reasons first."""
    samples: int | None = None
    label = "high"
    reasons: dict[str, int] = {}
    for d in dists:
        samples = d.samples if samples is None else min(samples, d.samples)
        label = lowest((label, d.label))
        rank = LABELS.index(d.label)
        for w in d.why:
            reasons[w] = min(rank, reasons.get(w, rank))
    ordered = sorted(reasons, key=lambda w: reasons[w])
    return samples or 0, label if samples is not None else "none", tuple(ordered[:6]) + tuple(extra)


def task_estimate(nodes: Sequence[NodeState], dists: Mapping[str, NodeDist | None], workers: int,
                  params: EstimateParams = DEFAULT_PARAMS) -> Estimate:
    """P50/P80 of the whole remaining time of a task's unfinished nodes."""
    unfinished = sum(1 for n in nodes if n.status not in FINISHED)
    if unfinished == 0:
        return Estimate(0.0, 0.0, 0, "none")
    if unfinished > params.mc_max_nodes:
        return _approx_from_nodes(nodes, dists, workers)
    got = _plan(nodes, dists)
    if got is None:
        return NO_ESTIMATE
    plan, keys = got
    trials = max(params.min_trials, min(params.trials, params.mc_budget // max(1, unfinished)))
    spans = sorted(simulate_makespans(plan, workers, trials, params.seed))
    top = dominant(plan, keys)
    extra = [f"{workers} worker{'s' if workers != 1 else ''}"] + ([f"weighs most: {', '.join(top)}"] if top else [])
    samples, label, why = summarise(plan.dists, extra)
    p80 = quantile(spans, 0.8)
    if label == "high" and p80 is not None:
        lumpy = _lump_edge(plan, workers, trials, p80, params)
        if lumpy is not None:
            label, why = "medium", (lumpy,) + why
    return Estimate(quantile(spans, 0.5), p80, samples, label, why)


def _lump_edge(plan: Plan, workers: int, trials: int, p80: float, params: EstimateParams) -> str | None:
    """Why a ``high`` figure must not be given (or None): so few fresh runs of a clustered kind are
    left that their sum is lumps (``mixture.lumpy_runs``), and the P80 would hold less than
    ``high_coverage`` if the kind's long runs were ``LUMP_SE`` standard errors more common than its
    history says — the P80 sits on a lump's edge, and the history cannot say which side of it
    (docs/estimates.md, "Kinds whose runs fall in clusters")."""
    left: dict[str, int] = {}
    running = set(plan.running)
    for i, d in enumerate(plan.dists):
        if d.shares and i not in running and d.group is not None:
            left[d.group] = left.get(d.group, 0) + 1
    lumpy = {d.group for i, d in enumerate(plan.dists)
             if d.group in left and i not in running and 0 < left[d.group] <= d.lumpy}
    if not lumpy:
        return None
    moved = [NodeDist(mixture.shifted(d.values, d.shares, mixture.LUMP_SE * d.shift), d.samples, d.label, d.source,
                      d.group, d.rho, d.why) if d.group in lumpy and i not in running else d
             for i, d in enumerate(plan.dists)]
    spans = simulate_makespans(Plan(moved, plan.running, plan.deps, plan.dependents), workers, trials, params.seed)
    held = sum(1 for s in spans if s <= p80) / len(spans)
    if held >= params.high_coverage:
        return None
    kinds = ", ".join(sorted(f"{left[g]} {g}" for g in lumpy))
    return (f"runs left ({kinds}) fall in clusters: this P80 holds {100 * held:.0f} % if the long ones are "
            f"{mixture.LUMP_SE:g} standard errors more common")


def _approx_from_nodes(nodes: Sequence[NodeState], dists: Mapping[str, NodeDist | None], workers: int) -> Estimate:
    groups: dict[int, tuple[NodeDist, int]] = {}  # by distribution (shared by nodes of a kind)
    running: list[NodeDist] = []
    for n in nodes:
        if n.status in FINISHED:
            continue
        d = dists.get(n.key)
        if d is None:
            return NO_ESTIMATE
        if n.status == "running":
            running.append(d)
        else:
            shared, count = groups.get(id(d), (d, 0))
            groups[id(d)] = (shared, count + 1)
    return approximate_estimate([(d, c) for d, c in groups.values()], running, workers)


def approximate_estimate(groups: Sequence[tuple[NodeDist, int]], running: Sequence[NodeDist], workers: int) -> Estimate:
    """The moment approximation for a large task, with its reasons (the kinds that weigh most)."""
    p50, p80 = approximate_makespan(groups, running, workers)
    weight: dict[str, float] = {}
    counts: dict[str, int] = {}
    for d, c in groups:
        k = d.group or "?"
        weight[k] = weight.get(k, 0.0) + d.moments()[0] * c
        counts[k] = counts.get(k, 0) + c
    top = sorted(weight, key=lambda k: -weight[k])[:2]
    extra = [f"{workers} worker{'s' if workers != 1 else ''}"] + (
        [f"weighs most: {', '.join(f'{counts[k]} {k} nodes' for k in top)}"] if top else [])
    samples, label, why = summarise([d for d, _ in groups] + list(running), extra)
    return Estimate(p50, p80, samples, label, why)


# ---------------------------------------------------------------------- reading the ledger
def recent_workers(ledger: LedgerCore, task_id: str, now: float, running_owners: Iterable[str | None] = (),
                   window_s: float = DEFAULT_PARAMS.worker_window_s, scan: int = 500) -> int:
    """Distinct workers that claimed a node of the task within ``window_s`` (from the newest
    ``scan`` claim events) or hold one of its leases now; at least 1."""
    who = {c.actor for c in evidence.recent_claims(ledger, task_id, scan) if c.at >= now - window_s and c.actor}
    who.update(o for o in running_owners if o)
    return max(1, len(who))


ELAPSED_STEP = 0.05  # running nodes' elapsed times are read in steps of this (log scale: ~5 %)
_PER_LOG = 1 / ELAPSED_STEP  # (20.0 exactly)


def running_elapsed(running: Iterable[tuple[str, float | None]], now: float,
                    history: DurationHistory) -> dict[str, tuple[float, ...]]:
    """Per kind, how long the task's running nodes of it (``(kind, claimed_at)``) have run:
    censored runs of the task (``tasklevel.censored``). Rounded to ``ELAPSED_STEP``, and 0 for a node not yet
    past its kind's median (it says little more than that it runs), sorted: a figure kept on
    them (``TaskAnalysis``) keeps between heartbeats."""
    out: dict[str, list[float]] = {}
    for kind, claimed_at in running:
        if claimed_at is None or not history.count(kind):
            continue
        x = math.log(max(now - claimed_at, 1e-3))
        out.setdefault(kind, []).append(math.exp(round(x * _PER_LOG) / _PER_LOG) if x > history.model(kind).mean else 0.0)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def dists_for(nodes: Sequence[NodeState], now: float, history: DurationHistory,
              params: EstimateParams = DEFAULT_PARAMS, task_id: str | None = None) -> dict[str, NodeDist | None]:
    """Each unfinished node's distribution (the first of a kind builds the kind's model)."""
    base_by_kind: dict[tuple[str, float | None, int | None], NodeDist | None] = {}
    out: dict[str, NodeDist | None] = {}
    running = running_elapsed(((n.kind, n.claimed_at) for n in nodes if n.status == "running"), now,
                              history) if task_id is not None else {}
    for n in nodes:
        if n.status in FINISHED:
            continue
        sloped = history.count(n.kind) and history.model(n.kind).pos_slope
        bk = (n.kind, n.est_wall_s, n.position if sloped else None)
        if bk not in base_by_kind:
            pooled = history.pooled_model() if not history.count(n.kind) and not n.est_wall_s else None
            base_by_kind[bk] = base_dist(n.kind, n.est_wall_s, history, params, pooled, task_id, n.position,
                                         running.get(n.kind, ()))
        out[n.key] = node_dist(n, now, history, params, base=base_by_kind[bk])
    return out



def estimate_graph(ledger: LedgerCore, graph: GraphView, *, params: EstimateParams = DEFAULT_PARAMS,
                   history: DurationHistory | None = None, now: float | None = None) -> GraphEstimate:
    """Every node's estimate and the task's, for ``warden graph`` and the console."""
    now = ledger.now() if now is None else now
    task = graph.task
    nodes = [NodeState.of(n) for n in graph.nodes]
    history = _ensure_history(ledger, history, nodes, params)
    dists = dists_for(nodes, now, history, params, task.task_id)
    per_node = {k: (dist_estimate(d) if d is not None else NO_ESTIMATE) for k, d in dists.items()}
    if task.status not in ("active", "parked"):
        return GraphEstimate(NO_ESTIMATE, per_node)
    owners = [n.lease_owner for n in graph.nodes if n.status == "running"]
    workers = recent_workers(ledger, task.task_id, now, owners, params.worker_window_s)
    return GraphEstimate(task_estimate(nodes, dists, workers, params), per_node)


LEAN_COLUMNS = evidence.LeanNode._fields  # what the estimator reads of a node (store/estimation/evidence.py)


def estimate_task(ledger: LedgerCore, task: TaskView, *, params: EstimateParams = DEFAULT_PARAMS,
                  history: DurationHistory | None = None, now: float | None = None) -> Estimate:
    """The task's estimate without loading its whole graph (``warden status``).

    Reads only the unfinished nodes (index on task, status) and the edges into them; above
    ``mc_max_nodes`` unfinished nodes, one aggregate per kind and the running rows.
    """
    if task.status not in ("active", "parked"):
        return NO_ESTIMATE
    now = ledger.now() if now is None else now
    counts = task.counts or {}
    unfinished = sum(v for k, v in counts.items() if k not in FINISHED)
    if unfinished == 0:
        return Estimate(0.0, 0.0, 0, "none")
    live_status = [s for s in counts if s not in FINISHED]
    if unfinished > params.mc_max_nodes:
        rows = evidence.kind_groups(ledger, task.task_id, [s for s in live_status if s != "running"])
        run_rows = [_lean(r) for r in evidence.lean_nodes(ledger, task.task_id, ["running"])]
        kinds = {r[0] for r in rows} | {r.kind for r, _ in run_rows}
        if history is None:
            history = DurationHistory(params.history_cap, params)
        history.load_kinds(ledger, kinds)
        if any(not history.count(k) for k in kinds):
            history.load_kinds(ledger, None)
        pooled = history.pooled_model() if any(not history.count(k) and not e for k, _, e in rows) else None
        elapsed = running_elapsed(((r.kind, r.claimed_at) for r, _ in run_rows), now, history)
        groups = []
        for kind, count, est in rows:
            d = base_dist(kind, est, history, params, pooled, task.task_id, None, elapsed.get(kind, ()))
            if d is None:
                return NO_ESTIMATE
            groups.append((d, int(count)))
        running = []
        for r, _ in run_rows:
            d = node_dist(r, now, history, params, history.pooled_model() if not history.count(r.kind) else None,
                          task_id=task.task_id, running=elapsed.get(r.kind, ()))
            if d is None:
                return NO_ESTIMATE
            running.append(d)
        workers = recent_workers(ledger, task.task_id, now, [o for _, o in run_rows], params.worker_window_s)
        return approximate_estimate(groups, running, workers)
    live = evidence.lean_nodes(ledger, task.task_id, live_status)
    key_of = {n.id: n.key for n in live}
    deps: dict[int, list[str]] = {}
    for dependent, dependency in evidence.dependencies(ledger, list(key_of)):
        if dependency in key_of:
            deps.setdefault(dependent, []).append(key_of[dependency])
    nodes = []
    owners = []
    for n in live:
        st, owner = _lean(n, tuple(deps.get(n.id, ())))
        nodes.append(st)
        owners.append(owner)
    history = _ensure_history(ledger, history, nodes, params)
    dists = dists_for(nodes, now, history, params, task.task_id)
    workers = recent_workers(ledger, task.task_id, now, owners, params.worker_window_s)
    return task_estimate(nodes, dists, workers, params)


def _ensure_history(ledger: LedgerCore, history: DurationHistory | None, nodes: Sequence[NodeState],
                    params: EstimateParams) -> DurationHistory:
    """Load (once) the kinds these unfinished nodes need; every kind when one has neither history
    nor ``est_wall_s`` (the pooled fallback)."""
    if history is None:
        history = DurationHistory(params.history_cap, params)
    live = [n for n in nodes if n.status not in FINISHED]
    history.load_kinds(ledger, {n.kind for n in live})
    if any(not history.count(n.kind) and not n.est_wall_s for n in live):
        history.load_kinds(ledger, None)
    return history


def _lean(r: evidence.LeanNode, deps: tuple[str, ...] = ()) -> tuple[NodeState, str | None]:
    return (NodeState(r.key, r.kind, r.status, r.position, deps, r.claimed_at, r.units_done, r.units_total,
                      r.est_wall_s, r.next_retry_at),
            r.lease_owner if r.status == "running" else None)


def kind_p80(history: DurationHistory, kind: str, est_wall_s: float | None = None,
             params: EstimateParams = DEFAULT_PARAMS) -> tuple[float | None, int]:
    """(P80 of a fresh run of this kind, its sample count): what ``overdue`` compares with. For a
    kind whose runs fall in clusters, at least the P80 of its longest cluster: a run as long as
    its usual long runs is not overdue, however many short ones there are (a fixer kind of 1 s
    and 11 s runs once warned every 11 s run at 3 s)."""
    d = base_dist(kind, est_wall_s, history, params)
    p80 = quantile(d.values, 0.8) if d is not None else None
    if p80 is not None and history.count(kind):
        model = history.model(kind)
        if model.parts:
            _, mean, var = model.parts[-1]
            if mean > 0:
                s2 = math.log1p(var / (mean * mean))
                p80 = max(p80, mean * math.exp(-s2 / 2 + Z80 * math.sqrt(s2)))
    return p80, history.count(kind)

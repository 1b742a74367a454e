"""Duration workloads for the P80 estimate, run through the real Ledger API on an injected clock.

Each workload makes one *trial* at a time: some prior history of the kinds (finished nodes of a
history task), then a task graph whose nodes take known durations, worked by ``W`` simulated
workers (``claim`` … ``commit`` in time order). When the share of finished nodes first reaches
each stage, ``estimates.estimate_task`` — what ``warden status`` shows — is recorded; when the task
completes each record learns the time that was actually left.

The family is deliberately broader than what the estimator was tuned on: log-normal spreads
σ 0.3-1.5, bimodal and heavy-tailed kinds, a fresh mixture of 2-3 clusters every trial, drift within a task and across tasks, cold starts with
0/1/3 samples with and without ``est_wall_s``, ``est_wall_s`` off by σ 0.5 per node or per kind,
chains, layered graphs and wide fans on 1-4 workers, several kinds at once.

```python
rep = run_workload(WORKLOADS["drift_within"], trials=20, seed=3, path=tmp / "d.db")
rep.cells()      # {(stage, label): (checks, covered)}
```
"""

from __future__ import annotations

import heapq
import math
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from store import Ledger, ManualClock, NodeSpec
from store.estimation.estimates import DurationHistory, estimate_task

STAGES = (0.10, 0.25, 0.50, 0.75, 0.90)


@dataclass
class Trial:
    """One task to run: nodes (key, kind, deps, est_wall_s, true duration), workers, and the
    history (kind, duration) to commit first."""

    nodes: list[tuple[str, str, tuple[str, ...], float | None, float]]
    workers: int
    history: list[tuple[str, float]] = field(default_factory=list)
    redraw: Callable[[random.Random], list[float]] | None = None  # fresh durations of the nodes (same shapes)


Maker = Callable[[random.Random, int], Trial]


# ---------------------------------------------------------------------- duration shapes
def lognormal(median: float, sigma: float) -> Callable[[random.Random], float]:
    return lambda rng: rng.lognormvariate(math.log(median), sigma)


def bimodal(a: float, b: float, p_a: float = 0.6, sigma: float = 0.3) -> Callable[[random.Random], float]:
    return lambda rng: rng.lognormvariate(math.log(a if rng.random() < p_a else b), sigma)


def clusters(medians: tuple[float, ...], weights: tuple[float, ...], sigma: float = 0.25) -> Callable[[random.Random], float]:
    """Runs from one of several clusters (log-normal each, its median and weight)."""
    cum = [sum(weights[: i + 1]) / sum(weights) for i in range(len(weights))]

    def draw(rng: random.Random) -> float:
        u = rng.random()
        i = next((j for j, c in enumerate(cum) if u < c), len(cum) - 1)
        return rng.lognormvariate(math.log(medians[i]), sigma)

    return draw


def pareto(scale: float, alpha: float) -> Callable[[random.Random], float]:
    return lambda rng: scale * rng.paretovariate(alpha)


def chain(n: int) -> list[tuple[str, ...]]:
    return [((f"n{i - 1}",) if i else ()) for i in range(n)]


def layered(rng: random.Random, n: int, width: int) -> list[tuple[str, ...]]:
    deps: list[tuple[str, ...]] = []
    for i in range(n):
        layer = i // width
        prev = [f"n{j}" for j in range((layer - 1) * width, layer * width)] if layer else []
        deps.append(tuple(sorted(rng.sample(prev, min(len(prev), rng.randint(1, 2))))) if prev else ())
    return deps


def fan(n: int) -> list[tuple[str, ...]]:
    """One root, ``n - 2`` independent middles, one join."""
    mids = tuple(f"n{i}" for i in range(1, n - 1))
    return [()] + [("n0",)] * (n - 2) + [mids]


# ---------------------------------------------------------------------- the workloads
def _simple(shape: Callable[[random.Random], float], *, n: int = 40, workers: int | tuple[int, int] = 2,
            history: int = 60, deps: str = "chain", est: str | None = None, est_sigma: float = 0.5,
            fresh_kind: bool = True, drift: tuple[float, float] | None = None, drift_across: float = 0.0,
            kinds: int = 1, task_factor: float | tuple[float, float] = 1.0) -> Maker:
    """A workload maker. ``est``: None (no est_wall_s), 'node' (true median × error per node) or
    'kind' (one error per kind). ``drift``: nodes' durations scale from ×a at the first to ×b at the
    last node of the task. ``drift_across``: trial t scales by 1 + drift_across·t. ``task_factor``:
    the task's nodes run this many times as long as the kind's history (a range: drawn per trial)."""
    median_probe = random.Random(0)
    median = sorted(shape(median_probe) for _ in range(2001))[1000]

    def make(rng: random.Random, t: int) -> Trial:
        names = [f"k{j}-{t}" if fresh_kind else f"k{j}" for j in range(kinds)]
        scale = [rng.choice((1.0, 3.0, 0.4)) if kinds > 1 else 1.0 for _ in range(kinds)]
        w = workers if isinstance(workers, int) else rng.randint(*workers)
        across = 1.0 + drift_across * t
        hist: list[tuple[str, float]] = []
        if fresh_kind or t == 0:
            for j, k in enumerate(names):
                hist += [(k, shape(rng) * scale[j] * across) for _ in range(history)]
        if deps == "chain":
            dd = chain(n)
        elif deps == "layered":
            dd = layered(rng, n, max(2, w))
        else:
            dd = fan(n)
        kind_err = [math.exp(rng.gauss(0, est_sigma)) for _ in range(kinds)]
        factor = task_factor if isinstance(task_factor, (int, float)) else rng.uniform(*task_factor)
        def duration(r: random.Random, i: int) -> float:
            d = shape(r) * scale[i % kinds] * across * factor
            if drift is not None:
                a, b = drift
                d *= a + (b - a) * i / max(1, n - 1)
            return d

        nodes = []
        for i in range(n):
            j = i % kinds
            d = duration(rng, i)
            e = None
            if est == "node":
                e = round(median * scale[j] * across * math.exp(rng.gauss(0, est_sigma)), 3)
            elif est == "kind":
                e = round(median * scale[j] * across * kind_err[j], 3)
            nodes.append((f"n{i}", names[j], dd[i], e, d))
        return Trial(nodes, w, hist, lambda r: [duration(r, i) for i in range(n)])

    return make


def _mixtures(*, three: bool = False, history: tuple[int, int] = (60, 400), ratio: tuple[float, float] = (3.0, 20.0),
              long_weight: tuple[float, float] = (0.2, 0.5)) -> Maker:
    """Held-out style: every trial a kind of its own, drawn afresh — 2 clusters (or 3) whose
    medians are ``ratio`` apart (log-uniform), the long cluster's weight in ``long_weight`` (20/80 to
    50/50), spread σ 0.15-0.35, a first median of 3-60 s, a history of ``history`` runs, a task of
    20-50 nodes as a chain or layered on 1-3 workers."""

    def make(rng: random.Random, t: int) -> Trial:
        base = math.exp(rng.uniform(math.log(3), math.log(60)))
        r = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w_long = rng.uniform(*long_weight)
        if three:
            mid = math.sqrt(r) * math.exp(rng.uniform(-0.2, 0.2))
            w_mid = rng.uniform(0.2, 0.4)
            medians: tuple[float, ...] = (base, base * mid, base * r)
            weights: tuple[float, ...] = (1 - w_long - w_mid, w_mid, w_long) if w_long + w_mid < 0.85 else (0.4, 0.3, 0.3)
        else:
            medians, weights = (base, base * r), (1 - w_long, w_long)
        shape = clusters(medians, weights, rng.uniform(0.15, 0.35))
        kind = f"mix{t}"
        hist = [(kind, shape(rng)) for _ in range(rng.randint(*history))]
        n = rng.choice((20, 30, 40, 50))
        w = rng.randint(1, 3)
        dd = chain(n) if w == 1 or rng.random() < 0.5 else layered(rng, n, w)
        return Trial([(f"n{i}", kind, dd[i], None, shape(rng)) for i in range(n)], w, hist,
                     lambda r: [shape(r) for _ in range(n)])

    return make


def speed(factor: float, *, sigmas: tuple[float, ...] = (0.3, 0.5, 0.7, 1.0),
          history: tuple[int, int] = (30, 300)) -> Maker:
    """Tasks that run ``factor`` times as long as their kind's history (1: like it; 0.5: twice as
    fast), everything else drawn afresh per trial: a log-normal kind of σ from ``sigmas`` and a
    median of 5-300 s, a history of ``history`` runs, 20-60 nodes as a chain or layered on 1-3
    workers, one or two kinds (the task's speed applies to both), ``est_wall_s`` on half the
    trials (the kind's median × an error of σ 0.5)."""

    def make(rng: random.Random, t: int) -> Trial:
        sigma = rng.choice(sigmas)
        kinds = rng.choice((1, 1, 2))
        names = [f"s{j}-{t}" for j in range(kinds)]
        medians = [math.exp(rng.uniform(math.log(5), math.log(300))) for _ in range(kinds)]
        hist = [(names[j], rng.lognormvariate(math.log(medians[j]), sigma))
                for j in range(kinds) for _ in range(rng.randint(*history))]
        rng.shuffle(hist)
        n = rng.randint(20, 60)
        w = rng.randint(1, 3)
        dd = chain(n) if w == 1 or rng.random() < 0.5 else layered(rng, n, w)
        est = rng.random() < 0.5
        errs = [math.exp(rng.gauss(0, 0.5)) for _ in range(kinds)]

        def duration(r: random.Random, i: int) -> float:
            return r.lognormvariate(math.log(medians[i % kinds] * factor), sigma)

        nodes = [(f"n{i}", names[i % kinds], dd[i], round(medians[i % kinds] * errs[i % kinds], 3) if est else None,
                  duration(rng, i)) for i in range(n)]
        return Trial(nodes, w, hist, lambda r: [duration(r, i) for i in range(n)])

    return make


SPEEDS = {"like its history": 1.0, "2× slower": 2.0, "3× slower": 3.0, "4× slower": 4.0, "2× faster": 0.5}


WORKLOADS: dict[str, Maker] = {
    # rich history
    "lognormal σ0.3": _simple(lognormal(60, 0.3)),
    "lognormal σ1.0": _simple(lognormal(60, 1.0)),
    "lognormal σ1.5": _simple(lognormal(60, 1.5)),
    "bimodal": _simple(bimodal(20, 200)),
    "heavy tail (pareto 1.5)": _simple(pareto(20, 1.5)),
    "shared history, 1-4 workers, layered": _simple(lognormal(60, 0.7), workers=(1, 4), deps="layered",
                                                   fresh_kind=False, history=40),
    "fan on 4 workers, 3 kinds": _simple(lognormal(60, 0.8), workers=4, deps="fan", kinds=3),
    # drift
    "drift ×1→×3 within every task, σ0.5": _simple(lognormal(60, 0.5), drift=(1.0, 3.0), fresh_kind=False,
                                                  history=20),
    "drift ×1→×3 within every task, σ1.0": _simple(lognormal(60, 1.0), drift=(1.0, 3.0), fresh_kind=False,
                                                  history=20),
    "drift ×1→×3 in the task": _simple(lognormal(60, 0.5), drift=(1.0, 3.0)),
    "drift ×1→×3 in the task, σ1.0": _simple(lognormal(60, 1.0), drift=(1.0, 3.0)),
    "drift across tasks ×1→×3": _simple(lognormal(60, 0.5), fresh_kind=False, drift_across=0.1, history=30),
    # a task slower than its kind's history must be flagged late; rich bimodal histories
    "task 3× slower than its history, σ0.3": _simple(lognormal(60, 0.3), task_factor=3.0, history=120),
    "task 3× slower than its history, σ0.5": _simple(lognormal(60, 0.5), task_factor=3.0, history=120),
    "task 3× slower than its history, σ1.0": _simple(lognormal(60, 1.0), task_factor=3.0, history=200),
    "task 2-4× slower, σ0.7, 60 nodes on 3 workers": _simple(lognormal(60, 0.7), task_factor=(2.0, 4.0),
                                                            history=150, n=60, workers=3, deps="layered"),
    "rich bimodal history (20 s / 200 s)": _simple(bimodal(20, 200), history=300),
    "rich bimodal history (10 s / 60 s, even)": _simple(bimodal(10, 60, p_a=0.5, sigma=0.2), history=400),
    "rich bimodal history (30 s / 300 s, σ0.5)": _simple(bimodal(30, 300, p_a=0.7, sigma=0.5), history=250,
                                                        workers=3, deps="layered", n=50),
    # held-out style: a fresh mixture every trial, so no tuning to one shape (store/estimation/mixture.py's clusters)
    "mixtures: 2 clusters 3-20×, 20/80-50/50, 60-400 runs": _mixtures(),
    "mixtures: 3 clusters, 60-400 runs": _mixtures(three=True),
    "mixtures: 2 clusters, short history (20-60 runs)": _mixtures(history=(20, 60)),
    # cold starts
    "cold: 0 samples, no est": _simple(lognormal(60, 0.7), history=0),
    "cold: 1 sample": _simple(lognormal(60, 0.7), history=1),
    "cold: 3 samples": _simple(lognormal(60, 0.7), history=3),
    "cold: 3 samples σ1.2": _simple(lognormal(60, 1.2), history=3),
    "cold: 3 samples + est (node σ0.5)": _simple(lognormal(60, 0.7), history=3, est="node"),
    # est_wall_s only
    "est only, node error σ0.5": _simple(lognormal(60, 0.5), history=0, est="node"),
    "est only, kind error σ0.5": _simple(lognormal(60, 0.5), history=0, est="kind"),
    "est only, kind error σ0.5, 2 workers layered": _simple(lognormal(60, 0.8), history=0, est="kind",
                                                            deps="layered", workers=2),
}


# ---------------------------------------------------------------------- running them
@dataclass
class Report:
    checks: list[dict[str, Any]] = field(default_factory=list)

    def cells(self) -> dict[tuple[float, str], tuple[int, int]]:
        """(stage, label) → (checks, covered)."""
        out: dict[tuple[float, str], list[int]] = {}
        for c in self.checks:
            cell = out.setdefault((c["stage"], c["label"]), [0, 0])
            cell[0] += 1
            cell[1] += c["p80_s"] is not None and c["actual_s"] <= c["p80_s"]
        return {k: (v[0], v[1]) for k, v in out.items()}

    def coverage(self, *, stage: float | None = None, labels: tuple[str, ...] | None = None) -> float | None:
        xs = [c for c in self.checks if (stage is None or c["stage"] == stage)
              and (labels is None or c["label"] in labels) and c["p80_s"] is not None]
        return sum(c["actual_s"] <= c["p80_s"] for c in xs) / len(xs) if xs else None


def run_workload(make: Maker, *, trials: int, seed: int, path: str, stages: tuple[float, ...] = STAGES,
                 history: DurationHistory | None = None) -> Report:
    """``trials`` tasks of one workload on a fresh ledger at ``path``."""
    if os.path.exists(path):
        raise FileExistsError(path)
    rng = random.Random(seed)
    clock = ManualClock()
    rep = Report()
    with Ledger.open(path, clock=clock) as ledger:
        ledger.db.execute_sql("PRAGMA synchronous=OFF")  # a throw-away ledger
        for t in range(trials):
            _run_trial(ledger, clock, make(rng, t), f"t{t:03d}", stages, rep)
    return rep


def _run_trial(ledger: Ledger, clock: ManualClock, trial: Trial, tid: str, stages: tuple[float, ...],
               rep: Report) -> None:
    if trial.history:
        hid = f"{tid}-history"
        ledger.create_task(hid)
        ledger.add_nodes(hid, [NodeSpec(f"h{i}", kind) for i, (kind, _) in enumerate(trial.history)])
        for kind, d in trial.history:
            c = ledger.claim(hid, "historian", lease_s=max(60.0, 2 * d))
            clock.advance(d)
            ledger.commit(c, output={})
        clock.advance(3600)  # the historian is not one of the task's workers
    truth = {key: d for key, _, _, _, d in trial.nodes}
    ledger.create_task(tid)
    ledger.add_nodes(tid, [NodeSpec(key, kind, deps, est_wall_s=est) for key, kind, deps, est, _ in trial.nodes])
    total = len(trial.nodes)
    idle = [f"w{i}" for i in range(trial.workers)]
    running: list[tuple[float, str, Any]] = []
    done = 0
    todo = list(stages)
    checks = []
    while True:
        while idle:
            c = ledger.claim(tid, idle[0], lease_s=10 * max(truth.values()))
            if c is None:
                break
            idle.pop(0)
            heapq.heappush(running, (clock() + truth[c.node_key], c.node_key, c))
        if not running:
            break
        at, _, c = heapq.heappop(running)
        clock.set(at)
        ledger.commit(c, output={})
        idle.append(c.worker)
        done += 1
        while todo and done / total >= todo[0] and done < total:
            st = todo.pop(0)
            e = estimate_task(ledger, ledger.task(tid))
            checks.append({"workload_trial": tid, "stage": st, "at": clock(), "p50_s": e.p50_s, "p80_s": e.p80_s,
                           "label": e.confidence, "samples": e.samples, "why": list(e.why)})
    for c in checks:
        c["actual_s"] = clock() - c["at"]
        rep.checks.append(c)


# ---------------------------------------------------------------------- expected coverage (no ledger)
def _makespan(trial: Trial, dur: dict[str, float], done: set[str], running: dict[str, float], t0: float) -> float:
    """The time from ``t0`` until the task ends: running nodes end when ``running`` says, pending
    ones are list-scheduled in position order on the trial's workers (what ``claim`` does)."""
    deps = {k: d for k, _, d, _, _ in trial.nodes}
    fin = set(done)
    events = [(end, k) for k, end in running.items()]
    heapq.heapify(events)
    pending = [k for k, *_ in trial.nodes if k not in done and k not in running]
    free = trial.workers - len(running)
    t = t0
    while True:
        for k in [k for k in pending if all(x in fin for x in deps[k])][:max(free, 0)]:
            pending.remove(k)
            heapq.heappush(events, (t + dur[k], k))
            free -= 1
        if not events:
            return t - t0
        t, k = heapq.heappop(events)
        fin.add(k)
        free += 1


def expected_coverage(make: Maker, *, trials: int, seed: int, draws: int = 200,
                      stages: tuple[float, ...] = STAGES) -> list[dict[str, Any]]:
    """The same trials as :func:`run_workload` (same random stream), without a ledger: the
    estimator's pure functions on a ``DurationHistory`` fed as the ledger would be. Each check
    records whether its P80 held (``held``) and its chance of holding (``chance``): the share of
    ``draws`` fresh runs of its pending nodes (drawn by the workload itself) whose remaining time
    stayed within it — a late figure of a clustered kind rests on a few draws, so whether it held
    says little about that chance."""
    from store.estimation.estimates import NodeState, dists_for, task_estimate

    rng = random.Random(seed)
    out = []
    for t in range(trials):
        trial = make(rng, t)
        assert trial.redraw is not None, "the workload cannot draw its nodes afresh"
        history = DurationHistory()
        for i, (kind, d) in enumerate(trial.history):
            history.add(kind, d, "history", i)
        truth = {k: d for k, _, _, _, d in trial.nodes}
        pos = {k: i for i, (k, *_) in enumerate(trial.nodes)}
        kind_of = {k: kind for k, kind, *_ in trial.nodes}
        deps = {k: dd for k, _, dd, _, _ in trial.nodes}
        clock = 0.0
        free = trial.workers
        running: dict[str, tuple[float, float]] = {}  # key → (end, claimed at)
        done: list[str] = []
        todo = list(stages)
        while True:
            for k in [k for k, *_ in trial.nodes if k not in running and k not in done
                      and all(x in done for x in deps[k])][:free]:
                running[k] = (clock + truth[k], clock)
                free -= 1
            if not running:
                break
            k = min(running, key=lambda x: (running[x][0], pos[x]))
            clock = running.pop(k)[0]
            free += 1
            history.add(kind_of[k], truth[k], "task", pos[k])
            done.append(k)
            while todo and len(done) / len(trial.nodes) >= todo[0] and len(done) < len(trial.nodes):
                st = todo.pop(0)
                nodes = [NodeState(key, kind, "succeeded" if key in done else "running" if key in running else "pending",
                                   pos[key], dd, running[key][1] if key in running else None, None, None, est)
                         for key, kind, dd, est, _ in trial.nodes]
                e = task_estimate(nodes, dists_for(nodes, clock, history, task_id="task"), trial.workers)
                if e.p80_s is None:
                    continue
                ends = {x: v[0] for x, v in running.items()}
                held = _makespan(trial, truth, set(done), ends, clock) <= e.p80_s
                fresh_rng = random.Random(seed * 7919 + t * 101 + int(st * 100))
                hits = 0
                for _ in range(draws):
                    dur = dict(truth)
                    for (key, *_), d in zip(trial.nodes, trial.redraw(fresh_rng)):  # the trial's own shapes
                        if key not in done and key not in running:
                            dur[key] = d
                    hits += _makespan(trial, dur, set(done), ends, clock) <= e.p80_s
                out.append({"stage": st, "label": e.confidence, "held": held, "chance": hits / draws})
    return out

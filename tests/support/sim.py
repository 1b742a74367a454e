"""A seeded simulator of agents working task graphs, for calibration, benchmarks and the demo.

Tasks are random layered graphs whose node durations come from known log-normal distributions
per kind. ``workers`` simulated agents run them on a :class:`ManualClock` through the public agent
API only (``claim``, ``heartbeat`` with units, tokens and an observation, ``commit``, ``fail``).
Some nodes are *slow but progressing* (their duration times ``slow_factor``, every observation
still new); some fall into a *loop*: from a random point their observations stop adding anything
(either the same text again, or old lines reshuffled) and their units stop moving, until the agent
gives up after ``loop_giveup_obs`` observations and the node is retried.

While the tasks run, a :class:`store.reading.analysis.TaskAnalysis` is fed the journal like the console
would, and after every heartbeat the node's signals are read. At 25 / 50 / 75 % of a task's nodes
finished, the task's P50/P80 (``estimates.estimate_task``, what ``warden status`` shows) is
recorded; when the task completes, each is checked against the time that was actually left.

```python
report = run_simulation("/tmp/sim.db", SimConfig(seed=3, tasks=30))
report.coverage(0.5)     # share of tasks that finished within their P80 at 50 % progress
report.recall()          # injected loops that raised a stall alarm within 5 observations
```
"""

from __future__ import annotations

import heapq
import math
import os
import random
from dataclasses import dataclass, field
from typing import Any

from store.reading.analysis import TaskAnalysis
from store.clock import ManualClock
from store.estimation.estimates import DurationHistory, estimate_task
from store import Ledger
from store.views import NodeSpec

from .observations import sentence

STALL_ALARM_KINDS = ("no_new_info", "repeating", "heartbeat_stale", "orphaned", "no_progress")


@dataclass(frozen=True)
class KindSpec:
    name: str
    median_s: float
    sigma: float


DEFAULT_KINDS = (KindSpec("llm_call", 120.0, 0.5), KindSpec("tool", 40.0, 0.7), KindSpec("test_run", 300.0, 0.35))


@dataclass(frozen=True)
class SimConfig:
    seed: int = 1
    tasks: int = 30
    warmup_tasks: int = 4  # run first, not scored for coverage (the memory starts empty)
    nodes: tuple[int, int] = (8, 16)
    layers: tuple[int, int] = (2, 5)
    workers: tuple[int, int] = (1, 4)
    kinds: tuple[KindSpec, ...] = DEFAULT_KINDS
    heartbeat_s: float = 15.0
    lease_s: float = 90.0
    units: tuple[int, int] = (4, 12)
    slow_rate: float = 0.08
    slow_factor: float = 3.0
    loop_rate: float = 0.06
    loop_giveup_obs: int = 8
    est_error_sigma: float = 0.3  # est_wall_s = kind median × log-normal error
    stages: tuple[float, ...] = (0.25, 0.5, 0.75)
    fast_sqlite: bool = True  # synchronous=OFF on the throw-away simulation ledger


@dataclass
class SimReport:
    checks: list[dict[str, Any]] = field(default_factory=list)  # one per (task, stage)
    loops: list[dict[str, Any]] = field(default_factory=list)  # one per injected loop
    healthy: list[dict[str, Any]] = field(default_factory=list)  # one per healthy attempt
    tasks: int = 0
    sim_seconds: float = 0.0

    def coverage(self, stage: float | None = None, which: str = "p80_s") -> float:
        xs = [c for c in self.checks if (stage is None or c["stage"] == stage) and c[which] is not None]
        return sum(1 for c in xs if c["actual_s"] <= c[which]) / len(xs) if xs else float("nan")

    def recall(self, within: int = 5) -> float:
        if not self.loops:
            return float("nan")
        return sum(1 for x in self.loops if x["detected_after"] is not None and x["detected_after"] <= within) / len(self.loops)

    def false_alarm_rate(self, slow_only: bool = False) -> float:
        xs = [h for h in self.healthy if h["slow"] or not slow_only]
        return sum(1 for h in xs if h["alarms"]) / len(xs) if xs else float("nan")

    def precision(self) -> float:
        flagged_loops = sum(1 for x in self.loops if x["detected_after"] is not None)
        flagged_healthy = sum(1 for h in self.healthy if h["alarms"])
        total = flagged_loops + flagged_healthy
        return flagged_loops / total if total else float("nan")

    def summary(self) -> dict[str, Any]:
        slow = [h for h in self.healthy if h["slow"]]
        return {
            "tasks_scored": len({c["task"] for c in self.checks}),
            "coverage_p80": {f"{int(s * 100)}%": round(self.coverage(s), 3) for s in sorted({c["stage"] for c in self.checks})},
            "coverage_p50": {f"{int(s * 100)}%": round(self.coverage(s, "p50_s"), 3)
                             for s in sorted({c["stage"] for c in self.checks})},
            "loops": len(self.loops),
            "recall_within_5": round(self.recall(), 3),
            "detected_after_obs": sorted(x["detected_after"] for x in self.loops if x["detected_after"] is not None),
            "precision": round(self.precision(), 3),
            "healthy_attempts": len(self.healthy),
            "false_alarm_rate": round(self.false_alarm_rate(), 4),
            "slow_attempts": len(slow),
            "slow_alarms": sum(1 for h in slow if h["alarms"]),
            "healthy_warn_rate": round(sum(1 for h in self.healthy if h["warns"]) / max(1, len(self.healthy)), 4),
            "sim_hours": round(self.sim_seconds / 3600, 1),
        }


@dataclass
class _Attempt:
    key: str
    claim: Any
    start: float
    duration: float
    units_total: int
    gamma: float
    loop_at: float | None  # elapsed seconds at which the loop starts
    loop_style: str
    slow: bool
    lines: list[str] = field(default_factory=list)
    loop_obs: int = 0
    units: int = 0  # units_done last reported (a loop freezes them there)
    detected_after: int | None = None
    alarms: set[str] = field(default_factory=set)
    warns: set[str] = field(default_factory=set)


def _graph(rng: random.Random, cfg: SimConfig, tid: str) -> tuple[list[NodeSpec], dict[str, tuple[float, bool, bool]]]:
    n = rng.randint(*cfg.nodes)
    layers = min(n, rng.randint(*cfg.layers))
    per = [[] for _ in range(layers)]
    for i in range(n):
        per[i % layers if i < layers else rng.randrange(layers)].append(i)
    specs: list[NodeSpec] = []
    truth: dict[str, tuple[float, bool, bool]] = {}
    est_err = {k.name: math.exp(rng.gauss(0, cfg.est_error_sigma)) for k in cfg.kinds}
    prev: list[str] = []
    for layer in per:
        keys = []
        for i in layer:
            kind = rng.choice(cfg.kinds)
            key = f"{tid}-n{i:02d}"
            deps = tuple(sorted(set(rng.sample(prev, min(len(prev), rng.randint(1, 2)))))) if prev else ()
            slow = rng.random() < cfg.slow_rate
            loop = rng.random() < cfg.loop_rate
            d = rng.lognormvariate(math.log(kind.median_s), kind.sigma) * (cfg.slow_factor if slow else 1.0)
            truth[key] = (d, slow, loop)
            specs.append(NodeSpec(key, kind.name, deps, est_wall_s=round(kind.median_s * est_err[kind.name], 1)))
            keys.append(key)
        prev = keys
    return specs, truth


def run_simulation(path: str, cfg: SimConfig = SimConfig()) -> SimReport:
    """Run ``cfg.tasks`` tasks one after the other on a fresh ledger at ``path``; see the module doc."""
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists; the simulator wants a fresh ledger")
    rng = random.Random(cfg.seed)
    clock = ManualClock()
    ledger = Ledger.open(path, clock=clock)
    if cfg.fast_sqlite:
        ledger.db.execute_sql("PRAGMA synchronous=OFF")
    report = SimReport()
    history = DurationHistory()  # shared by the analyses, like one console watching the ledger
    t_begin = clock()
    try:
        for t in range(cfg.tasks):
            _run_task(ledger, clock, rng, cfg, f"sim{t:03d}", t >= cfg.warmup_tasks, report, history)
            report.tasks += 1
    finally:
        ledger.close()
    report.sim_seconds = clock() - t_begin
    return report


def _run_task(ledger: Ledger, clock: ManualClock, rng: random.Random, cfg: SimConfig, tid: str, scored: bool,
              report: SimReport, history: DurationHistory) -> None:
    specs, truth = _graph(rng, cfg, tid)
    ledger.create_task(tid, title=f"simulated task {tid}")
    ledger.add_nodes(tid, specs)
    total = len(specs)
    analysis = TaskAnalysis(ledger, tid, history=history)
    cursor = analysis.cursor
    workers = [f"agent-{i}" for i in range(rng.randint(*cfg.workers))]
    idle = list(workers)
    events: list[tuple[float, int, str, str]] = []  # (time, seq, worker, what)
    seq = 0
    attempts: dict[str, _Attempt] = {}
    done = 0
    stages = list(cfg.stages)
    checks: list[dict[str, Any]] = []
    t_start = clock()

    def pump() -> None:
        nonlocal cursor
        for ev in ledger.events(cursor, task_id=tid):
            cursor = ev.id
            # Like the console: a heartbeat's payload is enough; other events re-read their node.
            fetch = ev.node and ev.kind != "node.heartbeat"
            analysis.apply_event(ev, ledger.nodes(tid, [ev.node]) if fetch else [])

    def push(at: float, worker: str, what: str) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (at, seq, worker, what))

    def start_idle() -> None:
        while idle:
            w = idle[0]
            claim = ledger.claim(tid, w, lease_s=cfg.lease_s)
            if claim is None:
                return
            idle.pop(0)
            d, slow, loop = truth[claim.node_key]
            if claim.attempt > 1:  # a retry after a loop: a fresh, healthy run
                kind = next(k for k in cfg.kinds if k.name == claim.kind)
                d, loop = rng.lognormvariate(math.log(kind.median_s), kind.sigma), False
            attempts[w] = _Attempt(
                claim.node_key, claim, clock(), d, rng.randint(*cfg.units), rng.uniform(0.7, 1.4),
                d * rng.uniform(0.2, 0.6) if loop else None, rng.choice(("same", "shuffle")), slow)
            push(clock() + min(cfg.heartbeat_s * rng.uniform(0.8, 1.2), d), w, "beat")

    start_idle()
    while events:
        at, _, w, _what = heapq.heappop(events)
        clock.set(at)
        a = attempts[w]
        e = at - a.start
        finished = a.loop_at is None and at >= a.start + a.duration  # same float as the scheduled time
        looping = a.loop_at is not None and e >= a.loop_at
        if finished:
            ledger.commit(a.claim, output={"ok": True}, units_done=a.units_total, tokens=rng.randint(50, 300))
            _close(report, a, scored)
            del attempts[w]
            idle.append(w)
            done += 1
            pump()
            while stages and done / total >= stages[0]:
                st = stages.pop(0)
                est = estimate_task(ledger, ledger.task(tid), history=history)
                checks.append({"task": tid, "stage": st, "at": clock(), "p50_s": est.p50_s, "p80_s": est.p80_s,
                               "samples": est.samples})
            start_idle()
            continue
        if looping and a.loop_obs >= cfg.loop_giveup_obs:
            ledger.fail(a.claim, error="going in circles", failure_class="transient", retryable=True, retry_after_s=0)
            _close(report, a, scored)
            del attempts[w]
            idle.append(w)
            pump()
            start_idle()
            continue
        if looping:
            a.loop_obs += 1
            if a.loop_style == "same" or len(a.lines) < 2:
                text = a.lines[-1] if a.lines else "still working"
            else:
                text = "\n".join(rng.sample(a.lines, min(len(a.lines), rng.randint(1, 3))))
            units = a.units  # frozen where the last healthy heartbeat left them
        else:
            # new words, not only a new number: a counter alone is not new information
            fresh = [f"{a.key} step {len(a.lines) + j}: {sentence(rng)}" for j in range(rng.randint(1, 2))]
            if not a.slow and rng.random() < 0.1 and a.lines:  # now and then one with nothing new
                # (slow-but-progressing nodes are the near miss: every observation adds something)
                text = rng.choice(a.lines)
            else:
                a.lines.extend(fresh)
                text = "\n".join(fresh)
            units = math.floor(a.units_total * min(1.0, e / a.duration) ** a.gamma)
            a.units = units
        ledger.heartbeat(a.claim, units_done=units, units_total=a.units_total, tokens=rng.randint(100, 400),
                         observation=text)
        pump()
        for s in analysis.signals():
            if s.node != a.key:
                continue
            if s.severity == "alarm" and s.kind in STALL_ALARM_KINDS:
                a.alarms.add(s.kind)
                if looping and a.detected_after is None:
                    a.detected_after = a.loop_obs
            elif s.severity == "warn":
                a.warns.add(s.kind)
        nxt = at + cfg.heartbeat_s * rng.uniform(0.8, 1.2)
        if a.loop_at is None:
            nxt = min(nxt, a.start + a.duration)
        push(nxt, w, "beat")
    t_end = clock()
    if scored:
        for c in checks:
            c["actual_s"] = t_end - c["at"]
            report.checks.append(c)
    del t_start


def _close(report: SimReport, a: _Attempt, scored: bool) -> None:
    if a.loop_at is not None:
        report.loops.append({"node": a.key, "style": a.loop_style, "loop_obs": a.loop_obs,
                             "detected_after": a.detected_after})
    else:
        report.healthy.append({"node": a.key, "slow": a.slow, "alarms": sorted(a.alarms), "warns": sorted(a.warns)})

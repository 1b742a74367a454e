"""Stall-signal workloads run through the real Ledger API on an injected clock.

A *trial* is one task whose node ``a`` follows a script of heartbeats — gaps, observations, units,
declared waits, attempts that fail and are retried — while neighbour nodes of the same task
heartbeat at their own rates. After every heartbeat of ``a`` (and at the end of each of its
silences) ``store.reading.signals.signals_for_task`` — what ``warden status`` shows — is read.

* **Loops** (``tests/support/observations.LOOPS``): a healthy prefix of 0-6 observations, then the
  loop. Recall = trials alarmed (severity ``alarm``) within 5 observations of the loop's start;
  the first alarm's observation is recorded; an alarm during the prefix is a false alarm.
* **Progress** (``PROGRESS`` and the scenarios below): no stall alarm may fire at all.

Heartbeat intervals are drawn from 1 s to 60 s with jitter; silences up to 45 % of the lease.
"""

from __future__ import annotations

import heapq
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from store import Ledger, ManualClock, NodeSpec
from store.estimation.estimates import DurationHistory
from store.reading.signals import signals_for_task

from .observations import LOOPS, PREAMBLE, PROGRESS, Gen, sentence, text

RATES = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0)
STALL_ALARMS = ("no_new_info", "repeating", "orphaned", "heartbeat_stale", "no_progress")


@dataclass
class Step:
    gap: float  # seconds since the previous heartbeat
    text: str | None
    units: tuple[float, float] | None = None
    wait: tuple[str, float] | None = None
    fail_after: bool = False  # the attempt fails after this step (retried at once)
    action: str | None = None  # heartbeat(action=): what the step did …
    result: str | None = None  # … and heartbeat(result=): what it learned

    @property
    def reports(self) -> bool:
        return self.text is not None or self.action is not None or self.result is not None


@dataclass
class Script:
    steps: list[Step]
    lease_s: float
    loop_start: tuple[int, int] | None = None  # (attempt, observation index in it) where a loop starts
    neighbours: list[float] = field(default_factory=list)  # heartbeat intervals of neighbour nodes
    within: int = 5  # a loop is caught when alarmed by its this-many-th observation (a cycle: 2 periods + 2)


@dataclass
class Outcome:
    name: str
    loop: bool
    within: int = 5  # the loop's deadline (observations)
    first_alarm: int | None = None  # the loop's observation (1-based) at the first stall alarm
    early_alarms: list[str] = field(default_factory=list)  # alarms before the loop (or on progress)
    kinds: set[str] = field(default_factory=set)
    warns: set[str] = field(default_factory=set)

    def caught(self, within: int | None = None) -> bool:
        return self.first_alarm is not None and self.first_alarm <= (self.within if within is None else within)


# ---------------------------------------------------------------------- scripts
def pick_rate(rng: random.Random) -> float:
    return rng.choice(RATES)


def beat_gaps(rng: random.Random, rate: float, lease: float, irregular: bool) -> Iterator[float]:
    while True:
        if irregular and rng.random() < 0.15:
            yield rng.uniform(rate, 0.45 * lease)  # a silence inside the lease
        elif irregular:
            yield rate * rng.uniform(0.3, 2.0)
        else:
            yield rate * rng.uniform(0.8, 1.2)


def lease_for(rate: float) -> float:
    return max(60.0, 8 * rate)


def loop_script(rng: random.Random, loop: Gen, *, prefix: int | None = None, within: int = 5) -> Script:
    rate = pick_rate(rng)
    lease = lease_for(rate)
    gaps = beat_gaps(rng, rate, lease, irregular=False)
    k = rng.randint(0, 6) if prefix is None else prefix
    progress = rng.choice(list(PROGRESS.values()))(rng)
    total = rng.randint(10, 40)
    steps = [Step(next(gaps), next(progress), (i + 1, total)) for i in range(k)]
    looping = loop(rng)
    for _ in range(PREAMBLE.get(loop, 0)):
        steps.append(Step(next(gaps), next(looping), (len(steps) + 1, total)))
        k += 1
    frozen = (k, total) if rng.random() < 0.7 else None  # units frozen, or not reported at all
    steps += [Step(next(gaps), next(looping), frozen) for _ in range(8)]
    return Script(steps, lease, (0, k), neighbours(rng, rate), within)


def progress_script(rng: random.Random, gen: Gen, *, n: tuple[int, int] = (20, 40)) -> Script:
    rate = pick_rate(rng)
    lease = lease_for(rate)
    gaps = beat_gaps(rng, rate, lease, irregular=True)
    obs = gen(rng)
    total = rng.randint(5, 60)
    count = rng.randint(*n)
    steps = []
    done = 0.0
    for i in range(count):
        done = min(total, done + rng.choice((0, 0, 1, 1, 2)) * total / count * 1.5)
        units = (round(done), total) if rng.random() < 0.8 else None
        steps.append(Step(next(gaps), next(obs) if rng.random() < 0.85 else None, units))
    return Script(steps, lease, None, neighbours(rng, rate))


def retry_script(rng: random.Random, *, loop_in_retry: Gen | None = None) -> Script:
    """Attempt 1 makes k steps and fails; attempt 2 repeats those steps' texts (its first steps are
    the same work), then goes on with new content — or loops within itself."""
    rate = pick_rate(rng)
    lease = lease_for(rate)
    gaps = beat_gaps(rng, rate, lease, irregular=True)
    k = rng.randint(3, 7)
    first = [text(rng, (1, 3)) for _ in range(k)]
    steps = [Step(next(gaps), t, (i + 1, 30)) for i, t in enumerate(first)]
    steps[-1].fail_after = True
    steps += [Step(next(gaps), t, (i + 1, 30)) for i, t in enumerate(first)]
    start = None
    if loop_in_retry is None:
        steps += [Step(next(gaps), text(rng, (1, 2)), (k + i + 1, 30)) for i in range(rng.randint(8, 20))]
    else:
        looping = loop_in_retry(rng)
        start = (1, k)
        steps += [Step(next(gaps), next(looping), (k, 30)) for _ in range(8)]
    return Script(steps, lease, start, neighbours(rng, rate))


def ci_script(rng: random.Random, *, declared: bool = True) -> Script:
    """Progress, then 4-9 identical polls of CI (declared as a wait, or not), then progress."""
    rate = rng.choice((5.0, 10.0, 15.0, 30.0, 60.0))
    lease = lease_for(rate)
    gaps = beat_gaps(rng, rate, lease, irregular=False)
    run = rng.getrandbits(32)
    steps = [Step(next(gaps), text(rng, (1, 2)), (i + 1, 20)) for i in range(rng.randint(2, 6))]
    polls = rng.randint(4, 9)
    poll = rng.choice([f"waiting for CI run {run}: status pending", f"ci {run}: 3 of 7 jobs done",
                       "polling the build: still running"])
    steps += [Step(next(gaps), poll.replace("3 of", f"{min(6, 1 + i)} of"), (len(steps), 20),
                   ("ci", 600.0) if declared else None) for i in range(polls)]
    steps += [Step(next(gaps), f"CI run {run} passed\n" + sentence(rng), (len(steps) + 1, 20))]
    steps += [Step(next(gaps), text(rng, (1, 2)), (len(steps) + i + 1, 20)) for i in range(rng.randint(3, 8))]
    return Script(steps, lease, None, neighbours(rng, rate))


def neighbours(rng: random.Random, rate: float) -> list[float]:
    """0-2 neighbours beating at their own rates (up to 5× faster than the node, or slower)."""
    return [rng.choice([r for r in RATES if r >= rate / 5]) for _ in range(rng.choice((0, 0, 1, 2)))]


# ---------------------------------------------------------------------- running a script
def run_script(ledger: Ledger, clock: ManualClock, tid: str, name: str, script: Script) -> Outcome:
    ledger.create_task(tid)
    ledger.add_nodes(tid, [NodeSpec("a", "agent_step")] +
                     [NodeSpec(f"n{i}", "agent_step") for i in range(len(script.neighbours))])
    claim = ledger.claim(tid, "worker-a", lease_s=script.lease_s)
    assert claim is not None and claim.node_key == "a"
    others = []
    for i, rate in enumerate(script.neighbours):
        c = ledger.claim(tid, f"worker-n{i}", lease_s=max(60.0, 8 * rate))
        others.append((c, rate, random.Random(hash((tid, i)) & 0xFFFF)))
    out = Outcome(name, script.loop_start is not None, script.within)
    # neighbour heartbeats, merged in time with a's
    queue: list[tuple[float, int]] = [(clock() + rate, i) for i, (_, rate, _) in enumerate(others)]
    heapq.heapify(queue)
    attempt, obs_in_attempt = 0, 0

    def advance_to(t: float) -> None:
        while queue and queue[0][0] <= t:
            at, i = heapq.heappop(queue)
            clock.set(at)
            c, rate, r = others[i]
            ledger.heartbeat(c, observation=sentence(r))
            heapq.heappush(queue, (at + rate * r.uniform(0.8, 1.2), i))
        clock.set(t)

    history = DurationHistory()  # nothing finishes here: one memory for the trial, as `warden status` shares one
    # The task view, read once: nothing here changes what signals_for_task reads of it (status
    # active, its nodes running, no handoff, no cap) — reading it again cost more than the signals.
    task = ledger.task(tid)

    def look() -> None:
        for s in signals_for_task(ledger, task, history=history):
            if s.node != "a":
                continue
            if s.severity == "alarm" and s.kind in STALL_ALARMS:
                out.kinds.add(s.kind)
                start = script.loop_start
                in_loop = start is not None and (attempt, obs_in_attempt) >= (start[0], start[1] + 1)
                if in_loop and start is not None:
                    if out.first_alarm is None:
                        out.first_alarm = obs_in_attempt - start[1]
                elif s.kind not in out.early_alarms:
                    out.early_alarms.append(s.kind)
            elif s.severity == "warn":
                out.warns.add(s.kind)

    rate = min(s.gap for s in script.steps)
    for step in script.steps:
        advance_to(clock() + step.gap)
        if step.gap > 2 * rate:
            look()  # at the end of a silence
        units = step.units or (None, None)
        ledger.heartbeat(claim, observation=step.text, units_done=units[0], units_total=units[1],
                         waiting_on=step.wait[0] if step.wait else None, wait_s=step.wait[1] if step.wait else None,
                         action=step.action, result=step.result)
        if step.reports:
            obs_in_attempt += 1
        look()
        if step.fail_after:
            ledger.fail(claim, error="gave up", retryable=True, retry_after_s=0)
            claim = ledger.claim(tid, "worker-a", lease_s=script.lease_s)
            assert claim is not None and claim.node_key == "a"
            attempt, obs_in_attempt = attempt + 1, 0
    return out


# ---------------------------------------------------------------------- the families
def families(retries: bool = True) -> dict[str, tuple[bool, Callable[[random.Random], Script]]]:
    """name → (is a loop, script maker)."""
    out: dict[str, tuple[bool, Callable[[random.Random], Script]]] = {}
    for name, gen in LOOPS.items():
        # a cycle of p texts is caught within two periods + 2 observations, anything else within 5
        within = 2 * int(name.split()[-1]) + 2 if name.startswith("cycle of") else 5
        out[f"loop: {name}"] = (True, lambda rng, g=gen, w=within: loop_script(rng, g, within=w))
    for name, gen in PROGRESS.items():
        out[f"progress: {name}"] = (False, lambda rng, g=gen: progress_script(rng, g))
    if retries:
        out["progress: retry repeating the failed attempt's first steps"] = (False, lambda rng: retry_script(rng))
        out["loop: a retry that loops within itself"] = (
            True, lambda rng: retry_script(rng, loop_in_retry=rng.choice(list(LOOPS.values()))))
    out["progress: CI polling under a declared wait"] = (False, lambda rng: ci_script(rng, declared=True))
    return out


@dataclass
class StallReport:
    outcomes: list[Outcome] = field(default_factory=list)

    def by_family(self) -> dict[str, list[Outcome]]:
        out: dict[str, list[Outcome]] = {}
        for o in self.outcomes:
            out.setdefault(o.name, []).append(o)
        return out

    def recall(self, within: int | None = None) -> float:
        """Share of loop trials alarmed by their deadline (``within``: this many observations
        instead of each trial's own)."""
        loops = [o for o in self.outcomes if o.loop]
        return sum(1 for o in loops if o.caught(within)) / max(1, len(loops))

    def false_alarm_rate(self) -> float:
        """Share of trials with a stall alarm where there was no loop (progress trials, and the
        healthy prefix of loop trials)."""
        return sum(1 for o in self.outcomes if o.early_alarms) / max(1, len(self.outcomes))

    def table(self) -> list[dict[str, Any]]:
        rows = []
        for name, os_ in self.by_family().items():
            firsts = sorted(o.first_alarm for o in os_ if o.first_alarm is not None)
            rows.append({"family": name, "trials": len(os_), "loop": os_[0].loop,
                         "within": os_[0].within,
                         "alarmed_within_5": sum(1 for o in os_ if o.caught()),
                         "first_alarm_median": firsts[len(firsts) // 2] if firsts else None,
                         "first_alarm_max": firsts[-1] if firsts else None,
                         "false_alarms": sum(1 for o in os_ if o.early_alarms),
                         "alarm_kinds": sorted(set().union(*(o.kinds for o in os_))),
                         "warn_kinds": sorted(set().union(*(o.warns for o in os_)))})
        return rows


def run_stalls(path: str, *, trials: int, seed: int, only: tuple[str, ...] = (),
               fams: dict[str, tuple[bool, Callable[[random.Random], Script]]] | None = None) -> StallReport:
    """``trials`` of every family (``fams``: these instead of :func:`families`) on a fresh ledger
    at ``path``."""
    if os.path.exists(path):
        raise FileExistsError(path)
    rng = random.Random(seed)
    clock = ManualClock()
    rep = StallReport()
    with Ledger.open(path, clock=clock) as ledger:
        ledger.db.execute_sql("PRAGMA synchronous=OFF")  # a throw-away ledger
        n = 0
        for name, (_, make) in (families() if fams is None else fams).items():
            if only and not any(o in name for o in only):
                continue
            for _ in range(trials):
                rep.outcomes.append(run_script(ledger, clock, f"s{n:05d}", name, make(rng)))
                n += 1
                clock.advance(3600)
    return rep

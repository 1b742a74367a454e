"""Heartbeat rhythms and parks, through the real Ledger API on an injected clock.

* **Healthy rhythms** (no ``heartbeat_stale``, no ``orphaned`` may fire): bursts of a few beats
  seconds apart then a long stretch of work, the burst and work lengths drawn per trial (the
  agent's lease covers its longest work with a margin); a ``LeaseKeeper``-like agent beating every
  third of its lease; irregular gaps anywhere inside the lease; a steady agent with jitter.
  Signals are read during every silence (at a quarter, half, three quarters and the end of it).
* **Hangs** (``heartbeat_stale`` should fire before the lease ends): the same rhythms, then
  silence. Recall = warned before the lease ran out.
* **Parks during a declared wait** (no ``orphaned``, ``overdue`` or ``heartbeat_stale`` may
  fire): a node declares ``waiting_on="ci", wait_s=W`` and polls; the operator parks the task for
  5-40 minutes; the agent either keeps polling through the park or stops (``Pulse.parked``) and
  polls the task's status until the resume; then it polls until its wait's own time is up (the
  park not counted) and finishes. Signals are read through the park and after it, every few
  seconds until the node commits.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Callable

from store import Ledger, ManualClock, NodeSpec
from store.estimation.estimates import DurationHistory
from store.reading.signals import signals_for_task

from .wording import narrative

Rhythm = Callable[[random.Random], tuple[float, list[float]]]  # → (lease, gaps between beats)


def bursty(rng: random.Random) -> tuple[float, list[float]]:
    """Bursts of 2-6 beats 0.5-5 s apart, then 20-240 s of work; the lease covers the work
    ×1.15-3 (at least 30 s)."""
    work = rng.uniform(20, 240)
    lease = max(30.0, work * rng.uniform(1.15, 3.0))
    gaps: list[float] = []
    while len(gaps) < 60:
        gaps += [rng.uniform(0.5, 5)] * rng.randint(1, 5)
        gaps.append(min(work * rng.uniform(0.7, 1.0), 0.87 * lease))
    return lease, gaps


def bursty_fixed(rng: random.Random) -> tuple[float, list[float]]:
    """A bursty agent: 3 beats 2 s apart, then 90 s of work (lease 100-300 s)."""
    lease = rng.choice((100.0, 120.0, 150.0, 180.0, 300.0))
    gaps = []
    for _ in range(20):
        gaps += [2.0, 2.0, 90.0 * rng.uniform(0.95, 1.05)]
    return lease, gaps


def keeper(rng: random.Random) -> tuple[float, list[float]]:
    lease = rng.choice((10.0, 30.0, 60.0, 120.0, 600.0))
    return lease, [lease / 3 * rng.uniform(0.9, 1.1) for _ in range(40)]


def irregular(rng: random.Random) -> tuple[float, list[float]]:
    lease = rng.choice((60.0, 120.0, 300.0))
    return lease, [rng.uniform(0.05, 0.8) * lease for _ in range(40)]


def steady(rng: random.Random) -> tuple[float, list[float]]:
    every = rng.choice((1.0, 2.0, 5.0, 15.0, 30.0))
    lease = max(30.0, every * rng.uniform(3, 10))
    return lease, [every * rng.uniform(0.8, 1.25) for _ in range(50)]


HEALTHY: dict[str, Rhythm] = {"bursts then long work": bursty, "3 beats 2 s apart, then 90 s": bursty_fixed,
                              "LeaseKeeper, every third of the lease": keeper,
                              "irregular gaps inside the lease": irregular, "steady with jitter": steady}


@dataclass
class RhythmOutcome:
    name: str
    hang: bool
    stale_at: float | None = None  # seconds into the silence when heartbeat_stale first fired
    lease_left: float | None = None  # … and how much lease was left then
    false: list[str] = field(default_factory=list)  # signals that must not fire, with when


def _setup(ledger: Ledger, tid: str) -> None:
    ledger.create_task(tid)
    ledger.add_nodes(tid, [NodeSpec("a", "agent_step")])


def run_rhythm(ledger: Ledger, clock: ManualClock, tid: str, name: str, rhythm: Rhythm, rng: random.Random,
               hang: bool) -> RhythmOutcome:
    """Beat ``rhythm``; with ``hang``, go silent after it (and watch what the signals say)."""
    _setup(ledger, tid)
    lease, gaps = rhythm(rng)
    claim = ledger.claim(tid, "w", lease_s=lease)
    assert claim is not None
    out = RhythmOutcome(name, hang)
    history = DurationHistory()
    task = ledger.task(tid)

    def bad(at: float) -> None:
        for s in signals_for_task(ledger, task, history=history):
            if s.kind in ("heartbeat_stale", "orphaned"):
                out.false.append(f"{s.kind} at +{at:.1f}s: {s.evidence}")

    clock.advance(rng.uniform(0.5, 3))
    ledger.heartbeat(claim, observation=f"started {tid}")
    for gap in gaps:
        start = clock()
        for part in (0.25, 0.5, 0.75, 0.999):
            clock.set(start + gap * part)
            bad(gap * part)
        clock.set(start + gap)
        ledger.heartbeat(claim)
    if hang:
        start = clock()
        node = ledger.node(tid, "a")
        assert node.lease_until is not None
        t = 0.0
        while start + t < node.lease_until:
            clock.set(start + t)
            got = [s for s in signals_for_task(ledger, task, history=history) if s.kind == "heartbeat_stale"]
            if got:
                out.stale_at, out.lease_left = t, node.lease_until - clock()
                break
            t += max(0.5, lease / 200)
    return out


# ---------------------------------------------------------------------- parks during a declared wait
@dataclass
class ParkOutcome:
    name: str
    false: list[str] = field(default_factory=list)
    finished: bool = False


def run_park(ledger: Ledger, clock: ManualClock, tid: str, rng: random.Random, *, keeps_polling: bool) -> ParkOutcome:
    _setup(ledger, tid)
    lease = rng.choice((30.0, 60.0, 120.0))
    poll = lease * rng.uniform(0.2, 0.4)
    wait_s = rng.choice((600.0, 900.0, 1800.0))
    claim = ledger.claim(tid, "w", lease_s=lease)
    assert claim is not None
    out = ParkOutcome(f"park during a declared wait ({'polling through it' if keeps_polling else 'stopped while parked'})")
    history = DurationHistory()

    def look(when: str) -> None:
        for s in signals_for_task(ledger, ledger.task(tid), history=history):
            if s.kind in ("orphaned", "overdue", "heartbeat_stale", "no_new_info", "repeating"):
                out.false.append(f"{s.kind} {when}: {s.evidence}")

    for i in range(rng.randint(3, 6)):  # some work first, a rhythm to learn
        clock.advance(poll * rng.uniform(0.8, 1.2))
        ledger.heartbeat(claim, observation=narrative(rng))
    clock.advance(poll)
    declared = clock()
    ledger.heartbeat(claim, observation="pushed; waiting for CI", waiting_on="ci", wait_s=wait_s)
    park_at = declared + rng.uniform(0.05, 0.3) * wait_s
    park_for = rng.uniform(300, 2400)
    target = wait_s * rng.uniform(0.6, 0.8)  # CI passes this long into the wait, the park not counted
    parked_total = 0.0
    while clock() - declared - parked_total + 2.5 * poll < target:
        step = poll * rng.uniform(0.8, 1.2)
        if parked_total == 0.0 and clock() + step >= park_at:
            clock.set(park_at)
            ledger.apply(ledger.plan_park(tid, reason="lunch"), operator="op")
            end = clock() + park_for
            while clock() + poll < end:
                clock.advance(poll * rng.uniform(0.8, 1.2))
                if keeps_polling:
                    pulse = ledger.heartbeat(claim, observation="CI: pending", waiting_on="ci", wait_s=wait_s)
                    assert pulse.parked
                look("while parked")
            clock.set(end)
            ledger.apply(ledger.plan_resume(tid), operator="op")
            parked_total = park_for
            look("at the resume")
            clock.advance(poll * rng.uniform(0.2, 0.9))  # the agent notices the resume (its own poll)
            look("just after the resume")
            ledger.heartbeat(claim, observation="CI: pending", waiting_on="ci", wait_s=wait_s)
            continue
        clock.advance(step)
        look("during the wait")
        ledger.heartbeat(claim, observation="CI: pending", waiting_on="ci", wait_s=wait_s)
    assert parked_total > 0, "the park happened during the wait"
    clock.advance(poll)
    look("before CI passed")
    ledger.heartbeat(claim, observation="CI passed: all 48 checks green")
    ledger.commit(claim, output={"ok": True})
    out.finished = True
    return out


def run_rhythms(path: str, *, trials: int, seed: int) -> tuple[list[RhythmOutcome], list[ParkOutcome]]:
    if os.path.exists(path):
        raise FileExistsError(path)
    rng = random.Random(seed)
    clock = ManualClock()
    rhythms: list[RhythmOutcome] = []
    parks: list[ParkOutcome] = []
    with Ledger.open(path, clock=clock) as ledger:
        ledger.db.execute_sql("PRAGMA synchronous=OFF")  # a throw-away ledger
        n = 0
        for name, rhythm in HEALTHY.items():
            for hang in (False, True):
                for _ in range(trials):
                    rhythms.append(run_rhythm(ledger, clock, f"r{n:05d}", name, rhythm, rng, hang))
                    n += 1
                    clock.advance(3600)
        for keeps in (True, False):
            for _ in range(trials):
                parks.append(run_park(ledger, clock, f"p{n:05d}", rng, keeps_polling=keeps))
                n += 1
                clock.advance(3600)
    return rhythms, parks

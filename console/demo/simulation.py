"""The demo's agents in-process on a ManualClock: discrete events, no real time, exactly
repeatable for a seed (tests, screenshots, the demo's finished history)."""

from __future__ import annotations

import heapq
from typing import Callable, Generator, Sequence

from store import Ledger, ManualClock

from .agent import DemoAgent, SimulatedCrash
from .world import IDLE_S, LEASE_S, RESTART_AFTER_S, ROSTER, TICK_S


class Simulation:
    """Run the roster's agents in-process on a ManualClock (discrete events, no real time).

    A simulated crash takes the agent out; the supervisor restarts it ``RESTART_AFTER_S`` later
    under a new name (``w4`` → ``w4-2``), as ``warden demo`` does with a crashed process.
    """

    def __init__(self, ledger: Ledger, clock: ManualClock, *, seed: int = 7,
                 roster: Sequence[tuple[str, str]] = ROSTER, tick_s: float = TICK_S,
                 log: Callable[[str], None] | None = None) -> None:
        self.ledger = ledger
        self.clock = clock
        self.seed = seed
        self.tick_s = tick_s
        self.log = log
        self.crashes: list[tuple[str, float]] = []
        self.agents: dict[str, DemoAgent] = {}
        self._heap: list[tuple[float, int, str, Generator[float, None, object]]] = []
        self._seq = 0
        self._restarts: dict[str, int] = {}
        for name, role in roster:
            self._start(name, role, clock.now)

    def _start(self, name: str, role: str, at: float) -> None:
        sink = self.log
        log = (lambda line, n=name: sink(f"{n}: {line}")) if sink is not None else None
        agent = DemoAgent(self.ledger, name, role, tick_s=self.tick_s, lease_s=max(LEASE_S, 3 * self.tick_s),
                          idle_s=max(IDLE_S, self.tick_s), seed=self.seed, log=log)
        self.agents[name] = agent
        heapq.heappush(self._heap, (at, self._seq, name, agent.loop()))
        self._seq += 1

    def run(self, *, until: float | None = None, stop: Callable[[], bool] | None = None,
            check_every_s: float = 5.0) -> float:
        """Advance until the clock reaches ``until`` or ``stop()`` is true (checked every few
        simulated seconds). Returns the clock."""
        next_check = self.clock.now
        while self._heap:
            at, _, name, gen = self._heap[0]
            if until is not None and at > until:
                break
            heapq.heappop(self._heap)
            self.clock.set(max(self.clock.now, at))
            try:
                wait = next(gen)
            except SimulatedCrash:
                self.crashes.append((name, self.clock.now))
                base = name.split("-")[0]
                k = self._restarts.get(base, 1) + 1
                self._restarts[base] = k
                self._start(f"{base}-{k}", self.agents[name].role, self.clock.now + RESTART_AFTER_S)
                continue
            heapq.heappush(self._heap, (self.clock.now + max(0.01, float(wait)), self._seq, name, gen))
            self._seq += 1
            if stop is not None and self.clock.now >= next_check:
                next_check = self.clock.now + check_every_s
                if stop():
                    break
        if until is not None and self.clock.now < until and (stop is None or not stop()):
            self.clock.set(until)
        return self.clock.now


__all__ = ["Simulation"]

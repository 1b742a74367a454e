"""The live path goes first: the analysis worker waits while a change or a key is on its way to
the screen.

The console's estimates (a Monte Carlo a task, pure Python) run in a worker thread. Python runs one
thread at a time, and a thread that gives the interpreter up — the journal reader does at every
SQLite call, the UI thread whenever it waits — gets it back only when the busy one is made to let
go (the switch interval, 1 ms here). A read of a few dozen rows took 30–40 ms while an analysis
ran instead of 2, so the commits that landed in a run (one second in ten on a busy list) reached
the screen 60–110 ms late (bench_fleet.py ``--trace``, docs/performance.md).

So the live path takes a turn: :meth:`LiveTurn.begin` when the follower starts a read or a key
arrives, :meth:`LiveTurn.end` once the frame that shows it is drawn (or the read found nothing).
Meanwhile the analysis, at its pause points (every Monte Carlo trial, every node's distribution,
between the reads that build an opened graph's analysis, between tasks), waits
(:meth:`LiveTurn.pause`). A turn lasts at most ``hold_s`` from its last ``begin``, whatever
happens to its ``end`` (a screen that went away before its frame): the analysis is delayed,
never stopped.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

HOLD_S = 0.1  # the longest the analysis waits for one turn


class LiveTurn:
    """Thread-safe; ``clock`` is injectable (tests)."""

    def __init__(self, *, hold_s: float = HOLD_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.hold_s = hold_s
        self.clock = clock
        self._cond = threading.Condition()
        self._held = False
        self._until = 0.0
        self.waited_s = 0.0  # how long pause() has waited in all (the analysis' own cost leaves it out)
        self.waits = 0

    @property
    def held(self) -> bool:
        return self._held and self.clock() < self._until

    def begin(self) -> None:
        """The live path has work (any thread): the analysis waits at its next pause point."""
        with self._cond:
            self._held = True
            self._until = self.clock() + self.hold_s

    def end(self) -> None:
        """What the live path was doing is on screen (or came to nothing): the analysis goes on."""
        with self._cond:
            self._held = False
            self._cond.notify_all()

    def pause(self) -> None:
        """The analysis' pause point: at once unless a turn is under way, else when it ends (at
        most ``hold_s`` after it began)."""
        if not self._held:  # (the common case: one attribute read, no lock)
            return
        with self._cond:
            start = self.clock()
            waited = False
            while self._held:
                left = self._until - self.clock()
                if left <= 0:
                    self._held = False  # this turn is over (its end never came): no lock per pause
                    break
                waited = True
                self._cond.wait(left)
            if waited:
                self.waits += 1
                self.waited_s += max(0.0, self.clock() - start)


__all__ = ["HOLD_S", "LiveTurn"]

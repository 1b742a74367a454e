"""Waiting in tests on a machine that may be busy.

Tests wait on conditions, never on sleeps; a deadline on such a wait is a safety net that turns a
hang into a failure saying what was awaited — it must never fail a slow but healthy test. So every
net here is stretched by how slow the machine is *now* (:func:`slowdown`):

* the machine's own speed, measured once a session (:func:`machine_speed`: the CPU time of a fixed
  piece of pure Python against the figure of the machine the suite's budgets were written on; a
  faster machine counts as 1, never less);
* how crowded it is: the one-minute load average over the CPUs this process may use (a machine
  with four runnable processes a core gives each a quarter of one: a wait takes four times as
  long).

:class:`Deadline` counts a wait's time in "idle seconds" — each interval divided by the slowdown of
that moment — so a load that comes and goes during the wait stretches exactly its own part.
Where a bound is the point of a test (a latency the product promises), scale it with
:func:`stretch` or compare with a baseline measured in the same test, and say so there.

The console's pilot tests wait with ``tests.support.console_app.wait_for`` (it pumps the app), which
uses :class:`Deadline` too.
"""

from __future__ import annotations

import os
import time
from typing import Callable

# The speed calibration: CPU seconds of _calibration_work() on the machine the budgets were
# written on (2 cores of a shared VM; its minimum over 7 runs was 20-27 ms there, idle or loaded).
REFERENCE_WORK_S = 0.025
SPEED_ENV = "WARDEN_TEST_SPEED"  # set by tests/conftest.py so every worker and helper agrees


def _calibration_work() -> int:
    d: dict[str, int] = {}
    s = 0
    for i in range(60_000):
        k = f"k{i % 997}"
        d[k] = d.get(k, 0) + i
        s += len(k) * (i & 7)
    return s + len(d)


_speed: float | None = None


def machine_speed() -> float:
    """How many times slower than the reference this machine's cores run Python (≥ 1): measured
    on CPU time (the thread's own, so other processes' load does not enter), the fastest of 7."""
    global _speed
    if _speed is None:
        given = os.environ.get(SPEED_ENV)
        if given:
            _speed = max(1.0, float(given))
        else:
            best = float("inf")
            for _ in range(7):
                t = time.thread_time()
                _calibration_work()
                best = min(best, time.thread_time() - t)
            _speed = max(1.0, best / REFERENCE_WORK_S)
    return _speed


def cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


_crowd = (0.0, 1.0)  # (when read, value): the load average is read at most every 0.25 s


def crowding() -> float:
    """Runnable processes per CPU over the last minute, at least 1 (the load average)."""
    global _crowd
    now = time.monotonic()
    if now - _crowd[0] >= 0.25:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = 0.0
        _crowd = (now, max(1.0, load / cpus()))
    return _crowd[1]


def slowdown() -> float:
    """How many times longer than on an idle reference machine a piece of work takes here now."""
    return machine_speed() * crowding()


def stretch(seconds: float) -> float:
    """``seconds`` on an idle reference machine, as wall-clock seconds here and now."""
    return seconds * slowdown()


class Deadline:
    """A safety net of ``seconds`` idle seconds: each interval between two looks is counted divided
    by the slowdown at that look, so the net stretches with the load while the wait lasts."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.used = 0.0
        self.started = self._last = time.monotonic()
        self._factor = self.worst = slowdown()

    def _tick(self) -> None:
        now = time.monotonic()
        self.used += (now - self._last) / self._factor
        self._last = now
        self._factor = slowdown()
        self.worst = max(self.worst, self._factor)

    def expired(self) -> bool:
        self._tick()
        return self.used > self.seconds

    def left(self) -> float:
        """Wall-clock seconds left at the present slowdown (for a select or a condition wait)."""
        self._tick()
        return max(0.0, (self.seconds - self.used) * self._factor)

    def waited(self) -> float:
        """Wall-clock seconds since the start."""
        return time.monotonic() - self.started

    def check(self, what: str) -> None:
        """Fail, saying what was awaited, once the net is used up."""
        if self.expired():
            raise AssertionError(f"timed out waiting for {what} ({self.waited():.0f} s, a net of {self.seconds:g} "
                                 f"idle seconds; "
                                 f"the machine was up to {self.worst:.1f}× slower than idle meanwhile)")


def wait_until(cond: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll ``cond`` until it holds; ``timeout`` idle seconds is a safety net (:class:`Deadline`),
    not a measurement."""
    deadline = Deadline(timeout)
    while not cond():
        deadline.check(what)
        time.sleep(0.002)


__all__ = ["Deadline", "cpus", "crowding", "machine_speed", "slowdown", "stretch", "wait_until"]

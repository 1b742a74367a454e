"""One trial's trace: the agent's reports, its rhythm, and the :class:`Script` the harness runs.

A family builds a :class:`Trial`, emits the agent's reports in order (``emit``: a tool call and its
output, or a note), marks where a loop starts (``loop``), and returns ``trial.script(actions)``:

* ``actions=True`` — the heartbeat carries ``action=`` (the tool call, in the trial's call style)
  and ``result=`` (its output); a report without a tool call goes as ``observation=``.
* ``actions=False`` — the same report as plain ``observation=`` text, laid out the way this
  trial's agent writes a command and its output (``$ cmd`` then the output, ``Ran `cmd`:`` …,
  or the output alone, as a wrapper that forwards stdout does).

Rhythm: the agent beats every 1–60 s (log-uniform), steadily, with jitter, or in bursts; long tool
calls are silences inside the lease (at most 40 % of it), or beats of a lease keeper with nothing
to say (every third of the lease); the lease is a round figure 3–10 × the beat interval.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Callable, TypeVar

from ..stalls import Script, Step
from .noise import N_DURATIONS, N_NUMS, N_STAMPS, duration, num, stamp
from .words import Names

Family = Callable[[random.Random, bool], Script]
T = TypeVar("T")

LEASES = (30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 900.0, 1200.0, 1800.0)
SILENCE = 0.4  # the longest silence, as a share of the lease


def registrars(healthy: dict[str, Family], loops: dict[str, Family]) -> tuple[Callable[[Family], Family], Callable[[Family], Family]]:
    """A corpus's two decorators: one registers a family in ``healthy``, the other in ``loops`` (a name
    once, in either)."""
    def into(registry: dict[str, Family]) -> Callable[[Family], Family]:
        def register(fn: Family) -> Family:
            assert fn.__name__ not in healthy and fn.__name__ not in loops, fn.__name__
            registry[fn.__name__] = fn
            return fn
        return register
    return into(healthy), into(loops)


HEALTHY: dict[str, Family] = {}
LOOPS: dict[str, Family] = {}
healthy, looping = registrars(HEALTHY, LOOPS)


@dataclass
class Beat:
    gap: float
    action: str | None
    result: str | None
    plain: str | None  # None: a lease keeper's beat with nothing to report
    note: str | None = None  # the agent's own words beside a tool call (sent as observation= too)
    units: tuple[float, float] | None = None
    wait: tuple[str, float] | None = None
    fail_after: bool = False


LAYOUTS: tuple[Callable[[str, str, str], str], ...] = (
    lambda tool, cmd, out: f"$ {cmd}\n{out}",
    lambda tool, cmd, out: f"{cmd}\n{out}",
    lambda tool, cmd, out: f"Ran `{cmd}`:\n{out}",
    lambda tool, cmd, out: f"Tool call: {cmd}\nOutput:\n{out}",
    lambda tool, cmd, out: f"{cmd} -> {out}",
    lambda tool, cmd, out: out,
    lambda tool, cmd, out: f"[{tool}] {cmd}\n{out}",
    lambda tool, cmd, out: f"> {cmd}\n\n{out}",
)
# (tool, its argument, the whole command as the agent would type it)
CALLS: tuple[Callable[[str, str, str], str], ...] = (
    lambda tool, arg, cmd: f"{tool}({arg!r})",
    lambda tool, arg, cmd: f"{tool.title().replace('_', '')}({json.dumps(arg)})",
    lambda tool, arg, cmd: f"{tool}: {arg}",
    lambda tool, arg, cmd: cmd,
    lambda tool, arg, cmd: json.dumps({"tool": tool, "input": arg}),
    lambda tool, arg, cmd: f"{tool} {arg}",
)


def pick_rate(rng: random.Random) -> float:
    return math.exp(rng.uniform(0.0, math.log(60.0)))


def lease_for(rng: random.Random, every: float) -> float:
    need = every * rng.uniform(3.0, 10.0)
    return next((x for x in LEASES if x >= need), LEASES[-1])


class Trial:
    """The reports of one trial and the clock they were written on."""

    def __init__(self, rng: random.Random, *, rate: float | None = None, style: str | None = None,
                 lease: float | None = None) -> None:
        self.rng = rng
        self.names = Names(rng)
        self.style = style or rng.choice(("steady", "jitter", "jitter", "bursty"))
        self.rate = rate if rate is not None else (rng.uniform(5.0, 60.0) if self.style == "bursty" else pick_rate(rng))
        scale = self.rate * (4.0 if self.style == "bursty" else 1.0)
        self.lease = lease if lease is not None else lease_for(rng, scale)
        self.now = rng.uniform(1_690_000_000.0, 1_760_000_000.0)  # the agent's wall clock
        self.ts_style = rng.randrange(N_STAMPS)
        self.dur_style = rng.randrange(N_DURATIONS)
        self.num_style = rng.randrange(N_NUMS)
        self.layout = LAYOUTS[rng.randrange(len(LAYOUTS))]
        self.call_style = CALLS[rng.randrange(len(CALLS))]
        self.neighbours = [rng.choice((5.0, 10.0, 15.0, 30.0, 60.0)) * rng.uniform(0.8, 1.2)
                           for _ in range(rng.choice((0, 0, 1, 1, 2)))]
        self.beats: list[Beat] = []
        self.loop_index: int | None = None
        self.period = 1
        self._burst = 0
        self._pending: float | None = None
        self._fixed: dict[object, object] = {}

    def fixed(self, key: object, make: Callable[[], T]) -> T:
        """A value drawn once per trial (a tool's version, a dependency's): the same on every later call."""
        if key not in self._fixed:
            self._fixed[key] = make()
        return self._fixed[key]  # type: ignore[return-value]

    # ------------------------------------------------------------------ time
    def gap(self) -> float:
        r = self.rng
        if self.style == "steady":
            g = self.rate * r.uniform(0.92, 1.08)
        elif self.style == "jitter":
            g = self.rate * math.exp(r.gauss(0.0, 0.35))
        elif self._burst > 0:
            self._burst -= 1
            g = r.uniform(0.3, 3.0)
        else:
            self._burst = r.randint(2, 8)
            g = self.rate * r.uniform(1.0, 4.0)
        return min(max(g, 0.2), SILENCE * self.lease)

    def long(self, lo: float = 0.15, hi: float = SILENCE) -> float:
        """A long tool call's silence: a share of the lease, never less than the usual beat."""
        return max(self.rng.uniform(lo, hi) * self.lease, min(self.rate * 1.5, SILENCE * self.lease))

    def advance(self, gap: float | None = None) -> float:
        g = self.gap() if gap is None else min(max(gap, 0.2), SILENCE * self.lease)
        self.now += g
        self._pending = (self._pending or 0.0) + g
        return g

    def keeper(self, total: float) -> None:
        """A long tool call under a lease keeper: beats with nothing to report, every third of the lease."""
        left = total
        while left > self.lease / 3:
            g = self.lease / 3 * self.rng.uniform(0.9, 1.0)
            self.advance(g)
            self.beats.append(Beat(self._pending or g, None, None, None))
            self._pending = None
            left -= g
        self.advance(max(left, 0.2))

    def ts(self) -> str:
        return stamp(self.now, self.ts_style)

    def dur(self, seconds: float) -> str:
        return duration(seconds, self.dur_style)

    def n(self, x: float) -> str:
        return num(x, self.num_style)

    # ------------------------------------------------------------------ reports
    def emit(self, cmd: str | None, out: str, *, tool: str = "bash", plain: str | None = None,
             note: str | None = None, units: tuple[float, float] | None = None,
             wait: tuple[str, float] | None = None, fail_after: bool = False, gap: float | None = None) -> None:
        """One report: ``cmd`` run with ``tool`` gave ``out`` (``cmd=None``: a note, ``out`` alone).

        The gap before it is drawn now unless :meth:`advance` already moved the clock."""
        if self._pending is None:
            self.advance(gap)
        assert self._pending is not None
        arg = cmd[len(tool) + 1:] if cmd is not None and cmd.startswith(tool + " ") else cmd
        action = None if cmd is None or arg is None else self.call_style(tool, arg, cmd)
        if plain is None:
            plain = out if cmd is None else self.layout(tool, cmd, out)
            if note:
                plain = f"{note}\n{plain}"
        self.beats.append(Beat(self._pending, action, None if cmd is None else out, plain, note, units, wait, fail_after))
        self._pending = None

    def loop(self, period: int = 1) -> None:
        """The loop starts with the next report (``period``: its cycle length, 1 for a plain repeat)."""
        self.loop_index = len(self.beats)
        self.period = period

    def script(self, actions: bool) -> Script:
        steps: list[Step] = []
        reported, attempt = 0, 0
        start: tuple[int, int] | None = None
        for i, b in enumerate(self.beats):
            if i == self.loop_index:
                start = (attempt, reported)
            if b.plain is None:
                steps.append(Step(b.gap, None))
                continue
            if actions and b.action is not None:
                steps.append(Step(b.gap, b.note, b.units, b.wait, b.fail_after, action=b.action, result=b.result))
            else:
                steps.append(Step(b.gap, b.plain, b.units, b.wait, b.fail_after))
            reported += 1
            if b.fail_after:
                attempt, reported = attempt + 1, 0
        within = max(5, self.period + 2)
        return Script(steps, self.lease, loop_start=start, neighbours=list(self.neighbours),
                      within=within if start is not None else 5)


def pick(rng: random.Random, *options: str) -> str:
    return rng.choice(options)


def tail(lines: list[str], rng: random.Random, keep: tuple[int, int] = (12, 40)) -> str:
    """The end of a long output, as agents truncate it."""
    k = rng.randint(*keep)
    if len(lines) <= k:
        return "\n".join(lines)
    cut = len(lines) - k
    return "\n".join([rng.choice((f"... ({cut} lines omitted)", f"[{cut} more lines]", "…"))] + lines[-k:])

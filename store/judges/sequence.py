"""Repeats and cycles in a sequence of observation identities (pure, no database).

``judge_sequence`` reads a sequence of identities (oldest first) for a repeat (period 1) or a
cycle (period 2-8) ending at the newest observation; ``store/reading/signals.py`` turns it into
``repeating``. ``retried_cycle`` (the same steps again into the same failure), ``is_rhythm`` (a
cycle that is the node's rhythm), ``same_action_run`` and ``usual_news`` (what this node's steps
usually bring) read the observations themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence, TypeVar

from store.views import FLAG_FAILED

MAX_PERIOD = 8


class Seen(Protocol):
    """What these judgements read of an observation (``reading/signals.Obs``)."""

    @property
    def digest(self) -> str: ...
    @property
    def new_units(self) -> int: ...
    @property
    def flags(self) -> int: ...
    @property
    def content(self) -> str | None: ...
    @property
    def action_key(self) -> str | None: ...


S = TypeVar("S", bound=Seen)


@dataclass(frozen=True)
class Repeat:
    period: int  # 1: the same observation again; 2-8: a cycle over that many
    run: int  # how many observations in a row repeat the one ``period`` before them
    start: int  # index (in the sequence given) of the first observation of the repeating stretch

    @property
    def observations(self) -> int:
        return self.run + self.period


def judge_sequence(digests: Sequence[str], *, min_repeat: int = 3, max_period: int = MAX_PERIOD,
                   min_cycle_run: int = 2, long_cycle_run: int = 3, long_from: int = 5) -> Repeat | None:
    """The repeat ending at the newest observation, if there is one worth an alarm: the same
    identity ``min_repeat`` times in a row (period 1), or a cycle of 2..``max_period`` distinct
    identities whose newest ``min_cycle_run`` observations (``long_cycle_run`` from a period of
    ``long_from``) each repeat the one a period before. The shortest period wins."""
    n = len(digests)
    for p in range(1, max_period + 1):
        run = 0
        while run < n - p and digests[n - 1 - run] == digests[n - 1 - run - p]:
            run += 1
        if p == 1:
            if run + 1 >= min_repeat:
                return Repeat(1, run, n - 1 - run)
            continue
        need = long_cycle_run if p >= long_from else min_cycle_run
        if run >= need and len(set(digests[n - p:])) == p:
            return Repeat(p, run, n - run - p)
    return None


def same_action_run(obs: Sequence[S]) -> list[S]:
    """The newest run of observations taking one action (by its key)."""
    i = len(obs)
    while i > 0 and obs[i - 1].action_key and obs[i - 1].action_key == obs[-1].action_key:
        i -= 1
    return list(obs[i:])


def usual_news(obs: Iterable[Seen]) -> int:
    """How many new lines this node's steps usually bring: the median over those that brought
    some (0 while fewer than 3 did: its normal is not known yet)."""
    brought = sorted(o.new_units for o in obs if o.new_units > 0)
    return brought[len(brought) // 2] if len(brought) >= 3 else 0


def is_rhythm(obs: Sequence[Seen], rep: Repeat) -> bool:
    """A cycle that is the node's rhythm, not a loop: repeats in form only (what varied in them — a
    test's name, a function's — was news), or a cycle caught before it came round whole (some of its
    steps repeat, others not yet) whose repeating steps the node already took before the cycle began,
    other work between (after each item, the same rerun and the same note: the items change)."""
    if rep.period <= 1 or rep.run >= rep.period:
        return False
    before = {o.digest for o in obs[:rep.start]}
    return any(o.digest in before for o in obs[len(obs) - rep.run:])


def retried_cycle(obs: Sequence[Seen], max_period: int, run: int) -> Repeat | None:
    """The same steps again — a cycle of 2..``max_period`` actions whose newest ``run`` each take
    the action a period before — where a step failed again with the same result it failed with a
    period before: retrying the same steps, whatever the other steps' output says (a reworded
    draft, a log that moved), brings back the same failure. Caught at its period + ``run``."""
    n = len(obs)
    for p in range(2, max_period + 1):
        if n < p + run:
            break
        window = range(n - run, n)
        if any(not obs[i].action_key or obs[i].action_key != obs[i - p].action_key for i in window):
            continue
        if any(obs[i].flags & FLAG_FAILED and obs[i - p].flags & FLAG_FAILED and obs[i].content is not None
               and obs[i].content == obs[i - p].content for i in window):
            return Repeat(p, run, n - run - p)
    return None


__all__ = ["MAX_PERIOD", "Repeat", "Seen", "is_rhythm", "judge_sequence", "retried_cycle", "same_action_run", "usual_news"]

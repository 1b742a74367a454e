"""Repeats and cycles in a sequence of observation identities (pure, no database).

``judge_sequence`` reads a sequence of identities (oldest first) for a repeat (period 1) or a
cycle (period 2-8) ending at the newest observation; ``store/reading/signals.py`` turns it into
``repeating``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MAX_PERIOD = 8


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


__all__ = ["MAX_PERIOD", "Repeat", "judge_sequence"]

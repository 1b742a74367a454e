"""A position trend is never extrapolated past the positions its samples came from: 14 commits
whose durations rose with their position (1.2 s → 6 s, as the console benchmark writes them) once
gave a node at position 99,999 of the same task a P80 of 1e27 s, then inf — which took the console
down and made ``warden status --json`` print ``Infinity``."""

from __future__ import annotations

import math

from store.estimation import estimates as E
from store.estimation.durations import DurationHistory


def test_a_position_trend_stays_within_the_positions_seen():
    h = DurationHistory()
    for i in range(14):
        h.add("tool", 1.2 if i < 10 else 6.0 + i, "big", i)
    model = h.model("tool")
    assert model.pos_slope > 0 and model.pos_lo == 0 and model.pos_hi == 13  # a trend was found
    near = E.base_dist("tool", None, h, task_id="big", position=13)
    far = E.base_dist("tool", None, h, task_id="big", position=99_999)
    assert near is not None and far is not None
    p80_near, p80_far = E.dist_estimate(near).p80_s, E.dist_estimate(far).p80_s
    assert math.isfinite(p80_far) and p80_far == p80_near  # the last position seen, not beyond
    est = E.approximate_estimate([(far, 99_000)], [], 4)
    assert est.p80_s is not None and math.isfinite(est.p80_s)

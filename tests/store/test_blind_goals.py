"""The stall signals held to their goals on the blind corpus (``tests/support/blind``), on fixed seeds.

The goals (docs/estimates.md, "The blind corpus"): every loop family caught within
``max(5, period + 2)`` loop observations in ≥ 95 % of trials; every healthy family with a stall
alarm in ≤ 1 % of trials; both with and without ``action``/``result``. Here each family runs
``TRIALS`` trials of each form on a fixed seed, so the goal reads: no healthy trial alarmed, every
loop trial caught in time, no loop trial alarmed before its loop.

A family the detector does not yet meet on these seeds is listed in ``MISSES`` with what was
measured on 4 trials per form (the table in docs/estimates.md): its test is a strict expected
failure, so the day it is met here it fails until it leaves the list. A family met on these
2 trials but not on 4 (the table says which) is not listed. The corpus is held out: a family is
never changed to pass here.
"""

from __future__ import annotations

import pytest

from tests.support.blind import HEALTHY, LOOPS
from tests.support.blind.goals import early_alarms, family_params
from tests.support.blind.runner import run_blind

SEED = 1
TRIALS = 2

# family → what was measured when it missed its goal (seed 1, 4 trials per form; docs/estimates.md)
MISSES: dict[str, str] = {
    "ci_rerun_same_failure": "caught in time 100% (action) / 75% (plain), median first alarm 4 / 5, alarmed before the loop 0% / 50%",
    "edit_no_match": "caught in time 75% (action) / 75% (plain), median first alarm 5 / 3",
    "error_moves_line_col": "caught in time 75% (action) / 50% (plain), median first alarm 4 / 6",
    "fix_revert_oscillation": "caught in time 50% (action) / 100% (plain), median first alarm 7 / 6",
    "infinite_scroll_stuck": "caught in time 50% (action) / 100% (plain), median first alarm 6 / 4",
    "log_tail_reworded": "caught in time 50% (action) / 50% (plain), median first alarm 7 / 6",
    "paywalled_sources": "caught in time 50% (action) / 25% (plain), median first alarm 6 / 10",
    "rereading_same_pages": "caught in time 50% (action) / 75% (plain), median first alarm 6 / 5",
    "thinking_fresh_words": "caught in time 100% (action) / 75% (plain), median first alarm 4 / 5",
}


@pytest.mark.parametrize("name", family_params(sorted(HEALTHY), MISSES))
def test_healthy_family_raises_no_stall_alarm(tmp_path, name: str) -> None:
    alarmed = early_alarms(str(tmp_path / "b.db"), name, seed=SEED, trials=TRIALS)
    assert all(not v for v in alarmed.values()), alarmed


@pytest.mark.parametrize("name", family_params(sorted(LOOPS), MISSES))
def test_loop_family_is_caught_within_its_deadline(tmp_path, name: str) -> None:
    rep = run_blind(str(tmp_path / "b.db"), trials=TRIALS, seed=SEED, only=(name,))
    for f in rep.figures:
        firsts = [(o.within, o.first_alarm) for o in f.outcomes]
        assert f.caught == f.trials, (f.form, "caught at (within, first alarm):", firsts)
        assert f.alarmed == 0, (f.form, [o.early_alarms for o in f.outcomes])

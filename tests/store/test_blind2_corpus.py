"""The second blind corpus itself (``tests/support/blind2``): its size, names of its own, noise that moves
inside its loops, and its runner end to end. Its traces' shape (a fresh trace per seed, the two forms,
loops marked and run past their deadline) is checked with the first corpus's in test_blind_corpus.py.

Nothing here asserts what the stall signals make of the corpus: a family changes only when it is
unrealistic, never because of a score.
"""

from __future__ import annotations

import random

import pytest

from tests.support.blind import HEALTHY, LOOPS
from tests.support.blind.runner import FORMS
from tests.support.blind2 import HEALTHY2, LOOPS2
from tests.support.blind2.runner import run_blind2
from tests.support.stalls import Script

NAMES = sorted(HEALTHY2) + sorted(LOOPS2)


def make(name: str, seed: int, actions: bool) -> Script:
    return (HEALTHY2.get(name) or LOOPS2[name])(random.Random(seed), actions)


def test_at_least_20_healthy_and_15_loop_families_none_from_the_first_corpus() -> None:
    assert len(HEALTHY2) >= 20, sorted(HEALTHY2)
    assert len(LOOPS2) >= 15, sorted(LOOPS2)
    assert not set(HEALTHY2) & set(LOOPS2)
    assert not (set(HEALTHY2) | set(LOOPS2)) & (set(HEALTHY) | set(LOOPS))


def test_the_noise_moves_from_one_loop_report_to_the_next() -> None:
    """A loop repeats its failure, not its bytes: consecutive loop reports differ in at least most families."""
    same = []
    for name in LOOPS2:
        s = make(name, 3, True)
        texts = [(st.action, st.result) for st in s.steps if st.reports]
        tail = texts[s.loop_start[1]:] if s.loop_start else []
        if len(set(tail)) < len(tail) * 0.8:
            same.append(name)
    assert len(same) <= len(LOOPS2) // 4, same


@pytest.mark.slow
def test_run_blind2_runs_every_family_in_both_forms(tmp_path) -> None:
    rep = run_blind2(str(tmp_path / "blind2.db"), trials=1, seed=20_261_207)
    assert [(f.name, f.form) for f in rep.figures] == [
        (n, form) for n in list(HEALTHY2) + list(LOOPS2) for form in FORMS]
    assert all(f.trials == 1 and f.loop == (f.name in LOOPS2) for f in rep.figures)
    table = rep.table()
    assert all(f"| {n} | {form} |" in table for n in NAMES for form in FORMS)

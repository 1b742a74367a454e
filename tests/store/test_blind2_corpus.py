"""The second blind corpus itself (``tests/support/blind2``): its size, its two forms, a fresh trace per
seed, its loops marked where they start and long enough past their deadline, and its runner end to end.

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
SEEDS = range(6)


def make(name: str, seed: int, actions: bool) -> Script:
    return (HEALTHY2.get(name) or LOOPS2[name])(random.Random(seed), actions)


def trace(script: Script) -> list[tuple]:
    return [(s.gap, s.text, s.action, s.result, s.units, s.wait, s.fail_after) for s in script.steps]


def reports(script: Script) -> int:
    return sum(1 for s in script.steps if s.reports)


def test_at_least_20_healthy_and_15_loop_families_none_from_the_first_corpus() -> None:
    assert len(HEALTHY2) >= 20, sorted(HEALTHY2)
    assert len(LOOPS2) >= 15, sorted(LOOPS2)
    assert not set(HEALTHY2) & set(LOOPS2)
    assert not (set(HEALTHY2) | set(LOOPS2)) & (set(HEALTHY) | set(LOOPS))


@pytest.mark.parametrize("name", NAMES)
def test_each_seed_writes_another_trace_and_the_same_seed_the_same(name: str) -> None:
    for actions in (True, False):
        traces = [repr(trace(make(name, seed, actions))) for seed in SEEDS]
        assert len(set(traces)) == len(traces), f"{name}: two seeds wrote the same trace"
        assert repr(trace(make(name, 2, actions))) == traces[2], f"{name}: not reproducible from its seed"


@pytest.mark.parametrize("name", NAMES)
def test_both_forms_report_the_same_work(name: str) -> None:
    for seed in SEEDS:
        act, plain = make(name, seed, True), make(name, seed, False)
        assert any(s.action and s.result is not None for s in act.steps), name
        assert all(s.action is None and s.result is None for s in plain.steps), name
        assert all(s.text is None or s.text.strip() for s in act.steps + plain.steps), f"{name}: an empty report"
        assert reports(plain) >= 5 and reports(act) == reports(plain), name
        assert [s.gap for s in act.steps] == [s.gap for s in plain.steps]
        assert (act.lease_s, act.loop_start, act.within) == (plain.lease_s, plain.loop_start, plain.within)
        assert all(0 < s.gap <= 0.4 * plain.lease_s for s in plain.steps), name
        assert plain.lease_s >= 30


@pytest.mark.parametrize("name", NAMES)
def test_loops_say_where_they_start_and_run_past_their_deadline(name: str) -> None:
    for seed in SEEDS:
        s = make(name, seed, False)
        if name in HEALTHY2:
            assert s.loop_start is None
            continue
        assert s.loop_start is not None and s.within >= 5
        attempt, before = s.loop_start
        assert before >= 2, f"{name}: a loop comes after some real work"
        seen, in_attempt, k = 0, 0, 0
        for st in s.steps:
            if st.reports and k == attempt:
                in_attempt += 1
                seen += in_attempt > before
            assert not (st.fail_after and k == attempt and in_attempt > before), "a loop ends its attempt"
            k += st.fail_after
        assert seen >= s.within + 3, (name, seed, seen, s.within)


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

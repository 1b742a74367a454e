"""The blind corpus itself (``tests/support/blind``): its size, its two forms, a fresh trace per seed,
its loops marked where they start, and ``run_blind`` end to end.

Nothing here asserts what the stall signals make of the corpus: that is measured against the goals
elsewhere, and a family changes only when it is unrealistic, never because of a score.
"""

from __future__ import annotations

import random

import pytest

from tests.support.blind import HEALTHY, LOOPS
from tests.support.blind.runner import FORMS, run_blind
from tests.support.stalls import Script

NAMES = sorted(HEALTHY) + sorted(LOOPS)
SEEDS = range(6)


def make(name: str, seed: int, actions: bool) -> Script:
    return (HEALTHY.get(name) or LOOPS[name])(random.Random(seed), actions)


def trace(script: Script) -> list[tuple]:
    return [(s.gap, s.text, s.action, s.result, s.units, s.wait, s.fail_after) for s in script.steps]


def reports(script: Script) -> int:
    return sum(1 for s in script.steps if s.reports)


def test_there_are_at_least_40_healthy_and_25_loop_families() -> None:
    assert len(HEALTHY) >= 40, sorted(HEALTHY)
    assert len(LOOPS) >= 25, sorted(LOOPS)
    assert not set(HEALTHY) & set(LOOPS)


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
        # the action form carries tool calls and their output; the plain form text only
        assert any(s.action and s.result is not None for s in act.steps), name
        assert all(s.action is None and s.result is None for s in plain.steps), name
        assert reports(plain) >= 5 and reports(act) == reports(plain), name
        # one trace, two forms: the same rhythm, lease and loop
        assert [s.gap for s in act.steps] == [s.gap for s in plain.steps]
        assert (act.lease_s, act.loop_start, act.within) == (plain.lease_s, plain.loop_start, plain.within)
        # heartbeats 1–60 s apart, or longer silences kept inside the lease
        assert all(0 < s.gap <= 0.4 * plain.lease_s for s in plain.steps), name
        assert plain.lease_s >= 30


@pytest.mark.parametrize("name", NAMES)
def test_loops_say_where_they_start_and_healthy_work_has_none(name: str) -> None:
    for seed in SEEDS:
        s = make(name, seed, False)
        if name in HEALTHY:
            assert s.loop_start is None
            continue
        assert s.loop_start is not None and s.within >= 5
        attempt, before = s.loop_start
        # the loop runs past its deadline: at least `within` reports after its start, all in its attempt
        seen, in_attempt, k = 0, 0, 0
        for st in s.steps:
            if st.reports and k == attempt:
                in_attempt += 1
                seen += in_attempt > before
            assert not (st.fail_after and k == attempt and in_attempt > before), "a loop ends its attempt"
            k += st.fail_after
        assert seen >= s.within + 2, (name, seed, seen, s.within)


@pytest.mark.slow
def test_run_blind_runs_every_family_in_both_forms(tmp_path) -> None:
    path = str(tmp_path / "blind.db")
    rep = run_blind(path, trials=1, seed=20_240_601)
    assert [(f.name, f.form) for f in rep.figures] == [(n, form) for n in list(HEALTHY) + list(LOOPS) for form in FORMS]
    assert all(f.trials == 1 and f.loop == (f.name in LOOPS) for f in rep.figures)
    for f in rep.figures:
        o = f.outcomes[0]
        assert o.name == f.name and o.loop == f.loop
        if f.loop:
            assert o.within >= 5
    table = rep.table()
    assert all(f"| {n} | {form} |" in table for n in NAMES for form in FORMS)
    assert rep.seconds > 0
    with pytest.raises(FileExistsError):
        run_blind(path, trials=1, seed=1, only=(NAMES[0],))
    with pytest.raises(ValueError):
        run_blind(str(tmp_path / "other.db"), trials=1, seed=1, forms=("prose",))

"""The two blind corpora themselves (``tests/support/blind``, ``tests/support/blind2``): one set of
shape checks over both — a fresh trace per seed and the same for the same seed, the two forms of
one trace, loops marked where they start and run past their deadline, healthy work with none — and
the first corpus's size and ``run_blind`` end to end (the second's are in test_blind2_corpus.py).

Nothing here asserts what the stall signals make of a corpus: that is measured against the goals
elsewhere, and a family changes only when it is unrealistic, never because of a score.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from tests.support.blind import HEALTHY, LOOPS
from tests.support.blind.runner import FORMS, run_blind
from tests.support.blind.trace import Family
from tests.support.blind2 import HEALTHY2, LOOPS2
from tests.support.stalls import Script

SEEDS = range(6)


@dataclass(frozen=True)
class Corpus:
    healthy: dict[str, Family]
    loops: dict[str, Family]
    warm: int  # a loop comes after at least this many reports of real work
    past: int  # a loop runs at least this many reports past its deadline
    worded: bool  # every report says something (no empty text)

    def make(self, name: str, seed: int, actions: bool) -> Script:
        return (self.healthy.get(name) or self.loops[name])(random.Random(seed), actions)


CORPORA = {"blind": Corpus(HEALTHY, LOOPS, warm=0, past=2, worded=False),
           "blind2": Corpus(HEALTHY2, LOOPS2, warm=2, past=3, worded=True)}
NAMES = sorted(HEALTHY) + sorted(LOOPS)
FAMILIES = [pytest.param(c, n, id=f"{c}-{n}") for c, k in CORPORA.items() for n in sorted(k.healthy) + sorted(k.loops)]


def trace(script: Script) -> list[tuple]:
    return [(s.gap, s.text, s.action, s.result, s.units, s.wait, s.fail_after) for s in script.steps]


def reports(script: Script) -> int:
    return sum(1 for s in script.steps if s.reports)


def test_there_are_at_least_40_healthy_and_25_loop_families() -> None:
    assert len(HEALTHY) >= 40, sorted(HEALTHY)
    assert len(LOOPS) >= 25, sorted(LOOPS)
    assert not set(HEALTHY) & set(LOOPS)


@pytest.mark.parametrize("corpus, name", FAMILIES)
def test_each_seed_writes_another_trace_and_the_same_seed_the_same(corpus: str, name: str) -> None:
    c = CORPORA[corpus]
    for actions in (True, False):
        traces = [repr(trace(c.make(name, seed, actions))) for seed in SEEDS]
        assert len(set(traces)) == len(traces), f"{name}: two seeds wrote the same trace"
        assert repr(trace(c.make(name, 2, actions))) == traces[2], f"{name}: not reproducible from its seed"


@pytest.mark.parametrize("corpus, name", FAMILIES)
def test_both_forms_report_the_same_work(corpus: str, name: str) -> None:
    c = CORPORA[corpus]
    for seed in SEEDS:
        act, plain = c.make(name, seed, True), c.make(name, seed, False)
        # the action form carries tool calls and their output; the plain form text only
        assert any(s.action and s.result is not None for s in act.steps), name
        assert all(s.action is None and s.result is None for s in plain.steps), name
        if c.worded:
            assert all(s.text is None or s.text.strip() for s in act.steps + plain.steps), f"{name}: an empty report"
        assert reports(plain) >= 5 and reports(act) == reports(plain), name
        # one trace, two forms: the same rhythm, lease and loop
        assert [s.gap for s in act.steps] == [s.gap for s in plain.steps]
        assert (act.lease_s, act.loop_start, act.within) == (plain.lease_s, plain.loop_start, plain.within)
        # heartbeats 1–60 s apart, or longer silences kept inside the lease
        assert all(0 < s.gap <= 0.4 * plain.lease_s for s in plain.steps), name
        assert plain.lease_s >= 30


@pytest.mark.parametrize("corpus, name", FAMILIES)
def test_loops_say_where_they_start_and_run_past_their_deadline(corpus: str, name: str) -> None:
    c = CORPORA[corpus]
    for seed in SEEDS:
        s = c.make(name, seed, False)
        if name in c.healthy:
            assert s.loop_start is None
            continue
        assert s.loop_start is not None and s.within >= 5
        attempt, before = s.loop_start
        assert before >= c.warm, f"{name}: a loop comes after some real work"
        # the loop runs past its deadline: reports after its start, all in its attempt
        seen, in_attempt, k = 0, 0, 0
        for st in s.steps:
            if st.reports and k == attempt:
                in_attempt += 1
                seen += in_attempt > before
            assert not (st.fail_after and k == attempt and in_attempt > before), "a loop ends its attempt"
            k += st.fail_after
        assert seen >= s.within + c.past, (name, seed, seen, s.within)


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

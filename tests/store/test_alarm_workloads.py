"""The report, rhythm and duration workloads as CI checks, on fixed seeds through the real Ledger API
(tests/support/reports.py, rhythm.py, durations.py). The bench (tests/bench/bench_estimates.py
--workloads) runs the same families with more trials for the figures in docs/estimates.md.

* progress whose text changes only in a number (with ``units_done`` rising, or stating its total),
  numbered generated files, and healthy agents of every style: no stall alarm at all;
* the same failing search with other queries: caught within 5 observations (every trial); a
  failure retried in other words: ≥ 90 % within 5; a growing log whose new tail says nothing new:
  every trial within 5; cycles of 5-8 steps: within two periods + 2;
* bursty and other healthy heartbeat rhythms: no ``heartbeat_stale``, no ``orphaned``; a declared
  wait across a park of 5-40 minutes: no ``orphaned``, ``overdue`` or ``heartbeat_stale``;
* a task 3× slower than its kind's history: its figures hold ≥ 75 % where labelled ``high``, or
  are not ``high``; a rich bimodal history: ≥ 70 % of figures labelled medium/high, and those hold.
"""

from __future__ import annotations

import pytest

from tests.support import durations as D
from tests.support import reports as R
from tests.support import rhythm as RH
from tests.support import stalls as S


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return S.run_stalls(str(tmp_path_factory.mktemp("reports") / "r.db"), trials=TRIALS, seed=25,
                        fams=R.families())


TRIALS = 2  # per family here (seconds); the bench runs 20 or more (docs/estimates.md "Evaluation")


def _family(rep: S.StallReport, name: str) -> list[S.Outcome]:
    out = rep.by_family()[name]
    assert len(out) == TRIALS
    return out


def test_every_family_ran(reports):
    assert set(reports.by_family()) == set(R.families())


@pytest.mark.parametrize("name", [n for n in R.families() if n.startswith("progress:")])
def test_progress_and_healthy_work_raise_no_stall_alarm(reports, name):
    for o in _family(reports, name):
        assert not o.early_alarms and not o.kinds, (name, o.early_alarms, o.kinds)


@pytest.mark.parametrize("name", ["loop: search: other queries, the same empty result",
                                  "loop: search: other queries, empty results worded differently",
                                  "loop: tool calls: other arguments, the same error",
                                  "loop: growing log, reworded tail", "loop: growing log (tail only), reworded",
                                  "loop: the same action, the same result"])
def test_loops_that_learn_nothing_are_caught_within_five(reports, name):
    for o in _family(reports, name):
        assert o.caught() and not o.early_alarms, (name, o.first_alarm, o.early_alarms)


def test_a_failure_retried_in_other_words_is_caught_within_five(reports):
    trials = [o for name, os_ in reports.by_family().items() if "in other words" in name for o in os_]
    assert len(trials) == 3 * TRIALS and all(not o.early_alarms for o in trials)
    assert sum(o.caught() for o in trials) / len(trials) >= 0.9, [(o.name, o.first_alarm) for o in trials]


@pytest.mark.parametrize("name", list(R.PERIOD))
def test_long_cycles_are_caught_within_two_periods_and_two(reports, name):
    for o in _family(reports, f"loop: {name}"):
        assert o.within == 2 * R.PERIOD[name] + 2
        assert o.caught() and not o.early_alarms, (name, o.first_alarm, o.early_alarms)


# ---------------------------------------------------------------------- rhythms and parks
@pytest.fixture(scope="module")
def rhythms(tmp_path_factory):
    return RH.run_rhythms(str(tmp_path_factory.mktemp("rhythm") / "r.db"), trials=1, seed=25)


def test_healthy_rhythms_are_never_stale_nor_orphaned(rhythms):
    beats, _ = rhythms
    assert {o.name for o in beats} == set(RH.HEALTHY)
    assert [(o.name, o.false) for o in beats if o.false] == []


def test_a_hang_after_a_steady_rhythm_is_stale_before_the_lease_ends(rhythms):
    beats, _ = rhythms
    hung = [o for o in beats if o.hang and o.name in ("steady with jitter", "LeaseKeeper, every third of the lease")]
    assert hung and all(o.stale_at is not None and o.lease_left is not None and o.lease_left > 0 for o in hung)


def test_a_declared_wait_pauses_with_the_park(rhythms):
    _, parks = rhythms
    assert len(parks) == 2 and all(p.finished for p in parks)
    assert [(p.name, p.false) for p in parks if p.false] == []


# ---------------------------------------------------------------------- confidence labels
SLOW = {"task 3× slower than its history, σ0.5": 3, "task 3× slower than its history, σ1.0": 3,
        "task 2-4× slower, σ0.7, 60 nodes on 3 workers": 2}


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    d = tmp_path_factory.mktemp("slow")
    return {name: D.run_workload(D.WORKLOADS[name], trials=n, seed=25, path=str(d / f"{i}.db"))
            for i, (name, n) in enumerate(SLOW.items())}


def test_a_task_slower_than_its_history_is_not_labelled_high_unless_it_holds(slow):
    checks = [c for rep in slow.values() for c in rep.checks if c["p80_s"] is not None]
    assert len(checks) == 5 * sum(SLOW.values())
    high = [c for c in checks if c["label"] == "high"]
    # pooled over every trial: high holds ≥ 75 % — or is not given
    assert not high or sum(c["actual_s"] <= c["p80_s"] for c in high) / len(high) >= 0.75, len(high)
    # the first 10 % of its nodes already show it: not high there
    assert [c["workload_trial"] for c in checks if c["stage"] == 0.10 and c["label"] == "high"] == []
    # and the label says why
    assert any("slower than its history" in " ".join(c["why"]) for c in checks)


@pytest.fixture(scope="module")
def bimodal(tmp_path_factory):
    return D.run_workload(D.WORKLOADS["rich bimodal history (20 s / 200 s)"], trials=6, seed=25,
                          path=str(tmp_path_factory.mktemp("bimodal") / "d.db"))


def test_labels_on_a_rich_bimodal_history_commit_where_they_hold(bimodal):
    checks = [c for c in bimodal.checks if c["p80_s"] is not None]
    sure = [c for c in checks if c["label"] in ("medium", "high")]
    assert len(checks) == 30 and len(sure) / len(checks) >= 0.70, (len(sure), len(checks))
    assert sum(c["actual_s"] <= c["p80_s"] for c in sure) / len(sure) >= 0.70

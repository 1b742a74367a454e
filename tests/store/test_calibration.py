"""Calibration on a small seeded workload (tests/support/sim.py): P80 coverage, loop detection, no alarm
on slow-but-progressing nodes. The workload is seeded, so the figures are the same on every run;
the bench (tests/bench/bench_estimates.py) runs the larger workload quoted in docs/estimates.md."""

from __future__ import annotations

import pytest

from tests.support.sim import SimConfig, run_simulation

CONFIG = SimConfig(seed=1, tasks=14, warmup_tasks=3)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return run_simulation(str(tmp_path_factory.mktemp("sim") / "sim.db"), CONFIG)


def test_the_workload_has_what_it_claims(report):
    assert len({c["task"] for c in report.checks}) == CONFIG.tasks - CONFIG.warmup_tasks
    assert len(report.checks) == 3 * (CONFIG.tasks - CONFIG.warmup_tasks)
    assert len(report.loops) >= 5 and sum(1 for h in report.healthy if h["slow"]) >= 5


def test_task_p80_coverage_is_calibrated(report):
    assert 0.70 <= report.coverage() <= 0.90, report.summary()
    assert report.coverage(which="p50_s") < report.coverage()  # the P50 is not a disguised P80


def test_injected_loops_are_detected_within_five_observations(report):
    assert report.recall(within=5) == 1.0, report.loops


def test_no_alarm_on_slow_but_progressing_nodes(report):
    slow = [h for h in report.healthy if h["slow"]]
    assert [h for h in slow if h["alarms"]] == []
    assert report.false_alarm_rate() <= 0.02

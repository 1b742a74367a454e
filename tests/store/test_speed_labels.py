"""Confidence labels that mean what they say, on tasks like their history and on tasks 2-4× slower
than it (``tests/support/durations.py`` ``speed``; docs/estimates.md "A task's own speed").

Each check is a task's P80 at 10 / 25 / 50 / 75 % of its nodes finished, with its *chance* of
holding: the share of 40 fresh draws of its pending nodes whose remaining time stayed within it (a
late figure rests on a few draws, so whether it held once says little). Per stage and speed, with
40 trials a speed (fewer, and a cell's mean swings with one check: a chance ranges 0-1):

* ``medium`` holds ≥ 70 % on average, ``high`` ≥ 75 % — on tasks 2-4× slower than their history too;
* a slower task is labelled again once its own finished nodes show its speed;
* ``high`` is not withheld on tasks like their history once their runs agree with it.

Pure functions on a fixed seed the thresholds were not tuned on (calibration: seeds 1001-1002):
nothing here depends on the machine's speed.
"""

from __future__ import annotations

import pytest

from tests.support import durations as D

STAGES = (0.10, 0.25, 0.50, 0.75)
TRIALS = 40
SEED = 38
PROMISE = {"medium": 0.70, "high": 0.75}
SPEEDS = ("like its history", "2× slower", "3× slower", "4× slower")


@pytest.fixture(scope="module", params=SPEEDS)
def speed(request):
    name = request.param
    return name, D.expected_coverage(D.speed(D.SPEEDS[name]), trials=TRIALS, seed=SEED, draws=40, stages=STAGES)


def _cells(checks):
    out: dict[tuple[float, str], list[float]] = {}
    for c in checks:
        out.setdefault((c["stage"], c["label"]), []).append(c["chance"])
    return out


def test_every_stage_was_checked(speed):
    name, checks = speed
    assert {c["stage"] for c in checks} == set(STAGES), name
    assert len(checks) >= TRIALS * len(STAGES) - 4, (name, len(checks))


# Not met yet, held as a strict expected failure until mended: a task 2× slower whose runs read
# like its history, or whose speed its runs pin within ±×1.1, keeps its kind's high — on this seed 8
# such figures held 56 % (docs/estimates.md "Labels on tasks faster, like or slower").
MISSED = {("2× slower", "high")}


@pytest.mark.parametrize("label", sorted(PROMISE))
def test_a_label_holds_what_it_promises_at_every_stage(speed, label, request):
    name, checks = speed
    if (name, label) in MISSED:
        request.applymarker(pytest.mark.xfail(strict=True, reason="high on a task 2× slower: 56 % on this seed"))
    bad = []
    for (stage, got), chances in sorted(_cells(checks).items()):
        if got == label and len(chances) >= 5 and sum(chances) / len(chances) < PROMISE[label]:
            bad.append((stage, round(sum(chances) / len(chances), 2), len(chances)))
    pooled = [c["chance"] for c in checks if c["label"] == label]
    assert not bad, (name, label, bad)
    assert not pooled or sum(pooled) / len(pooled) >= PROMISE[label] + 0.03, (name, label, len(pooled))


def test_a_slower_task_is_labelled_once_its_runs_show_its_speed(speed):
    """From half-way, two in five of a slower task's figures or more are medium or high (at its own
    speed; it was low throughout)."""
    name, checks = speed
    late = [c for c in checks if c["stage"] >= 0.50]
    assert sum(c["label"] in ("medium", "high") for c in late) >= 0.4 * len(late), (name, len(late))


def test_high_is_given_on_tasks_like_their_history(speed):
    """Not withheld where its kinds earned it: from the 25 % stage, a third of the figures of a task
    like its history are high (the rest rest on a kind whose own replayed P80s held too seldom or
    were too few — a short history split between two kinds: medium or low, whatever the task's
    runs say; docs/estimates.md)."""
    name, checks = speed
    if D.SPEEDS[name] != 1.0:
        return
    later = [c for c in checks if c["stage"] >= 0.25]
    assert sum(c["label"] == "high" for c in later) >= 0.33 * len(later), [(c["stage"], c["label"]) for c in later]

"""What a loop is not saved by: progress is a number moving on to a value it has not had lately, in
the same sort of report (a note's figures do not continue a tool's count), and a page seen again is
not smaller than itself because it repeats one of its sentences."""

from __future__ import annotations

import pytest

from store.judges.fields import progress_marks
from store.judges.novelty import Tracker
from tests.support.loop_alarms import loops, start

PAGE = ("The quarterly report covers three regions and their sales.\n"
        "Sales rose in the northern region after the new depot opened.\n"
        "Sales rose in the northern region after the new depot opened.\n"
        "The southern region stayed flat through the whole year.")
NOTE = "So far: the northern region grew faster than the southern one."


@pytest.fixture
def claim(ledger):
    return start(ledger)


def test_a_page_read_again_between_the_same_notes_is_a_loop_not_progress(ledger, clock, claim):
    for i, (url, page) in enumerate([("https://example.org/a", "Wind farms produce more in winter.\nStorage costs fell."),
                                     ("https://example.org/b", "Grid losses depend on distance.\nCables age in heat.")]):
        clock.advance(5)
        ledger.heartbeat(claim, action=f"fetch('{url}')", result=page)
    firsts = []
    for i in range(8):
        clock.advance(5)
        if i % 2 == 0:
            ledger.heartbeat(claim, action="fetch('https://example.org/report')", result=PAGE)
        else:
            ledger.heartbeat(claim, observation=NOTE)
        if loops(ledger):
            firsts.append(i + 1)
    # the re-read page (a sentence of it twice) once counted as a page that shrank: progress
    assert firsts and firsts[0] <= 5, firsts


def test_figures_restated_in_turn_are_not_progress():
    t = Tracker()
    t.observe(None, 0, action="fetch('https://example.org/x')", result="Output rose by 30% in the first year.")
    notes = ["Findings: the depot explained the rise by 12%. Costs lagged output by 29%.",
             "Findings: the depot explained the rise by 12%. Prices raised demand by 45%. Costs lagged output by 29%."]
    moved = []
    for i in range(6):
        _, _, p = t.observe(notes[i % 2], 0)
        moved.append(p.text_progress)
    assert not any(moved[2:]), moved  # 45 % is new once; after that every figure has been seen


def test_a_count_moving_on_is_still_progress():
    t = Tracker()
    moved = [t.observe(f"copied {n} of 40 files", 0)[2].text_progress for n in (10, 20, 30, 40)]
    assert moved == [False, True, True, True]


def test_percent_written_as_a_word_is_read_as_a_percentage():
    assert progress_marks("the change was roughly 48 percent") == (("up", 48.0, 100.0),)
    assert progress_marks("first 7 per cent, then 9 pct") == (("up", 7.0, 100.0), ("up", 9.0, 100.0))

"""A plain report's layout read as note / command / output (``store/judges/roles.py``): the agent's
words before what came back are not news, whether or not the command is shown."""

from __future__ import annotations

from store.judges.novelty import Tracker
from store.judges.roles import looks_like_command, split_report

RUN = ("=============== test session starts ===============\n"
       "collected 12 items\n"
       "tests/test_cart.py ....F.......\n"
       "FAILED tests/test_cart.py::test_total_rounding - AssertionError: 10.01 != 10.0\n"
       "========= 1 failed, 11 passed in 2.31s =========")
SAYS = ["OK, let me run the tests once more.", "Trying the suite again to see whether it passes now.",
        "Perhaps it was flaky; running it one more time.", "Right, another go at the failing test.",
        "Let me check again whether the rounding test still fails."]


def test_a_note_then_output_without_a_command_judges_the_output():
    parts = split_report(SAYS[0] + "\n" + RUN)
    assert parts is not None and parts.note == SAYS[0] and parts.command is None
    assert parts.output.startswith("=====")


def test_the_same_output_under_fresh_words_brings_nothing_new():
    t = Tracker()
    brought = [t.observe(say + "\n" + RUN, 0)[0] for say in SAYS]
    assert brought[0] > 0 and brought[1:] == [0, 0, 0, 0], brought


def test_a_command_naming_a_file_after_a_note_is_the_command():
    parts = split_report("Let me try the one failing test again.\nuv run pytest tests/test_cart.py::test_total_rounding\n" + RUN)
    assert parts is not None and parts.command == "uv run pytest tests/test_cart.py::test_total_rounding"
    # without a note a path is not argument enough: a line of output may name a file
    assert not looks_like_command("found widget dovel/jufedan.md")


def test_prose_lines_stay_one_text():
    text = ("The team met on Monday to plan the release.\nThey agreed to ship the billing changes first.\n"
            "Support will be told on Friday.")
    assert split_report(text) is None

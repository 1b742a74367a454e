"""On ``TERM=linux`` only characters of the Linux console's font reach the terminal (the
others draw as garbage there): the console's own glyphs switch to ASCII, and whatever Rich, Textual or an agent draws besides
("…", input borders ``▔ ▁``, scrollbar ends, "★", "›", CJK) is replaced, one cell for one cell.

The end-to-end test runs ``warden console`` in a real pty with ``TERM=linux`` and checks every
character it writes while the operator visits the task list, a graph, the help, the handoff inbox,
the resolve screen and the park dialog (an input field)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.support.console_app import build_ledger
from console import glyphs
from console.glyphs import MARKS, NODE_GLYPHS, TASK_GLYPHS, use_ascii
from console.plainterm import ASCII_FONT, LINUX_FONT, NEAREST, FontFilter, font_of, substitute
from test_alerts_pty import Pty

ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|[()][0-9A-Za-z]|[=>78DEHMc])")


def test_the_linux_font_is_code_page_437():
    assert len(LINUX_FONT) == 95 + 128
    for ch in "█▀▄▌▐░▒▓─│┌┐└┘═║·éü±":
        assert ch in LINUX_FONT, ch
    for ch in "…›★▔▁▏▕→⏸◷✔⚠✋—":  # drawn as garbage on TERM=linux: the console must not use them there
        assert ch not in LINUX_FONT, ch


def test_font_of_reads_term():
    assert font_of({"TERM": "linux"}) is LINUX_FONT and font_of({"TERM": "linux-16color"}) is LINUX_FONT
    assert font_of({"TERM": "vt100"}) is ASCII_FONT and font_of({}) is ASCII_FONT


@pytest.mark.parametrize("font", [LINUX_FONT, ASCII_FONT], ids=["linux", "ascii"])
def test_every_substitute_is_drawable_and_as_wide(font):
    tried = set(NEAREST) | set(NEAREST.values()) | set("┼╬╭│█░中😀é\u0301\u200b⏎") | {chr(c) for c in range(0x2500, 0x2600)}
    for ch in tried:
        out = substitute(ch, font)
        assert all(c in font for c in out), (ch, out)
        assert cell_len(out) == cell_len(ch), (ch, out)


def test_the_filter_leaves_escape_sequences_and_ascii_alone():
    only = FontFilter(LINUX_FONT)
    frame = "\x1b[1;1H\x1b[7m task \x1b[0m ▶ ★ ok…\r\n\x1b]0;title\x07│█"
    assert only(frame) == "\x1b[1;1H\x1b[7m task \x1b[0m > * ok~\r\n\x1b]0;title\x07│█"
    assert only("plain ascii\x1b[K") == "plain ascii\x1b[K"
    assert FontFilter(ASCII_FONT)("│█─") == "|#-"


@pytest.fixture
def plain_glyphs():
    use_ascii()
    yield
    use_ascii(False)


def test_the_console_glyphs_of_a_plain_terminal_are_in_the_linux_font(plain_glyphs):
    for table in (NODE_GLYPHS, TASK_GLYPHS, MARKS):
        for value in table.values():
            assert set(value) <= LINUX_FONT, value
    assert glyphs.pause_label({"paused_since": "2027-01-15T08:00:00Z", "paused_for": "parked"}).startswith("@ ")


def test_parked_and_a_paused_budget_clock_have_different_marks():
    """⏸ is a status (parked); the budget clock standing still is its own mark, in both sets."""
    assert MARKS["clock"] != TASK_GLYPHS["parked"] and MARKS["clock"] != NODE_GLYPHS["parked"]
    label = glyphs.pause_label({"paused_since": "2027-01-15T08:00:00Z", "paused_for": "handoff"})
    assert label.startswith(MARKS["clock"] + " budget clock paused") and TASK_GLYPHS["parked"] not in label
    use_ascii()
    try:
        assert MARKS["clock"] not in (TASK_GLYPHS["parked"], NODE_GLYPHS["parked"])
    finally:
        use_ascii(False)


def _drawn(out: bytes) -> set[str]:
    text = ESCAPES.sub("", out.decode("utf-8", errors="replace"))
    return {c for c in text if c not in "\r\n\t\x07\x08"}


# (key, a word it paints, what) in turn: every screen and a dialog, back to the task list between.
VISITS = [
    (b"?", b"Everywhere", "the help"),
    (b"\x1b", b"idle-002", "the task list again"),
    (b"\r", b"collect", "the graph"),  # the first task's
    (b"\x1b", b"idle-002", "the task list again"),
    (b"h", b"Leave out", "the handoff inbox"),
    (b"\r", b"What is done", "the resolve screen"),
    (b"\x1b", b"Leave out", "the inbox again"),
    (b"\x1b", b"idle-002", "the task list again"),
    (b"p", b"reason", "the park dialog"),
    (b"\x1b", b"idle-002", "the task list again"),
]


@pytest.mark.slow
def test_term_linux_gets_only_characters_of_its_font(tmp_path: Path) -> None:
    build_ledger(tmp_path / "ledger.db")
    env = dict(os.environ, TERM="linux", COLUMNS="80", LINES="24", PYTHONPATH=str(Path(__file__).parents[2]))
    for name in ("NO_COLOR", "WARDEN_ASCII"):
        env.pop(name, None)
    term = Pty(["console", "--ledger", "ledger.db"], tmp_path, env)
    try:
        def see(word: bytes, what: str) -> None:  # painted since the last key (escape sequences aside)
            start = len(term.out)
            term.pump_until(lambda: word.decode() in ESCAPES.sub("", bytes(term.out[start:]).decode(errors="replace")),
                            what)

        term.pump_until(lambda: b"idle-002" in term.out, "the task list")
        for key, word, what in VISITS:
            os.write(term.fd, key)
            see(word, what)
        os.write(term.fd, b"q")
        term.pump_until(lambda: not term.alive(), "the console to quit")
    finally:
        term.close()
    drawn = _drawn(bytes(term.out))
    assert "+" in drawn and ">" in drawn  # the ASCII status glyphs ("+ succeeded", "> active")
    assert drawn <= LINUX_FONT, "not in the Linux console font: " + " ".join(
        f"U+{ord(c):04X}{c}" for c in sorted(drawn - LINUX_FONT))

"""console/text.py: agent text is made harmless and stays readable."""

from __future__ import annotations

from hypothesis import given, strategies as st
from rich.console import Console
from rich.text import Text

from console.text import safe, safe_line

from tests.support.console_app import HOSTILE


def test_controls_become_visible_escapes():
    assert safe_line("a\x1bb") == "a\\x1bb"
    assert safe_line("\x9b31m") == "\\x9b31m"
    assert safe_line("x\x7fy") == "x\\x7fy"
    assert safe_line("\u202egnp.exe") == "\\u202egnp.exe"
    assert safe_line("a\u2066b\u2069") == "a\\u2066b\\u2069"
    assert safe_line("zero\u200bwidth\ufeff") == "zero\\u200bwidth\\ufeff"
    assert safe_line("tab\tnew\nline\r") == "tab\\tnew\\nline\\r"
    assert safe("tab\tnew\nline") == "tab\tnew\nline"  # multi-line keeps layout
    assert safe("a\x1b[2Jb\nc") == "a\\x1b[2Jb\nc"


def test_markup_is_left_as_text():
    s = "[@click=app.quit]x[/] [link=https://e.example]y[/link] [/] [bold]z"
    assert safe_line(s) == s  # unchanged: markup is harmless as long as it is never parsed
    out = Console(width=200, no_color=True, record=True)
    out.print(Text(safe_line(s)))
    assert out.export_text().strip() == s


def test_hostile_text_renders_without_any_control_byte():
    con = Console(width=400, force_terminal=True, color_system=None, record=False, file=open("/dev/null", "w"))
    segments = list(con.render(Text(safe_line(HOSTILE))))
    text = "".join(seg.text for seg in segments)
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text and "\u202e" not in text
    assert "[@click=app.quit]" in text and "\\x1b]52;c;" in text


def test_limit_and_lone_surrogates():
    assert safe_line("abcdef", limit=3) == "abc…"
    assert safe_line("a\ud800b") == "a\\ud800b"
    assert safe_line(None) == "" and safe_line(42) == "42"


@given(st.text())
def test_no_unsafe_character_survives(s):
    for out in (safe_line(s), safe(s)):
        for ch in out:
            cp = ord(ch)
            assert not (cp < 0x20 and ch not in "\n\t") and not (0x7F <= cp <= 0x9F)
            assert not (0x202A <= cp <= 0x202E or 0x2066 <= cp <= 0x2069 or 0x200B <= cp <= 0x200F)
            assert cp not in (0x2060, 0xFEFF) and not (0xD800 <= cp <= 0xDFFF)
    assert "\n" not in safe_line(s) and "\t" not in safe_line(s)

"""store/text.py: the one sanitiser for untrusted text.

The oracle below is written from docs/contracts.md "Display conventions" and the module's docstring,
independently of the implementation: a character is unsafe when it is listed there by code
point or belongs to a general category Cc, Cf, Cs, Co, Cn, Zl or Zp.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import example, given, settings, strategies as st

from store.text import escape_char, is_unsafe, safe, safe_line

ROOT = Path(__file__).resolve().parents[2]

LISTED = {
    *range(0x00, 0x20), *range(0x7F, 0xA0),
    *range(0x202A, 0x202F), *range(0x2066, 0x206A),
    *range(0x200B, 0x2010), 0x2060, 0xFEFF, 0x2028, 0x2029,
}
CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def unsafe(ch: str) -> bool:
    return ord(ch) in LISTED or unicodedata.category(ch) in CATEGORIES


_ESCAPE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|[ntr])")


def unescape(s: str) -> str:
    """Read the escapes back (valid for text that had no backslash of its own)."""
    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        return {"n": "\n", "t": "\t", "r": "\r"}.get(e) or chr(int(e[1:], 16))
    return _ESCAPE.sub(one, s)


INTERESTING = [
    "\x00", "\x07", "\x08", "\t", "\n", "\x0b", "\x0c", "\r", "\x1b", "\x1f", "\x7f", "\x80",
    "\x85", "\x9b", "\x9f", "\xa0", "\xad", "\u061c", "\u180e", "\u200b", "\u200d", "\u200e",
    "\u200f", "\u2028", "\u2029", "\u202a", "\u202e", "\u2060", "\u2064", "\u2066", "\u2069",
    "\ufeff", "\ufffe", "\uffff", "\ud800", "\udbff", "\udc00", "\udfff", "\ue000", "\U000f0000",
    "\U0010ffff", "\U000e0001", "\U000e0041", "\u0378", "\\", "[", "]", "/", "é", "e\u0301",
    "复", "👍", "\U0001f3fd", "\ufe0f", "\u3000", "x", " ",
]
TEXT = st.lists(st.one_of(st.characters(exclude_categories=()), st.sampled_from(INTERESTING)),
                max_size=80).map("".join)


# ----------------------------------------------------------------------------- table


@pytest.mark.parametrize("raw, line", [
    ("\x00", "\\x00"), ("\x07", "\\x07"), ("\x08", "\\x08"), ("\t", "\\t"), ("\n", "\\n"),
    ("\x0b", "\\x0b"), ("\x0c", "\\x0c"), ("\r", "\\r"), ("\x1b", "\\x1b"), ("\x1f", "\\x1f"),
    ("\x7f", "\\x7f"), ("\x80", "\\x80"), ("\x85", "\\x85"), ("\x9b", "\\x9b"), ("\x9f", "\\x9f"),
    ("\xad", "\\xad"),                                               # soft hyphen (Cf)
    ("\u202a", "\\u202a"), ("\u202b", "\\u202b"), ("\u202c", "\\u202c"), ("\u202d", "\\u202d"),
    ("\u202e", "\\u202e"), ("\u2066", "\\u2066"), ("\u2067", "\\u2067"), ("\u2068", "\\u2068"),
    ("\u2069", "\\u2069"), ("\u061c", "\\u061c"),                    # bidi
    ("\u200b", "\\u200b"), ("\u200c", "\\u200c"), ("\u200d", "\\u200d"), ("\u200e", "\\u200e"),
    ("\u200f", "\\u200f"), ("\u2060", "\\u2060"), ("\u2063", "\\u2063"), ("\ufeff", "\\ufeff"),
    ("\u180e", "\\u180e"),                                           # zero-width / invisible
    ("\u2028", "\\u2028"), ("\u2029", "\\u2029"),                    # line/paragraph separators
    ("\ud800", "\\ud800"), ("\udfff", "\\udfff"),                    # lone surrogates
    ("\ue000", "\\ue000"), ("\U000f0000", "\\U000f0000"),            # private use
    ("\u0378", "\\u0378"), ("\uffff", "\\uffff"), ("\U0010ffff", "\\U0010ffff"),  # unassigned
    ("\U000e0041", "\\U000e0041"),                                   # tag character (Cf)
])
def test_each_unsafe_character_has_its_escape(raw: str, line: str) -> None:
    assert safe_line(raw) == line == escape_char(raw)
    assert safe_line(f"a{raw}b") == f"a{line}b"
    assert is_unsafe(raw)
    multi = raw if raw in "\n\t" else line
    assert safe(f"a{raw}b") == f"a{multi}b"


@pytest.mark.parametrize("kept", [
    "plain ascii ~!@#$%^&*()", "复习.md", "é and e\u0301", "👍🏽 ❤️", "a\u00a0b\u3000c",
    "[bold red]OPT[/] [/] [@click=app.quit]x[/]", "C:\\path\\x1b (six literal characters)",
    "ümlaut ß Ωmega", "",
])
def test_ordinary_text_markup_and_backslashes_are_kept(kept: str) -> None:
    assert safe_line(kept) == kept and safe(kept) == kept


def test_the_designs_examples() -> None:
    assert safe_line("evil \x1b]52;c;aGk=\x07 \x1b[2J \x9b31m \u202egnp.exe") == (
        "evil \\x1b]52;c;aGk=\\x07 \\x1b[2J \\x9b31m \\u202egnp.exe")
    assert safe("line one\n\tindented\r\nend\x1b[0m") == "line one\n\tindented\\r\nend\\x1b[0m"


def test_values_that_are_not_strings() -> None:
    class Shouty:
        def __str__(self) -> str:
            return "x\x1b[2Jy"

    assert safe_line(None) == "" and safe(None) == ""
    assert safe_line(42) == "42" and safe_line(1.5) == "1.5"
    assert safe_line(Shouty()) == "x\\x1b[2Jy" and safe(Shouty()) == "x\\x1b[2Jy"


def test_limit_cuts_the_input_before_escaping() -> None:
    assert safe_line("abcdef", limit=3) == "abc…"
    assert safe_line("abc", limit=3) == "abc"
    assert safe_line("\x1b\x1b\x1b", limit=1) == "\\x1b…"
    assert safe("a\nb\nc", limit=3) == "a\nb…"


# ----------------------------------------------------------------------------- properties


@settings(max_examples=500)
@given(TEXT)
@example("\ud800\n\x1b\u202e\U000e0041")
def test_no_unsafe_character_survives_and_one_line_is_one_line(s: str) -> None:
    line, multi = safe_line(s), safe(s)
    assert not any(unsafe(ch) for ch in line), ascii(line)
    assert not any(unsafe(ch) for ch in multi if ch not in "\n\t"), ascii(multi)
    assert len(line.splitlines()) <= 1 and "\n" not in line and "\t" not in line
    line.encode("utf-8")   # no lone surrogate left: always encodable for a terminal
    multi.encode("utf-8")
    assert multi.count("\n") == s.count("\n") and multi.count("\t") == s.count("\t")


@settings(max_examples=500)
@given(TEXT.filter(lambda s: "\\" not in s))
def test_escapes_read_back_to_the_original(s: str) -> None:
    assert unescape(safe_line(s)) == s
    assert unescape(safe(s)) == s


@settings(max_examples=300)
@given(TEXT)
def test_safe_characters_pass_unchanged_and_in_order(s: str) -> None:
    kept = "".join(ch for ch in s if not unsafe(ch))
    # remove exactly the escapes made for unsafe characters, and what is left is the safe text
    pieces, i = [], 0
    out = safe_line(s)
    for ch in s:
        if unsafe(ch):
            e = escape_char(ch)
            assert out.startswith(e, i)
            i += len(e)
        else:
            assert out[i] == ch
            pieces.append(ch)
            i += 1
    assert i == len(out) and "".join(pieces) == kept


@settings(max_examples=300)
@given(TEXT)
def test_idempotent(s: str) -> None:
    assert safe_line(safe_line(s)) == safe_line(s)
    assert safe(safe(s)) == safe(s)


@settings(max_examples=300)
@given(TEXT, st.integers(min_value=0, max_value=90))
def test_limit_is_the_input_prefix(s: str, limit: int) -> None:
    want = safe_line(s[:limit]) + ("…" if len(s) > limit else "")
    assert safe_line(s, limit=limit) == want


def test_every_code_point_is_classified_like_the_oracle() -> None:
    """All 1,114,112 code points, 512 at a time (a block mixes safe and unsafe neighbours)."""
    for start in range(0, 0x110000, 512):
        chars = [chr(cp) for cp in range(start, min(start + 512, 0x110000))]
        bad = [unsafe(ch) for ch in chars]
        assert [is_unsafe(ch) for ch in chars] == bad, hex(start)
        want_line = "".join(escape_char(ch) if b else ch for ch, b in zip(chars, bad))
        want_multi = "".join(escape_char(ch) if b and ch not in "\n\t" else ch
                             for ch, b in zip(chars, bad))
        assert safe_line("".join(chars)) == want_line, hex(start)
        assert safe("".join(chars)) == want_multi, hex(start)


# ----------------------------------------------------------------------------- one sanitiser


def test_store_and_console_share_the_one_sanitiser() -> None:
    import console.text
    import store.runs
    import store.text

    assert console.text.safe is store.text.safe and console.text.safe_line is store.text.safe_line
    assert store.runs.printable is store.text.safe_line


def test_no_other_module_classifies_characters_itself() -> None:
    """Only store/text.py looks characters up in Unicode or escapes them one by one."""
    offenders = []
    for path in sorted([*ROOT.joinpath("store").rglob("*.py"), *ROOT.joinpath("console").rglob("*.py")]):
        if path == ROOT / "store" / "text.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if "unicodedata" in names:
                offenders.append(f"{path.relative_to(ROOT)} imports unicodedata")
            if isinstance(node, ast.Attribute) and node.attr == "isprintable":
                offenders.append(f"{path.relative_to(ROOT)} calls isprintable")
    assert offenders == []

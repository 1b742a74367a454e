"""The one sanitiser for untrusted text (anything an agent or a run directory wrote).

Everything that shows such text goes through here: recovery evidence, HANDOFF.md, CLI lines,
and the console (``console/text.py`` implements its names with these functions). The store never
imports Rich or Textual, so this module returns plain strings; callers that render them wrap the
result in ``rich.text.Text`` / ``Content`` (or pass ``markup=False``), never in a markup string.

Rules (docs/contracts.md "Display conventions"):

- **Markup is never interpreted** and never altered: ``[bold]x[/]`` comes out as those characters.
  Making it harmless is the renderer's job (literal text, never markup).
- **Escaped**: every character whose Unicode general category is
    - ``Cc`` control: C0 (U+0000–U+001F), DEL (U+007F), C1 (U+0080–U+009F);
    - ``Cf`` format: bidi embeddings/overrides/isolates/marks (U+202A–U+202E, U+2066–U+2069,
      U+200E/U+200F, U+061C), zero-width characters (U+200B–U+200D, U+2060–U+2064, U+FEFF),
      soft hyphen, tag characters (U+E0000 block, used to smuggle invisible text), …;
    - ``Cs`` lone surrogate (cannot be encoded for a terminal at all);
    - ``Co`` private use (its glyph is whatever the font says);
    - ``Cn`` unassigned in this Python's Unicode database, noncharacters included (no agreed
      width, and a later Unicode version may make it a control or a format character);
    - ``Zl`` / ``Zp`` line and paragraph separators (U+2028, U+2029: line breaks in disguise);

  plus the characters the display conventions name (C0, DEL, C1, U+202A–U+202E, U+2066–U+2069,
  U+200B–U+200F, U+2060, U+FEFF, U+2028, U+2029), escaped whatever the Unicode database says.
- **Kept**: everything else, including non-ASCII spaces (``Zs``: visible as blank, no effect on
  the terminal), combining marks, emoji and their variation selectors, and backslashes.
- **One-line fields** (:func:`safe_line`): tab and newline are escaped too, so the result is
  exactly one line. **Multi-line text** (:func:`safe`) keeps newline and tab (a tab only moves
  the cursor right, and Rich expands it); carriage return is escaped in both (it would move the
  cursor back over what was written).
- **Escapes** are literal text: ``\\t``, ``\\n``, ``\\r`` for those three; ``\\xNN`` below
  U+0100 (``\\x1b``, ``\\x9b``); ``\\uNNNN`` in the BMP (``\\u202e``, ``\\ud800``);
  ``\\UNNNNNNNN`` above it (``\\U000e0041``). Hex digits are lowercase.
- A backslash in the input is not doubled, so an agent can write the six characters ``\\x1b``
  and they look like an escape: that is harmless (it is text) and keeps paths and regexes
  readable. Text without a backslash reads back exactly from its escapes (the tests check it).
- ``limit`` cuts the *input* to that many characters (then ``…``) before escaping.
"""

from __future__ import annotations

import re
import unicodedata

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode general categories whose characters are always shown as escapes."""

_LISTED = frozenset(
    chr(cp)
    for cp in (
        *range(0x00, 0x20), *range(0x7F, 0xA0),          # C0, DEL, C1
        *range(0x202A, 0x202F), *range(0x2066, 0x206A),  # bidi embeddings/overrides/isolates
        *range(0x200B, 0x2010), 0x2060, 0xFEFF,           # zero-width, marks, BOM
        0x2028, 0x2029,                                   # line/paragraph separators
    )
)
"""The characters the display conventions name, escaped whatever this Python's Unicode database says."""

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_MULTI_LINE_KEEPS = frozenset("\n\t")
_ONE_LINE_KEEPS: frozenset[str] = frozenset()
_NOT_ASCII_PRINTABLE = re.compile(r"[^\x20-\x7e]+")
_LISTED_RE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]")


def is_unsafe(ch: str) -> bool:
    """True when the character ``ch`` is shown as an escape (in one-line fields)."""
    return ch in _LISTED or unicodedata.category(ch) in UNSAFE_CATEGORIES


def escape_char(ch: str) -> str:
    """The visible escape of one character: ``\\n``, ``\\x1b``, ``\\u202e`` or ``\\U000e0041``."""
    named = _NAMED.get(ch)
    if named is not None:
        return named
    cp = ord(ch)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _as_text(value: object, limit: int | None) -> str:
    s = value if isinstance(value, str) else ("" if value is None else str(value))
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    return s


def _clean(s: str) -> bool:
    # A fast pre-check at C speed. str.isprintable() is False for every character of an unsafe
    # category (and for Zs, which the slow path keeps); the listed characters are checked by
    # code point so the rule holds whatever this Python's Unicode database says.
    return s.isprintable() and _LISTED_RE.search(s) is None


def _escape_run(run: str, keep: frozenset[str]) -> str:
    if _clean(run):
        return run
    return "".join(escape_char(ch) if ch not in keep and is_unsafe(ch) else ch for ch in run)


def safe_line(value: object, *, limit: int | None = None) -> str:
    """One-line field: every unsafe character, tab and newline included, shown as an escape.

    ``value`` may be any object (``None`` is the empty string, others go through ``str``).
    """
    s = _as_text(value, limit)
    if _clean(s):
        return s
    return _NOT_ASCII_PRINTABLE.sub(lambda m: _escape_run(m.group(0), _ONE_LINE_KEEPS), s)


def safe(value: object, *, limit: int | None = None) -> str:
    """Multi-line text: newlines and tabs kept, every other unsafe character shown as an escape."""
    s = _as_text(value, limit)
    if _clean(s.replace("\n", "").replace("\t", "")):
        return s
    return _NOT_ASCII_PRINTABLE.sub(lambda m: _escape_run(m.group(0), _MULTI_LINE_KEEPS), s)

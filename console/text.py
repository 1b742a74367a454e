"""The one place untrusted text (anything an agent wrote) is made safe for display.

Markup is never interpreted: callers wrap the result in ``rich.text.Text`` / ``Content`` (or pass
``markup=False``), never in a markup string. Here we make the characters themselves harmless:
C0 controls, DEL, C1 controls, bidi embeddings/overrides/isolates and zero-width characters are
shown as visible escapes (``\\x1b``, ``\\u202e``) so no control sequence reaches the terminal and
no text can reorder or hide itself. In one-line fields tab and newline are escaped too.
"""

from __future__ import annotations

import re

_BIDI = "\u202a-\u202e\u2066-\u2069"
_ZERO_WIDTH = "\u200b-\u200f\u2060\ufeff"
# C0 (except tab/newline, handled per mode), DEL, C1, bidi, zero-width, line/paragraph separators.
_UNSAFE_MULTI = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}{_ZERO_WIDTH}\u2028\u2029]")
_UNSAFE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}{_ZERO_WIDTH}\u2028\u2029]")


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    cp = ord(ch)
    if cp == 0x09:
        return "\\t"
    if cp == 0x0A:
        return "\\n"
    if cp == 0x0D:
        return "\\r"
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}"


def safe(value: object, *, limit: int | None = None) -> str:
    """Multi-line text: newlines and tabs kept, every other control shown as an escape."""
    s = value if isinstance(value, str) else ("" if value is None else str(value))
    s = _surrogates(s)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    return _UNSAFE_MULTI.sub(_escape, s)


def safe_line(value: object, *, limit: int | None = None) -> str:
    """One-line field: every control (tab and newline included) shown as an escape."""
    s = value if isinstance(value, str) else ("" if value is None else str(value))
    s = _surrogates(s)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    return _UNSAFE_LINE.sub(_escape, s)


def _surrogates(s: str) -> str:
    # Lone surrogates cannot be encoded to the terminal; show them as escapes too.
    if any("\ud800" <= c <= "\udfff" for c in s):
        return "".join(f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c for c in s)
    return s

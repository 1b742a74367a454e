"""The console on a plain terminal (``TERM=linux``, vt100, ``WARDEN_ASCII=1``): only characters
its font has reach it.

The glyph tables switch to ASCII (``console.glyphs.use_ascii``), but much of a screen is drawn by
Rich and Textual themselves: "…" where a cell is cut, input borders (``▔ ▁ ▏ ▕``), scrollbar ends
(``▂ ▆``), the footer's ``▏``, rounded corners, and whatever an agent wrote. So the last step of
every frame, the driver's :meth:`write`, replaces each character the terminal cannot draw by one
that it can, of the same width, so nothing moves.

What "can draw" means:

* ``TERM=linux`` — the kernel console's font: the 256 characters of code page 437 (the built-in
  VGA font; the Terminus and Fixed fonts of console-setup have them too): ASCII, Latin-1 letters,
  box drawing, blocks ``█ ▀ ▄ ▌ ▐ ░ ▒ ▓``, ``· ±`` …  (:data:`LINUX_FONT`);
* any other plain terminal: printable ASCII only.

tests/console/test_plain_terminal.py runs the console in a real pty with ``TERM=linux`` and checks
every character it writes.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from rich.cells import cell_len

# Code page 437's upper half (what the Linux console's built-in font draws beyond ASCII).
LINUX_FONT = frozenset(bytes(range(0x20, 0x7F)).decode("ascii") + bytes(range(0x80, 0x100)).decode("cp437"))
ASCII_FONT = frozenset(bytes(range(0x20, 0x7F)).decode("ascii"))

# One cell for one cell: the nearest character the font has (box drawing and blocks first to
# their CP437 kin, then to ASCII for a terminal without them).
NEAREST = {
    "…": "~", "›": ">", "‹": "<", "»": ">", "«": "<", "★": "*", "☆": "*", "→": ">", "←": "<", "↑": "^", "↓": "v",
    "⇥": ">", "⏎": "<", "⌫": "<", "—": "-", "–": "-", "‐": "-", "‘": "'", "’": "'", "“": '"', "”": '"', "•": "*",
    "●": "*", "○": "o", "◉": "o", "◯": "o", "◷": "@", "✔": "+", "✓": "+", "✖": "x", "✗": "x", "⚠": "!", "⚑": "*",
    "⏸": "=", "▶": ">", "▸": ">", "◀": "<", "▲": "^", "▼": "v", "▾": "v", "⊘": "-", "✋": "H",
    "▔": "▀", "▁": "▄", "▂": "▄", "▃": "▄", "▅": "█", "▆": "█", "▇": "█", "▉": "█", "▊": "█", "▋": "▌", "▍": "▌",
    "▎": "▌", "▏": "▌", "▕": "▐",
    "╭": "┌", "╮": "┐", "╰": "└", "╯": "┘", "━": "═", "┃": "║", "┏": "╔", "┓": "╗", "┗": "╚", "┛": "╝",
    "╍": "-", "╏": "|", "┅": "-", "┇": "|",
}
# For a terminal without CP437's line drawing and blocks (vt100, dumb …).
TO_ASCII = {
    "─": "-", "═": "=", "│": "|", "║": "|", "█": "#", "▀": "#", "▄": "#", "▌": "#", "▐": "#", "░": ".", "▒": ":",
    "▓": "#", "■": "#", "·": ".", "°": "o", "±": "+",
}
_CORNERS = "┌┐└┘├┤┬┴┼╔╗╚╝╠╣╦╩╬╒╓╕╖╘╙╛╜╞╟╡╢╤╥╧╨╪╫"


def font_of(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The characters this (plain) terminal draws: the Linux console's for ``TERM=linux``, ASCII else."""
    env = os.environ if environ is None else environ
    return LINUX_FONT if env.get("TERM", "").split("-")[0] == "linux" else ASCII_FONT


def substitute(ch: str, font: frozenset[str]) -> str:
    """``ch`` as ``font`` can draw it, in as many cells as it took (``✋`` → ``H `` : two)."""
    width = cell_len(ch)
    out = _nearest(ch, font)
    return out + " " * (width - cell_len(out)) if cell_len(out) <= width else "?" * width


def _nearest(ch: str, font: frozenset[str]) -> str:
    for step in (NEAREST, TO_ASCII):
        ch2 = step.get(ch)
        if ch2 is not None:
            ch = ch2
            if ch in font:
                return ch
    if ch in _CORNERS and "+" in font:
        return "+"
    return ch if ch in font else ""


class FontFilter:
    """Replaces what a font lacks, fast: one regex scan of the frame, a lookup per odd character."""

    def __init__(self, font: frozenset[str]) -> None:
        self.font = font
        keep = "".join(re.escape(c) for c in sorted(font))
        # controls (escape sequences, newlines) pass untouched; they are not drawn
        self._odd = re.compile(f"[^\\x00-\\x1f\\x7f{keep}]")
        self._cache: dict[str, str] = {}

    def _one(self, m: re.Match[str]) -> str:
        ch = m.group(0)
        out = self._cache.get(ch)
        if out is None:
            out = self._cache[ch] = substitute(ch, self.font)
        return out

    def __call__(self, data: str) -> str:
        if data.isascii():
            return data
        return self._odd.sub(self._one, data)


def plain_driver(base: type[Any], font: frozenset[str]) -> type[Any]:
    """``base`` (the app's Textual driver class) with every write passed through :class:`FontFilter`."""
    only = FontFilter(font)

    class PlainTerminalDriver(base):
        def write(self, data: str) -> None:
            super().write(only(data))

    return PlainTerminalDriver


__all__ = ["ASCII_FONT", "LINUX_FONT", "NEAREST", "FontFilter", "font_of", "plain_driver", "substitute"]

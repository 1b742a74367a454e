"""Status glyphs and short labels: glyph + word everywhere, so nothing relies on colour."""

from __future__ import annotations

import math
import os
from typing import Mapping, Sequence

from store.clock import duration_text
from store.jsontypes import JsonMapping

from .text import safe_line

NODE_GLYPHS = {
    "pending": "○", "running": "▶", "blocked": "✋", "parked": "⏸", "succeeded": "✔", "failed": "✖",
    "abandoned": "⊘",
}
TASK_GLYPHS = {"active": "▶", "parked": "⏸", "completed": "✔", "failed": "✖", "aborted": "⊘"}
SIGNAL_GLYPH = "⚠"  # (the Unicode mark; what is drawn is MARKS["signal"], ASCII on a plain terminal)
ALERT_GLYPH = "⚑"
# Single marks drawn by the console, replaced in place by use_ascii() like the status glyphs.
# "clock": the budget clock stands still (a task waiting: parked, or on a human) — not "parked"
# (⏸), which is a status; a parked task shows both, each saying its own thing.
MARKS = {"signal": SIGNAL_GLYPH, "handoff": "✋", "alert": ALERT_GLYPH, "full": "█", "empty": "░",
         "spark": "▁▂▃▄▅▆▇█", "dash": "—", "left": "←", "clock": "◷", "star": "★", "crumb": "›",
         "arrow": "→", "more": "…"}

# A terminal that cannot draw those (TERM=linux: the kernel's console font; TERM=dumb, vt100…):
# a letter or sign each, still glyph + word ("+ succeeded"), so nothing relies on the glyph alone.
ASCII_NODE_GLYPHS = {"pending": "o", "running": ">", "blocked": "H", "parked": "=", "succeeded": "+",
                     "failed": "x", "abandoned": "-"}
ASCII_TASK_GLYPHS = {"active": ">", "parked": "=", "completed": "+", "failed": "x", "aborted": "-"}
ASCII_MARKS = {"signal": "!", "handoff": "H", "alert": "*", "full": "#", "empty": ".", "spark": "_.-=+*#@",
               "dash": "-", "left": "<-", "clock": "@", "star": "*", "crumb": ">", "arrow": "->", "more": "..."}
ASCII_TERMS = ("dumb", "linux", "vt100", "vt102", "vt220", "ansi", "cons25")
SERVED_ENV = "WARDEN_SERVED"  # set by `warden serve` for the consoles it runs (console/serve/server.py)


def read_only_notice(environ: Mapping[str, str] | None = None) -> str:
    """What an action key says on a read-only console: how it was made read-only, so how to act —
    in the browser, the server decides (``warden serve --allow-actions``), not ``--read-only``."""
    env = os.environ if environ is None else environ
    if env.get(SERVED_ENV):
        return "read-only in the browser: actions are disabled (the server runs without --allow-actions)"
    return "read-only (opened with --read-only): actions are disabled"


READ_ONLY_NOTICE = read_only_notice()  # a served console has SERVED_ENV from its start


def ascii_terminal(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this terminal gets ASCII glyphs: ``$WARDEN_ASCII`` (1/0) decides if set, else a
    ``$TERM`` of :data:`ASCII_TERMS` (docs/console.md, "Sizes and terminals")."""
    env = os.environ if environ is None else environ
    forced = env.get("WARDEN_ASCII")
    if forced:
        return forced not in ("0", "no", "false")
    return env.get("TERM", "").split("-")[0] in ASCII_TERMS


def use_ascii(on: bool = True) -> None:
    """Draw ASCII glyphs from now on (``on=False``: the Unicode ones again). The tables are
    changed in place, so every module that imported them follows."""
    _ascii[0] = on
    NODE_GLYPHS.update(ASCII_NODE_GLYPHS if on else UNICODE_NODE_GLYPHS)
    TASK_GLYPHS.update(ASCII_TASK_GLYPHS if on else UNICODE_TASK_GLYPHS)
    MARKS.update(ASCII_MARKS if on else UNICODE_MARKS)


def ascii_on() -> bool:
    """Whether :func:`use_ascii` is in force."""
    return _ascii[0]


_ascii = [False]
UNICODE_NODE_GLYPHS = dict(NODE_GLYPHS)
UNICODE_TASK_GLYPHS = dict(TASK_GLYPHS)
UNICODE_MARKS = dict(MARKS)


def node_status_label(status: str) -> str:
    # A ledger written elsewhere may hold any status: shown escaped, like any other text in it.
    return f"{NODE_GLYPHS.get(status, '?')} {safe_line(status, limit=20)}"


def task_status_label(status: str) -> str:
    return f"{TASK_GLYPHS.get(status, '?')} {safe_line(status, limit=20)}"


def task_label(task_id: str, origin: str | None) -> str:
    """A task's id as lists show it: with its origin marked (``fix-7 [mcp]``) when an integration
    other than the Python API made it (docs/agents.md "Which integration"); made safe."""
    label = safe_line(task_id)
    if origin and origin != "python":
        label += f" [{safe_line(origin, limit=32)}]"
    return label


def duration_label(seconds: float | None) -> str:
    """Compact duration: 45s, 3m05s, 12m, 3h05m, 2d04h (or — when unknown, or not a finite number:
    an infinite figure once took the whole console down)."""
    if seconds is None or not math.isfinite(seconds):
        return MARKS["dash"]
    return duration_text(seconds)


def age_label(seconds: float | None) -> str:
    """Relative age: "3m ago"."""
    if seconds is None:
        return MARKS["dash"]
    if seconds < 0:
        return "in " + duration_label(-seconds)
    return duration_label(seconds) + " ago"


CONFIDENCE_SHORT = {"none": "?", "low": "low", "medium": "med", "high": "high"}


def eta_label(eta: JsonMapping | None) -> str:
    if not eta or eta.get("p80_s") is None:
        return MARKS["dash"]
    return f"{duration_label(eta['p80_s'])} ({CONFIDENCE_SHORT.get(eta.get('confidence', 'none'), '?')})"


def budget_label(budget: JsonMapping | None) -> str:
    if not budget:
        return MARKS["dash"]
    ratio = budget.get("ratio")
    if ratio is None or (not budget.get("token_cap") and not budget.get("wall_cap_s")):
        return MARKS["dash"]
    gate = budget.get("gate", "ok")
    return f"{ratio * 100:.0f}% {gate}"


def pause_label(budget: JsonMapping | None) -> str:
    """"◷ budget clock paused since 2027-01-15T08:00Z (parked)" while the task waits, else ""."""
    if not budget or not budget.get("paused_since"):
        return ""
    since = str(budget["paused_since"])
    since = since[:16] + "Z" if len(since) >= 16 else since  # to the minute
    why = {"parked": "parked", "handoff": "waiting on a human", "parked node": "a node is parked"}.get(
        str(budget.get("paused_for")), str(budget.get("paused_for") or "waiting"))
    return f"{MARKS['clock']} budget clock paused since {since} ({why})"


def signals_label(signals: Sequence[JsonMapping] | None) -> str:
    if not signals:
        return MARKS["dash"]
    return f"{MARKS['signal']} {len(signals)}"

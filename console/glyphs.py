"""Status glyphs and short labels: glyph + word everywhere, so nothing relies on colour."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from store.clock import duration_text

from .text import safe_line

NODE_GLYPHS = {
    "pending": "○", "running": "▶", "blocked": "✋", "parked": "⏸", "succeeded": "✔", "failed": "✖",
    "abandoned": "⊘",
}
TASK_GLYPHS = {"active": "▶", "parked": "⏸", "completed": "✔", "failed": "✖", "aborted": "⊘"}
SIGNAL_GLYPH = "⚠"
READ_ONLY_NOTICE = "read-only (opened with --read-only): actions are disabled"


def node_status_label(status: str) -> str:
    # A ledger written elsewhere may hold any status: shown escaped, like any other text in it.
    return f"{NODE_GLYPHS.get(status, '?')} {safe_line(status, limit=20)}"


def task_status_label(status: str) -> str:
    return f"{TASK_GLYPHS.get(status, '?')} {safe_line(status, limit=20)}"


def duration_label(seconds: float | None) -> str:
    """Compact duration: 45s, 3m05s, 12m, 3h05m, 2d04h (or — when unknown, or not a finite number:
    an infinite figure once took the whole console down)."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    return duration_text(seconds)


def age_label(seconds: float | None) -> str:
    """Relative age: "3m ago"."""
    if seconds is None:
        return "—"
    if seconds < 0:
        return "in " + duration_label(-seconds)
    return duration_label(seconds) + " ago"


CONFIDENCE_SHORT = {"none": "?", "low": "low", "medium": "med", "high": "high"}


def eta_label(eta: Mapping[str, Any] | None) -> str:
    if not eta or eta.get("p80_s") is None:
        return "—"
    return f"{duration_label(eta['p80_s'])} ({CONFIDENCE_SHORT.get(eta.get('confidence', 'none'), '?')})"


def budget_label(budget: Mapping[str, Any] | None) -> str:
    if not budget:
        return "—"
    ratio = budget.get("ratio")
    if ratio is None or (not budget.get("token_cap") and not budget.get("wall_cap_s")):
        return "—"
    gate = budget.get("gate", "ok")
    return f"{ratio * 100:.0f}% {gate}"


def pause_label(budget: Mapping[str, Any] | None) -> str:
    """"⏸ budget clock paused since 2027-01-15T08:00Z (parked)" while the task waits, else ""."""
    if not budget or not budget.get("paused_since"):
        return ""
    since = str(budget["paused_since"])
    since = since[:16] + "Z" if len(since) >= 16 else since  # to the minute
    why = {"parked": "parked", "handoff": "waiting on a human", "parked node": "a node is parked"}.get(
        str(budget.get("paused_for")), str(budget.get("paused_for") or "waiting"))
    return f"⏸ budget clock paused since {since} ({why})"


def signals_label(signals: Sequence[Mapping[str, Any]] | None) -> str:
    if not signals:
        return "—"
    return f"{SIGNAL_GLYPH} {len(signals)}"

"""Status glyphs and short labels: glyph + word everywhere, so nothing relies on colour."""

from __future__ import annotations

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
    """Compact duration: 45s, 3m05s, 12m, 3h05m, 2d04h (or — when unknown)."""
    if seconds is None:
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


def signals_label(signals: Sequence[Mapping[str, Any]] | None) -> str:
    if not signals:
        return "—"
    return f"{SIGNAL_GLYPH} {len(signals)}"

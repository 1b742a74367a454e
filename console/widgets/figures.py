"""Small text figures that read without colour: a budget gauge and a sparkline."""

from __future__ import annotations

from typing import Sequence

from ..glyphs import MARKS

SPARK = "▁▂▃▄▅▆▇█"  # (the Unicode set; what is drawn is MARKS["spark"], ASCII on a plain terminal)


def gauge(ratio: float | None, width: int = 8) -> str:
    """``[████░░░░]``-style gauge of a 0..1+ ratio; over 100 % fills and ends in ``!``."""
    if ratio is None:
        return MARKS["dash"]
    inner = max(1, width - 2)
    filled = max(0, min(inner, round(ratio * inner)))
    bar = MARKS["full"] * filled + MARKS["empty"] * (inner - filled)
    return "[" + bar + ("!" if ratio > 1.0 else "]")


def sparkline(values: Sequence[float], width: int | None = None) -> str:
    """One character per value (the last ``width`` values), scaled to the largest."""
    vals = list(values)[-width:] if width else list(values)
    if not vals:
        return ""
    spark = MARKS["spark"]
    top = max(vals)
    if top <= 0:
        return spark[0] * len(vals)
    return "".join(spark[min(len(spark) - 1, int(v / top * (len(spark) - 1) + 0.5))] if v > 0 else spark[0]
                   for v in vals)

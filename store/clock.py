"""The one clock of the store. Time is injected so tests control it exactly."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Callable

Clock = Callable[[], float]
"""A clock returns seconds since the epoch (UTC), like ``time.time``."""

system_clock: Clock = time.time


class ManualClock:
    """A clock for tests and simulations: it moves only when told to."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += float(seconds)
        return self.now

    def set(self, at: float) -> None:
        self.now = float(at)


def iso(ts: float | None) -> str | None:
    """ISO-8601 UTC with ``Z`` (seconds precision kept to milliseconds), or None."""
    if ts is None:
        return None
    try:
        dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):  # NaN, infinity, past year 9999: not a time
        return None
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str, now: float) -> float:
    """Parse a duration (``90s``, ``15m``, ``2h``, ``1d``) relative to now, or an ISO time.

    Raises ValueError with a one-line message.
    """
    s = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if s and s[-1] in units:
        try:
            return now + float(s[:-1]) * units[s[-1]]
        except ValueError:
            pass
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a duration (15m, 2h, 1d) or an ISO time: {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def duration_text(seconds: float) -> str:
    """Compact duration for people: 45s, 3m05s, 12m, 3h05m, 2d04h."""
    s = int(round(max(0.0, float(seconds))))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s" if m < 10 and s else f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"

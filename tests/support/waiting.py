"""Waiting for a condition in a test, from plain threads (no app loop to pump: the console's tests
use ``tests.console.conftest.wait_for`` with their pilot)."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(cond: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll ``cond`` until it holds (a safety-net deadline for a loaded machine, not a measurement)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.002)


__all__ = ["wait_until"]

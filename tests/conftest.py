"""Shared fixtures: a file ledger in tmp_path on a fixed, manual clock."""

from __future__ import annotations

import os
import sys

import pytest

from store import Ledger, ManualClock

# A fixed instant (2027-01-15T08:00:00Z) so snapshots and JSON are deterministic.
T0 = 1_800_000_000.0

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def ledger_path(tmp_path) -> str:
    return str(tmp_path / "ledger.db")


@pytest.fixture
def ledger(ledger_path, clock):
    led = Ledger.open(ledger_path, clock=clock)
    yield led
    led.close()

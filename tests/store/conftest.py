"""Fixtures shared by the store's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def runs_started():
    """``warden run`` processes a test started (tests/store/test_run_command.py ``Run``): killed
    after the test, whatever it did."""
    started: list = []
    yield started
    for r in started:
        r.kill()


@pytest.fixture
def workdir(tmp_path):
    """A working directory for a supervised command."""
    d = tmp_path / "work"
    d.mkdir()
    return d

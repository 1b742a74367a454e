"""Fixtures for the console tests. The fixed ledger and the helpers that wait on conditions live in
tests/support/console_app.py (imported from there by the tests, never from this file)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from store import Ledger
from tests.support.console_app import build_ledger


@pytest.fixture(autouse=True)
def lasting_notifications(monkeypatch: pytest.MonkeyPatch) -> None:
    """Notifications stay for the whole test. Textual drops one from ``app._notifications`` once
    its timeout (5 s) has passed on the wall clock, so on a loaded machine a test asserting the
    notices it caused could find the first already gone."""
    from console.app import WardenApp

    monkeypatch.setattr(WardenApp, "NOTIFICATION_TIMEOUT", 3600.0)


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return build_ledger(tmp_path / "ledger.db")


@pytest.fixture
def fixed_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fixed ledger at ./ledger.db in a temp cwd (relative paths keep snapshots deterministic)."""
    build_ledger(tmp_path / "ledger.db")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def console_applies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every ``Ledger.apply`` the console makes during the test, as (action, target): the app's
    worker threads apply; the test's own setup (main thread) is not counted."""
    calls: list[tuple[str, str]] = []
    real = Ledger.apply

    def spy(self: Ledger, plan: Any, *args: Any, **kw: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            calls.append((plan.action, plan.target))
        return real(self, plan, *args, **kw)

    monkeypatch.setattr(Ledger, "apply", spy)
    return calls


@pytest.fixture
def apply_attempts(monkeypatch: pytest.MonkeyPatch) -> Callable[[object], int]:
    """How many writes a dialog or screen started (an apply, a resolution, a record), counted around
    the worker each starts (``ActionDialog._apply``, ``ResolveHandoffScreen._resolve``,
    ``RecoveryWizardScreen._write``): how a test proves that Cancel, escape, enter, an empty reason
    or read-only never start one. Call it with the dialog."""
    from console.dialogs.base import ActionDialog
    from console.screens.recovery import RecoveryWizardScreen
    from console.screens.resolve import ResolveHandoffScreen

    started: dict[int, int] = {}
    for cls, name in ((ActionDialog, "_apply"), (ResolveHandoffScreen, "_resolve"), (RecoveryWizardScreen, "_write")):
        real = getattr(cls, name)

        def start(self: object, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            started[id(self)] = started.get(id(self), 0) + 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, start)
    return lambda screen: started.get(id(screen), 0)

"""Snapshot tests of every dialog (park, resume, narrow, rewind, abort, handoff resolution,
recovery advice, recovery wizard) at 80×24 and 100×30, on the fixed ledger and a fixed clock.
Review the report before `pytest --snapshot-update`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.widgets import Input, Select

from tests.support.console_app import NOW, make_app, settle, wait_for
from test_dialogs import add_scope_task

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
import runfactory as rf  # noqa: E402

SIZES = [(80, 24), (100, 30)]


async def _plan(pilot, dlg) -> None:
    await wait_for(pilot, lambda: not dlg.planning and (dlg.plan is not None or dlg.plan_error is not None),
                   timeout=30)
    await pilot.pause()


def _open(action: str, task: str, node: str | None = None, reason: str = ""):
    async def run(pilot) -> None:
        from console.dialogs import NarrowDialog, open_action

        await settle(pilot)
        dlg = open_action(pilot.app, action, task, node)
        await wait_for(pilot, lambda: pilot.app.screen is dlg and dlg.is_mounted, timeout=30)
        if isinstance(dlg, NarrowDialog):
            await wait_for(pilot, lambda: dlg.choices is not None, timeout=30)
            dlg.query_one("#pre-key", Select).value = "module"
            await pilot.pause()
            dlg.query_one("#pre-value", Select).value = '"a"'
            await pilot.pause()
        await _plan(pilot, dlg)
        if reason:
            await pilot.press(*reason)
        if action == "abort":
            dlg.query_one("#confirm", Input).focus()
            await pilot.press(*"report-0")
        await pilot.pause()
    return run


async def _stale(pilot) -> None:
    from store import Ledger, ManualClock

    await _open("rewind", "report-001", "outline", "wrong outline")(pilot)
    dlg = pilot.app.screen
    with Ledger.open("ledger.db", create=False, clock=ManualClock(NOW)) as ledger:
        # another operator rewinds a node the rewind resets: the preview no longer holds
        ledger.apply(ledger.plan_rewind("report-001", "section-1", reason="outside"), operator="other@elsewhere")
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: dlg.stale is not None and not dlg.planning and not dlg.applying, timeout=30)
    await pilot.pause()


async def _resolve(pilot) -> None:
    await settle(pilot)
    await pilot.press("h")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "loaded", False), timeout=30)
    await pilot.press("enter")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "handoff", None) is not None, timeout=30)
    await pilot.press("enter")
    await pilot.pause()


async def _advice(pilot) -> None:
    await settle(pilot)
    pilot.app.open_node("report-001", "section-3")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "key", None) == "section-3", timeout=30)
    await pilot.press("R")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "advice", None) is not None, timeout=30)
    await pilot.pause()


def _wizard(steps: int):
    async def run(pilot) -> None:
        await settle(pilot)
        await pilot.press("g")
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "loaded", False), timeout=30)
        await pilot.press("enter")
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "mode", "loading") != "loading", timeout=30)
        for _ in range(steps):
            await pilot.press("enter")
        await pilot.pause()
    return run


def _steady(run):
    """No blinking cursor in a picture: inputs keep a steady cursor."""
    async def wrapped(pilot) -> None:
        await run(pilot)
        for inp in pilot.app.screen.query(Input):
            inp.cursor_blink = False
        await pilot.pause()
    return wrapped


DIALOGS = {
    "park": _open("park", "report-001", None, "waiting for legal"),
    "resume": _open("resume", "idle-002"),
    "narrow": _open("narrow", "scope-003", None, "module b dropped"),
    "rewind": _open("rewind", "report-001", "outline", "wrong outline"),
    "rewind_stale": _stale,
    "abort": _open("abort", "report-001", None, "superseded"),
    "resolve": _resolve,
    "advice": _advice,
    "wizard_check": _wizard(3),
    "wizard_decision": _wizard(5),
}


@pytest.fixture
def dialog_dir(fixed_dir: Path) -> Path:
    add_scope_task(fixed_dir / "ledger.db")
    rf.make_run(fixed_dir / "runs", "resume-01", "exported")
    return fixed_dir


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dialog", list(DIALOGS))
def test_dialog(snap_compare, dialog_dir, monkeypatch, dialog, size):
    monkeypatch.delenv("NO_COLOR", raising=False)
    app = make_app(analysis=False, operator="ana@console")
    assert snap_compare(app, terminal_size=size, run_before=_steady(DIALOGS[dialog]))

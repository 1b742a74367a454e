"""Snapshots of the task's Mind screen, the memory inbox and its confirm dialog on a fixed
ledger and clock, at 80×24 and 100×30, under NO_COLOR and with ASCII glyphs (TERM=linux). Review the
report before `pytest --snapshot-update`."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.glyphs import use_ascii

from tests.support.console_app import graph_loaded, make_app, settle, wait_for
from test_mind_screen import build

SIZES = [(100, 30), (80, 24)]


@pytest.fixture
def mind_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    build(tmp_path / "ledger.db")
    monkeypatch.chdir(tmp_path)  # relative paths keep the pictures free of temp names
    return tmp_path


async def _mind(pilot) -> None:
    app = pilot.app
    await settle(pilot)
    app.open_graph("audit")
    await graph_loaded(pilot)
    await settle(pilot)
    await pilot.press("m")
    await wait_for(pilot, lambda: getattr(app.screen, "loaded", False), what="the mind")
    await pilot.press("3", "j")  # a conclusion: its full text under the list
    await settle(pilot)


async def _inbox(pilot) -> None:
    await settle(pilot)
    await pilot.press("M")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "loaded", False), what="the inbox")
    await settle(pilot)


async def _confirm(pilot) -> None:
    await _inbox(pilot)
    await pilot.press("y")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "plan", None) is not None, what="the plan")
    await pilot.press(*"seen on three runs")
    await settle(pilot)


SCREENS = {"mind": _mind, "memory_inbox": _inbox, "memory_confirm": _confirm}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_mind_screens(snap_compare, mind_dir, monkeypatch, screen, size):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert snap_compare(make_app(), terminal_size=size, run_before=SCREENS[screen])


@pytest.mark.parametrize("screen", ["mind", "memory_inbox"])
def test_mind_screens_no_color_ascii(snap_compare, mind_dir, monkeypatch, screen):
    monkeypatch.setenv("NO_COLOR", "1")
    use_ascii()
    try:
        assert snap_compare(make_app(), terminal_size=(80, 24), run_before=SCREENS[screen])
    finally:
        use_ascii(False)

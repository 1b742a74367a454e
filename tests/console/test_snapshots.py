"""Snapshot tests of every screen on the fixed ledger (fixed clock), at 100×30 and 80×24, and
under NO_COLOR. Review the report before `pytest --snapshot-update`."""

from __future__ import annotations

import pytest

from tests.support.console_app import make_app, settle, wait_for, graph_of

SIZES = [(100, 30), (80, 24)]


async def _home(pilot) -> None:
    await settle(pilot)


async def _graph(pilot) -> None:
    await settle(pilot)
    await pilot.press("enter")
    await wait_for(pilot, lambda: graph_of(pilot.app) is not None)
    await settle(pilot)
    await pilot.press("j", "j")


async def _graph_filtered(pilot) -> None:
    await _graph(pilot)
    await pilot.press("slash", *"status:pend")
    await settle(pilot)


async def _node(pilot) -> None:
    await _graph(pilot)
    await pilot.press("enter")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "detail", None) is not None)
    await settle(pilot)


async def _hostile(pilot) -> None:
    await settle(pilot)
    pilot.app.open_node("evil-task", "fetch")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "detail", None) is not None)
    await settle(pilot)


async def _events(pilot) -> None:
    await settle(pilot)
    await pilot.press("e")
    await settle(pilot)


async def _handoffs(pilot) -> None:
    await settle(pilot)
    await pilot.press("h")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "loaded", False))
    await settle(pilot)


async def _runs(pilot) -> None:
    await settle(pilot)
    await pilot.press("g")
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "loaded", False))
    await settle(pilot)


async def _help(pilot) -> None:
    await settle(pilot)
    await pilot.press("question_mark")
    await settle(pilot)


SCREENS = {
    "tasks": _home, "graph": _graph, "graph_filtered": _graph_filtered, "node": _node, "hostile": _hostile,
    "events": _events, "handoffs": _handoffs, "runs": _runs, "help": _help,
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen(snap_compare, fixed_dir, monkeypatch, screen, size):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert snap_compare(make_app(), terminal_size=size, run_before=SCREENS[screen])


@pytest.mark.parametrize("screen", ["tasks", "graph", "node"])
def test_screen_no_color(snap_compare, fixed_dir, monkeypatch, screen):
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=SCREENS[screen])


def test_read_only_header(snap_compare, fixed_dir, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert snap_compare(make_app(read_only=True), terminal_size=(80, 24), run_before=_home)

"""Snapshots of the node detail's explanations (fixed ledger, fixed clock) at 80×24 and 100×30: the node
detail opening with its signals and estimate, the collapsed observations, a failure as recorded,
and the graph's explanation panel. Review the PNGs before `pytest --snapshot-update`."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import ManualClock

from tests.support.console_app import graph_loaded, make_app, settle, wait_for, graph_of
from explain_ledger import build_explain_ledger

SIZES = [(100, 30), (80, 24)]


def _node(key: str, scroll_to: str | None = None):
    async def run(pilot) -> None:
        app = pilot.app
        await settle(pilot)
        app.open_node("maint-7", key)
        await wait_for(pilot, lambda: getattr(app.screen, "explained", None) is not None
                       and app.screen.detail is not None)
        await settle(pilot)
        if scroll_to is not None:
            text = app.screen.query_one("#detail").render()
            line = str(text).split("\n").index(scroll_to)
            app.screen.query_one("#detail-scroll").scroll_to(y=line, animate=False)
            await pilot.pause()
    return run


async def _graph_explained(pilot) -> None:
    app = pilot.app
    await settle(pilot)
    app.open_graph("maint-7")
    await graph_loaded(pilot)
    await wait_for(pilot, lambda: bool(graph_of(app).task_eta.get("why")), what="the analysis")
    await settle(pilot)
    app.screen.select_key("fix-old_exports")
    await pilot.press("x")
    await settle(pilot)


SCREENS = {
    "signals": _node("fix-old_exports"),
    "observations": _node("fix-old_exports", "Observations (40)"),
    "failure": _node("lint"),
    "graph_explained": _graph_explained,
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_explained(snap_compare, tmp_path: Path, monkeypatch, screen, size):
    monkeypatch.delenv("NO_COLOR", raising=False)
    now = build_explain_ledger(tmp_path / "ledger.db")
    monkeypatch.chdir(tmp_path)
    assert snap_compare(make_app(clock=ManualClock(now)), terminal_size=size, run_before=SCREENS[screen])

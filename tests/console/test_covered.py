"""A screen under a full screen draws nothing until it is back on top (console/widgets/covered.py).

Textual repaints the whole top screen when a region of the screen right under it is refreshed,
whatever the top screen's opacity: the task list under an open graph, moving with every commit,
made each commit a full-screen redraw of the graph. Counted here on the compositor the top screen
draws with (Textual's, reached through the screen: there is no public counter of full redraws)."""

from __future__ import annotations

import re

import pytest

from store import Ledger, NodeSpec
from tests.support.console_app import build_ledger, graph_loaded, make_app, settle, wait_for


@pytest.mark.parametrize("commits", [1, 4, 9])
async def test_changes_under_the_graph_do_not_redraw_all_of_it_and_show_when_back(tmp_path, monkeypatch, commits):
    path = build_ledger(tmp_path / "ledger.db")
    with Ledger.open(path) as led:
        led.create_task("big", title="covered")
        led.add_nodes("big", [NodeSpec(key=f"n{i:02d}") for i in range(30)])
    app = make_app(path, analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.open_graph("big")
        await graph_loaded(pilot)
        await settle(pilot)
        counts = {"full": 0, "partial": 0}
        compositor = type(app.screen._compositor)
        full, partial = compositor.render_full_update, compositor.render_partial_update

        def count_full(self, *a, **k):
            counts["full"] += 1
            return full(self, *a, **k)

        def count_partial(self, *a, **k):
            counts["partial"] += 1
            return partial(self, *a, **k)

        monkeypatch.setattr(compositor, "render_full_update", count_full)
        monkeypatch.setattr(compositor, "render_partial_update", count_partial)

        def done() -> int:
            i = app.tasks_model.index["big"]
            return app.tasks_model.rows[i].view.counts.get("succeeded", 0)

        with Ledger.open(path) as led:
            for k in range(commits):
                c = led.claim("big", "w", lease_s=600)
                led.commit(c)
                await wait_for(pilot, lambda k=k: done() == k + 1, what=f"commit {k + 1} in the task rows")
                await settle(pilot)
        assert counts["full"] == 0 and counts["partial"] > 0, counts
        await pilot.press("escape")  # back on the task list
        await settle(pilot)
        text = re.sub(r"&#160;|\s+", " ", app.export_screenshot())
        assert re.search(rf"big.*?{commits}/30", text), "the task list shows what changed while it was covered"

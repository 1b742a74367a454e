"""The node detail explains what the console shows — each signal with the
same evidence as `warden graph --json` and its suggested action one key away, the estimate with
the store's own reasons, identical consecutive observations collapsed, a failure as it was
recorded (its own retryable flag, not the node's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from console.dialogs import EscalateDialog, ParkDialog, RewindDialog
from console.explain import collapse_observations, failure_facts, task_estimate_text
from console.screens import NodeDetailScreen, TaskGraphScreen
from console.screens.node import render_detail
from store import Ledger, ManualClock
from store.reading.cli_json import graph_json
from store.views import EventView, ObservationView

from tests.support.console_app import make_app, settle, wait_for, graph_of
from explain_ledger import LOOP, LOOPS, build_explain_ledger


@pytest.fixture
def explain_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, float]:
    now = build_explain_ledger(tmp_path / "ledger.db")
    monkeypatch.chdir(tmp_path)
    return tmp_path, now


def graph_nodes(path: Path, now: float) -> dict[str, Any]:
    ledger = Ledger.open(path, clock=ManualClock(now))
    try:
        g = graph_json(ledger, "maint-7")
    finally:
        ledger.close()
    return {n["key"]: n for n in g["nodes"]} | {"": g["task"]}


async def open_detail(pilot: Any, key: str) -> NodeDetailScreen:
    app = pilot.app
    await settle(pilot)
    app.open_node("maint-7", key)
    await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.detail is not None
                   and app.screen.explained is not None, what="the node detail and its explanation")
    await settle(pilot)
    return app.screen


def shown(screen: NodeDetailScreen) -> str:
    assert screen.detail is not None
    return render_detail(screen.detail, screen.wapp.now(), screen.explained).plain


async def detail_of(now: float, key: str) -> tuple[NodeDetailScreen, str]:
    """Open maint-7/``key``'s detail in a fresh console at ``now``: the screen and its text."""
    app = make_app(clock=ManualClock(now))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_detail(pilot, key)
        return screen, shown(screen)


async def test_signals_are_those_of_warden_graph_with_the_same_evidence(explain_dir) -> None:
    path, now = explain_dir
    want = graph_nodes(path / "ledger.db", now)
    app = make_app(clock=ManualClock(now))
    async with app.run_test(size=(100, 30)) as pilot:
        for key in ("fix-old_exports", "ci-wait", "lint"):
            screen = await open_detail(pilot, key)
            assert screen.explained is not None
            assert list(screen.explained.signals) == want[key]["signals"]  # the same signals, field by field
            assert screen.explained.eta == want[key]["eta"]  # the same estimate and reasons
            text = shown(screen)
            for s in want[key]["signals"]:
                assert s["evidence"] in text
            for why in want[key]["eta"]["why"]:
                assert why in text
            await pilot.press("escape")
    kinds = [s["kind"] for s in want["fix-old_exports"]["signals"]]
    assert {"no_new_info", "repeating"} <= set(kinds)  # the fixture loops: a test that can fail


async def test_the_detail_opens_with_signals_then_estimate(explain_dir) -> None:
    _, text = await detail_of(explain_dir[1], "fix-old_exports")
    assert text.index("Signals (") < text.index("Estimate") < text.index("Lease") < text.index("Observations")
    assert "→ rewind, the evidence as the reason: press s or 1" in text
    assert "P50 " in text and "P80 " in text and "low confidence, 3 samples" in text
    assert "3 samples of fix" in text


async def test_a_declared_wait_is_shown_with_the_signals(explain_dir) -> None:
    _, text = await detail_of(explain_dir[1], "ci-wait")
    assert "declared wait waiting on ci (" in text and "left)" in text
    assert text.count("during the declared wait on ci") == 2  # its observations say so


async def test_s_opens_rewind_with_the_evidence_as_the_reason(explain_dir) -> None:
    path, now = explain_dir
    app = make_app(clock=ManualClock(now))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_detail(pilot, "fix-old_exports")
        assert screen.explained is not None
        first = screen.explained.signals[0]
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, RewindDialog))
        dialog = app.screen
        assert dialog.node == "fix-old_exports"
        assert dialog.query_one("#reason", Input).value == f"{first['kind']}: {first['evidence']}"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        kinds = [s["kind"] for s in screen.explained.signals]
        await pilot.press(str(kinds.index("no_progress") + 1))
        await wait_for(pilot, lambda: isinstance(app.screen, EscalateDialog))
        assert "units_done 1/4 unchanged" in app.screen.query_one("#reason", Input).value
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press(str(kinds.index("overdue") + 1))
        await wait_for(pilot, lambda: isinstance(app.screen, ParkDialog))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        notices: list[str] = []
        real_notify = app.notify
        app.notify = lambda message, **kw: (notices.append(str(message)), real_notify(message, **kw))[1]
        await pilot.press("9")  # no ninth signal: a notice, no dialog
        await wait_for(pilot, lambda: "there is no signal 9" in notices, what="the notice")
        await settle(pilot)
        assert app.screen is screen


async def test_identical_consecutive_observations_collapse_with_a_count(explain_dir) -> None:
    screen, text = await detail_of(explain_dir[1], "fix-old_exports")
    assert screen.detail is not None
    loop = [o for o in screen.detail.observations if o.text == LOOP]
    assert len(loop) == LOOPS
    assert f"×{LOOPS} " in text
    from store.clock import iso

    assert f"{iso(loop[0].at)} … {iso(loop[-1].at)}" in text  # first and last time
    assert text.count("FAILED test_export.py::test_old_format") == 1  # shown once, not 38 times
    assert "new info" in text and "▁▁▁▁" in text  # the sparkline stays, one mark per observation


def test_collapse_keeps_order_and_attempts_apart() -> None:
    def o(i: int, digest: str, attempt: int = 1, text: str = "t") -> ObservationView:
        return ObservationView(i, float(i), attempt, text, digest, 0, 1)

    runs = collapse_observations([o(1, "a"), o(2, "a"), o(3, "b"), o(4, "a"), o(5, "a", 2), o(6, "a", 2, "t2")])
    assert [(r.first.id, r.last.id, r.count) for r in runs] == [(1, 2, 2), (3, 3, 1), (4, 4, 1), (5, 6, 2)]
    assert runs[-1].texts_differ and not runs[0].texts_differ


async def test_a_failure_shows_its_own_retryable_flag(explain_dir) -> None:
    screen, text = await detail_of(explain_dir[1], "lint")
    assert screen.detail is not None and screen.detail.node.retryable  # the node declares yes …
    assert "retryable     no" in text  # … the failure said no
    assert "retryable=yes" not in text and "retryable     yes" not in text
    assert "class         spec" in text
    assert "message       ruff config rejects the new rule set: E999 unknown" in text
    assert "next retry    none: not retryable" in text


def test_failure_facts_from_an_older_journal_entry() -> None:
    class N:
        failure_class, error, retryable = "transient", "boom", True

    def ev(summary: str, payload: dict[str, Any]) -> EventView:
        return EventView(1, 0.0, "t", "k", "execution", "node.failed", "w", summary, payload)

    old = failure_facts(N(), ev("k failed (spec, not retryable)", {"failure_class": "spec", "retry": False,
                                                                   "error": "x"}))
    assert old is not None and old.retryable is False and old.failure_class == "spec"
    tired = failure_facts(N(), ev("k failed (transient, retries exhausted)", {"retry": False}))
    assert tired is not None and tired.retryable is True and tired.exhausted
    again = failure_facts(N(), ev("k failed (transient); retry in 30s", {"retry": True}))
    assert again is not None and again.retryable is True


async def test_the_graph_names_the_selected_nodes_first_signal_and_explains_the_task(explain_dir) -> None:
    path, now = explain_dir
    want = graph_nodes(path / "ledger.db", now)
    app = make_app(clock=ManualClock(now))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        app.open_graph("maint-7")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen) and graph_of(app) is not None)
        await wait_for(pilot, lambda: bool(graph_of(app).signals) and graph_of(app).task_eta.get("why"),
                       what="the analysis")
        await settle(pilot)
        graph = app.screen
        assert graph.select_key("fix-old_exports")
        first = want["fix-old_exports"]["signals"][0]
        named = f"{first['kind']} fix-old_exports ({first['severity']})"
        await wait_for(pilot, lambda: named in str(graph.query_one("#info").render()), what="the node's first signal")
        await pilot.press("x")

        def explained() -> bool:
            panel = str(graph.query_one("#explain").render())
            return "weighs most:" in panel and "P50" in panel and "P80" in panel

        await wait_for(pilot, explained, what="the task's explanation")
        summary = str(graph.query_one("#summary").render())
        assert "P50 " in summary


def test_task_estimate_text_is_literal() -> None:
    hostile = "[@click=app.quit]x[/] \x1b[2J"
    text = task_estimate_text({"p50_s": 60, "p80_s": 120, "samples": 2, "confidence": "low", "why": [hostile]},
                              [{"kind": "repeating", "node": hostile, "severity": "alarm", "evidence": hostile}])
    assert "\x1b" not in text.plain and "[@click=app.quit]x[/]" in text.plain and not text.spans[0].style == "link"

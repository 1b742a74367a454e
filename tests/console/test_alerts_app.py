"""Alerts in the app (Pilot): raised from the feed, counted in the header, seen by opening."""

from __future__ import annotations

from typing import Any

from tests.support.console_app import NOW, make_app, settle, wait_for
from console.widgets import StatusBar
from store import Ledger, ManualClock
from tests.support.console_probes import AlertLog
from tests.support.asks import ask


def _open_handoff(key: str) -> None:
    with Ledger.open("ledger.db", clock=ManualClock(NOW + 5)) as ledger:
        c = ledger.claim("report-001", worker="zed", key=key, lease_s=600)
        assert c is not None
        ask(ledger, c, kind="confirm", question="Publish [b]now[/b]?",
                             options=[{"id": "yes", "label": "Yes", "consequence": "published"}])


def _header(app: Any) -> str | None:
    """The status bar's text, None while the screen has not composed one yet (a test waiting on
    the header waits for it to exist, never reads a missing one as empty)."""
    bars = app.screen.query(StatusBar)
    return str(bars.first().render()) if bars else None


def _none_open(app: Any) -> bool:
    """No alert open, and a header on screen that no longer counts one."""
    header = _header(app)
    return app.alerts.open_count == 0 and header is not None and "new alert" not in header


async def test_a_handoff_counts_until_its_node_is_opened(fixed_dir: Any) -> None:
    app = make_app()
    log = AlertLog(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.alerts.open_count == 0 and log.delivered == []  # report-001's open handoff: startup
        _open_handoff("figures")
        await wait_for(pilot, lambda: app.alerts.open_count == 1, what="the alert")
        await wait_for(pilot, lambda: "1 new alert" in (_header(app) or ""), what="the header's count")
        [a] = log.delivered
        assert (a.kind, a.task, a.node) == ("handoff", "report-001", "figures")
        note = app._notifications  # noqa: SLF001 - what the operator saw
        assert any("report-001/figures" in n.message and "[b]now[/b]" in n.message for n in note)
        assert log.bells == 1
        app.open_node("report-001", "figures")
        await wait_for(pilot, lambda: _none_open(app), what="opening the node to mark its alert seen")


async def test_the_handoff_inbox_and_the_palette_mark_seen(fixed_dir: Any) -> None:
    app = make_app(bell=False)
    log = AlertLog(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        _open_handoff("figures")
        await wait_for(pilot, lambda: app.alerts.open_count == 1, what="the alert")
        assert log.bells == 0  # --no-bell
        await pilot.press("h")
        await wait_for(pilot, lambda: app.alerts.open_count == 0, what="the inbox to mark the handoff seen")
        await pilot.press("escape")
        with Ledger.open("ledger.db", clock=ManualClock(NOW + 9)) as ledger:  # a task made after startup
            ledger.create_task("new-004", title="New")
            ledger.add_node("new-004", "ask", kind="human")
            c = ledger.claim("new-004", worker="zed")
            ask(ledger, c, kind="direction", question="Which way?",
                                 options=[{"id": "a", "label": "A", "consequence": "a"}])
        await wait_for(pilot, lambda: app.alerts.open_count == 1, what="the second alert")
        await wait_for(pilot, lambda: "1 new alert" in (_header(app) or ""), what="the header's count")
        app.action_alerts_seen()
        await wait_for(pilot, lambda: _none_open(app), what="the palette's 'mark seen'")

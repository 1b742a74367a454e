"""A notification never covers an open dialog: alerts raised while a dialog is
open wait — counted in the header — until it closes; a notification on screen when a dialog opens
is taken down and shown again after it."""

from __future__ import annotations

from typing import Any

from tests.support.console_app import NOW, make_app, settle, wait_for
from textual.screen import ModalScreen

from console.widgets import StatusBar
from store import Ledger, ManualClock
from tests.support.asks import ask


def _open_handoff(key: str) -> None:
    with Ledger.open("ledger.db", clock=ManualClock(NOW + 5)) as ledger:
        if key != "figures":  # the fixture's one ready node; another is added for a second question
            ledger.add_node("report-001", key, kind="tool", title=key.title())
        c = ledger.claim("report-001", worker="zed", key=key, lease_s=600)
        assert c is not None
        ask(ledger, c, kind="confirm", question=f"Publish {key}?",
                             options=[{"id": "yes", "label": "Yes", "consequence": "published"}])


def _base_header(app: Any) -> str:
    """The header of the screen under the dialog (the dialog has none of its own)."""
    for screen in reversed(app.screen_stack):
        bars = screen.query(StatusBar)
        if bars:
            return str(bars.first().render())
    return ""


def _toasts(app: Any) -> list[str]:
    return [n.message for n in app._notifications]  # noqa: SLF001 - what the operator sees


async def _open_dialog(pilot: Any) -> None:
    await pilot.press("p")  # park the selected task: its confirmation dialog
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModalScreen), what="the park dialog")


async def test_an_alert_raised_under_a_dialog_waits_in_the_header_until_it_closes(fixed_dir: Any) -> None:
    app = make_app(bell=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await _open_dialog(pilot)
        _open_handoff("figures")
        await wait_for(pilot, lambda: app.alerts.open_count == 1, what="the alert")
        await wait_for(pilot, lambda: "1 new alert, 1 waiting" in _base_header(app), what="the header's count")
        assert _toasts(app) == []  # nothing drawn over the dialog and its buttons
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ModalScreen), what="the dialog to close")
        await wait_for(pilot, lambda: any("report-001/figures" in t for t in _toasts(app)), what="the notification")
        await wait_for(pilot, lambda: "waiting" not in _base_header(app) and "1 new alert" in _base_header(app),
                       what="the header without 'waiting'")
        assert app.alerts.waiting == 0


async def test_a_notification_on_screen_is_taken_down_by_a_dialog_and_shown_after_it(fixed_dir: Any) -> None:
    app = make_app(bell=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        _open_handoff("figures")
        await wait_for(pilot, lambda: any("report-001/figures" in t for t in _toasts(app)), what="the notification")
        await _open_dialog(pilot)
        await wait_for(pilot, lambda: _toasts(app) == [], what="the notification to be taken down")
        await wait_for(pilot, lambda: "1 waiting" in _base_header(app), what="the header's 'waiting'")
        _open_handoff("tables")  # a second alert while the dialog is open
        await wait_for(pilot, lambda: app.alerts.open_count == 2, what="the second alert")
        assert _toasts(app) == []
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ModalScreen), what="the dialog to close")
        await wait_for(pilot, lambda: any("figures" in t and "tables" in t for t in _toasts(app)),
                       what="one notification listing both")

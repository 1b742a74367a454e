"""Type-ahead: what an operator types right after an action key, before the
dialog is ready (its plan still loading in a worker), lands in the reason field in order; nothing
typed is lost or acts on the screen underneath. And ctrl+s right after typing applies the reason as
typed in full.

The planner is held by a ``threading.Event`` (released by the test), never by a sleep. A fast
typist's burst is the app reading several keys before it has handled the first: the keys are posted
to the app in one go, as the terminal driver does with one read of the input."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from textual import events
from textual.widgets import Input

from console.dialogs import ParkDialog, RewindDialog
from console.screens import TaskGraphScreen
from store import Ledger, ManualClock

from tests.support.console_app import NOW, graph_loaded, make_app, settle, wait_for, workers_done

TYPED = "jk loop: he quit ever"  # j/k move lists, e/h/q open screens or quit: none of that may happen


def key(ch: str) -> events.Key:
    return events.Key({" ": "space", ":": "colon", "/": "slash", "-": "minus"}.get(ch, ch), ch)


@pytest.fixture
def held_planner(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Planning (Ledger.plan, which the dialogs call, and plan_rewind / plan_park) waits for the
    returned event (set by the test)."""
    gate = threading.Event()
    for name in ("plan", "plan_rewind", "plan_park"):
        real = getattr(Ledger, name)

        def held(self: Ledger, *a: Any, _real: Any = real, **kw: Any) -> Any:
            assert gate.wait(30), "the test never released the planner"
            return _real(self, *a, **kw)

        monkeypatch.setattr(Ledger, name, held)
    return gate


async def open_graph_on(pilot: Any, key_name: str) -> TaskGraphScreen:
    app = pilot.app
    await settle(pilot)
    await pilot.press("enter")
    await graph_loaded(pilot)
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, TaskGraphScreen)
    assert screen.select_key(key_name)
    return screen


def rejections(path: Any, key_name: str) -> tuple[str, ...]:
    ledger = Ledger.open(path, clock=ManualClock(NOW))
    try:
        return ledger.node("report-001", key_name).rejections
    finally:
        ledger.close()


async def test_keys_typed_right_after_r_land_in_the_reason(fixed_dir, held_planner) -> None:
    app = make_app(analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        graph = await open_graph_on(pilot, "outline")
        cursor = graph.row_list.cursor
        await pilot.press("r", *TYPED)  # each key handled before the next; the plan is still held
        dialog = app.screen
        assert isinstance(dialog, RewindDialog) and dialog.planning
        assert dialog.query_one("#reason", Input).value == TYPED
        held_planner.set()
        await wait_for(pilot, lambda: not dialog.planning, what="the plan")
        assert dialog.plan is not None, dialog.plan_error
        assert dialog.query_one("#reason", Input).value == TYPED
        assert app.screen is dialog and graph.row_list.cursor == cursor
        await pilot.press("ctrl+s")
        await workers_done(pilot, dialog)
        assert app.screen is graph
    assert rejections(fixed_dir / "ledger.db", "outline")[-1] == TYPED.strip()


async def test_a_burst_typed_with_r_lands_in_order_and_nothing_underneath(fixed_dir, held_planner) -> None:
    app = make_app(analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        graph = await open_graph_on(pilot, "outline")
        cursor = graph.row_list.cursor
        stack = len(app.screen_stack)
        for ch in "r" + TYPED:  # one read of the terminal: the app sees them all before handling `r`
            app.post_message(key(ch))
        await wait_for(pilot, lambda: isinstance(app.screen, RewindDialog)
                       and app.screen.query_one("#reason", Input).value == TYPED, what="the typed reason")
        dialog = app.screen
        assert dialog.planning  # still held: the keys did not wait for the plan
        assert len(app.screen_stack) == stack + 1 and app.is_running  # no `e`, `h` or `q` acted
        assert graph.row_list.cursor == cursor  # no `j` or `k` moved the list underneath
        held_planner.set()
        await wait_for(pilot, lambda: not dialog.planning, what="the plan")
        assert dialog.plan is not None, dialog.plan_error
        await pilot.press("ctrl+s")
        await workers_done(pilot, dialog)
    assert rejections(fixed_dir / "ledger.db", "outline")[-1] == TYPED.strip()


async def test_escape_typed_ahead_cancels_and_nothing_is_applied(fixed_dir, held_planner, console_applies) -> None:
    app = make_app(analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        graph = await open_graph_on(pilot, "outline")
        pushed: list[Any] = []
        real_push = app.push_screen
        app.push_screen = lambda screen, *a, **kw: (pushed.append(screen), real_push(screen, *a, **kw))[1]
        for name, ch in (("p", "p"), ("x", "x"), ("escape", None)):
            app.post_message(events.Key(name, ch))
        # the park dialog opened (else there was nothing to cancel), then closed
        await wait_for(pilot, lambda: any(isinstance(s, ParkDialog) for s in pushed) and app.screen is graph,
                       what="the dialog to open and close")
        held_planner.set()
        await settle(pilot)
        assert not any(isinstance(s, ParkDialog) for s in app.screen_stack)
    assert console_applies == []


async def test_ctrl_s_right_after_typing_applies_the_reason_in_full(fixed_dir, apply_attempts) -> None:
    """ctrl+s is a priority binding: the app runs it the moment it reads it, while the keys typed
    just before may still be queued for the input."""
    reason = "the sources were stale; fetch them again from the archive"
    app = make_app(analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_graph_on(pilot, "outline")
        await pilot.press("r")
        dialog = app.screen
        assert isinstance(dialog, RewindDialog)
        await wait_for(pilot, lambda: not dialog.planning, what="the plan")
        assert dialog.plan is not None, dialog.plan_error
        for ch in reason:
            app.post_message(key(ch))
        app.post_message(events.Key("ctrl+s", None))
        await wait_for(pilot, lambda: apply_attempts(dialog) == 1, what="the apply")
        await workers_done(pilot, dialog)
    assert rejections(fixed_dir / "ledger.db", "outline")[-1] == reason


async def test_slash_and_the_filter_text_in_one_burst_filter_and_act_on_nothing(fixed_dir) -> None:
    """`/` opens the filter; the keys of the same burst are the filter's (`u`, `r`, `e` … are
    action and screen keys on the graph underneath), then enter leaves the filter and the next key
    acts on the filtered list."""
    app = make_app(analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        graph = await open_graph_on(pilot, "outline")
        stack = len(app.screen_stack)
        for ch in "/section":
            app.post_message(key(ch))
        app.post_message(events.Key("backspace", "\x7f"))
        for ch in "n-2":
            app.post_message(key(ch))
        app.post_message(events.Key("enter", "\r"))
        app.post_message(key("j"))  # after enter: the list's, not the filter's
        inp = graph.query_one("#filter", Input)
        await wait_for(pilot, lambda: not app.taking_keys() and inp.value == "section-2", what="the filter text")
        await settle(pilot)
        assert inp.value == "section-2" and len(app.screen_stack) == stack  # nothing opened
        assert graph.row_list.has_focus
        assert graph.row_list.cursor == 0  # one row left; `j` on it stays
        assert graph.selected_node() == "section-2"


async def test_a_burst_with_tab_and_enter_fills_each_field_in_order(fixed_dir, held_planner) -> None:
    """Abort: reason, Tab, the task id; shift+Tab back to the reason; enter moves on like Tab —
    all typed before the dialog is ready and after."""
    from console.dialogs import AbortDialog

    app = make_app(analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        burst = ["a", *"stop", "tab", *"report-001", "shift+tab", *" now"]
        for name in burst:
            app.post_message(events.Key(name, None) if len(name) > 1 else key(name))
        await wait_for(pilot, lambda: isinstance(app.screen, AbortDialog) and not app.taking_keys(), what="the keys")
        dialog = app.screen
        assert dialog.query_one("#reason", Input).value == "stop now"
        assert dialog.query_one("#confirm", Input).value == "report-001"
        for name in ["enter", "x"]:  # the dialog ready: enter in the reason moves to the id
            app.post_message(events.Key(name, None) if len(name) > 1 else key(name))
        # entered by enter (as by Tab) the id field's text is selected: `x` replaces it
        await wait_for(pilot, lambda: dialog.query_one("#confirm", Input).value == "x", what="x in the id")
        assert dialog.query_one("#reason", Input).value == "stop now"
        held_planner.set()

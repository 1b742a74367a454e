"""What the operator types is never dropped, and every dialog ends with the screen usable.

* The resolve screen: ``enter`` on an option moves to the answer, and the words typed after it are
  the answer (a Claude ``deny`` with its reason, not ``answer: null``); words typed while the
  options have the focus go there too.
* Every action dialog: a character typed while a list, a box or a button has the focus goes into
  the reason, in order.
* ``c`` (mark an effect compensated) shows its dialog — not a full-screen spinner (its "loading"
  flag was Textual's own ``Widget.loading``) — and every dialog, cancelled or applied, leaves the
  screen under it drawn and answering keys.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, LoadingIndicator, OptionList

from console.dialogs import ActionDialog, CompensatedDialog
from console.screens import HandoffInboxScreen, TaskGraphScreen, TaskListScreen
from console.screens.resolve import ResolveHandoffScreen
from store import Ledger, ManualClock

from tests.support.console_app import T0, build_ledger, make_app, settle, wait_for


def select_task(app: Any, task_id: str) -> None:
    screen = app.screen
    assert isinstance(screen, TaskListScreen)
    screen.row_list.cursor = next(i for i, r in enumerate(app.tasks_model.rows) if r.view.task_id == task_id)


def screen_text(app: Any) -> str:
    return re.sub(r"&#160;|\s+", " ", app.export_screenshot())


def with_effect(path: Path) -> Path:
    """build_ledger's tasks and "fx", whose node made a confirmed effect with a compensation."""
    build_ledger(path)
    with Ledger.open(path, clock=ManualClock(T0 + 10)) as led:
        led.create_task("fx", title="opened a PR")
        led.add_node("fx", "pr", kind="tool")
        led.add_node("fx", "more", kind="tool", deps=["pr"])
        c = led.claim("fx", "w", kinds=["tool"])
        led.intend_effect(c, "pr:12", compensation="close PR 12")
        led.confirm_effect(c, "pr:12", external_id="#12")
        led.commit(c, output={})
    return path


def handoff_row(path: Path) -> Any:
    with Ledger.open(path, create=False) as ledger:
        [h] = ledger.handoffs(status=None, task_id="report-001")
        return h


async def open_resolve(pilot) -> ResolveHandoffScreen:
    app = pilot.app
    await settle(pilot)
    await pilot.press("h")
    await wait_for(pilot, lambda: isinstance(app.screen, HandoffInboxScreen) and app.screen.loaded)
    await pilot.press("enter")
    scr = app.screen
    assert isinstance(scr, ResolveHandoffScreen)
    await wait_for(pilot, lambda: scr.handoff is not None, what="the handoff")
    await pilot.pause()
    return scr


# ---------------------------------------------------------------------- the resolve screen
async def test_words_typed_after_enter_are_the_answer(ledger_path):
    app = make_app(ledger_path, operator="ana@console", analysis=False)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_resolve(pilot)
        assert isinstance(scr.focused, OptionList)  # on the recommended option, "no"
        await pilot.press("enter", *"unaudited figures stay out", "ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, ResolveHandoffScreen), what="resolved")
    h = handoff_row(ledger_path)
    assert (h.status, h.resolution_option, h.resolution_answer) == ("resolved", "no", "unaudited figures stay out")


async def test_words_typed_on_the_options_go_to_the_answer(ledger_path):
    app = make_app(ledger_path, operator="ana@console", analysis=False)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_resolve(pilot)
        await pilot.press(*"flag it")  # the options have the focus: the words go to the answer
        await wait_for(pilot, lambda: scr.query_one("#answer", Input).value == "flag it", what="the words")
        scr.query_one("#options", OptionList).focus()
        await pilot.pause()
        await pilot.press("up", "enter", *" clearly", "ctrl+s")  # "yes", then more words
        await wait_for(pilot, lambda: not isinstance(app.screen, ResolveHandoffScreen), what="resolved")
    h = handoff_row(ledger_path)
    assert (h.resolution_option, h.resolution_answer) == ("yes", "flag it clearly")


# ---------------------------------------------------------------------- every action dialog
@pytest.mark.parametrize("key", ["p", "n", "a"])
async def test_a_character_typed_on_a_button_goes_into_the_reason(ledger_path, key):
    app = make_app(ledger_path, analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        select_task(app, "report-001")
        await pilot.press(key)
        dlg = app.screen
        assert isinstance(dlg, ActionDialog)
        await wait_for(pilot, lambda: dlg.focused is dlg.query_one("#reason", Input), what="the reason focused")
        await pilot.press(*"why")
        dlg.query_one("#cancel").focus()
        await pilot.pause()
        await pilot.press(*" not", " ", *"now")
        await wait_for(pilot, lambda: dlg.query_one("#reason", Input).value == "why not now", what="the words")
        assert dlg.focused is dlg.query_one("#reason", Input)
        await pilot.press("escape")


# ---------------------------------------------------------------------- c, and the screen after every dialog
async def test_c_shows_its_dialog_and_leaves_the_list_usable(tmp_path):
    path = with_effect(tmp_path / "ledger.db")
    app = make_app(path, operator="ana@console", analysis=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        select_task(app, "fx")
        await pilot.press("c")
        dlg = app.screen
        assert isinstance(dlg, CompensatedDialog)
        await wait_for(pilot, lambda: dlg.plan is not None, what="the plan")
        await pilot.pause()
        assert not dlg.loading and not list(dlg.query(LoadingIndicator))
        shown = screen_text(app)
        assert "Mark compensated" in shown and "pr:12" in shown and "● ● ●" not in shown
        await pilot.press(*"closed PR 12 by hand", "ctrl+s")
        await wait_for(pilot, lambda: app.screen is not dlg, what="applied")
        await settle(pilot)
        assert isinstance(app.screen, TaskListScreen) and not app.screen.loading
        assert re.search(r"fx .*active", screen_text(app))
    with Ledger.open(path, create=False) as led:
        [e] = led.effects("fx")
        assert (e.status, e.compensation_note) == ("compensated", "closed PR 12 by hand")


# (key, task, node, typed before escape) — one per registered action with a key
DIALOGS = [("p", "report-001", None), ("u", "idle-002", None), ("n", "report-001", None),
           ("r", "report-001", "outline"), ("a", "report-001", None), ("c", "fx", None)]


async def test_every_dialog_cancelled_leaves_its_screen_drawn_and_answering(tmp_path):
    path = with_effect(tmp_path / "ledger.db")
    app = make_app(path, analysis=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for key, task, node in DIALOGS:
            if node:
                app.open_graph(task)
                await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), what="the graph")
                await settle(pilot)
                app.screen.select_key(node)
                await pilot.pause()
            else:
                select_task(app, task)
                await pilot.pause()
            under = app.screen
            await pilot.press(key)
            dlg = app.screen
            assert isinstance(dlg, ActionDialog), key
            await wait_for(pilot, lambda: not dlg.planning, what=f"{key}: the plan")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is under, what=f"{key}: back")
            await settle(pilot)
            assert not under.loading and not list(under.query(LoadingIndicator)), key
            before = under.row_list.cursor
            await pilot.press("down" if before == 0 else "up")
            await wait_for(pilot, lambda: under.row_list.cursor != before, what=f"{key}: the cursor moves after")
            if node:
                await pilot.press("escape")
                await wait_for(pilot, lambda: isinstance(app.screen, TaskListScreen), what="the task list")

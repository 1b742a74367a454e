"""The console side of what the operator relies on, driven like an operator (Pilot):

* ``o`` opens the report of the selected task (the deliverable of a task at the stop gate or
  aborted; the task list and graph say so); agent text shows literally;
* the graph's summary and the task list say "budget clock paused since …" while a task waits;
* the abort dialog lists the compensation nodes it adds; ``c`` marks an effect compensated by hand
  (reason required, Cancel by default, read-only shows a notice);
* the node detail shows each effect's status, its compensation node and who compensated it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, Input, OptionList, Static

from console.dialogs import AbortDialog, CompensatedDialog
from console.glyphs import READ_ONLY_NOTICE
from console.screens import NodeDetailScreen, TaskGraphScreen, TaskListScreen, TaskReportScreen
from store import Budget, Ledger, ManualClock, NodeSpec

from tests.support.console_app import HOSTILE, NOW, T0, settle, workers_done, graph_of
from tests.support.console_app import make_app
from tests.support.console_app import wait_for
from tests.support.asks import ask

EFFECT = "pr:repo/" + "fix\x1b[31m"


def build(path: Path) -> Path:
    """stopped: over its token cap (the stop gate), an artifact, a confirmed effect, a closing step
    left; waiting: a node blocked on a human and nothing running (its clock stands still)."""
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock) as led:
        led.create_task("stopped", title="Pilot report", budget=Budget(tokens=1000))
        led.add_nodes("stopped", [NodeSpec("draft", "llm"), NodeSpec("close", "llm", ("draft",), always_admit=True)])
        c = led.claim("stopped", "w", lease_s=10**7)
        clock.advance(20)
        led.intend_effect(c, EFFECT, compensation="close the PR " + HOSTILE)
        led.confirm_effect(c, EFFECT, external_id="#12")
        led.commit(c, output={}, tokens=1500, artifact=(HOSTILE + ".md", b"# report\n"))
        led.create_task("waiting", title="Needs a human")
        led.add_nodes("waiting", [NodeSpec("ask", "human"), NodeSpec("after", "tool", ("ask",))])
        c = led.claim("waiting", "w", lease_s=10**7)
        clock.advance(30)
        ask(led, c, kind="confirm", question="go?", options=[{"id": "yes"}])
    return path


@pytest.fixture
def sp(tmp_path: Path) -> Path:
    return build(tmp_path / "sem.db")


def select_task(app, task_id: str) -> None:
    screen = app.screen
    assert isinstance(screen, TaskListScreen)
    rows = app.tasks_model.rows
    screen.row_list.cursor = next(i for i, r in enumerate(rows) if r.view.task_id == task_id)


def info_text(screen) -> str:
    return str(screen.query_one("#info", Static).render())


async def test_o_opens_the_report_of_a_task_at_the_stop_gate(sp):
    app = make_app(sp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        select_task(app, "stopped")
        await pilot.pause()
        assert "o: report" in info_text(app.screen)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskReportScreen), what="the report")
        rep = app.screen
        await wait_for(pilot, lambda: rep.data is not None, what="the report's data")
        assert rep.data["budget"]["gate"] == "stop" and rep.data["best_artifact"]["node"] == "draft"
        shown = str(rep.query_one("#report", Static).render())
        assert "best result so far" in shown and "unfinished (1)" in shown and "closing step" in shown
        assert "\x1b" not in shown and "\\x1b" in shown  # agent text literal, escaped
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskListScreen), what="back")
        select_task(app, "waiting")
        await pilot.pause()
        assert "o: report" not in info_text(app.screen)  # any task has one; only these are pointed at


async def test_the_report_is_available_read_only(sp):
    app = make_app(sp, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        select_task(app, "stopped")
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskReportScreen) and app.screen.data is not None)
        await pilot.press("c")  # an action: only a notice
        await pilot.pause()
        assert list(app._notifications)[-1].message == READ_ONLY_NOTICE


async def test_a_waiting_task_says_its_clock_is_paused(sp):
    app = make_app(sp)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        select_task(app, "waiting")
        await pilot.pause()
        assert "budget clock paused since 2027-01-15T08:00Z (waiting on a human)" in info_text(app.screen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen) and graph_of(app) is not None)
        await settle(pilot)
        summary = str(app.screen.query_one("#summary", Static).render())
        assert "◷ budget clock paused since" in summary


async def test_abort_lists_compensations_and_c_marks_one_by_hand(sp, console_applies, apply_attempts):
    app = make_app(sp, operator="ana@console")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        select_task(app, "stopped")
        await pilot.press("a")
        dlg = app.screen
        assert isinstance(dlg, AbortDialog)
        await wait_for(pilot, lambda: dlg.plan is not None, what="the abort plan")
        preview = str(dlg.query_one("#preview").render())
        assert "compensation nodes added (1), run in this order" in preview and "1. compensate:pr:repo/fix_" in preview
        assert "\x1b" not in preview
        dlg.query_one("#reason", Input).value = "wrong repository"
        dlg.query_one("#confirm", Input).value = "stopped"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen is not dlg, what="abort applied")
        await settle(pilot)
        # c: mark the effect compensated by hand
        await pilot.press("c")
        dlg = app.screen
        assert isinstance(dlg, CompensatedDialog)
        assert dlg.focused is dlg.query_one("#reason", Input)
        await wait_for(pilot, lambda: dlg.plan is not None, what="the plan")
        ol = dlg.query_one("#effects", OptionList)
        assert ol.option_count == 1 and "\x1b" not in str(ol.get_option_at_index(0).prompt)
        assert dict(dlg.plan.changes) == {dlg.plan.params.to_json()["compensation_node"]: ("pending", "abandoned")}
        assert dlg.query_one("#apply", Button).disabled  # no reason yet
        await pilot.press("escape")  # cancel: nothing changes
        await wait_for(pilot, lambda: app.screen is not dlg)
        await workers_done(pilot, dlg)
        assert apply_attempts(dlg) == 0 and console_applies == [("abort", "stopped")]
        await pilot.press("c")
        dlg = app.screen
        await wait_for(pilot, lambda: dlg.plan is not None, what="the plan")
        await pilot.press(*"closed PR 12 by hand", "enter")  # enter never applies
        assert app.screen is dlg
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen is not dlg, what="applied")
        assert apply_attempts(dlg) == 1 and console_applies[-1] == ("compensated", EFFECT)
    with Ledger.open(sp, create=False) as led:
        [e] = led.effects("stopped")
        assert (e.status, e.compensated_by, e.compensation_note) == ("compensated", "ana@console",
                                                                     "closed PR 12 by hand")


async def test_the_node_detail_shows_effect_statuses(sp):
    with Ledger.open(sp, create=False, clock=ManualClock(NOW)) as led:
        led.apply(led.plan_abort("stopped", reason="stop"), operator="op")
        c = led.claim("stopped", "undoer")
        led.commit(c, output={})
    app = make_app(sp)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        app.open_node("stopped", "draft")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.detail is not None)
        shown = str(app.screen.query_one("#detail", Static).render())
        assert "compensated" in shown and "compensated by undoer" in shown and "\x1b" not in shown


async def test_the_console_looks_at_wake_conditions(sp):
    """at:/file: conditions need somebody to look: the console does (every WAKES_EVERY_S; called
    here directly) and the auto-resume shows up through the feed like any change."""
    with Ledger.open(sp, create=False, clock=ManualClock(T0 + 60)) as led:
        led.apply(led.plan_park("waiting", reason="after lunch", wake_on="at:5m", auto_resume=True), operator="op")
    clock = ManualClock(NOW)  # T0 + 600: past the wake time
    app = make_app(sp, clock=clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        # The console's own periodic look may already have resumed it on a slow machine; either way
        # the resume comes from a look at the condition, never from the agent.
        app.check_wakes()
        await wait_for(pilot, lambda: next(r for r in app.tasks_model.rows
                                           if r.view.task_id == "waiting").view.status == "active",
                       what="the auto-resume to reach the task list")
    with Ledger.open(sp, create=False) as led:
        assert [(a.action, a.operator) for a in led.actions("waiting")][:1] == [("resume", "system")]


async def test_a_read_only_console_writes_no_wake(sp):
    with Ledger.open(sp, create=False, clock=ManualClock(T0 + 60)) as led:
        led.apply(led.plan_park("waiting", reason="after lunch", wake_on="at:5m", auto_resume=True), operator="op")
    app = make_app(sp, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        worker = app.check_wakes()  # even when asked, a read-only ledger is left alone
        await pilot.app.workers.wait_for_complete([worker])
        await settle(pilot)
    with Ledger.open(sp, create=False) as led:
        assert led.task("waiting").status == "parked" and [a.action for a in led.actions("waiting")] == ["park"]
        assert not [e for e in led.events(0, task_id="waiting") if e.kind == "park.wake"]

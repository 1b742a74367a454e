"""The action dialogs driven like an operator (Pilot) against a file ledger: cancel changes
nothing; apply changes exactly the plan; a plan made stale from outside is refused, re-shown
under a banner and applied only when Apply is pressed again; abort needs the exact task id;
an empty reason cannot apply; enter in an input never applies; read-only refuses; the command
palette runs the commands it lists.

A negative test (nothing may be applied) waits for every worker of the dialog to finish before it
looks, and checks three things: the dialog started no apply (``apply_attempts``), the console
called ``Ledger.apply`` never (the ``console_applies`` spy, which the positive tests show does
see the console's applies), and the ledger is unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from textual.widgets import Button, Input, Select, SelectionList, Static

from console.dialogs import (
    STALE_BANNER,
    AbortDialog,
    ActionDialog,
    CompensatedDialog,
    NarrowDialog,
    ParkDialog,
    ResumeDialog,
    RewindDialog,
)
from console.glyphs import READ_ONLY_NOTICE
from console.screens import (
    EventLogScreen,
    HandoffInboxScreen,
    HelpScreen,
    RunsScreen,
    TaskGraphScreen,
    TaskListScreen,
    TaskReportScreen,
)
from store import Ledger, ManualClock

from tests.support.console_app import NOW, T0, graph_of, run_from_palette, settle, workers_done
from tests.support.console_app import make_app as _make_app
from tests.support.console_app import wait_for as _wait_for


def make_app(*a: Any, **kw: Any):
    kw.setdefault("analysis", False)  # estimates are not what these tests look at
    return _make_app(*a, **kw)


async def wait_for(pilot, cond, timeout: float = 30.0, what: str = "") -> None:
    await _wait_for(pilot, cond, timeout=timeout, what=what)

OUTSIDE = "other-op@elsewhere"


def add_scope_task(path: Path) -> None:
    """scope-003: two module nodes with preconditions, both succeeded, and a merge after them."""
    clock = ManualClock(T0 + 200)
    with Ledger.open(path, clock=clock) as ledger:
        ledger.create_task("scope-003", title="Migrate modules", preconditions={"module": ["a", "b"]})
        ledger.add_node("scope-003", "mod-a", preconditions={"module": "a"})
        ledger.add_node("scope-003", "mod-b", preconditions={"module": "b"})
        ledger.add_node("scope-003", "docs", preconditions={"module": ["a", "b"]})
        ledger.add_node("scope-003", "merge", deps=["mod-a", "mod-b"])
        for _ in range(2):
            c = ledger.claim("scope-003", worker="erin", lease_s=60)
            ledger.commit(c, output={"ok": c.node_key})


@pytest.fixture
def lp(ledger_path: Path) -> Path:
    add_scope_task(ledger_path)
    return ledger_path


def state(path: Path, task_id: str) -> dict[str, Any]:
    """Everything an action may change, read through a fresh connection."""
    with Ledger.open(path, create=False, clock=ManualClock(NOW)) as ledger:
        g = ledger.graph(task_id)
        return {
            "task": (g.task.status, g.task.revision, dict(g.task.preconditions), g.task.park_reason),
            "nodes": {n.key: (n.status, n.version, n.rejections, n.lease_owner) for n in g.nodes},
            "actions": [(a.action, a.result, a.operator, a.reason) for a in ledger.actions(task_id)],
            "handoffs": [(h.id, h.status) for h in ledger.handoffs(status=None, task_id=task_id)],
        }


def statuses(s: dict[str, Any]) -> dict[str, str]:
    return {k: v[0] for k, v in s["nodes"].items()}


async def open_dialog(pilot, action: str, task: str, node: str | None = None, **kw) -> ActionDialog:
    app = pilot.app
    await settle(pilot)
    from console.dialogs import open_action

    dlg = open_action(app, action, task, node, **kw)
    assert isinstance(dlg, ActionDialog)
    await wait_for(pilot, lambda: app.screen is dlg and dlg.is_mounted, what="the dialog")
    return dlg


async def plan_ready(pilot, dlg: ActionDialog) -> None:
    await wait_for(pilot, lambda: not dlg.planning and (dlg.plan is not None or dlg.plan_error is not None),
                   what="the plan")
    await pilot.pause()


def apply_button(dlg: ActionDialog) -> Button:
    return dlg.query_one("#apply", Button)


async def nothing_applied(pilot, dlg: ActionDialog, applies: list, lp: Path, before: dict[str, Any],
                          task: str, apply_attempts: Callable[[object], int]) -> None:
    """Once the dialog's workers are done: no apply started, none reached the ledger, no change."""
    await workers_done(pilot, dlg)
    assert apply_attempts(dlg) == 0
    assert applies == []
    assert state(lp, task) == before


async def type_reason(pilot, dlg: ActionDialog, text: str = "wrong sources") -> None:
    dlg.query_one("#reason", Input).focus()
    await pilot.press(*text)


# (action, task, node, what to type besides the reason)
CASES = {
    "park": ("park", "report-001", None),
    "resume": ("resume", "idle-002", None),
    "narrow": ("narrow", "scope-003", None),
    "rewind": ("rewind", "report-001", "outline"),
    "abort": ("abort", "report-001", None),
}


async def fill(pilot, dlg: ActionDialog, reason: str = "wrong sources") -> None:
    """Make the dialog ready to apply: the choices (narrow), the reason, the confirmation."""
    if isinstance(dlg, NarrowDialog):
        await wait_for(pilot, lambda: dlg.choices is not None, what="narrow choices")
        dlg.query_one("#pre-key", Select).value = "module"
        await pilot.pause()
        dlg.query_one("#pre-value", Select).value = '"a"'
        await pilot.pause()
    await plan_ready(pilot, dlg)
    if dlg.needs_reason:
        await type_reason(pilot, dlg, reason)
    if isinstance(dlg, AbortDialog):
        dlg.query_one("#confirm", Input).focus()
        await pilot.press(*dlg.task_id)
    await pilot.pause()


# ---------------------------------------------------------------------- keys and focus
async def test_rewind_from_the_graph_with_keys(lp, console_applies, apply_attempts):
    app = make_app(lp, operator="ana@console")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: graph_of(app) is not None)
        await settle(pilot)
        await pilot.press("j")  # outline
        assert isinstance(app.screen, TaskGraphScreen) and app.screen.selected_node() == "outline"
        before = state(lp, "report-001")
        await pilot.press("r")
        dlg = app.screen
        assert isinstance(dlg, RewindDialog)
        assert dlg.focused is dlg.query_one("#reason", Input)  # focus starts in the reason
        await plan_ready(pilot, dlg)
        plan = dlg.plan
        assert set(plan.changes) == {"outline", "section-1", "section-2", "section-3"}
        assert str(apply_button(dlg).label) == "Rewind 4 nodes"
        assert apply_button(dlg).disabled  # no reason yet
        await pilot.press("ctrl+s")
        assert app.screen is dlg
        await nothing_applied(pilot, dlg, console_applies, lp, before, "report-001", apply_attempts)
        # keys type into the reason (r, a, p do not open other dialogs); enter never applies
        await pilot.press(*"rap sheet wrong", "enter")
        assert dlg.query_one("#reason", Input).value == "rap sheet wrong"
        assert app.screen is dlg
        await nothing_applied(pilot, dlg, console_applies, lp, before, "report-001", apply_attempts)
        assert not apply_button(dlg).disabled
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen is not dlg, what="dialog closed")
        assert apply_attempts(dlg) == 1 and console_applies == [("rewind", "outline")]
        after = state(lp, "report-001")
        changed = {k for k in after["nodes"] if after["nodes"][k][0] != before["nodes"][k][0]}
        assert changed == {k for k, (a, b) in plan.changes.items() if a != b}
        assert all(after["nodes"][k][0] == b for k, (_, b) in plan.changes.items())
        assert after["nodes"]["outline"][2][-1] == "rap sheet wrong"  # fed back to the agent
        assert after["actions"][0] == ("rewind", "applied", "ana@console", "rap sheet wrong")
        assert any("applied (action" in n.message for n in app._notifications)


@pytest.mark.parametrize("case", list(CASES))
async def test_cancel_changes_nothing_apply_changes_exactly_the_plan(lp, case, console_applies, apply_attempts):
    action, task, node = CASES[case]
    app = make_app(lp, operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        before = state(lp, task)
        # escape cancels a dialog that was ready to apply: nothing changes
        dlg = await open_dialog(pilot, action, task, node)
        await fill(pilot, dlg)
        assert not apply_button(dlg).disabled, dlg.blockers()
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is not dlg, what="dialog closed")
        assert isinstance(app.screen, TaskListScreen) and dlg.result is None
        await nothing_applied(pilot, dlg, console_applies, lp, before, task, apply_attempts)
        await settle(pilot)
        assert state(lp, task) == before
        # apply changes exactly what the plan said
        dlg = await open_dialog(pilot, action, task, node)
        await fill(pilot, dlg)
        plan = dlg.plan
        if case == "resume":  # no reason input: focus starts on Cancel
            assert dlg.focused is dlg.query_one("#cancel", Button)
        await pilot.click("#apply")
        await wait_for(pilot, lambda: app.screen is not dlg, what="dialog closed")
        after = state(lp, task)
        expect = {k: v for k, v in statuses(before).items()}
        expect.update({k: b for k, (_, b) in plan.changes.items()})
        assert statuses(after) == expect
        assert after["task"][0] == plan.task_status[1]
        assert after["actions"][0][:3] == (action, "applied", "ana@console")
        assert after["actions"][0][3] == ("" if case == "resume" else "wrong sources")
        for lease in plan.revoked_leases:
            assert after["nodes"][lease["node"]][3] is None
        withdrawn = {h for h, st in after["handoffs"] if st == "withdrawn"}
        assert withdrawn == set(plan.handoffs_withdrawn)
        assert dlg.result is not None and dlg.result.applied
        assert apply_attempts(dlg) == 1 and console_applies == [(action, plan.target)]  # the spy sees applies


def _confirm_an_effect(ledger: Ledger) -> None:
    c = ledger.claim("report-001", "erin", lease_s=60, kinds=["tool"])
    ledger.intend_effect(c, "pr:9", compensation="close PR 9")
    ledger.confirm_effect(c, "pr:9")


# Per case, what makes its preview stale (store/actions/promise.py): agents' progress never does.
OUTSIDE_CHANGE = {
    # another operator parks and resumes the task: its status moved under the park
    "park": lambda led: [led.apply(led.plan_park("report-001", reason="outside"), operator=OUTSIDE),
                         led.apply(led.plan_resume("report-001"), operator=OUTSIDE)],
    # another operator parks a node the resume would resume
    "resume": lambda led: led.apply(led.plan_park("idle-002", node="rebuild", reason="outside"), operator=OUTSIDE),
    # another narrow changes the scope
    "narrow": lambda led: led.apply(led.plan_narrow("scope-003", set={"module": ["a", "b", "c"]}, reason="outside"),
                                    operator=OUTSIDE),
    # another operator rewinds a node the rewind resets
    "rewind": lambda led: led.apply(led.plan_rewind("report-001", "section-1", reason="outside"), operator=OUTSIDE),
    # an effect with a compensation is confirmed: the abort would run a compensation the preview did not list
    "abort": _confirm_an_effect,
}


@pytest.mark.parametrize("case", list(CASES))
async def test_stale_plan_shows_banner_applies_nothing_then_the_fresh_plan(lp, case):
    action, task, node = CASES[case]
    app = make_app(lp, operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        dlg = await open_dialog(pilot, action, task, node)
        await fill(pilot, dlg)
        old = dlg.plan
        # Between the preview and Apply, a change the preview's promise does not cover.
        with Ledger.open(lp, create=False, clock=ManualClock(NOW)) as ledger:
            OUTSIDE_CHANGE[case](ledger)
        moved = state(lp, task)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: dlg.stale is not None and not dlg.planning and not dlg.applying,
                       what="the stale banner")
        banner = dlg.query_one("#banner", Static)
        assert banner.display and STALE_BANNER in str(banner.render())
        assert app.screen is dlg  # still open: the operator reviews again
        after_refusal = state(lp, task)
        assert statuses(after_refusal) == statuses(moved)  # nothing applied
        assert after_refusal["actions"][0][:2] == (action, "refused")
        fresh = dlg.plan
        assert fresh is not None and fresh.revision == moved["task"][1] and fresh.to_json() != old.to_json()
        assert not apply_button(dlg).disabled  # the reason is kept; Apply must be pressed again
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen is not dlg, what="dialog closed")
        done = state(lp, task)
        assert done["actions"][0][:2] == (action, "applied")
        expect = statuses(moved)
        expect.update({k: b for k, (_, b) in fresh.changes.items()})
        expect.update({str(c["node"]): "pending" for c in fresh.compensations})  # abort: the one it now lists
        assert statuses(done) == expect


# ---------------------------------------------------------------------- refusals in the dialog
async def test_abort_needs_the_exact_task_id(lp, console_applies, apply_attempts):
    app = make_app(lp)
    async with app.run_test(size=(80, 24)) as pilot:
        before = state(lp, "report-001")
        await settle(pilot)
        await pilot.press("a")  # report-001 is selected on the task list
        dlg = app.screen
        assert isinstance(dlg, AbortDialog)
        await plan_ready(pilot, dlg)
        assert str(apply_button(dlg).label) == "Abort task report-001"
        await type_reason(pilot, dlg, "superseded")
        confirm = dlg.query_one("#confirm", Input)
        for wrong in ("report-00", "report-002", "REPORT-001", "report-001 ", "evil-task"):
            confirm.value = wrong
            await pilot.pause()
            assert apply_button(dlg).disabled, wrong
            await pilot.press("ctrl+s")
            assert app.screen is dlg
            await nothing_applied(pilot, dlg, console_applies, lp, before, "report-001", apply_attempts)
        confirm.value = ""
        confirm.focus()
        await pilot.press(*"report-001", "enter")  # enter in the confirmation does not apply
        assert app.screen is dlg
        await nothing_applied(pilot, dlg, console_applies, lp, before, "report-001", apply_attempts)
        assert not apply_button(dlg).disabled
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen is not dlg)
        assert state(lp, "report-001")["task"][0] == "aborted"
        assert apply_attempts(dlg) == 1 and console_applies == [("abort", "report-001")]


@pytest.mark.parametrize("reason", ["", "   "])
async def test_empty_reason_cannot_apply(lp, reason, console_applies, apply_attempts):
    app = make_app(lp)
    async with app.run_test(size=(80, 24)) as pilot:
        before = state(lp, "report-001")
        dlg = await open_dialog(pilot, "park", "report-001")
        await plan_ready(pilot, dlg)
        dlg.query_one("#reason", Input).value = reason
        await pilot.pause()
        assert apply_button(dlg).disabled
        await pilot.press("ctrl+s")
        await pilot.click("#apply")
        await nothing_applied(pilot, dlg, console_applies, lp, before, "report-001", apply_attempts)
        assert app.screen is dlg
        assert "type a reason" in str(dlg.query_one("#dialog-error", Static).render())


async def test_refused_plan_is_shown_and_cannot_apply(lp, console_applies, apply_attempts):
    app = make_app(lp)
    async with app.run_test(size=(80, 24)) as pilot:
        before = state(lp, "report-001")
        dlg = await open_dialog(pilot, "rewind", "report-001", "figures")  # pending: nothing to rewind
        await plan_ready(pilot, dlg)
        assert dlg.plan is None and "nothing to rewind" in dlg.plan_error
        await type_reason(pilot, dlg)
        assert apply_button(dlg).disabled
        await pilot.press("ctrl+s")
        await nothing_applied(pilot, dlg, console_applies, lp, before, "report-001", apply_attempts)
        assert "there is no plan to apply" in str(dlg.query_one("#dialog-error", Static).render())


async def test_park_options_until_and_now(lp):
    app = make_app(lp, operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        dlg = await open_dialog(pilot, "park", "report-001", "section-1")
        assert isinstance(dlg, ParkDialog)
        await plan_ready(pilot, dlg)
        assert dlg.plan.params.to_json()["node"] is None and str(apply_button(dlg).label) == "Park task"
        assert dlg.plan.changes == {}  # running work finishes its step unless "now"
        # the warning names the box to tick, not the CLI's flag: the operator is in the dialog
        preview = " ".join(str(dlg.query_one("#preview").render()).split())
        assert 'tick "stop running work now" to stop them' in preview and "--now" not in preview
        dlg.query_one("#until", Input).value = "2h"
        dlg.query_one("#wake-on", Input).value = "node:section-1, at:1d"
        dlg.query_one("#now").value = True
        await pilot.pause()
        await plan_ready(pilot, dlg)
        p = dlg.plan
        assert p.changes == {"section-1": ("running", "parked")}
        assert p.revoked_leases == ({"node": "section-1", "owner": "bob"},)
        assert p.params.to_json()["until_ts"] == NOW + 7200
        assert p.params.to_json()["wake_on"] == "node:section-1, at:2027-01-16T08:10:00.000Z"
        preview = str(dlg.query_one("#preview").render())
        assert "held by bob" in preview and "wake on: node:section-1, at:" in preview
        assert "resumes on its own" not in preview
        dlg.query_one("#auto-resume").value = True
        await pilot.pause()
        await plan_ready(pilot, dlg)
        assert dlg.plan.params.to_json()["auto_resume"] is True
        assert "resumes on its own" in str(dlg.query_one("#preview").render())
        dlg.query_one("#wake-on", Input).value = "the data drop"  # not a condition: refused, one line
        await pilot.pause()
        await plan_ready(pilot, dlg)
        assert dlg.plan is None and "unknown wake condition 'the data drop'" in dlg.plan_error
        dlg.query_one("#wake-on", Input).value = "node:section-1"
        await pilot.pause()
        await plan_ready(pilot, dlg)
        dlg.query_one("#until", Input).value = "yesterday-ish"
        await pilot.pause()
        await plan_ready(pilot, dlg)
        assert dlg.plan is None and apply_button(dlg).disabled
        dlg.query_one("#until", Input).value = "2h"
        await pilot.pause()
        await plan_ready(pilot, dlg)
        await type_reason(pilot, dlg, "waiting for data")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen is not dlg)
        with Ledger.open(lp, create=False) as ledger:
            t = ledger.task("report-001")
            assert (t.status, t.park_until, t.wake_on) == ("parked", NOW + 7200, "node:section-1")
            assert t.wake_state["task"]["auto_resume"] is True
            assert ledger.node("report-001", "section-1").status == "parked"


async def park_only_node(pilot, node: str) -> ActionDialog:
    """The park dialog on report-001's ``node`` with "only this node" ticked, its plan made again."""
    dlg = await open_dialog(pilot, "park", "report-001", node)
    await plan_ready(pilot, dlg)
    dlg.query_one("#only-node").value = True
    await pilot.pause()
    await plan_ready(pilot, dlg)
    return dlg


async def test_park_only_the_selected_node(lp):
    app = make_app(lp)
    async with app.run_test(size=(80, 24)) as pilot:
        dlg = await park_only_node(pilot, "figures")
        assert dlg.plan.params.to_json()["node"] == "figures" and dlg.plan.changes == {"figures": ("pending", "parked")}
        assert str(apply_button(dlg).label) == "Park node figures"


async def test_park_refusal_names_the_checkbox_not_the_flag(lp):
    """A running node parked alone without "now" is refused; the dialog says which box to tick."""
    app = make_app(lp)
    async with app.run_test(size=(80, 24)) as pilot:
        dlg = await park_only_node(pilot, "section-1")
        assert dlg.plan is None
        shown = " ".join(str(dlg.query_one("#preview").render()).split())
        assert 'node section-1 is running: tick "stop running work now" to stop it' in shown
        assert "--now" not in shown
        dlg.query_one("#now").value = True
        await pilot.pause()
        await plan_ready(pilot, dlg)
        assert dlg.plan is not None and dlg.plan.changes == {"section-1": ("running", "parked")}


async def test_narrow_preview_follows_the_choices(lp):
    app = make_app(lp)
    async with app.run_test(size=(80, 24)) as pilot:
        dlg = await open_dialog(pilot, "narrow", "scope-003")
        await wait_for(pilot, lambda: dlg.choices is not None)
        await pilot.pause()
        assert dlg.plan is None and not dlg.planning  # nothing chosen: nothing to plan
        assert set(dlg.choices.keys["module"]) == {'"a"', '"b"'}
        key = dlg.query_one("#pre-key", Select)
        assert [v for _, v in key._options if isinstance(v, str)] == ["module"]
        key.value = "module"
        await pilot.pause()
        dlg.query_one("#pre-value", Select).value = '"b"'
        await pilot.pause()
        await plan_ready(pilot, dlg)
        assert dlg.plan.abandoned == ("mod-a",) and dlg.plan.params.to_json()["set"] == {"module": "b"}
        assert str(apply_button(dlg).label) == "Narrow: abandon 1 node"
        dlg.query_one("#pre-value", Select).value = '"a"'
        await pilot.pause()
        await plan_ready(pilot, dlg)
        assert dlg.plan.abandoned == ("mod-b",)
        # exclude docs as well
        dlg.query_one("#exclude", SelectionList).select("docs")
        await pilot.pause()
        await plan_ready(pilot, dlg)
        assert set(dlg.plan.abandoned) == {"mod-b", "docs"} and dlg.plan.params.to_json()["exclude"] == ["docs"]
        assert "mod-b" in str(dlg.query_one("#preview").render())


async def test_resume_opens_on_cancel_and_enter_cancels(lp, console_applies, apply_attempts):
    app = make_app(lp)
    async with app.run_test(size=(80, 24)) as pilot:
        before = state(lp, "idle-002")
        dlg = await open_dialog(pilot, "resume", "idle-002")
        assert isinstance(dlg, ResumeDialog)
        await plan_ready(pilot, dlg)
        assert dlg.focused is dlg.query_one("#cancel", Button)
        assert not apply_button(dlg).disabled and str(apply_button(dlg).label) == "Resume task"
        await pilot.press("enter")  # the default is Cancel
        await wait_for(pilot, lambda: app.screen is not dlg)
        await nothing_applied(pilot, dlg, console_applies, lp, before, "idle-002", apply_attempts)


# ---------------------------------------------------------------------- read-only, selection
async def test_read_only_action_keys_show_a_notice_and_write_nothing(lp, console_applies):
    app = make_app(lp, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        before = state(lp, "report-001")
        await settle(pilot)
        for n, key in enumerate(["p", "u", "n", "r", "a", "R"], 1):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, TaskListScreen)
            assert [n.message for n in app._notifications] == ["read-only (opened with --read-only): actions are disabled"] * n
        from console.dialogs import open_action

        assert open_action(app, "park", "report-001", None) is None  # the hook refuses too
        assert isinstance(app.screen, TaskListScreen)
        await settle(pilot)
        assert console_applies == [] and state(lp, "report-001") == before


async def test_rewind_without_a_node_says_how(lp):
    app = make_app(lp)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, TaskListScreen)
        assert "select a node" in list(app._notifications)[-1].message


# ---------------------------------------------------------------------- the command palette
def _screen_is(kind: type, **attrs: Any):
    return lambda app: isinstance(app.screen, kind) and all(getattr(app.screen, k) == v for k, v in attrs.items())


def _notified(text: str):
    return lambda app: isinstance(app.screen, TaskListScreen) and any(text in n.message for n in app._notifications)


# What each palette entry does from the task list (report-001 selected). A command added to the
# palette without an entry here fails test_every_palette_command_has_an_expected_effect.
PALETTE = {
    "Event log": _screen_is(EventLogScreen),
    "Handoff inbox": _screen_is(HandoffInboxScreen),
    "Mark alerts seen": _notified("0 alerts marked seen"),
    "Runs and recovery": _screen_is(RunsScreen),
    "Help": _screen_is(HelpScreen),
    "Park": _screen_is(ParkDialog, task_id="report-001"),
    "Resume": _screen_is(ResumeDialog, task_id="report-001"),
    "Narrow": _screen_is(NarrowDialog, task_id="report-001"),
    "Rewind": _notified("rewind: select a node"),
    "Abort": _screen_is(AbortDialog, task_id="report-001"),
    "Recovery advice": _notified("recovery advice: select a node"),
    "Mark effect compensated": _screen_is(CompensatedDialog, task_id="report-001"),
    "Mark alarm healthy": _notified("healthy: select a node"),
    "Task report": _screen_is(TaskReportScreen, task_id="report-001"),
    "Open task idle-002": _screen_is(TaskGraphScreen, task_id="idle-002"),
    "Quit": lambda app: app.return_code == 0,
}


def test_every_palette_command_has_an_expected_effect():
    from console.commands import COMMANDS

    assert {name for name, _, _ in COMMANDS} == set(PALETTE) - {"Open task idle-002"}


@pytest.mark.parametrize("name", list(PALETTE))
async def test_the_palette_runs_the_command(lp, name):
    app = make_app(lp)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TaskListScreen) and app.screen.selected_task() == "report-001"
        await run_from_palette(pilot, name, typed=name.lower())
        await wait_for(pilot, lambda: PALETTE[name](app), what=f"{name} to run")


async def test_the_palette_respects_read_only(lp, console_applies):
    app = make_app(lp, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        before = state(lp, "report-001")
        await settle(pilot)
        for name in ("Park", "Abort", "Recovery advice"):
            await run_from_palette(pilot, name)
            await wait_for(pilot, lambda: isinstance(app.screen, TaskListScreen), what="the task list")
        assert [n.message for n in app._notifications] == [READ_ONLY_NOTICE] * 3
        await settle(pilot)
        assert console_applies == [] and state(lp, "report-001") == before


def test_park_refusals_and_warnings_name_the_dialogs_boxes_not_cli_flags(tmp_path: Path) -> None:
    """Every way the store says "--now" reaches the park dialog as its checkbox: a store wording that
    drifted from the phrases the dialog replaces would leave a flag the dialog does not have."""
    from console.dialogs.park import NOW_BOX, dialog_words
    from store import Refused

    led = Ledger.open(str(tmp_path / "l.db"), clock=ManualClock(T0))
    led.create_task("t")
    led.add_node("t", "a")
    led.claim("t", "w")
    said = [*led.plan_park("t", reason="r").warnings]  # a running node keeps its lease
    for call in (lambda: led.plan_park("t", reason="r", node="a"),  # a running node needs --now
                 lambda: (led.apply(led.plan_park("t", reason="r"), operator="op"),
                          led.plan_park("t", reason="r"))):  # already parked
        with pytest.raises(Refused) as e:
            call()
        said.append(str(e.value))
    led.close()
    assert len(said) == 3
    for text in said:
        assert "--now" in text and "--now" not in dialog_words(text) and NOW_BOX in dialog_words(text)


async def test_a_refusal_and_the_reason_field_name_the_action_as_a_sentence_does(lp):
    """"cannot mark healthy: …", not the registered name ("cannot healthy"); a reason the agent is
    never shown does not promise that it is."""
    app = make_app(lp)
    async with app.run_test(size=(100, 30)) as pilot:
        dlg = await open_dialog(pilot, "healthy", "report-001", "outline")  # no loop alarm there
        await plan_ready(pilot, dlg)
        preview = " ".join(str(dlg.query_one("#preview").render()).split())
        assert dlg.plan is None and preview.startswith("cannot mark healthy: "), preview
        assert "not shown to the agent" in str(dlg.query_one("#reason", Input).placeholder)
        await pilot.press("escape")
        park = await open_dialog(pilot, "park", "report-001")
        assert str(park.query_one("#reason", Input).placeholder).endswith("recorded, shown to the agent")

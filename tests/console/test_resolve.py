"""Handoff resolution from the inbox (h, enter), the one-pass answering of a task's handoffs,
the lost race (resolved by another operator after the screen opened), recovery advice (R)
opening the matching dialog, and read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Button, Input, OptionList, Static

from console.dialogs import NarrowDialog, RewindDialog
from console.screens import HandoffInboxScreen, NodeDetailScreen
from console.screens.advice import AdviceDialog
from console.screens.resolve import ResolveHandoffScreen
from store import Ledger, ManualClock

from tests.support.console_app import HOSTILE, NOW, T0, settle, workers_done
from tests.support.console_app import make_app as _make_app
from tests.support.console_app import wait_for as _wait_for
from tests.support.asks import ask


def make_app(*a: Any, **kw: Any):
    kw.setdefault("analysis", False)
    return _make_app(*a, **kw)


async def wait_for(pilot, cond, timeout: float = 30.0, what: str = "") -> None:
    await _wait_for(pilot, cond, timeout=timeout, what=what)


def second_handoff(path: Path) -> str:
    """figures (report-001) asks too, later than section-2; its context is hostile text."""
    with Ledger.open(path, clock=ManualClock(T0 + 300)) as ledger:
        c = ledger.claim("report-001", worker="frank", lease_s=60)
        assert c.node_key == "figures"
        return ask(ledger, c, kind="direction", question="Which chart style?",
                                    options=[{"id": "bar", "label": "Bars", "consequence": "one chart per metric"},
                                             {"id": "line", "label": "Lines", "consequence": HOSTILE}],
                                    context={"done": "data loaded", "stuck": HOSTILE, "why": "bars read better"},
                                    recommendation="bar")


def handoffs(path: Path) -> list[Any]:
    with Ledger.open(path, create=False) as ledger:
        return ledger.handoffs(status=None, task_id="report-001")


async def open_inbox_and_resolve(pilot) -> ResolveHandoffScreen:
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


async def test_resolve_from_the_inbox_then_the_next_of_the_task(ledger_path, console_applies, apply_attempts):
    second = second_handoff(ledger_path)
    app = make_app(ledger_path, operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_inbox_and_resolve(pilot)
        first = scr.handoff
        assert first.node == "section-2" and scr.remaining == 1  # oldest first
        opts = scr.query_one("#options", OptionList)
        assert scr.focused is opts and opts.highlighted == 1  # on the recommendation ("no")
        chosen = " ".join(str(scr.query_one("#chosen", Static).render()).split())
        assert "the cursor starts on the recommended option, no ★: enter takes it" in chosen  # and says so
        body = str(scr.query_one("#handoff", Static).render())
        assert "Include the unaudited Q3 figures?" in body and "Recommended: no" in body
        assert scr.query_one("#apply", Button).disabled  # nothing chosen yet
        await pilot.press("ctrl+s")
        await workers_done(pilot, scr)
        assert apply_attempts(scr) == 0 and console_applies == []
        assert all(h.status == "open" for h in handoffs(ledger_path))
        await pilot.press("up", "enter")  # choose "yes"
        assert scr.chosen == "yes"
        scr.query_one("#answer", Input).focus()
        await pilot.press(*"flag it clearly", "enter")  # enter in the answer does not resolve
        await workers_done(pilot, scr)
        assert apply_attempts(scr) == 0 and console_applies == []
        assert all(h.status == "open" for h in handoffs(ledger_path))
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: scr.handoff is not None and scr.handoff.id == second, what="the next handoff")
        assert apply_attempts(scr) == 1 and [a for a, _ in console_applies] == ["resolve"]
        hs = {h.id: h for h in handoffs(ledger_path)}
        h1 = hs[first.id]
        assert (h1.status, h1.resolution_option, h1.resolution_answer, h1.resolved_by) == (
            "resolved", "yes", "flag it clearly", "ana@console")
        with Ledger.open(ledger_path, create=False) as ledger:
            assert ledger.node("report-001", "section-2").status == "pending"
        # the second one: hostile context shown literally, never interpreted
        body = str(scr.query_one("#handoff", Static).render())
        assert "\\x1b]52;c;" in body and "\x1b" not in body and "What is done" in body and "why: bars" in body
        assert "resolved #" in str(scr.query_one("#banner", Static).render())
        assert scr.query_one("#answer", Input).value == ""
        await pilot.press("enter", "ctrl+s")  # the recommended option, no answer
        await wait_for(pilot, lambda: not isinstance(app.screen, ResolveHandoffScreen), what="closed")
        assert isinstance(app.screen, HandoffInboxScreen)
        await wait_for(pilot, lambda: app.screen.source.items == (), what="the inbox empties")
        assert {h.id: (h.status, h.resolution_option) for h in handoffs(ledger_path)}[second] == ("resolved", "bar")


async def test_lost_race_tells_who_resolved_it(ledger_path):
    app = make_app(ledger_path, operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_inbox_and_resolve(pilot)
        await pilot.press("enter")  # choose the recommended "no"
        assert scr.chosen == "no"
        with Ledger.open(ledger_path, create=False, clock=ManualClock(NOW)) as ledger:
            ledger.apply(ledger.plan_resolve(scr.handoff.id, option="yes"), operator="bo@elsewhere")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: scr.closed_reason is not None and not scr.busy, what="the refusal")
        banner = str(scr.query_one("#banner", Static).render())
        assert "already resolved by bo@elsewhere" in banner and "(option yes)" in banner
        assert scr.query_one("#apply", Button).disabled
        [h] = handoffs(ledger_path)
        assert (h.resolved_by, h.resolution_option) == ("bo@elsewhere", "yes")  # theirs stands
        with Ledger.open(ledger_path, create=False) as ledger:
            assert [a.operator for a in ledger.actions("report-001") if a.action == "resolve"] == ["bo@elsewhere"]
        await pilot.press("escape")
        assert isinstance(app.screen, HandoffInboxScreen)


async def test_handoff_without_options_needs_an_answer(ledger_path, console_applies, apply_attempts):
    with Ledger.open(ledger_path, clock=ManualClock(T0 + 300)) as ledger:
        c = ledger.claim("report-001", worker="frank", lease_s=60)
        hid = ask(ledger, c, kind="exception", question="What now?")
    app = make_app(ledger_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        scr = ResolveHandoffScreen(hid)
        app.push_screen(scr)
        await wait_for(pilot, lambda: scr.handoff is not None)
        await pilot.pause()
        assert scr.focused is scr.query_one("#answer", Input)
        assert "recommended" not in str(scr.query_one("#chosen", Static).render())  # no options, nothing said
        await pilot.press("ctrl+s")
        await workers_done(pilot, scr)
        assert apply_attempts(scr) == 0 and console_applies == []
        assert scr.query_one("#apply", Button).disabled and handoffs(ledger_path)[-1].status == "open"
        await pilot.press(*"skip the charts", "ctrl+s")
        # resolved; the task's other open handoff (section-2) is offered next
        await wait_for(pilot, lambda: scr.handoff.id != hid, what="the next handoff")
        assert scr.handoff.node == "section-2" and scr.focused is scr.query_one("#options")
        h = [h for h in handoffs(ledger_path) if h.id == hid][0]
        assert (h.status, h.resolution_option, h.resolution_answer) == ("resolved", None, "skip the charts")


async def test_read_only_resolution_shows_but_cannot_resolve(ledger_path, console_applies, apply_attempts):
    app = make_app(ledger_path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_inbox_and_resolve(pilot)
        await pilot.press("enter")
        btn = scr.query_one("#apply", Button)
        assert btn.disabled and str(btn.label) == "read-only"
        await pilot.press("ctrl+s")
        await workers_done(pilot, scr)
        assert apply_attempts(scr) == 0 and console_applies == []
        assert "read-only (opened with --read-only): actions are disabled" in [n.message for n in app._notifications]
        assert [h.status for h in handoffs(ledger_path)] == ["open"]


async def test_inbox_o_opens_the_node(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, HandoffInboxScreen) and app.screen.loaded)
        await pilot.press("o")
        assert isinstance(app.screen, NodeDetailScreen) and app.screen.key == "section-2"


# ---------------------------------------------------------------------- recovery advice (R)
async def advice_for(pilot, task: str, node: str) -> AdviceDialog:
    app = pilot.app
    await settle(pilot)
    app.open_node(task, node)
    await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen))
    await pilot.press("R")
    dlg = app.screen
    assert isinstance(dlg, AdviceDialog)
    await wait_for(pilot, lambda: dlg.advice is not None or dlg.error is not None, what="the advice")
    await pilot.pause()
    return dlg


async def test_advice_retry_opens_a_prefilled_rewind(ledger_path, console_applies, apply_attempts):
    app = make_app(ledger_path)
    async with app.run_test(size=(80, 24)) as pilot:
        dlg = await advice_for(pilot, "report-001", "section-3")  # failed, transient
        assert (dlg.advice.recommendation, dlg.advice.reason) == ("retry", "safe_to_retry")
        body = str(dlg.query_one("#advice", Static).render())
        assert "rate limited by the provider" in body  # the evidence
        assert dlg.focused is dlg.query_one("#cancel", Button)
        assert str(dlg.query_one("#accept", Button).label) == "Retry section-3"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, RewindDialog))
        rw = app.screen
        assert rw.node == "section-3"
        assert rw.query_one("#reason", Input).value.startswith("recovery advice: retry (safe_to_retry)")
        await wait_for(pilot, lambda: rw.plan is not None)
        await pilot.pause()
        assert rw.plan.changes == {"section-3": ("failed", "pending")} and not rw.query_one("#apply").disabled
        await pilot.press("escape")  # accepting the advice applied nothing by itself
        await workers_done(pilot, rw)
        assert apply_attempts(rw) == 0 and console_applies == []
        with Ledger.open(ledger_path, create=False) as ledger:
            assert ledger.node("report-001", "section-3").status == "failed"


async def test_advice_needs_human_opens_the_handoff(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(80, 24)) as pilot:
        dlg = await advice_for(pilot, "report-001", "section-2")  # blocked on a handoff
        assert dlg.advice.recommendation == "needs_human"
        await pilot.click("#accept")
        await wait_for(pilot, lambda: isinstance(app.screen, ResolveHandoffScreen))
        await wait_for(pilot, lambda: app.screen.handoff is not None)
        assert app.screen.handoff.node == "section-2"


async def test_advice_abandon_opens_narrow_with_the_node_excluded(ledger_path):
    with Ledger.open(ledger_path, clock=ManualClock(T0 + 300)) as ledger:
        ledger.create_task("scoped", preconditions={"region": "eu"})
        ledger.add_node("scoped", "us-only", preconditions={"region": "us"})
        ledger.add_node("scoped", "eu-only", preconditions={"region": "eu"})
        c = ledger.claim("scoped", worker="gil")
        ledger.fail(c, error="no access", failure_class="transient", retryable=False)
    app = make_app(ledger_path)
    async with app.run_test(size=(80, 24)) as pilot:
        dlg = await advice_for(pilot, "scoped", "us-only")
        assert dlg.advice.recommendation == "abandon"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, NarrowDialog))
        nd = app.screen
        await wait_for(pilot, lambda: nd.plan is not None, what="narrow plan")
        assert nd.plan.abandoned == ("us-only",) and nd.plan.params.to_json()["exclude"] == ["us-only"]


async def test_advice_for_a_node_with_nothing_to_recover(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(80, 24)) as pilot:
        dlg = await advice_for(pilot, "report-001", "collect")  # succeeded
        assert dlg.advice is None and "advice is for failed" in dlg.error
        assert dlg.query_one("#accept", Button).disabled


RULE = {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}], "behavior": "allow",
        "destination": "session"}


def permission(ledger: Ledger, node: str, command: str) -> str:
    ledger.add_node("claude-9b2e", node, kind="step")
    c = ledger.claim("claude-9b2e", worker="claude", lease_s=600)
    return ask(ledger, 
        c, kind="permission", question="Allow Claude Code to use Bash?",
        context={"tool": "Bash", "input": command, "session": "9b2e4c1a",
                 "rules": [{"option": "always-1", "rule": RULE, "text": "allow Bash(npm test:*) — this session"}]},
        options=[{"id": "allow", "label": "Allow Bash"}, {"id": "deny", "label": "Deny"},
                 {"id": "always-1", "label": "Always: allow Bash(npm test:*) — this session"}])


async def test_a_permission_request_shows_the_rules_already_granted_in_its_task(ledger_path):
    with Ledger.open(ledger_path, create=False, clock=ManualClock(NOW - 600)) as ledger:
        ledger.create_task("claude-9b2e")
        first = permission(ledger, "turn-1.ask-1", "npm test -- parser")
        ledger.apply(ledger.plan_resolve(first, option="always-1"), operator="ana (phone page from 10.0.0.7)")
        second = permission(ledger, "turn-2.ask-1", "npm test -- lexer")
        denied = permission(ledger, "turn-3.ask-1", "rm -rf build")
        ledger.apply(ledger.plan_resolve(denied, option="deny"), operator="ana@console")
    app = make_app(ledger_path, operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        scr = ResolveHandoffScreen(second)
        app.push_screen(scr)
        await wait_for(pilot, lambda: scr.handoff is not None, what="the handoff")
        await pilot.pause()
        body = " ".join(str(scr.query_one("#handoff", Static).render()).split())
        assert "Rules granted in this task" in body
        assert "✔ allow Bash(npm test:*) — this session · by ana (phone page from 10.0.0.7) 10m ago · session 9b2e4c1a" \
            in body
        assert body.count("allow Bash(npm test:*) — this session ·") == 1  # the deny granted nothing
        scr2 = ResolveHandoffScreen(handoffs_of(ledger_path, "report-001")[0].id)
        app.push_screen(scr2)
        await wait_for(pilot, lambda: scr2.handoff is not None, what="the other task's handoff")
        await pilot.pause()
        assert "Rules granted" not in str(scr2.query_one("#handoff", Static).render())  # not a permission request


def handoffs_of(path: Path, task: str) -> list[Any]:
    with Ledger.open(path, create=False) as ledger:
        return ledger.handoffs(status="open", task_id=task)


def test_a_question_without_a_recommendation_says_why_where_the_recommendation_goes(tmp_path: Path) -> None:
    from console.screens.resolve import render_handoff

    with Ledger.open(str(tmp_path / "l.db"), clock=ManualClock(T0)) as led:
        led.create_task("t")
        led.add_node("t", "n")
        hid = led.request_human(led.claim("t", "w", lease_s=60), kind="direction", question="Who reads it?",
                                context={"done": "drafted it", "stuck": "the audience is not said",
                                         "no_recommendation": "a matter of who reads it"})
        text = render_handoff(led.handoff(hid), T0).plain
    assert "No recommendation: a matter of who reads it" in text and "no_recommendation:" not in text
    assert "What is done\ndrafted it" in text and "Where it is stuck\nthe audience is not said" in text

"""The task's mind in the console: its Mind screen (``m`` from the graph), the memory inbox (``M``)
with its confirm / reject dialog (plan → preview → reason → ctrl+s, audited), the node detail's
mind section — at 80×24, agent text literal."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Static

from console.dialogs.memory import ConfirmMemoryDialog
from console.dialogs.rewind import RewindDialog
from console.glyphs import READ_ONLY_NOTICE
from console.screens import MemoryInboxScreen, MindScreen, NodeDetailScreen, TaskGraphScreen, TaskListScreen
from store import Ledger, ManualClock, NodeSpec

from tests.support.console_app import HOSTILE, T0, graph_loaded, make_app, settle, wait_for, workers_done

LONG = 10**7


def build(path: Path) -> Path:
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock) as led:
        led.create_task("audit", title="Performance audit", workflow="perf", constraints=["staging only " + HOSTILE],
                        requirements=[{"id": "r1", "text": "profile every endpoint"},
                                      {"id": "r2", "text": "rank the hot spots " + HOSTILE}])
        led.add_nodes("audit", [NodeSpec("p-a", "profile", serves=("r1",)),
                                NodeSpec("p-b", "profile", deps=("p-a",), serves=("r1",)),
                                NodeSpec("p-c", "profile", deps=("p-b",), serves=("r1",)),
                                NodeSpec("rank", "rank", deps=("p-c",), serves=("r2",)),
                                NodeSpec("stray", "tool")])
        c = led.claim("audit", "w7", lease_s=LONG, key="p-a")
        clock.advance(20)
        led.conclude(c, "p-a: 38 queries per request " + HOSTILE, source="load test " + HOSTILE)
        led.conclude(c, "sampling at 1 kHz", kind="rejected", reason="overhead hid it " + HOSTILE, source="tests")
        led.propose_memory(c, "warm the database first " + HOSTILE, scope="workflow", source="tests")
        led.commit(c, output={})
        c = led.claim("audit", "w7", lease_s=LONG, key="p-b")
        clock.advance(20)
        led.conclude(c, "p-b: the same shape", source="load test b")
        led.commit(c, output={})
        led.replan("audit", remove=["p-c"], add=[NodeSpec("p-orm", "profile", deps=("p-b",), serves=("r1",))],
                   trigger="pattern", reason="two endpoints, one root cause", actor="w7")
    return path


@pytest.fixture
def mp(tmp_path: Path) -> Path:
    return build(tmp_path / "mind.db")


async def open_mind(pilot, app) -> MindScreen:
    await settle(pilot)
    app.open_graph("audit")
    await graph_loaded(pilot)
    await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), what="the graph")
    await pilot.press("m")
    await wait_for(pilot, lambda: isinstance(app.screen, MindScreen) and app.screen.loaded, what="the mind")
    return app.screen


def rows_text(screen: MindScreen) -> list[str]:
    return [f"{r.cells[0][0]} | {r.cells[1][0]}" for r in screen.source.rows]


async def test_m_on_the_graph_opens_the_tasks_mind_with_every_section(mp):
    app = make_app(mp)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_mind(pilot, app)
        text = "\n".join(rows_text(screen))
        for needle in ("REQUIREMENTS (2)", "r1 | profile every endpoint", "3 nodes (2 done): p-a ✔, p-b ✔, p-orm ○",
                       "serving none (1): stray ○", "CONSTRAINTS (1)", "CONCLUSIONS (2, newest first)",
                       "p-b  p-b: the same shape", "REJECTED PATHS (2, newest first)", "why: overhead hid it",
                       "PLAN HISTORY (v2, 2 versions)", "v2 | pattern by w7", "- removed (1): p-c",
                       "+ added (1): p-orm", "MEMORIES PROPOSED (1)", "#1 | pending"):
            assert needle in text, (needle, text)
        assert "\x1b" not in text and "\u202e" not in text and "\\x1b]52" in text
        # 1-6 jump to the sections; the full text of the selection shows under the list
        await pilot.press("4")
        assert screen.selected_row().section == "rejected"
        await pilot.press("j")
        detail = str(screen.query_one("#mind-detail", Static).render())
        assert "why:" in detail and "\x1b" not in detail
        await pilot.press("6")
        assert screen.selected_row().section == "memories"
        await pilot.press("m")  # m closes it again
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), what="back to the graph")


async def test_r_on_a_conclusion_opens_the_rewind_dialog_of_the_node_that_produced_it(mp):
    app = make_app(mp)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_mind(pilot, app)
        await pilot.press("3")  # the conclusions' heading
        await pilot.press("j")  # the newest: p-b's
        assert screen.selected_node() == "p-b"
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RewindDialog), what="the rewind dialog")
        dialog = app.screen
        assert (dialog.task_id, dialog.node) == ("audit", "p-b")
        await wait_for(pilot, lambda: dialog.plan is not None, what="its plan")
        assert dialog.plan.reset == ("p-b",) and "p-orm" in dialog.plan.kept
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MindScreen), what="back")
        with Ledger.open(mp, create=False) as led:
            assert led.node("audit", "p-b").status == "succeeded"  # escape changed nothing
        await pilot.press("1")  # a requirement is no node: r says so instead of opening a dialog
        await pilot.press("r")
        await wait_for(pilot, lambda: any("select a node" in str(n.message) for n in app._notifications),
                       what="the warning")
        assert isinstance(app.screen, MindScreen)
        await pilot.press("3", "j", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen), what="the node detail")


async def test_the_memory_inbox_confirms_through_the_dialog_and_the_audit(mp, console_applies, apply_attempts):
    app = make_app(mp, operator="ana")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("M")
        await wait_for(pilot, lambda: isinstance(app.screen, MemoryInboxScreen) and app.screen.loaded, what="inbox")
        inbox = app.screen
        assert [m.status for m in inbox.source.items] == ["pending"]
        assert "1 waiting for a person" in str(inbox.query_one("#info", Static).render())
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmMemoryDialog), what="the dialog")
        dialog = app.screen
        await wait_for(pilot, lambda: dialog.plan is not None, what="its plan")
        assert dialog.plan.action == "memory-confirm" and dialog.plan.params.decision == "confirm"
        assert str(app.screen.query_one("#apply").label) == "Confirm memory #1"
        await pilot.press("ctrl+s")  # no reason yet: nothing applied
        await wait_for(pilot, lambda: "cannot apply yet" in str(dialog.query_one("#dialog-error", Static).render()),
                       what="the refusal")
        assert apply_attempts(dialog) == 0 and console_applies == []
        dialog.query_one("#reason", Input).value = "seen on three runs"
        await pilot.press("ctrl+s")
        await workers_done(pilot, dialog)
        await wait_for(pilot, lambda: isinstance(app.screen, MemoryInboxScreen), what="back to the inbox")
        assert console_applies == [("memory-confirm", "1")]
        await wait_for(pilot, lambda: [m.status for m in inbox.source.items] == ["confirmed"], what="the reload")
    with Ledger.open(mp, create=False) as led:
        m = led.memory("1")
        assert (m.status, m.decided_by, m.decision_reason) == ("confirmed", "ana", "seen on three runs")
        assert led.actions()[0].action == "memory-confirm"


async def test_read_only_shows_the_mind_and_the_inbox_but_decides_nothing(mp, console_applies):
    app = make_app(mp, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TaskListScreen)
        await pilot.press("M")
        await wait_for(pilot, lambda: isinstance(app.screen, MemoryInboxScreen) and app.screen.loaded, what="inbox")
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, MemoryInboxScreen)
        assert list(app._notifications)[-1].message == READ_ONLY_NOTICE
        assert console_applies == []


async def test_the_node_detail_says_what_it_serves_and_what_its_next_claim_is_handed(mp):
    app = make_app(mp)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.open_node("audit", "p-orm")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.detail is not None,
                       what="the node detail")
        d = app.screen.detail
        assert d.mind is not None and [r["id"] for r in d.mind.serves] == ["r1"]
        from console.screens.node import render_detail

        shown = render_detail(d, app.now()).plain
        assert "Mind" in shown and "serves        r1  profile every endpoint" in shown
        assert "next claim    1 constraint, 2 requirements, 2 rejected, 1 conclusion, 0 memories" in shown
        assert "\x1b" not in shown and "\\x1b" in shown

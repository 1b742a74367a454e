"""The console's alarms agree with the ledger after any operator action: an abort (a task-level
event whose payload lists the nodes it changed) used to leave the open graph's incremental analysis
holding its running node — an "orphaned" alarm on the task list for as long as the console ran,
while the node detail, the graph and ``warden status`` showed none."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import Ledger, ManualClock, NodeSpec
from store.reading.cli_json import status_json

from tests.support.console_app import NOW, T0, graph_loaded, make_app, settle, wait_for


def build(path: Path) -> None:
    """Task t: a node whose agent died (its lease ran out long before NOW: orphaned), two pending."""
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock) as ledger:
        ledger.create_task("t", title="an agent died")
        ledger.add_nodes("t", [NodeSpec("dead"), NodeSpec("next-1"), NodeSpec("next-2")])
        c = ledger.claim("t", "gone", lease_s=30, key="dead")
        ledger.heartbeat(c, observation="working")


def ledger_signals(path: Path) -> list[dict]:
    with Ledger.open(path, clock=ManualClock(NOW)) as ledger:
        return next(t for t in status_json(ledger)["tasks"] if t["task_id"] == "t")["signals"]


def apply(path: Path, action: str) -> None:
    with Ledger.open(path, clock=ManualClock(NOW)) as ledger:
        plan = (ledger.plan_abort("t", reason="the agent died") if action == "abort"
                else ledger.plan_narrow("t", reason="not needed", exclude=["dead"]))
        ledger.apply(plan, operator="op")


@pytest.mark.parametrize("action", ["abort", "narrow"])
async def test_the_task_lists_alarms_follow_an_operator_action_while_the_graph_is_open(tmp_path, action):
    path = tmp_path / "ledger.db"
    build(path)
    assert [s["kind"] for s in ledger_signals(path) if s["severity"] == "alarm"] == ["orphaned"]
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.open_graph("t")
        await graph_loaded(pilot)
        tasks = app.hub.tasks

        def row_signals() -> list[dict]:
            return list(tasks.rows[tasks.index["t"]].signals)

        def analysed() -> None:
            app.analysis.run_analysis()

        await wait_for(pilot, lambda: any(s["kind"] == "orphaned" for s in row_signals()), what="the alarm shown")
        assert tasks.summary.alarms == 1
        with Ledger.open(path, clock=ManualClock(NOW)) as ledger:
            before = ledger.last_event_id()
        apply(path, action)
        await wait_for(pilot, lambda: app.cursor > before, what="the action in the model")
        want = ledger_signals(path)
        assert not any(s["kind"] == "orphaned" for s in want)
        for _ in range(2):  # the graph's own run, then a full one: both must agree with the ledger
            await wait_for(pilot, lambda: not app.analysis.busy, what="the run under way")
            analysed()
            await wait_for(pilot, lambda: not app.analysis.busy, what="the full run")
            await settle(pilot)
        assert row_signals() == want
        assert tasks.summary.alarms == sum(1 for s in want if s["severity"] == "alarm")

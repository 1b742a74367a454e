"""One operator view of the agents people run: a Claude Code permission request and an
MCP client's question, both asked by real agent-side processes, ring the console's alert (the
bell's count and the ``--on-alert`` hook) and are answered in its resolve screen; the agent then
gets the answer (the hook prints the allow decision; the MCP tool answers ``answered``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from console.screens import HandoffInboxScreen
from console.screens.resolve import ResolveHandoffScreen
from store import Ledger

from tests.support.console_app import make_app, settle, wait_for
from tests.support.asks import MCP_PARTS, mcp_options
from tests.support.console_probes import AlertLog
from tests.support.waiting import Deadline

ROOT = Path(__file__).resolve().parents[2]
SID = "5c0ffee5-1234-4abc-9def-0123456789ab"
TASK = f"claude-{SID[:13]}"


def open_handoffs(ledger: str) -> list[Any]:
    with Ledger.open(ledger, create=False) as led:
        return led.handoffs()


async def until(pilot: Any, cond, timeout: float = 120.0, what: str = "") -> Any:
    """Pump the app while an agent process works; the condition is read in a thread."""
    deadline = Deadline(timeout)
    while True:
        got = await asyncio.to_thread(cond)
        if got:
            return got
        if deadline.expired():
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.1)


async def resolve_in_console(pilot: Any, pick: list[str]) -> ResolveHandoffScreen:
    """h (the inbox), enter (the oldest handoff), the keys that choose the option, ctrl+s."""
    app = pilot.app
    await settle(pilot)
    await pilot.press("h")
    await wait_for(pilot, lambda: isinstance(app.screen, HandoffInboxScreen) and app.screen.loaded
                   and len(app.screen.source.items) == 1, what="the inbox with the agent's question")
    await pilot.press("enter")
    scr = app.screen
    assert isinstance(scr, ResolveHandoffScreen)
    await wait_for(pilot, lambda: scr.handoff is not None, what="the handoff")
    await pilot.pause()
    await pilot.press(*pick)
    await pilot.press("ctrl+s")
    return scr


def hook_recorder(tmp_path: Path) -> tuple[list[str], Path]:
    out = tmp_path / "alerts.jsonl"
    code = f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read().strip() + '\\n')"
    return [sys.executable, "-c", code], out


async def test_a_claude_permission_request_is_allowed_in_the_console(tmp_path):
    ledger = str(tmp_path / "ledger.db")
    Ledger.open(ledger).close()
    on_alert, alerts = hook_recorder(tmp_path)
    answers = tmp_path / "answers.jsonl"
    app = make_app(ledger, operator="ana@console", clock=time.time, analysis=False, on_alert=on_alert, bell=True)
    log = AlertLog(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        fake = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "fake_claude.py"),
                                 "--ledger", ledger, "--sessions", str(tmp_path / "sessions"), "--out", str(answers),
                                 "--session", SID, "SessionStart", "PermissionRequest", "Stop"],
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
        try:
            await until(pilot, lambda: open_handoffs(ledger), what="the permission request")
            await wait_for(pilot, lambda: any(a.kind == "handoff" for a in log.delivered), timeout=60,
                           what="the alert")
            alert = next(a for a in log.delivered if a.kind == "handoff")
            assert alert.task == TASK and "Allow Claude Code to use Bash?" in alert.evidence
            scr = await resolve_in_console(pilot, ["home", "enter"])  # the first option: allow
            assert scr.chosen == "allow"
            done = await until(pilot, lambda: answers.exists() and answers.read_text().count("\n") >= 2,
                               what="the hook's answer")
            assert done
            assert await asyncio.to_thread(fake.wait, 120) == 0
        finally:
            try:
                os.killpg(fake.pid, signal.SIGKILL)  # the fake and a hook it still runs
            except ProcessLookupError:
                pass
            fake.wait()
    by = {a["event"]: a for a in map(json.loads, answers.read_text().splitlines())}
    assert by["PermissionRequest"]["answer"] == {
        "hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
    with Ledger.open(ledger) as led:
        [h] = led.handoffs(status=None, task_id=TASK)
        assert (h.kind, h.resolution_option, h.resolved_by) == ("permission", "allow", "ana@console")
        assert led.node(TASK, "turn-1").status == "succeeded"
    hooked = [json.loads(line) for line in alerts.read_text().splitlines()]
    assert any(a["kind"] == "handoff" and a["task"] == TASK for a in hooked)  # the --on-alert hook ran


async def test_an_mcp_client_asks_and_the_operator_answers_in_the_console(tmp_path):
    mcp = pytest.importorskip("mcp")
    ledger = str(tmp_path / "ledger.db")
    Ledger.open(ledger).close()
    app = make_app(ledger, operator="bo@console", clock=time.time, analysis=False)
    params = mcp.StdioServerParameters(
        command=sys.executable, args=["-m", "console", "mcp", "--ledger", ledger, "--task", "deploy-7",
                                      "--worker", "codex-1", "--sessions", str(tmp_path / "sessions"),
                                      "--ask-wait", "120"],
        env={"PYTHONPATH": str(ROOT)}, cwd=str(tmp_path))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        async with mcp.Client(params) as client:
            claimed = json.loads((await client.call_tool("claim_next", {})).content[0].text)
            assert claimed["status"] == "claimed"
            beat = await client.call_tool("heartbeat", {"action": "built the image", "result": "image 1.4.2"})
            assert json.loads(beat.content[0].text)["status"] == "ok"
            asking = asyncio.ensure_future(client.call_tool("ask_human", {
                "question": "Deploy 1.4.2 to production?", "options": mcp_options("deploy", "wait"), "kind": "confirm",
                **MCP_PARTS}))
            await until(pilot, lambda: open_handoffs(ledger), what="the question")
            scr = await resolve_in_console(pilot, ["home", "enter"])
            assert scr.chosen == "deploy"
            answered = json.loads((await asyncio.wait_for(asking, 120)).content[0].text)
            assert (answered["status"], answered["option"], answered["by"]) == ("answered", "deploy", "bo@console")
            done = json.loads((await client.call_tool("commit", {"output": {"deployed": "1.4.2"}})).content[0].text)
            assert done["status"] == "committed"
    with Ledger.open(ledger) as led:
        assert led.node("deploy-7", "main").status == "succeeded"
        assert led.task("deploy-7").origin == "mcp"

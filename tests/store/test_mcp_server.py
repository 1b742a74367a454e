"""``warden mcp`` end to end: the official MCP SDK's client talks to a real ``warden mcp`` process
over stdio (``mcp.Client`` + ``StdioServerParameters``), as Claude Code or Codex would. The
tools' every branch is tests/store/test_agent_session.py (in this process, faster)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

mcp = pytest.importorskip("mcp")

from console.cli import main as warden  # noqa: E402
from tests.support.asks import MCP_PARTS, mcp_options  # noqa: E402
from tests.support.observed import all_said  # noqa: E402
from store import Ledger  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def server(ledger: str, sessions: Path, *extra: str):
    args = ["-m", "console", "mcp", "--ledger", ledger, "--sessions", str(sessions), *extra]
    return mcp.Client(mcp.StdioServerParameters(command=sys.executable, args=args, cwd=str(sessions.parent),
                                                env={"PYTHONPATH": str(ROOT)}))


async def call(client, tool: str, **arguments):
    r = await client.call_tool(tool, arguments)
    assert not r.is_error, [getattr(c, "text", c) for c in r.content]
    text = json.loads(r.content[0].text)
    assert r.structured_content in (None, text) or r.structured_content.get("result", text) == text
    return text


@pytest.fixture
def sessions(tmp_path) -> Path:
    return tmp_path / "sessions"


async def test_the_sdk_client_claims_heartbeats_asks_a_human_and_commits(ledger_path, sessions, capsys):
    with Ledger.open(ledger_path) as led:
        led.create_task("fix-42", title="Fix issue 42", constraints=["never push to main"], inputs={"issue": 42})
        led.add_node("fix-42", "patch", kind="llm")
    async with server(ledger_path, sessions, "--task", "fix-42", "--worker", "claude-1", "--lease", "5",
                      "--ask-wait", "1") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"claim_next", "heartbeat", "commit", "fail", "intend_effect", "confirm_effect",
                         "ask_human", "wait_for_human", "report"}
        got = await call(client, "claim_next")
        assert (got["status"], got["node"], got["inputs"]["task"]) == ("claimed", "patch", {"issue": 42})
        constraints = await client.read_resource("warden://task/constraints")
        assert json.loads(constraints.contents[0].text) == ["never push to main"]
        inputs = await client.read_resource("warden://claim/inputs")
        assert json.loads(inputs.contents[0].text)["task"] == {"issue": 42}
        beat = await call(client, "heartbeat", action="ran the tests", result="3 failed", progress=0.25, tokens=900)
        assert beat["status"] == "ok"
        bare = await client.call_tool("ask_human", {"question": "Push the fix?", "options": ["yes", "no"],
                                                    "kind": "confirm"})
        assert bare.is_error and "context['done']" in bare.content[0].text  # a bare checkpoint is refused
        asked = await call(client, "ask_human", question="Push the fix to a branch?", kind="confirm",
                           done="patched the parser; 44 tests pass", stuck="pushing is not mine to decide",
                           options=[{"id": "yes", "consequence": "a branch fix-42 is pushed"},
                                    {"id": "no", "consequence": "the fix stays local"}],
                           recommendation="yes", why="the suite passes")
        assert asked["status"] == "pending"  # after --ask-wait: the client's tool timeout never loses it
        assert warden(["resolve", asked["handoff"], "--option", "yes", "--answer", "branch fix-42",
                       "--yes", "--ledger", ledger_path, "--operator", "ana@console"]) == 0
        capsys.readouterr()
        answered = await call(client, "wait_for_human", handoff=asked["handoff"])
        assert (answered["status"], answered["option"], answered["answer"], answered["by"]) == (
            "answered", "yes", "branch fix-42", "ana@console")
        done = await call(client, "commit", output={"branch": "fix-42", "tests": "44 passed"})
        assert done["status"] == "committed"
        report = await call(client, "report")
        assert report["session"]["claim"] is None
    with Ledger.open(ledger_path) as led:
        n = led.node("fix-42", "patch")
        assert n.status == "succeeded" and n.output == {"branch": "fix-42", "tests": "44 passed"}
        assert n.tokens_used == 900 and n.units_done == 0.25
        assert "ran the tests" in all_said(led.observations("fix-42", "patch"))
        assert led.task("fix-42").status == "completed"


async def test_a_reconnected_client_goes_on_and_a_repeated_commit_is_not_doubled(tmp_path, sessions):
    ledger_path = str(tmp_path / "l.db")  # (nothing backend-specific: both are covered above)
    flags = ("--task", "t", "--worker", "w-1", "--lease", "30")
    async with server(ledger_path, sessions, *flags) as client:
        first = await call(client, "claim_next")
        await call(client, "heartbeat", observation="step one")
    async with server(ledger_path, sessions, *flags) as client:  # a new process: the same claim
        assert (await call(client, "heartbeat", observation="step two"))["status"] == "ok"
        again = await call(client, "claim_next")
        assert again["resumed"] is True and again["attempt"] == first["attempt"]
        assert (await call(client, "commit", output={"n": 1}))["already"] is False
    async with server(ledger_path, sessions, *flags) as client:  # the answer was "lost": it commits again
        repeat = await call(client, "commit", output={"n": 1})
        assert repeat["status"] == "committed" and repeat["already"] is True
    with Ledger.open(ledger_path) as led:
        kinds = [e.kind for e in led.events(task_id="t")]
        assert kinds.count("node.claimed") == 1 and kinds.count("node.committed") == 1
        assert len(led.tasks()) == 1 and [o.text for o in led.observations("t", "main")] == ["step one", "step two"]


async def test_the_operator_park_rewind_and_abort_reach_the_client(tmp_path, sessions):
    ledger_path = str(tmp_path / "l.db")
    async with server(ledger_path, sessions, "--task", "t", "--worker", "w", "--lease", "30") as client:
        await call(client, "claim_next")
        with Ledger.open(ledger_path) as led:
            led.apply(led.plan_park("t", reason="CI quota", now=True), operator="op")
        parked = await call(client, "heartbeat", observation="x")
        assert (parked["status"], parked["answer"], parked["reason"]) == ("parked", "parked", "CI quota")
        with Ledger.open(ledger_path) as led:
            led.apply(led.plan_resume("t"), operator="op")
        assert (await call(client, "heartbeat", observation="y"))["status"] == "ok"
        with Ledger.open(ledger_path) as led:
            led.apply(led.plan_rewind("t", "main", reason="keep the old API"), operator="op")
        rewound = await call(client, "heartbeat", observation="z")
        assert rewound["answer"] == "rewound: keep the old API"
        assert rewound["inputs"]["rejections"] == ["keep the old API"]
        with Ledger.open(ledger_path) as led:
            led.apply(led.plan_abort("t", reason="wrong repo"), operator="op")
        aborted = await call(client, "commit", output="late")
        assert (aborted["status"], aborted["reason"]) == ("aborted", "wrong repo")
    with Ledger.open(ledger_path) as led:
        assert led.node("t", "main").status == "abandoned" and led.node("t", "main").output is None


async def test_malformed_calls_are_tool_errors_and_the_server_goes_on(tmp_path, sessions):
    ledger = str(tmp_path / "l.db")
    async with server(ledger, sessions, "--task", "t", "--worker", "w") as client:
        await call(client, "claim_next")
        for tool, args in [("commit", {}), ("heartbeat", {"progress": "lots"}), ("fail", {"error": "x",
                           "failure_class": "cosmic"}), ("ask_human", {"question": "?", "options": [{"x": 1}]}),
                           ("heartbeat", {"tokens": -3}), ("no_such_tool", {})]:
            r = await client.call_tool(tool, args)
            assert r.is_error, (tool, args)
            assert all("Traceback" not in getattr(c, "text", "") for c in r.content)
        assert (await call(client, "heartbeat", observation="\x1b]52;c;evil\x07 fine"))["status"] == "ok"
    with Ledger.open(ledger) as led:
        assert led.node("t", "main").status == "running"  # nothing refused changed anything


def test_without_the_sdk_warden_mcp_says_which_extra(monkeypatch, capsys, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a))
    assert warden(["mcp", "--ledger", str(tmp_path / "l.db")]) == 1
    assert "pip install 'warden[mcp]'" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "l.db")


async def test_concurrent_ask_human_calls_are_each_their_own_handoff(ledger_path, sessions):
    """A client that asks two questions at once (two tool calls in flight): two handoffs, each
    answer back to its own call, the step's claim kept throughout."""
    import asyncio
    import threading

    from tests.support.waiting import wait_until

    async with server(ledger_path, sessions, "--task", "t", "--worker", "w", "--ask-wait", "60") as client:
        await call(client, "claim_next")

        def answer() -> None:
            with Ledger.open(ledger_path) as led:
                wait_until(lambda: len(led.handoffs(task_id="t")) == 2, "both questions open", timeout=60)
                assert led.node("t", "main").status == "running"
                for h in led.handoffs(task_id="t"):
                    led.apply(led.plan_resolve(h.id, option="a", answer=f"for {h.question}"), operator="op")
        operator = threading.Thread(target=answer)
        operator.start()
        one, two = await asyncio.gather(
            call(client, "ask_human", question="Q1?", options=mcp_options("a", "b"), **MCP_PARTS),
            call(client, "ask_human", question="Q2?", options=mcp_options("a", "b"), **MCP_PARTS))
        operator.join(60)
        assert (one["status"], one["answer"], two["status"], two["answer"]) == ("answered", "for Q1?", "answered",
                                                                                  "for Q2?")
        assert (await call(client, "commit", output={"ok": True}))["status"] == "committed"
    with Ledger.open(ledger_path) as led:
        assert led.node("t", "main").attempt == 1 and led.task("t").status == "completed"

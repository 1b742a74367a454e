"""``warden run --json-stream claude|codex``: each event is parsed whole before anything is cut
(store/adapters/command.py ``STREAM_EVENT_CAP``), so the events real CLIs print every run —
Claude's ``system/init`` (~1,400 characters) and ``result`` (the final answer, the cost, the
token totals), a tool call writing 3,000 characters, a command printing 400 lines — all count.

The events are built here in the shapes the CLIs publish (docs/agents.md "warden run"; Claude
Code's ``--output-format stream-json --verbose``, Codex's ``exec --json``), at real sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

from store import Ledger
from tests.store.test_run_command import node, supervise

SESSION = "8f0c2a52-3b7e-4a51-9d0e-6c1f2b7d9e11"
TOOLS = ["Task", "Bash", "Glob", "Grep", "ExitPlanMode", "Read", "Edit", "MultiEdit", "Write", "NotebookEdit",
         "WebFetch", "TodoWrite", "WebSearch", "BashOutput", "KillShell", "SlashCommand"] + [
    f"mcp__warden__{t}" for t in ("claim_next", "heartbeat", "commit", "fail", "intend_effect", "confirm_effect",
                                  "ask_human", "wait_for_human", "report")]


def claude_events() -> list[dict]:
    usage1 = {"input_tokens": 3, "cache_creation_input_tokens": 1800, "cache_read_input_tokens": 0,
              "output_tokens": 1200, "service_tier": "standard"}
    usage2 = {"input_tokens": 5, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 1800,
              "output_tokens": 300, "service_tier": "standard"}
    write = "def parse(text):\n" + "".join(f"    step_{i} = text.split(',')[{i % 7}]  # field {i}\n"
                                          for i in range(70))
    listing = "\n".join(f"{i:4d}  ok  tests/test_parser.py::test_case_{i}" for i in range(400))
    final = ("Fixed the CSV parser: empty fields no longer shift the columns. " * 14).strip()
    return [
        {"type": "system", "subtype": "init", "cwd": "/home/dev/project", "session_id": SESSION, "tools": TOOLS,
         "mcp_servers": [{"name": "warden", "status": "connected"}], "model": "claude-sonnet-4-5-20250929",
         "permissionMode": "acceptEdits", "slash_commands": ["compact", "context", "cost", "init", "pr-comments",
                                                             "release-notes", "review", "security-review", "todos"],
         "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.1.197", "output_style": "default",
         "agents": ["general-purpose", "statusline-setup", "output-style-setup"], "skills": [], "plugins": [],
         "uuid": "0b6f3d3e-9d7e-4a4b-8a1a-2f5a0c8e7d61"},
        {"type": "assistant", "message": {"id": "msg_01", "type": "message", "role": "assistant",
                                          "model": "claude-sonnet-4-5-20250929",
                                          "content": [{"type": "tool_use", "id": "toolu_01", "name": "Write",
                                                       "input": {"file_path": "/home/dev/project/parser.py",
                                                                 "content": write}}],
                                          "stop_reason": None, "usage": usage1},
         "parent_tool_use_id": None, "session_id": SESSION, "uuid": "u1"},
        {"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": "toolu_01", "type": "tool_result", "content": "File created successfully at: "
                                                                          "/home/dev/project/parser.py"}]},
         "parent_tool_use_id": None, "session_id": SESSION, "uuid": "u2",
         "tool_use_result": {"type": "create", "filePath": "/home/dev/project/parser.py", "content": write}},
        {"type": "assistant", "message": {"id": "msg_02", "type": "message", "role": "assistant",
                                          "model": "claude-sonnet-4-5-20250929",
                                          "content": [{"type": "tool_use", "id": "toolu_02", "name": "Bash",
                                                       "input": {"command": "pytest -v tests/test_parser.py",
                                                                 "description": "Run the parser tests"}}],
                                          "stop_reason": None, "usage": usage2},
         "parent_tool_use_id": None, "session_id": SESSION, "uuid": "u3"},
        {"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": "toolu_02", "type": "tool_result", "content": listing, "is_error": False}]},
         "parent_tool_use_id": None, "session_id": SESSION, "uuid": "u4",
         "tool_use_result": {"stdout": listing, "stderr": "", "interrupted": False, "isImage": False}},
        {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 48211, "duration_api_ms": 45310,
         "num_turns": 3, "result": final, "session_id": SESSION, "total_cost_usd": 0.0871265,
         "usage": {"input_tokens": 12, "cache_creation_input_tokens": 1830, "cache_read_input_tokens": 1800,
                   "output_tokens": 1650, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
                   "service_tier": "standard", "cache_creation": {"ephemeral_1h_input_tokens": 0,
                                                                  "ephemeral_5m_input_tokens": 1830}},
         "modelUsage": {"claude-sonnet-4-5-20250929": {"inputTokens": 12, "outputTokens": 1650,
                                                       "cacheReadInputTokens": 1800,
                                                       "cacheCreationInputTokens": 1830, "costUSD": 0.0871265}},
         "permission_denials": [], "uuid": "u5"},
    ]


def write_stream(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_claude_init_result_and_large_calls_are_read_whole(tmp_path, workdir):
    events = claude_events()
    assert len(json.dumps(events[0])) > 1000 and len(json.dumps(events[-1])) > 1000  # the sizes that were lost
    stream = write_stream(tmp_path / "claude.jsonl", events)
    ledger = str(tmp_path / "l.db")
    outcome, _, _ = supervise(ledger, workdir, argv=["cat", str(stream)], json_stream="claude")
    assert outcome.status == "committed", outcome
    n = node(ledger)
    assert n.output["final"] == events[-1]["result"]
    assert n.output["cost_usd"] == 0.0871265
    assert n.tokens_used == 12 + 1830 + 1800 + 1650  # the result's totals, every token once
    with Ledger.open(ledger) as led:
        text = "\n".join(o.text for o in led.observations("t", "main", limit=100))
        actions = [e for e in led.events(task_id="t") if e.kind == "node.heartbeat" and e.payload.get("action")]
    assert any("Write(" in a.payload["action"] for a in actions) and any("Bash(" in a.payload["action"] for a in actions)
    assert f"session {SESSION} started (model claude-sonnet-4-5-20250929)" in text
    assert len(n.output["last_lines"]) <= 20 and len(json.dumps(n.output)) < 64 * 1024


def test_a_codex_command_with_a_large_output_is_one_call(tmp_path, workdir):
    out = "\n".join(f"line {i} of the build log " + "x" * 40 for i in range(400))
    events = [
        {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
        {"type": "turn.started"},
        {"type": "item.started", "item": {"id": "item_1", "type": "command_execution",
                                          "command": "bash -lc 'make build'", "aggregated_output": "",
                                          "exit_code": None, "status": "in_progress"}},
        {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                            "command": "bash -lc 'make build'", "aggregated_output": out,
                                            "exit_code": 0, "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "Built."}},
        {"type": "turn.completed", "usage": {"input_tokens": 24763, "cached_input_tokens": 24448,
                                             "output_tokens": 122}},
    ]
    stream = write_stream(tmp_path / "codex.jsonl", events)
    ledger = str(tmp_path / "l.db")
    outcome, _, _ = supervise(ledger, workdir, argv=["cat", str(stream)], json_stream="codex")
    assert outcome.status == "committed", outcome
    n = node(ledger)
    assert n.output["final"] == "Built." and n.tokens_used == 24763 + 122
    with Ledger.open(ledger) as led:
        actions = [e.payload["action"] for e in led.events(task_id="t") if e.payload.get("action")]
    assert actions == ["run: bash -lc 'make build'"]


def test_an_event_over_the_bound_is_reported_and_the_rest_still_read(tmp_path, workdir):
    from store.adapters.command import STREAM_EVENT_CAP

    huge = {"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_9", "type": "tool_result", "content": "y" * (STREAM_EVENT_CAP + 10)}]}}
    events = [huge, claude_events()[-1]]
    stream = write_stream(tmp_path / "claude.jsonl", events)
    ledger = str(tmp_path / "l.db")
    outcome, _, _ = supervise(ledger, workdir, argv=["cat", str(stream)], json_stream="claude")
    assert outcome.status == "committed", outcome
    n = node(ledger)
    assert n.output["events_not_read"] == 1 and n.output["cost_usd"] == 0.0871265
    with Ledger.open(ledger) as led:
        text = "\n".join(o.text for o in led.observations("t", "main", limit=100))
    assert f"an event of more than {STREAM_EVENT_CAP} bytes was not read" in text
    assert "y" * 1001 not in text  # what is stored stays bounded

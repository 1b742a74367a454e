"""``--json-stream claude|codex``: agents' event streams read as actions, results, tokens, cost and
progress (store/adapters/streams.py), from recorded streams (tests/fixtures/agents/README.md) and
from hostile ones (anything a process can print: never an exception, always bounded)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.adapters.steering import clean, clean_lines
from store.adapters.streams import SUMMARY_CAP, Step, parser_for, summarize

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "agents")


def replay(fmt: str, name: str) -> list[Step]:
    p = parser_for(fmt)
    steps: list[Step] = []
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        for line in f:
            steps.extend(p.feed(line))
    return steps


def test_claude_stream_json_gives_each_tool_call_with_its_result_and_every_token_once():
    steps = replay("claude", "claude_stream.jsonl")
    pairs = [(s.action, s.result) for s in steps if s.action is not None]
    assert pairs == [
        ('Bash({"command":"pytest -q","description":"Run the tests"})', "3 failed, 41 passed in 2.31s"),
        ('Edit({"file_path":"/work/repo/app.py","new_string":"x = 2","old_string":"x = 1"})',
         "The file /work/repo/app.py has been updated."),
        ('Bash({"command":"pytest -q"})', "44 passed in 2.02s"),
    ]
    # msg_01A carries its usage on two lines (one per content block): counted once; the result's
    # cumulative usage adds what the messages did not report (100 output tokens here)
    assert sum(s.tokens for s in steps) == 2042 + 2100 + 2125 + 2178 + 100 == 8545
    end = [s for s in steps if s.final is not None]
    assert end[-1].final == "Fixed: x is 2 now and all 44 tests pass." and end[-1].cost_usd == 0.0421
    assert not any(s.failed for s in steps)
    assert [s.text for s in steps if s.text][:2] == [
        "session 3f1c2a9e-5b7d-4e61-9a0b-2c4d6e8f0a12 started (model claude-sonnet-4-5)",
        "I'll run the tests first."]


def test_codex_exec_json_gives_commands_file_changes_progress_and_tokens():
    steps = replay("codex", "codex_exec.jsonl")
    pairs = [(s.action, s.result) for s in steps if s.action is not None]
    assert pairs == [
        ("run: bash -lc ls", "exit 0 (completed): README.md src tests"),
        ("edit files", "update src/parser.py (completed)"),
        ("run: bash -lc 'pytest -q'", "exit 0 (completed): 12 passed in 0.41s"),
    ]
    assert [s.units for s in steps if s.units] == [(3.0, 3.0)]  # the completed to-do list
    assert sum(s.tokens for s in steps) == 24763 + 122  # cached input tokens are part of the input
    assert [s.final for s in steps if s.final] == ["Fixed the parser in src/parser.py; the 12 tests pass."]


def test_errors_the_streams_report_are_failures():
    c = parser_for("claude")
    [step] = c.feed(json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True,
                                "total_cost_usd": 1.5, "usage": {"output_tokens": 10}}))
    assert step.failed == "error_max_turns" and step.cost_usd == 1.5 and step.tokens == 10
    x = parser_for("codex")
    assert x.feed('{"type":"turn.failed","error":{"message":"stream disconnected"}}')[0].failed == \
        "stream disconnected"
    assert x.feed('{"type":"error","message":"rate limited"}')[0].failed == "rate limited"
    [tool] = c.feed(json.dumps({"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "nope", "content": "boom", "is_error": True}]}}))
    assert tool.action == "a tool call" and tool.result == "error: boom"  # a result whose call was never seen


def test_plain_lines_and_broken_json_are_kept_as_lines():
    p = parser_for("claude")
    assert p.feed("Compiling...") == [Step(line="Compiling...")]
    assert p.feed('{"type": "assistant", "message"') == [Step(line='{"type": "assistant", "message"')]
    assert p.feed("   ") == []
    assert p.feed("[1, 2]") == [Step(line="[1, 2]")]


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "subtype", "message", "content", "id", "name", "input", "usage", "item",
                         "tool_use_id", "result", "is_error", "total_cost_usd", "text", "items", "changes",
                         "error", "input_tokens", "output_tokens", "exit_code", "aggregated_output", "x"]),
        kids, max_size=6),
    max_leaves=30)
EVENT_TYPES = ["assistant", "user", "result", "system", "item.started", "item.completed", "item.updated",
               "turn.completed", "turn.failed", "error", "thread.started", "zzz"]


@settings(max_examples=400, deadline=None)
@given(fmt=st.sampled_from(["claude", "codex"]), kind=st.sampled_from(EVENT_TYPES), body=JSONISH)
def test_any_event_never_raises_and_stays_bounded(fmt, kind, body):
    p = parser_for(fmt)
    event = dict(body) if isinstance(body, dict) else {"x": body}
    event["type"] = kind
    for step in p.feed(json.dumps(event)) + p.feed(json.dumps(event)):
        assert step.tokens >= 0
        for text in (step.action, step.result):
            assert text is None or len(text) <= SUMMARY_CAP
        assert step.cost_usd is None or step.cost_usd >= 0


def test_a_stream_that_opens_calls_and_never_closes_them_is_bounded():
    p = parser_for("codex")
    for i in range(3000):
        p.feed(json.dumps({"type": "item.started", "item": {"id": f"i{i}", "type": "command_execution",
                                                             "command": "x" * 1000}}))
    assert len(p.pending) <= 1000


def test_summaries_and_clean_lines():
    assert summarize("a\n\tb  c") == "a b c"
    assert len(summarize("x" * 10_000)) == SUMMARY_CAP
    assert summarize({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert clean(b"\x1b[1;31merror\x1b[0m: bad \xff") == "error: bad \ufffd"
    assert clean("progress 10%\rprogress 50%\rprogress 100%") == "progress 100%"
    assert clean("\x1b]0;title\x07done") == "done"
    assert clean("y" * 5000).endswith("…") and len(clean("y" * 5000)) == 1001
    assert clean("keep \x07 bell") == "keep \x07 bell"  # escaped on display, not dropped here
    joined = clean_lines([f"line {i}" for i in range(1000)], cap=100)
    assert joined.startswith("[") and "earlier lines left out" in joined and joined.endswith("line 999")
    assert len(joined) < 200


@pytest.mark.parametrize("fmt", ["claude", "codex"])
def test_a_huge_or_deep_line_is_harmless(fmt):
    p = parser_for(fmt)
    deep = "[" * 100_000 + "]" * 100_000
    assert p.feed(deep) == [Step(line=deep)]  # not JSON an object starts with: kept as a line
    nested = '{"type":"assistant","message":' + '{"a":' * 5000 + "1" + "}" * 5000 + "}"
    out = p.feed(nested)  # Python's JSON parser refuses the depth: a line, not a crash
    assert len(out) == 1

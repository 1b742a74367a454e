"""A node judged looping or bringing nothing new: the agent is told on its heartbeat (Python API,
``warden mcp``, the Claude Code hooks) with the operator's signal's own evidence, and healthy work
(a counter beside a status line, new measurements) is told nothing."""

from __future__ import annotations

import json
from pathlib import Path

from store.adapters.agent_session import AgentSession, SessionConfig
from store.adapters.claude_hooks import HookConfig, handle
from store.adapters.sessions import SessionStore
from tests.support.loop_alarms import agrees, loops, start

HOOKS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "agents" / "claude_hooks"


def event(name: str, **changes) -> dict:
    data = json.loads((HOOKS / f"{name}.json").read_text())
    data.update(changes)
    return data


# ---------------------------------------------------------------------- the agent is told
def test_the_heartbeat_says_when_the_node_loops_and_not_before(ledger, clock):
    c = start(ledger)
    p = ledger.heartbeat(c, action="read_file('src/a.py')", result="def parse(x):\n    return x")
    assert p.stall is None and p.stall_evidence is None
    answers = []
    for _ in range(3):
        clock.advance(5)
        answers.append(ledger.heartbeat(c, action="pytest tests/test_a.py", result="1 failed: test_parse"))
    assert [a.stall for a in answers[:2]] == [None, None]
    assert answers[2].stall == "repeating" and "the same action got the same result 3 times" in answers[2].stall_evidence
    # the operator's signal is the same judgement
    (sig,) = [s for s in loops(ledger) if s.kind == "repeating"]
    assert sig.evidence == answers[2].stall_evidence
    clock.advance(5)  # news ends it
    assert ledger.heartbeat(c, action="edit src/a.py", result="patched parse: strip the input").stall is None


def test_warden_mcp_heartbeat_answer_carries_the_stall_and_what_to_do(ledger, clock, tmp_path):
    s = AgentSession(ledger, SessionStore(str(tmp_path / "s")), SessionConfig(worker="w1", task="t"), say=lambda x: None)
    assert s.claim_next("t", None)["status"] == "claimed"
    first = s.heartbeat(None, None, "curl -sS localhost:8000/health", "curl: (7) Failed to connect: Connection refused",
                        None, None, 0)
    assert first["status"] == "ok" and "stall" not in first
    for _ in range(3):
        clock.advance(3)
        out = s.heartbeat(None, None, "curl -sS localhost:8000/health",
                          "curl: (7) Failed to connect: Connection refused", None, None, 0)
    assert out["status"] == "ok" and out["stall"] == "repeating"
    assert "Change course" in out["advice"] and out["stall_evidence"] in out["advice"]
    s.close()


def test_a_claude_code_hook_tells_claude_with_the_tool_result(ledger, tmp_path):
    store = SessionStore(str(tmp_path / "sessions"))
    cfg = HookConfig(permission_wait_s=30, park_wait_s=30, poll_s=0.05)
    handle(ledger, store, cfg, event("session_start"), sleep=lambda s: None)
    handle(ledger, store, cfg, event("user_prompt_submit"), sleep=lambda s: None)
    answers = [handle(ledger, store, cfg, event("post_tool_use"), sleep=lambda s: None) for _ in range(4)]
    assert answers[0].output is None  # the first run of the tool is news
    ctx = answers[-1].output["hookSpecificOutput"]
    assert ctx["hookEventName"] == "PostToolUse" and "Warden judges this step looping" in ctx["additionalContext"]


# ---------------------------------------------------------------------- a rising counter hides nothing


def test_the_heartbeats_answer_is_the_operators_signal_beat_by_beat(ledger, clock):
    c = start(ledger)
    for i, f in enumerate(("src/a.py", "src/b.py")):  # real work first
        clock.advance(5)
        agrees(ledger, ledger.heartbeat(c, action=f"read {f}", result=f"contents of {f}: def f{i}(): pass",
                                        units_done=i, units_total=50))
    cycle = [("git status --short", " M src/app.py"), ("pytest -q", "1 failed, 3 passed"),
             ("curl localhost:8000/health", "HTTP 503 Service Unavailable")]
    told = []
    for n in range(1, 13):  # the same three steps with a rising counter: a loop all the same
        clock.advance(5)
        action, result = cycle[(n - 1) % 3]
        told.append(agrees(ledger, ledger.heartbeat(c, action=action, result=result, units_done=2 + n,
                                                    units_total=50)).stall)
    assert "repeating" in told and told[:3] == [None] * 3, told
    clock.advance(5)  # a bare heartbeat (a lease keeper's) is answered too
    assert agrees(ledger, ledger.heartbeat(c)).stall == told[-1]


def test_a_status_line_beside_a_rising_counter_is_progress(ledger, clock):
    c = start(ledger)
    for i in range(30):
        clock.advance(5)
        assert ledger.heartbeat(c, observation="processing batch", units_done=i + 1, units_total=60).stall is None
    assert loops(ledger) == []


def test_a_counter_beside_new_measurements_is_progress(ledger, clock):
    c = start(ledger)
    for i in range(12):  # the same step, a log tail whose loss moves: a training run, not a loop
        clock.advance(5)
        p = ledger.heartbeat(c, action="tail -n 1 train.log", result=f"{{'loss': {2.0 - i * 0.05:.4f}, 'epoch': 1.0}}",
                             units_done=100 * (i + 1), units_total=5000)
        assert p.stall is None, i

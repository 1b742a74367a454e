"""``warden hook claude``: Claude Code's hook events (recorded payloads in
tests/fixtures/agents/claude_hooks/, made from https://code.claude.com/docs/en/hooks) answered as
the protocol expects, in this process (store/adapters/claude_hooks.py) and end to end with a fake
Claude Code that runs the real command per event (tests/support/fake_claude.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli import main as warden
from store import Ledger
from tests.support.observed import all_said  # noqa: E402
from store.adapters.claude_hooks import HookConfig, handle, parse, run_hook
from store.adapters.sessions import SessionStore

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "tests" / "fixtures" / "agents" / "claude_hooks"
SID = "9b2e4c1a-7d3f-4a58-b6e0-1f2a3b4c5d6e"
TASK = f"claude-{SID[:13]}"


def event(name: str, **changes) -> dict:
    data = json.loads((HOOKS / f"{name}.json").read_text())
    data.update(changes)
    return data


@pytest.fixture
def store(tmp_path):
    return SessionStore(str(tmp_path / "sessions"))


def hook(ledger, store, name: str, cfg: HookConfig | None = None, sleep=time.sleep, **changes):
    return handle(ledger, store, cfg or HookConfig(permission_wait_s=30, park_wait_s=30, poll_s=0.05),
                  event(name, **changes), sleep=sleep)


def apply(ledger, plan):
    return ledger.apply(plan, operator="op@console")


def test_a_session_is_a_task_and_each_turn_a_node(ledger, store):
    start = hook(ledger, store, "session_start")
    ctx = start.output["hookSpecificOutput"]
    assert ctx["hookEventName"] == "SessionStart" and TASK in ctx["additionalContext"]
    t = ledger.task(TASK)
    assert (t.origin, t.title) == ("claude", "Claude Code in repo")
    assert hook(ledger, store, "user_prompt_submit").output is None
    assert hook(ledger, store, "pre_tool_use").output is None  # no decision: the normal permission flow
    assert hook(ledger, store, "post_tool_use").output is None
    n = ledger.node(TASK, "turn-1")
    assert n.status == "running" and n.lease_owner == "claude:9b2e4c1a" and n.kind == "claude-turn"
    text = all_said(ledger.observations(TASK, "turn-1"))
    assert "Bash(" in text and "pytest -q tests/test_parser.py" in text and "1 failed, 11 passed" in text
    notes = [e.summary for e in ledger.events(task_id=TASK) if e.kind == "node.note"]
    assert any("Fix the failing parser test" in s for s in notes)
    assert hook(ledger, store, "stop").output is None
    n = ledger.node(TASK, "turn-1")
    assert n.status == "succeeded" and n.output["last_message"].startswith("Fixed the parser")
    assert ledger.task(TASK).status == "completed"
    # the next prompt opens turn 2, after turn 1
    hook(ledger, store, "user_prompt_submit", prompt="Now update the changelog")
    two = ledger.node(TASK, "turn-2")
    assert two.status == "running" and two.deps == ("turn-1",) and two.title == "Now update the changelog"
    assert ledger.task(TASK).status == "active"


def test_a_shared_task_keeps_sessions_apart(ledger, store):
    cfg = HookConfig(task="team-x", poll_s=0.05)
    hook(ledger, store, "session_start", cfg)
    hook(ledger, store, "session_start", cfg, session_id="session-1")
    hook(ledger, store, "session_start", cfg, session_id="session-2")  # same prefix: still apart
    nodes = {n.key: n for n in ledger.graph("team-x").nodes}
    assert len(nodes) == 3 and "9b2e4c1a.turn-1" in nodes
    assert all(n.status == "running" for n in nodes.values())
    assert len({n.lease_owner for n in nodes.values()}) == 3


def permission_in_thread(ledger_path, clock, store, cfg):
    got = {}

    def run():
        with Ledger.open(ledger_path, clock=clock) as led:
            got["answer"] = handle(led, store, cfg, event("permission_request"))
    t = threading.Thread(target=run)
    t.start()
    return t, got


def wait_handoff(ledger, kind="permission"):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        hs = [h for h in ledger.handoffs(task_id=TASK) if h.kind == kind]
        if hs:
            return hs[0]
        time.sleep(0.02)  # the pause between two looks at the ledger
    pytest.fail(f"no {kind} handoff opened")


@pytest.mark.parametrize("option,behavior", [("allow", "allow"), ("deny", "deny")])
def test_permission_request_blocks_until_the_operator_answers(ledger_path, clock, store, option, behavior):
    cfg = HookConfig(permission_wait_s=60, poll_s=0.05)
    with Ledger.open(ledger_path, clock=clock) as led:
        handle(led, store, cfg, event("session_start"))
        t, got = permission_in_thread(ledger_path, clock, store, cfg)
        h = wait_handoff(led)
        assert t.is_alive()  # blocked on the operator
        assert h.kind == "permission" and "Allow Claude Code to use Bash?" in h.question
        assert "rm -rf build/" in h.question and h.context["tool"] == "Bash"
        assert [o["id"] for o in h.options] == ["allow", "deny"]
        assert led.node(TASK, "turn-1").status == "blocked"
        apply(led, led.plan_resolve(h.id, option=option, answer="not the cache" if option == "deny" else None))
        t.join(60)
        out = got["answer"].output["hookSpecificOutput"]
        assert out["hookEventName"] == "PermissionRequest" and out["decision"]["behavior"] == behavior
        if behavior == "deny":
            assert "not the cache" in out["decision"]["message"]
        assert led.node(TASK, "turn-1").status == "running"  # the turn goes on


def test_permission_request_nobody_answers_is_denied_and_the_question_closed(ledger, store):
    hook(ledger, store, "session_start")
    answer = hook(ledger, store, "permission_request", HookConfig(permission_wait_s=0.3, poll_s=0.05))
    decision = answer.output["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny" and "nobody answered" in decision["message"]
    [h] = ledger.handoffs(status=None, task_id=TASK)
    assert (h.status, h.resolution_option, h.resolved_by) == ("resolved", "deny", "claude:9b2e4c1a")
    assert ledger.node(TASK, "turn-1").status == "running"


def test_an_abort_while_a_permission_waits_denies_and_interrupts(ledger_path, clock, store):
    cfg = HookConfig(permission_wait_s=60)
    with Ledger.open(ledger_path, clock=clock) as led:
        handle(led, store, cfg, event("session_start"))
        t, got = permission_in_thread(ledger_path, clock, store, cfg)
        wait_handoff(led)
        apply(led, led.plan_abort(TASK, reason="stop this session"))
        t.join(60)
    decision = got["answer"].output["hookSpecificOutput"]["decision"]
    assert decision == {"behavior": "deny", "message": decision["message"], "interrupt": True}


def test_park_holds_the_tool_call_until_resumed(ledger, store):
    hook(ledger, store, "session_start")
    apply(ledger, ledger.plan_park(TASK, reason="lunch", now=True))
    waits = []

    def sleep(s):  # the operator resumes while the hook waits
        waits.append(s)
        if len(waits) == 2:
            apply(ledger, ledger.plan_resume(TASK))

    assert hook(ledger, store, "pre_tool_use", sleep=sleep).output is None  # went on, no decision
    assert len(waits) == 2 and ledger.node(TASK, "turn-1").status == "running"


def test_park_past_the_wait_stops_claude(ledger, store):
    hook(ledger, store, "session_start")
    apply(ledger, ledger.plan_park(TASK, reason="over budget"))  # the lease is kept: heartbeats say parked
    answer = hook(ledger, store, "pre_tool_use", HookConfig(park_wait_s=0.2, poll_s=0.05))
    out = answer.output
    assert out["continue"] is False and "Parked by the operator in Warden: over budget" in out["stopReason"]
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_abort_stops_claude(ledger, store):
    hook(ledger, store, "session_start")
    apply(ledger, ledger.plan_abort(TASK, reason="wrong repo"))
    out = hook(ledger, store, "pre_tool_use").output
    assert out["continue"] is False and out["stopReason"] == "Aborted by the operator in Warden: wrong repo"
    out = hook(ledger, store, "post_tool_use").output
    assert out["continue"] is False


def test_rewind_is_told_to_claude_before_a_tool_and_at_stop(ledger, store):
    hook(ledger, store, "session_start")
    apply(ledger, ledger.plan_rewind(TASK, "turn-1", reason="do not touch the lockfile"))
    out = hook(ledger, store, "pre_tool_use").output["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "do not touch the lockfile" in out["permissionDecisionReason"]
    assert ledger.node(TASK, "turn-1").status == "running" and ledger.node(TASK, "turn-1").attempt == 2
    apply(ledger, ledger.plan_rewind(TASK, "turn-1", reason="keep the tests green"))
    out = hook(ledger, store, "stop").output
    assert out["decision"] == "block" and "keep the tests green" in out["reason"]
    assert hook(ledger, store, "stop", stop_hook_active=True).output is None
    assert ledger.node(TASK, "turn-1").status == "succeeded"


@pytest.mark.parametrize("name,kind", [("notification_idle_prompt", "direction"),
                                       ("notification_permission_prompt", "permission")])
def test_a_notification_is_an_alert_and_closes_when_the_session_goes_on(ledger, store, name, kind):
    hook(ledger, store, "session_start")
    if kind == "direction":
        hook(ledger, store, "stop")  # idle: the turn is over, Claude waits for the next prompt
    assert hook(ledger, store, name).output is None
    [h] = ledger.handoffs(task_id=TASK)  # an open handoff: the console's bell and --on-alert
    assert h.kind == kind and "(at the Claude Code terminal)" in h.question
    events = [e.kind for e in ledger.events(task_id=TASK)]
    assert events[-1] == "handoff.opened"
    assert hook(ledger, store, name).output is None  # the same again: still one question
    assert len(ledger.handoffs(task_id=TASK)) == 1
    hook(ledger, store, "user_prompt_submit")  # someone answered at the terminal
    [h] = ledger.handoffs(status=None, task_id=TASK)
    assert (h.status, h.resolved_by, h.resolution_answer) == ("resolved", "claude:9b2e4c1a", "the session went on")
    assert ledger.handoffs(task_id=TASK) == []


def test_session_end_mid_turn_fails_the_turn(ledger, store):
    hook(ledger, store, "session_start")
    hook(ledger, store, "session_end")
    n = ledger.node(TASK, "turn-1")
    assert n.status == "failed" and "the session ended mid-turn (prompt_input_exit)" in n.error


# ---------------------------------------------------------------------- hostile input
@pytest.mark.parametrize("raw,expect_event", [
    (b"", None), (b"not json", None), (b"[1, 2]", None), (b"\xff\xfe", None), (b"{}", None),
    (b'{"hook_event_name": "Nope", "session_id": "s"}', "Nope"),
    (b'{"hook_event_name": "PermissionRequest"}', "PermissionRequest"),
    (b'{"hook_event_name": "PermissionRequest", "session_id": "s"}', "PermissionRequest"),
    (b'{"hook_event_name": "PreToolUse", "session_id": 7, "tool_name": "Bash"}', "PreToolUse"),
    (b'{"hook_event_name": "Stop", "session_id": "a\\nb"}', "Stop"),
    (b"[" * 100_000, None),
])
def test_a_malformed_payload_gets_one_line_and_a_safe_default(tmp_path, store, raw, expect_event):
    opened = []
    answer = run_hook(lambda: opened.append(1) or Ledger.open(str(tmp_path / "l.db")), store, HookConfig(), raw)
    assert answer.message and "\n" not in answer.message and answer.message.startswith("warden hook claude: ")
    assert opened == []  # nothing is opened (no ledger made) for input that cannot be read
    if expect_event == "PermissionRequest":
        assert answer.output["hookSpecificOutput"]["decision"]["behavior"] == "deny" and answer.exit_code == 0
    elif expect_event == "PreToolUse":
        assert answer.output["hookSpecificOutput"]["permissionDecision"] == "deny"
    else:
        assert answer.output is None and answer.exit_code in (1, 2)


def test_a_hook_without_stdin_answers_one_line_and_the_safe_default(tmp_path):
    """``exec 0<&-``: no event to read — one line on stderr, exit 2 (an unknown event's default),
    no traceback, nothing made."""
    done = subprocess.run(["sh", "-c", 'exec 0<&- && exec "$0" -m console hook claude --ledger "$1" --sessions "$2"',
                           sys.executable, str(tmp_path / "l.db"), str(tmp_path / "s")],
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode() == "warden hook claude: no hook input: stdin is closed\n"
    assert sorted(os.listdir(tmp_path)) == []


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["hook_event_name", "session_id", "tool_name", "tool_input", "cwd",
                                        "prompt", "message", "notification_type", "tool_response"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=30), st.lists(st.integers(), max_size=3),
                                 st.sampled_from(["PermissionRequest", "PreToolUse", "Stop", "SessionStart"]))))
def test_any_payload_never_raises(payload):
    parsed, event, problem = parse(json.dumps(payload).encode())
    assert (parsed is None) == (problem is not None)


def test_an_unavailable_ledger_denies_a_permission(tmp_path, store):
    def broken():
        from store.errors import LedgerUnavailable
        raise LedgerUnavailable("cannot reach postgresql://db (connection refused)")
    answer = run_hook(broken, store, HookConfig(), (HOOKS / "permission_request.json").read_bytes())
    assert answer.output["hookSpecificOutput"]["decision"]["behavior"] == "deny"
    assert "unavailable" in answer.message


# ---------------------------------------------------------------------- end to end: a fake Claude Code
def wait_lines(path: Path, n: int, timeout: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            return [json.loads(x) for x in lines]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {n} hook answers (have {len(lines)})")
        time.sleep(0.1)  # the pause between two looks at the answers file


def test_a_fake_claude_session_end_to_end_with_warden_resolve(ledger_path, tmp_path, capsys):
    out = tmp_path / "answers.jsonl"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "fake_claude.py"), "--ledger", ledger_path,
                             "--sessions", str(tmp_path / "sessions"), "--out", str(out), "--session", SID,
                             "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
                             "Stop"], start_new_session=True)
    try:
        wait_lines(out, 3)  # up to the PermissionRequest, which blocks
        with Ledger.open(ledger_path) as led:
            h = wait_handoff(led)
        assert len(wait_lines(out, 3)) == 3  # still waiting on the operator
        assert warden(["resolve", h.id, "--option", "allow", "--yes", "--ledger", ledger_path,
                       "--operator", "ana@ssh"]) == 0
        capsys.readouterr()
        answers = wait_lines(out, 6)
        assert proc.wait(120) == 0
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the fake and a hook it still runs
        except ProcessLookupError:
            pass
        proc.wait()
    by = {a["event"]: a for a in answers}
    assert all(a["exit"] == 0 for a in answers), answers
    assert by["PermissionRequest"]["answer"] == {
        "hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
    assert by["SessionStart"]["answer"]["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert by["Stop"]["answer"] == "" and by["PreToolUse"]["answer"] == ""
    with Ledger.open(ledger_path) as led:
        assert led.node(TASK, "turn-1").status == "succeeded"
        assert led.handoff(h.id).resolved_by == "ana@ssh"
        assert led.task(TASK).origin == "claude"


def test_the_settings_snippet_in_the_guide_is_valid_and_covers_every_event():
    guide = (ROOT / "docs" / "agents.md").read_text()
    blocks = [b.split("```", 1)[0] for b in guide.split("```json\n")[1:]]
    settings_block = next(json.loads(b) for b in blocks if '"hooks"' in b)
    hooks = settings_block["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
                          "Notification", "Stop", "SessionEnd"}
    for event, groups in hooks.items():
        for group in groups:
            for h in group["hooks"]:
                assert h["type"] == "command" and h["command"].startswith("warden hook claude"), event
    [permission] = hooks["PermissionRequest"][0]["hooks"]
    assert permission["timeout"] > HookConfig().permission_wait_s  # the hook answers before Claude gives up
    mcp_block = next(json.loads(b) for b in blocks if '"mcpServers"' in b)
    assert mcp_block["mcpServers"]["warden"]["args"][0] == "mcp"


def test_the_hook_takes_the_lean_path_without_the_console(tmp_path):
    """Claude Code runs the hook around every tool call: it loads neither Textual nor Rich nor the
    whole warden parser, and answers exactly as the full parser's path does."""
    probe = ("import json, sys\nfrom console.cli import main\nrc = main(sys.argv[1:])\n"
             "print(json.dumps({'rc': rc, 'loaded': sorted(m for m in ('textual', 'rich', 'console.cli.entry') "
             "if m in sys.modules)}), file=sys.stderr)\n")
    args = ["hook", "claude", "--ledger", str(tmp_path / "l.db"), "--sessions", str(tmp_path / "s")]
    done = subprocess.run([sys.executable, "-c", probe, *args], input=(HOOKS / "session_start.json").read_bytes(),
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    report = json.loads(done.stderr.decode().strip().splitlines()[-1])
    assert report == {"rc": 0, "loaded": []}
    lean = json.loads(done.stdout)
    with pytest.MonkeyPatch.context() as mp:  # the same event through the full parser (a flag before hook)
        mp.setattr(sys, "stdin", type("S", (), {"buffer": open(HOOKS / "session_start.json", "rb")})())
        import io
        out = io.StringIO()
        mp.setattr(sys, "stdout", out)
        assert warden(["--ledger", str(tmp_path / "l2.db"), "hook", "claude", "--sessions", str(tmp_path / "s2")]) == 0
    full = json.loads(out.getvalue())
    assert lean["hookSpecificOutput"]["hookEventName"] == full["hookSpecificOutput"]["hookEventName"] == "SessionStart"

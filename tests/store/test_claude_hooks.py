"""``warden hook claude|codex``: hook events answered as the clients honour them, in this process
(store/adapters/claude_hooks.py, hook_session.py, questions.py, hook_transcript.py) and through
the real command. The payloads are the recorded ones in tests/fixtures/agents/claude_hooks/
(their shapes checked against Claude Code 2.1.197 in tests/clients/); the real clients run in
tests/clients/."""

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

from store.adapters.permission_rules import rules_for
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli import main as warden
from store import Budget, Ledger
from store.adapters.claude_hooks import HookConfig, handle, parse, run_hook, tool_output
from store.adapters.sessions import SessionStore
from tests.support.observed import all_said  # noqa: E402
from tests.support.waiting import Deadline, stretch, wait_until

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "tests" / "fixtures" / "agents" / "claude_hooks"
SID = "9b2e4c1a-7d3f-4a58-b6e0-1f2a3b4c5d6e"
TASK = f"claude-{SID[:13]}"
FAST = HookConfig(permission_wait_s=30, park_wait_s=30, poll_s=0.05)


def event(name: str, **changes) -> dict:
    data = json.loads((HOOKS / f"{name}.json").read_text())
    data.update(changes)
    return data


@pytest.fixture
def store(tmp_path):
    return SessionStore(str(tmp_path / "sessions"))


def hook(ledger, store, name: str, cfg: HookConfig | None = None, sleep=time.sleep, **changes):
    return handle(ledger, store, cfg or FAST, event(name, **changes), sleep=sleep)


def apply(ledger, plan):
    return ledger.apply(plan, operator="op@console")


def turn(ledger, store, prompt="Fix the failing parser test and run the suite"):
    hook(ledger, store, "session_start")
    assert hook(ledger, store, "user_prompt_submit", prompt=prompt).output is None


def said(ledger, node="turn-1") -> str:
    return all_said(ledger.observations(TASK, node))


def test_a_session_is_a_task_each_prompt_a_turn_and_it_waits_for_its_user_between_turns(ledger, store):
    start = hook(ledger, store, "session_start")
    ctx = start.output["hookSpecificOutput"]
    assert ctx["hookEventName"] == "SessionStart" and TASK in ctx["additionalContext"]
    t = ledger.task(TASK)
    assert (t.origin, t.title, t.status) == ("claude", "Claude Code in repo", "active")
    wait = ledger.node(TASK, "await-1")  # the session waits for its user: the task is live, not done
    assert (wait.status, wait.title) == ("pending", "waiting for prompt 1 at the Claude Code terminal")
    assert hook(ledger, store, "user_prompt_submit").output is None
    n = ledger.node(TASK, "turn-1")
    assert n.title == "Fix the failing parser test and run the suite"  # titled by its prompt
    assert n.status == "running" and n.lease_owner == "claude:9b2e4c1a" and n.kind == "claude-turn"
    assert ledger.node(TASK, "await-1").status == "succeeded" and n.deps == ("await-1",)
    assert hook(ledger, store, "pre_tool_use").output is None  # no decision: the normal permission flow
    assert hook(ledger, store, "post_tool_use").output is None
    obs = ledger.observations(TASK, "turn-1")
    assert len(obs) == 1  # one observation per tool call: the call and its output text
    assert "pytest -q tests/test_parser.py" in all_said(obs) and obs[0].result == "1 failed, 11 passed in 0.40s"
    notes = [e.summary for e in ledger.events(task_id=TASK) if e.kind == "node.note"]
    assert any("Fix the failing parser test" in s for s in notes)
    assert hook(ledger, store, "stop").output is None
    n = ledger.node(TASK, "turn-1")
    assert n.status == "succeeded" and n.output["last_message"].startswith("Fixed the parser") and n.attempt == 1
    assert ledger.task(TASK).status == "active"  # between turns: still live, waiting for prompt 2
    assert ledger.node(TASK, "await-2").status == "pending" and ledger.node(TASK, "await-2").deps == ("turn-1",)
    hook(ledger, store, "user_prompt_submit", prompt="Now update the changelog")
    two = ledger.node(TASK, "turn-2")
    assert two.status == "running" and two.deps == ("await-2",) and two.title == "Now update the changelog"
    hook(ledger, store, "stop")
    hook(ledger, store, "session_end")  # the session ended: nothing waits any more
    assert ledger.task(TASK).status == "completed"


def test_a_live_session_between_turns_can_be_parked_and_refuses_the_next_prompt(ledger, store):
    turn(ledger, store)
    hook(ledger, store, "stop")
    apply(ledger, ledger.plan_park(TASK, reason="budget review"))  # not "nothing to park"
    assert ledger.task(TASK).status == "parked"
    out = hook(ledger, store, "user_prompt_submit", prompt="next thing").output
    assert out == {"continue": False,
                   "stopReason": "Parked by the operator in Warden: budget review; the prompt was not sent."}
    apply(ledger, ledger.plan_resume(TASK))
    assert hook(ledger, store, "user_prompt_submit", prompt="next thing").output is None
    assert ledger.node(TASK, "turn-2").status == "running"


def test_a_shared_task_keeps_sessions_apart(ledger, store):
    cfg = HookConfig(task="team-x", poll_s=0.05)
    for sid in (SID, "session-1", "session-2"):  # the last two share a prefix: still apart
        hook(ledger, store, "session_start", cfg, session_id=sid)
        hook(ledger, store, "user_prompt_submit", cfg, session_id=sid)
    turns = {n.key: n for n in ledger.graph("team-x").nodes if n.kind == "claude-turn"}
    assert len(turns) == 3 and "9b2e4c1a.turn-1" in turns
    assert all(n.status == "running" for n in turns.values())
    assert len({n.lease_owner for n in turns.values()}) == 3


# ---------------------------------------------------------------------- permission requests
def permission_in_thread(ledger_path, clock, store, cfg, **changes):
    got = {}

    def run():
        with Ledger.open(ledger_path, clock=clock) as led:
            got["answer"] = handle(led, store, cfg, event("permission_request", **changes))
    t = threading.Thread(target=run)
    t.start()
    return t, got


def open_permissions(ledger, n=1):
    wait_until(lambda: len([h for h in ledger.handoffs(task_id=TASK) if h.kind == "permission"]) >= n,
               f"{n} permission handoffs open")
    return [h for h in ledger.handoffs(task_id=TASK) if h.kind == "permission"]


@pytest.mark.parametrize("option,behavior", [("allow", "allow"), ("deny", "deny")])
def test_a_permission_request_is_a_question_of_its_own_and_the_turn_goes_on(ledger_path, clock, store, option,
                                                                            behavior):
    with Ledger.open(ledger_path, clock=clock) as led:
        turn(led, store)
        t, got = permission_in_thread(ledger_path, clock, store, FAST)
        [h] = open_permissions(led)
        assert t.is_alive()  # waits on the operator
        assert h.kind == "permission" and "Allow Claude Code to use Bash?" in h.question
        assert "rm -rf build/" in h.question and h.context["tool"] == "Bash"
        assert [o["id"] for o in h.options] == ["allow", "deny", "always-1"]  # the rule Claude Code suggests
        assert h.node == "turn-1.ask-1" and led.node(TASK, "turn-1").status == "running"  # the turn is not blocked
        apply(led, led.plan_resolve(h.id, option=option, answer="not the cache" if option == "deny" else None))
        t.join(60)
        out = got["answer"].output["hookSpecificOutput"]
        assert out["hookEventName"] == "PermissionRequest" and out["decision"]["behavior"] == behavior
        if behavior == "deny":
            assert "not the cache" in out["decision"]["message"]
        one = led.node(TASK, "turn-1")
        assert (one.status, one.attempt) == ("running", 1)  # an answered question is not another attempt
        assert led.node(TASK, "turn-1.ask-1").status == "succeeded"  # the question closed


SUGGESTED = [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}], "behavior": "allow",
              "destination": "session"},
             {"type": "addDirectories", "directories": ["/work/other"], "destination": "localSettings"},
             {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]


def test_always_allow_offers_claudes_suggestions_and_answers_with_the_rule_chosen(ledger_path, clock, store):
    with Ledger.open(ledger_path, clock=clock) as led:
        turn(led, store)
        t, got = permission_in_thread(ledger_path, clock, store, FAST, permission_suggestions=SUGGESTED,
                                      tool_input={"command": "npm test -- parser", "description": "Run the tests"})
        [h] = open_permissions(led)
        assert [(o["id"], o["label"]) for o in h.options][2:] == [
            ("always-1", "Always: allow Bash(npm test:*) — this session"),
            ("always-2", "Always: allow access to /work/other — this project, for you"),
            ("always-3", "Always: switch to acceptEdits mode — this session")]
        apply(led, led.plan_resolve(h.id, option="always-1"))
        t.join(60)
        decision = got["answer"].output["hookSpecificOutput"]["decision"]
        assert decision == {"behavior": "allow", "updatedPermissions": [SUGGESTED[0]]}  # as Claude Code gave it
        [granted] = rules_for(led, TASK)
        assert granted["text"] == "allow Bash(npm test:*) — this session" and granted["rule"] == SUGGESTED[0]
        assert granted["by"] == "op@console" and granted["session"] == event("permission_request")["session_id"]
        assert granted["tool"] == "Bash"


def test_allow_once_gives_back_no_rule(ledger_path, clock, store):
    with Ledger.open(ledger_path, clock=clock) as led:
        turn(led, store)
        t, got = permission_in_thread(ledger_path, clock, store, FAST, permission_suggestions=SUGGESTED)
        [h] = open_permissions(led)
        apply(led, led.plan_resolve(h.id, option="allow"))
        t.join(60)
        assert got["answer"].output["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
        assert rules_for(led, TASK) == []


def test_an_edit_asks_with_its_diff(ledger_path, clock, store):
    with Ledger.open(ledger_path, clock=clock) as led:
        turn(led, store)
        edit = {"file_path": "/work/repo/parser.py", "old_string": "def parse(x):\n    return x\n",
                "new_string": "def parse(x):\n    return x.strip()\n"}
        t, got = permission_in_thread(ledger_path, clock, store, FAST, tool_name="Edit", tool_input=edit,
                                      permission_suggestions=[])
        [h] = open_permissions(led)
        assert h.context["file"] == "/work/repo/parser.py"
        assert h.context["diff"].splitlines()[-2:] == ["-    return x", "+    return x.strip()"]
        assert [o["id"] for o in h.options] == ["allow", "deny"]
        apply(led, led.plan_resolve(h.id, option="deny"))
        t.join(60)


def test_the_allow_answer_reaches_claude_beside_the_calls_result(ledger_path, clock, store):
    with Ledger.open(ledger_path, clock=clock) as led:
        turn(led, store)
        pre = event("pre_tool_use", tool_input=event("permission_request")["tool_input"], tool_use_id="toolu_X")
        handle(led, store, FAST, pre)
        t, got = permission_in_thread(ledger_path, clock, store, FAST)
        [h] = open_permissions(led)
        apply(led, led.plan_resolve(h.id, option="allow", answer="fine, but keep build/cache"))
        t.join(60)
        assert got["answer"].output["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
        post = handle(led, store, FAST, {**pre, "hook_event_name": "PostToolUse", "tool_response": {"stdout": ""}})
        out = post.output["hookSpecificOutput"]
        assert out["hookEventName"] == "PostToolUse"
        assert out["additionalContext"] == "The operator allowed this call in Warden and said: fine, but keep build/cache"


def test_twenty_concurrent_permission_requests_are_twenty_questions_each_answered_to_its_own_hook(
        ledger_path, clock, store):
    with Ledger.open(ledger_path, clock=clock) as led:
        turn(led, store)
        threads = [permission_in_thread(ledger_path, clock, store, FAST,
                                        tool_input={"command": f"touch file-{i}", "description": f"file {i}"})
                   for i in range(20)]
        hs = open_permissions(led, 20)
        assert len(hs) == 20 and len({h.node for h in hs}) == 20
        assert all(t.is_alive() for t, _ in threads)  # none was denied because another was open
        for h in hs:
            i = int(h.context["input"].split("file-")[1].split('"')[0])
            apply(led, led.plan_resolve(h.id, option="allow" if i % 2 else "deny", answer=f"answer {i}"))
        for i, (t, got) in enumerate(threads):
            t.join(60)
            decision = got["answer"].output["hookSpecificOutput"]["decision"]
            assert decision["behavior"] == ("allow" if i % 2 else "deny"), i
            if not i % 2:
                assert decision["message"].endswith(f": answer {i}")
        assert led.node(TASK, "turn-1").status == "running"


def test_a_permission_answered_at_claudes_terminal_closes_its_question(ledger_path, clock, store):
    with Ledger.open(ledger_path, clock=clock) as led:
        turn(led, store)
        tool_input = event("permission_request")["tool_input"]
        pre = event("pre_tool_use", tool_input=tool_input, tool_use_id="toolu_T")
        handle(led, store, FAST, pre)
        t, got = permission_in_thread(ledger_path, clock, store, FAST)
        [h] = open_permissions(led)
        # the person pressed "Yes" in Claude's own dialog: the call ran, its PostToolUse comes
        post = {**pre, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "removed"}}
        assert handle(led, store, FAST, post).output is None
        h = led.handoff(h.id)
        assert (h.status, h.resolution_option, h.resolved_by) == ("resolved", "allow", "claude:9b2e4c1a")
        assert h.resolution_answer == "answered at the Claude Code terminal"
        t.join(60)  # the waiting hook went away with it
        assert not t.is_alive()
        assert "removed\n[permission answered at the Claude Code terminal]" in said(led)
        # the next request is asked, not denied because of the earlier one
        t2, got2 = permission_in_thread(ledger_path, clock, store, FAST, tool_input={"command": "make"})
        [h2] = open_permissions(led)
        apply(led, led.plan_resolve(h2.id, option="allow"))
        t2.join(60)
        assert got2["answer"].output["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        hook(led, store, "stop")
        assert led.node(TASK, "turn-1").status == "succeeded"  # the turn's Stop is recorded


def hook_process(ledger_path, tmp_path, name, **changes):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "console", "hook", "claude", "--ledger", ledger_path,
                             "--sessions", str(tmp_path / "sessions"), "--permission-wait", "60"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True).__enter__(), json.dumps(event(name, **changes)).encode()


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_hook_that_dies_while_it_waits_never_wedges_the_session(ledger_path, tmp_path, store, how):
    with Ledger.open(ledger_path) as led:
        turn(led, store)
        proc, data = hook_process(ledger_path, tmp_path, "permission_request")
        proc.stdin.write(data)
        proc.stdin.close()
        [h] = open_permissions(led)
        os.kill(proc.pid, getattr(signal, how))  # kill -9, or Claude ending it (Esc / "No" at its dialog)
        proc.wait(60)
        if how == "SIGTERM":  # Claude ended it: the question is settled at once as answered there
            h1 = led.handoff(h.id)
            assert (h1.status, h1.resolution_option) == ("resolved", "deny")
            assert "answered at the Claude Code terminal" in h1.resolution_answer
        # later requests are asked and answered, not denied because of the dead one
        cfg = HookConfig(permission_wait_s=30, poll_s=0.05)
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("a", handle(Ledger.open(ledger_path), store, cfg,
                                                                       event("permission_request",
                                                                             tool_input={"command": "ls"}))))
        t.start()
        wait_until(lambda: any(x.id != h.id and x.status == "open" for x in led.handoffs(task_id=TASK)),
                   "the next request asked")
        [h2] = [x for x in led.handoffs(task_id=TASK) if x.id != h.id]
        apply(led, led.plan_resolve(h2.id, option="allow"))
        t.join(60)
        assert got["a"].output["hookSpecificOutput"]["decision"]["behavior"] == "allow"
        h1 = led.handoff(h.id)  # the dead hook's question: withdrawn, not left open for nobody
        assert h1.status != "open" and h1.resolved_by == "claude:9b2e4c1a"
        hook(led, store, "stop")
        assert led.node(TASK, "turn-1").status == "succeeded"
        hook(led, store, "session_end")
        assert led.task(TASK).status == "completed"  # nothing of the dead hook holds the task


def test_a_permission_nobody_answers_is_denied_and_the_question_closed(ledger, store):
    turn(ledger, store)
    answer = hook(ledger, store, "permission_request", HookConfig(permission_wait_s=0.3, poll_s=0.05))
    decision = answer.output["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny" and "nobody answered" in decision["message"]
    [h] = ledger.handoffs(status=None, task_id=TASK)
    assert (h.status, h.resolution_option, h.resolved_by) == ("resolved", "deny", "claude:9b2e4c1a")
    assert ledger.node(TASK, "turn-1").status == "running"


def test_an_abort_while_a_permission_waits_denies_and_interrupts(ledger_path, clock, store):
    with Ledger.open(ledger_path, clock=clock) as led:
        turn(led, store)
        t, got = permission_in_thread(ledger_path, clock, store, FAST)
        open_permissions(led)
        apply(led, led.plan_abort(TASK, reason="stop this session"))
        t.join(60)
    decision = got["answer"].output["hookSpecificOutput"]["decision"]
    assert decision == {"behavior": "deny", "message": decision["message"], "interrupt": True}


# ---------------------------------------------------------------------- park, abort, rewind
def test_park_holds_the_tool_call_until_resumed_without_a_heartbeat_a_poll(ledger, store):
    turn(ledger, store)
    apply(ledger, ledger.plan_park(TASK, reason="lunch"))
    beats = len([e for e in ledger.events(task_id=TASK) if e.kind == "node.heartbeat"])
    waits = []

    def sleep(s):  # the operator resumes after 30 polls
        waits.append(s)
        if len(waits) == 30:
            apply(ledger, ledger.plan_resume(TASK))

    assert hook(ledger, store, "pre_tool_use", sleep=sleep).output is None  # went on, no decision
    assert len(waits) == 30 and ledger.node(TASK, "turn-1").status == "running"
    written = len([e for e in ledger.events(task_id=TASK) if e.kind == "node.heartbeat"]) - beats
    assert written <= 2  # the waiting call reads; it writes only to keep its lease


@pytest.mark.parametrize("interactive,decision", [(True, "ask"), (False, "defer")])
def test_park_past_the_wait_stops_claude_without_running_the_call(ledger, store, interactive, decision):
    turn(ledger, store)
    apply(ledger, ledger.plan_park(TASK, reason="over budget"))
    cfg = HookConfig(park_wait_s=0.2, poll_s=0.05, interactive=interactive)
    out = hook(ledger, store, "pre_tool_use", cfg).output
    assert out["continue"] is False and "Parked by the operator in Warden: over budget" in out["stopReason"]
    assert out["hookSpecificOutput"]["permissionDecision"] == decision  # what stops it before the call (measured)


def test_abort_stops_claude_by_the_means_it_honours(ledger, store):
    turn(ledger, store)
    apply(ledger, ledger.plan_abort(TASK, reason="wrong repo"))
    out = hook(ledger, store, "pre_tool_use").output  # interactive: the permission flow, where it is interrupted
    assert out["continue"] is False and out["stopReason"] == "Aborted by the operator in Warden: wrong repo"
    assert out["hookSpecificOutput"]["permissionDecision"] == "ask"
    decision = hook(ledger, store, "permission_request").output["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny" and decision["interrupt"] is True
    headless = hook(ledger, store, "pre_tool_use", HookConfig(interactive=False)).output
    assert headless["hookSpecificOutput"]["permissionDecision"] == "defer" and headless["continue"] is False
    assert hook(ledger, store, "post_tool_use").output == {"continue": False, "stopReason": out["stopReason"]}
    refused = hook(ledger, store, "user_prompt_submit").output
    assert refused["continue"] is False and refused["stopReason"].startswith("Aborted by the operator")


def test_codex_is_never_sent_what_it_would_drop(ledger, store):
    cfg = HookConfig(client="codex", poll_s=0.05, park_wait_s=0.2)
    sid = "01a25099-da6a-7cd0-a3d1-250ddd7b370a"
    hook(ledger, store, "session_start", cfg, session_id=sid)
    hook(ledger, store, "user_prompt_submit", cfg, session_id=sid)
    [task] = [t for t in ledger.tasks() if t.origin == "codex"]
    assert task.task_id.startswith("codex-") and task.title == "Codex in repo"
    apply(ledger, ledger.plan_abort(task.task_id, reason="wrong repo"))
    out = hook(ledger, store, "pre_tool_use", cfg, session_id=sid).output
    assert set(out) == {"hookSpecificOutput"} and out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "wrong repo" in out["hookSpecificOutput"]["permissionDecisionReason"]
    post = hook(ledger, store, "post_tool_use", cfg, session_id=sid).output
    assert set(post) == {"hookSpecificOutput"} and "Aborted" in post["hookSpecificOutput"]["additionalContext"]
    decision = hook(ledger, store, "permission_request", cfg, session_id=sid).output["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny" and "interrupt" not in decision


def test_rewind_is_told_to_claude_before_a_tool_and_at_stop(ledger, store):
    turn(ledger, store)
    apply(ledger, ledger.plan_rewind(TASK, "turn-1", reason="do not touch the lockfile"))
    out = hook(ledger, store, "pre_tool_use").output["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and "do not touch the lockfile" in out["permissionDecisionReason"]
    assert ledger.node(TASK, "turn-1").status == "running" and ledger.node(TASK, "turn-1").attempt == 2
    apply(ledger, ledger.plan_rewind(TASK, "turn-1", reason="keep the tests green"))
    out = hook(ledger, store, "stop").output
    assert out["decision"] == "block" and "keep the tests green" in out["reason"]
    assert hook(ledger, store, "stop", stop_hook_active=True).output is None
    assert ledger.node(TASK, "turn-1").status == "succeeded"


# ---------------------------------------------------------------------- what a call did
@pytest.mark.parametrize("payload,result", [
    ({"hook_event_name": "PostToolUseFailure", "error": "Exit code 3\nout\nerr"}, "failed: Exit code 3\nout\nerr"),
    ({"hook_event_name": "PermissionDenied", "reason": "auto mode refused rm"}, "denied: auto mode refused rm"),
    ({"tool_name": "Write", "tool_response": {"type": "create", "filePath": "a.txt", "content": "x\ny\n"}},
     "created a.txt (2 lines)"),
    ({"tool_name": "Edit", "tool_response": {"filePath": "a.txt", "structuredPatch": [
        {"lines": [" hello", "-world", "+there"]}]}}, "edited a.txt:\n hello\n-world\n+there"),
    ({"tool_name": "Read", "tool_response": {"type": "text", "file": {"filePath": "a.txt", "content": "hi\n"}}}, "hi\n"),
    ({"tool_response": "plain codex output\n"}, "plain codex output\n"),
])
def test_each_call_is_one_observation_with_its_output_refused_and_failed_ones_as_such(ledger, store, payload, result):
    turn(ledger, store)
    hook(ledger, store, "pre_tool_use")
    hook(ledger, store, "post_tool_use", **payload)
    [obs] = ledger.observations(TASK, "turn-1")
    assert obs.result == result and obs.action.startswith(f"{payload.get('tool_name', 'Bash')}(")
    assert tool_output(event("post_tool_use", **payload)) == result


def transcript(tmp_path, *lines) -> str:
    path = tmp_path / "transcript.jsonl"
    with open(path, "a") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return str(path)


def usage(mid: str, inp: int, out: int, cache: int = 0) -> dict:
    return {"type": "assistant", "message": {"id": mid, "usage": {"input_tokens": inp, "output_tokens": out,
                                                                  "cache_read_input_tokens": cache}}}


def test_tokens_come_from_the_transcript_each_message_once(ledger, store, tmp_path):
    path = transcript(tmp_path, usage("m1", 100, 1), usage("m1", 100, 20, cache=30))  # one message, two lines
    turn(ledger, store)
    hook(ledger, store, "pre_tool_use", transcript_path=path)
    assert ledger.node(TASK, "turn-1").tokens_used == 150
    transcript(tmp_path, usage("m2", 200, 10), {"type": "user", "message": {"content": "x"}})
    hook(ledger, store, "post_tool_use", transcript_path=path)
    hook(ledger, store, "stop", transcript_path=path)
    assert ledger.node(TASK, "turn-1").tokens_used == 360 and ledger.task(TASK).tokens_used == 360


def test_a_transcript_that_is_a_link_or_a_fifo_is_not_read(ledger, store, tmp_path, sqlite_only):
    real = transcript(tmp_path, usage("m1", 100, 1))
    os.symlink(real, tmp_path / "link.jsonl")
    os.mkfifo(tmp_path / "fifo.jsonl")
    turn(ledger, store)
    for path in (str(tmp_path / "link.jsonl"), str(tmp_path / "fifo.jsonl"), "relative.jsonl"):
        assert hook(ledger, store, "pre_tool_use", transcript_path=path).output is None  # answered, not stuck
    assert ledger.node(TASK, "turn-1").tokens_used == 0


def test_a_call_refused_by_claude_itself_is_recorded_from_the_transcript(ledger, store, tmp_path):
    path = transcript(tmp_path)
    turn(ledger, store)
    hook(ledger, store, "pre_tool_use", transcript_path=path, tool_use_id="toolu_R")  # claude -p refuses it: no Post
    transcript(tmp_path, {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "toolu_R", "is_error": True,
         "content": "Claude requested permissions to use Bash, but you haven't granted it yet."}]}})
    hook(ledger, store, "stop", transcript_path=path)
    [obs] = ledger.observations(TASK, "turn-1")
    assert obs.result.startswith("refused: Claude requested permissions") and "pytest -q" in obs.action


def test_the_budget_gates_act_on_a_claude_session(ledger, store, tmp_path):
    ledger.create_task(TASK, title="budgeted", budget=Budget(tokens=1000), origin="claude")
    path = transcript(tmp_path, usage("m1", 700, 50))
    turn(ledger, store)
    hook(ledger, store, "pre_tool_use", transcript_path=path)  # 750 of 1000: past the soft gate
    [soft] = ledger.handoffs(task_id=TASK)
    assert "soft budget gate" in soft.question
    transcript(tmp_path, usage("m2", 300, 10))  # 1060: the hard gate, the next call waits
    waits = []

    def sleep(s):
        waits.append(s)
        if len(waits) == 3:
            [hard] = [h for h in ledger.handoffs(task_id=TASK) if h.kind == "confirm"]
            assert "hard gate" in hard.question
            apply(ledger, ledger.plan_resolve(hard.id, option="go_on"))
    assert hook(ledger, store, "pre_tool_use", transcript_path=path, sleep=sleep).output is None
    assert len(waits) == 3


# ---------------------------------------------------------------------- notifications, the session's end
@pytest.mark.parametrize("name,kind", [("notification_idle_prompt", "direction"),
                                       ("notification_permission_prompt", "permission")])
def test_a_notification_is_an_alert_and_closes_when_the_session_goes_on(ledger, store, name, kind):
    turn(ledger, store)
    if kind == "direction":
        hook(ledger, store, "stop")  # idle: the turn is over, Claude waits for the next prompt
    assert hook(ledger, store, name).output is None
    [h] = ledger.handoffs(task_id=TASK)  # an open handoff: the console's bell and --on-alert
    assert h.kind == kind and "(at the Claude Code terminal)" in h.question
    assert hook(ledger, store, name).output is None  # the same again: still one question
    assert len(ledger.handoffs(task_id=TASK)) == 1
    hook(ledger, store, "user_prompt_submit")  # someone answered at the terminal
    [h] = ledger.handoffs(status=None, task_id=TASK)
    assert (h.status, h.resolved_by, h.resolution_answer) == ("resolved", "claude:9b2e4c1a", "the session went on")
    assert ledger.handoffs(task_id=TASK) == []


def test_a_lease_that_ran_out_between_two_hooks_is_taken_back_and_the_turn_commits(ledger, clock, store):
    """No hook ran for longer than the turn's lease (Claude thought for a long while on a suspended
    or loaded machine) and nobody took the node: the next hook takes the turn back and the stop
    commits it — it was left running with every write refused."""
    hook(ledger, store, "session_start")
    hook(ledger, store, "user_prompt_submit")
    claims = ledger.node(TASK, "turn-1").claim_count
    clock.advance(HookConfig().lease_s + 1)
    got: list = []  # (in a thread: it looped forever on the dead claim before)
    t = threading.Thread(target=lambda: got.append(hook(ledger, store, "pre_tool_use")), daemon=True)
    t.start()
    t.join(stretch(30))
    assert got and got[0].output is None, "the hook never answered"
    n = ledger.node(TASK, "turn-1")  # a renewal: the same attempt, no claim spent (max_claims)
    assert (n.claim_count, n.attempt) == (claims, 1)
    hook(ledger, store, "stop")
    assert ledger.node(TASK, "turn-1").status == "succeeded"


def test_session_end_mid_turn_fails_the_turn(ledger, store):
    turn(ledger, store)
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
    parsed, event_name, problem = parse(json.dumps(payload).encode())
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
    deadline = Deadline(timeout)
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            return [json.loads(x) for x in lines]
        if deadline.expired():
            pytest.fail(f"timed out waiting for {n} hook answers (have {len(lines)})")
        time.sleep(0.1)  # the pause between two looks at the answers file


def test_a_fake_claude_session_end_to_end_with_warden_resolve(ledger_path, tmp_path, capsys):
    out = tmp_path / "answers.jsonl"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "fake_claude.py"), "--ledger", ledger_path,
                             "--sessions", str(tmp_path / "sessions"), "--out", str(out), "--session", SID,
                             "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
                             "Stop"], start_new_session=True)
    try:
        wait_lines(out, 3)  # up to the PermissionRequest, which waits
        with Ledger.open(ledger_path) as led:
            [h] = open_permissions(led)
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


def guide_blocks() -> list[str]:
    guide = (ROOT / "docs" / "agents.md").read_text()
    return [b.split("```", 1)[0] for b in guide.split("```json\n")[1:]]


def test_the_settings_snippet_in_the_guide_is_valid_and_covers_every_event():
    settings_block = next(json.loads(b) for b in guide_blocks() if '"hooks"' in b and "claude" in b)
    hooks = settings_block["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
                          "PostToolUseFailure", "PermissionDenied", "Notification", "Stop", "SessionEnd"}
    for name, groups in hooks.items():
        for group in groups:
            for h in group["hooks"]:
                assert h["type"] == "command" and h["command"].startswith("warden hook claude"), name
    [permission] = hooks["PermissionRequest"][0]["hooks"]
    assert permission["timeout"] > HookConfig().permission_wait_s  # the hook answers before Claude gives up
    mcp_block = next(json.loads(b) for b in guide_blocks() if '"mcpServers"' in b)
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


def test_a_turn_rewound_after_it_ended_is_taken_back_by_the_next_prompt(ledger, store):
    turn(ledger, store)
    hook(ledger, store, "stop")
    apply(ledger, ledger.plan_rewind(TASK, "turn-1", reason="the fix broke the CLI"))
    out = hook(ledger, store, "user_prompt_submit", prompt="and now?").output  # not refused: no wedge
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "the fix broke the CLI" in out["hookSpecificOutput"]["additionalContext"]
    one = ledger.node(TASK, "turn-1")
    assert (one.status, one.attempt) == ("running", 2)
    hook(ledger, store, "stop")
    assert ledger.node(TASK, "turn-1").status == "succeeded" and ledger.node(TASK, "await-2").status == "pending"
    assert hook(ledger, store, "user_prompt_submit", prompt="next").output is None
    assert ledger.node(TASK, "turn-2").status == "running"

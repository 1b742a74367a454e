"""The real Claude Code 2.1.197 and Codex 0.171.0 under ``warden hook claude|codex``, configured as
docs/agents.md says, against the scripted model: what the operator's controls do to the real
clients (docs/agents.md, "What each control does"), headless (``claude -p``, ``codex exec``) and
interactive (Claude Code in a pseudo-terminal, read through a terminal emulator).
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from console.cli import main as warden
from store import Budget, Ledger
from store.adapters.permission_rules import rules_for
from tests.support.clients import (ClaudeSetup, CodexSetup, claude_hooks, codex_hooks, run_claude_p, run_codex_exec,
                                   stream_events)
from tests.support.console_terminal import Terminal, shows
from tests.support.model_server import Call, ModelServer, Reply, Usage, bash, shell, wait_for_mcp, write
from tests.support.asks import MCP_PARTS, mcp_options
from tests.support.observed import all_said
from tests.support.waiting import wait_until


def claude_task(led: Ledger) -> str:
    [t] = [t for t in led.tasks() if t.origin == "claude"]
    return t.task_id


@pytest.fixture
def where(tmp_path):
    return {"ledger": str(tmp_path / "ledger.db"), "sessions": str(tmp_path / "sessions"), "tmp": tmp_path}


def setup_claude(where, model, *hook_args: str, **kw) -> ClaudeSetup:
    hooks = claude_hooks(where["ledger"], where["sessions"], *hook_args)
    return ClaudeSetup(where["tmp"] / "home", where["tmp"] / "proj", model.url, settings={"hooks": hooks}, **kw).write()


# ---------------------------------------------------------------------- claude -p
def test_a_headless_session_is_recorded_call_by_call_with_its_tokens(where):
    script = [Reply(calls=(bash("echo hello from the tool"),), usage=Usage(1000, 30)),
              Reply(calls=(write("notes.txt", "one\ntwo\n"),), usage=Usage(1100, 40, cache_read=500)),
              Reply(calls=(bash("ls no-such-file-here"),), usage=Usage(1200, 20)),
              Reply(calls=(bash("touch outside-$(date +%s)", "needs permission"),), usage=Usage(1300, 20)),
              Reply(text="All done.", usage=Usage(1400, 60))]
    with ModelServer(script) as model:
        s = setup_claude(where, model)
        done = run_claude_p(s, "Write the notes", "--allowedTools", "Write", "Bash(echo:*)", "Bash(ls:*)")
        assert done.returncode == 0, done.stderr
    with Ledger.open(where["ledger"]) as led:
        task = claude_task(led)
        t = led.task(task)
        turn = led.node(task, "turn-1")
        assert turn.title == "Write the notes" and turn.status == "succeeded" and turn.attempt == 1
        assert turn.output["last_message"] == "All done."
        obs = led.observations(task, "turn-1")
        results = [o.result for o in obs]
        assert results[0] == "hello from the tool"  # the output text, not the raw tool_response JSON
        assert results[1] == "created notes.txt (2 lines)"
        assert results[2].startswith("failed: Exit code 2")  # PostToolUseFailure
        assert results[3].startswith("refused: ")  # claude -p refused it itself: read from the transcript
        assert len(obs) == 4  # one observation per call
        expected = 1030 + 1640 + 1220 + 1320 + 1460
        assert turn.tokens_used == expected and t.tokens_used == expected  # from the transcript, each message once
        assert t.status == "completed"  # claude -p ended: the session is over


def test_abort_stops_claude_p_before_the_call_runs(where):
    held = Reply(calls=(bash("touch must-not-exist"),), hold=True)
    script = [Reply(calls=(bash("echo first"),)), held, Reply(calls=(bash("touch nor-this"),)), Reply(text="x")]
    with ModelServer(script) as model:
        s = setup_claude(where, model)
        out: dict = {}
        t = threading.Thread(target=lambda: out.setdefault("p", run_claude_p(s, "go", "--allowedTools", "Bash")))
        t.start()
        model.wait_requests(2)  # the second model call is under way: the operator aborts now
        with Ledger.open(where["ledger"]) as led:
            task = claude_task(led)
            led.apply(led.plan_abort(task, reason="wrong repository"), operator="op@console")
        held.release()
        t.join(120)
        assert len(model.scripted()) == 2  # Claude made no further model call
    assert not (s.project / "must-not-exist").exists()
    result = stream_events(out["p"].stdout)[-1]
    assert result["terminal_reason"] == "tool_deferred"


def test_park_holds_claude_p_until_resumed(where):
    held = Reply(calls=(bash("touch after-resume"),), hold=True)
    with ModelServer([Reply(calls=(bash("echo one"),)), held, Reply(text="resumed and done")]) as model:
        s = setup_claude(where, model)
        out: dict = {}
        t = threading.Thread(target=lambda: out.setdefault("p", run_claude_p(s, "go", "--allowedTools", "Bash")))
        t.start()
        model.wait_requests(2)
        with Ledger.open(where["ledger"]) as led:
            task = claude_task(led)
            led.apply(led.plan_park(task, reason="lunch"), operator="op@console")
            beats = len([e for e in led.events(task_id=task) if e.kind == "node.heartbeat"])
            held.release()
            wait_until(lambda: _hook_waiting(where), "the PreToolUse hook waiting")
            assert not (s.project / "after-resume").exists() and t.is_alive()
            written = len([e for e in led.events(task_id=task) if e.kind == "node.heartbeat"]) - beats
            led.apply(led.plan_resume(task), operator="op@console")
        t.join(120)
        assert (s.project / "after-resume").exists()
        assert stream_events(out["p"].stdout)[-1]["result"] == "resumed and done"
        assert written <= 2


def _hook_waiting(where) -> bool:
    """A ``warden hook claude`` PreToolUse process is alive (the call waits in it)."""
    for pid in Path("/proc").iterdir():
        if not pid.name.isdigit():
            continue
        try:
            cmd = (pid / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hook" in cmd and where["ledger"].encode() in cmd:
            return True
    return False


def test_budget_gates_act_on_a_claude_session(where):
    script = [Reply(calls=(bash("echo a"),), usage=Usage(7500, 100)),  # 76 %: past the soft gate
              Reply(calls=(bash("echo b"),), usage=Usage(3000, 100)),  # 107 %: the hard gate
              Reply(calls=(bash("touch over-budget"),), usage=Usage(100, 10)), Reply(text="done")]
    with ModelServer(script) as model:
        s = setup_claude(where, model, "--park-wait", "600")
        with Ledger.open(where["ledger"]) as led:
            led.create_task("budgeted", title="budgeted", budget=Budget(tokens=10_000), origin="claude")
        s.settings["hooks"] = claude_hooks(where["ledger"], where["sessions"], "--task", "budgeted")
        s.write()
        out: dict = {}
        t = threading.Thread(target=lambda: out.setdefault("p", run_claude_p(s, "go", "--allowedTools", "Bash")))
        t.start()
        with Ledger.open(where["ledger"]) as led:
            wait_until(lambda: any(h.kind == "confirm" for h in led.handoffs(task_id="budgeted")), "the hard gate",
                       timeout=120)
            kinds = sorted(h.kind for h in led.handoffs(task_id="budgeted"))
            assert kinds == ["confirm", "direction"]  # the soft gate's notice, the hard gate's question
            assert not (s.project / "over-budget").exists() and t.is_alive()  # the next call waits
            [hard] = [h for h in led.handoffs(task_id="budgeted") if h.kind == "confirm"]
            led.apply(led.plan_resolve(hard.id, option="go_on"), operator="op@console")
        t.join(120)
        assert (s.project / "over-budget").exists()


# ---------------------------------------------------------------------- interactive Claude Code in a pty
class Interactive:
    """Claude Code in a pseudo-terminal of 100×30, its screen read through pyte."""

    def __init__(self, setup: ClaudeSetup) -> None:
        self.setup = setup
        self.term = Terminal(setup.argv(), cols=100, rows=30, env=setup.env(), cwd=setup.project, clean_env=True)
        self.term.wait_for(shows("for shortcuts"), 60, "Claude Code's prompt")

    def prompt(self, text: str) -> None:
        self.term.press(text.encode())
        time.sleep(0.3)  # pacing: Claude takes a burst ending in Enter as a paste
        self.term.press(b"\r")

    def screen(self) -> str:
        return "\n".join(self.term.lines())

    def close(self) -> None:
        self.term.proc.kill()
        self.term.proc.wait()


@pytest.fixture
def interactive():
    made: list[Interactive] = []
    yield lambda setup: made.append(Interactive(setup)) or made[-1]
    for i in made:
        i.close()


def open_permission(led: Ledger, n: int = 1):
    wait_until(lambda: len([h for h in led.handoffs() if h.kind == "permission"]) >= n, f"{n} permission question(s)",
               timeout=60)
    return [h for h in led.handoffs() if h.kind == "permission"]


def test_interactive_permission_answered_in_warden(where, interactive, capsys):
    with ModelServer([Reply(calls=(bash("touch allowed-by-warden"),)), Reply(text="finished")]) as model:
        claude = interactive(setup_claude(where, model))
        claude.prompt("make the file")
        with Ledger.open(where["ledger"]) as led:
            [h] = open_permission(led)
            assert "touch allowed-by-warden" in h.question
            assert warden(["resolve", h.id, "--option", "allow", "--answer", "ok, just this once", "--yes",
                           "--ledger", where["ledger"], "--operator", "ana@console"]) == 0
            capsys.readouterr()
            claude.term.wait_for(shows("finished"), 60)
            assert (claude.setup.project / "allowed-by-warden").exists()
            assert "ok, just this once" in model.scripted()[-1].text()  # the answer's text reached Claude
            task = claude_task(led)
            wait_until(lambda: led.node(task, "turn-1").status == "succeeded", "the turn's Stop")
            assert led.node(task, "turn-1").attempt == 1
            assert led.task(task).status == "active"  # a live session waits for its user between turns
            led.apply(led.plan_park(task, reason="end of the day"), operator="op@console")
            claude.prompt("one more thing")
            claude.term.wait_for(shows("Parked by the operator"), 60, "the refused prompt")
            assert len(model.scripted()) == 2


def test_interactive_permission_answered_at_claudes_terminal(where, interactive):
    script = [Reply(calls=(bash("touch yes-at-terminal"),)), Reply(calls=(bash("touch no-at-terminal"),)),
              Reply(calls=(bash("touch third"),)), Reply(text="all done")]  # Esc ends the turn: no model call
    with ModelServer(script) as model:
        claude = interactive(setup_claude(where, model))
        claude.prompt("first")
        with Ledger.open(where["ledger"]) as led:
            [h1] = open_permission(led)
            claude.term.wait_for(shows("Do you want to proceed?"), 60)
            claude.term.press(b"1")  # "Yes" in Claude's own dialog
            wait_until(lambda: led.handoff(h1.id).status == "resolved", "the question closed")
            h1 = led.handoff(h1.id)
            assert h1.resolution_answer == "answered at the Claude Code terminal" and h1.resolution_option == "allow"
            [h2] = [h for h in open_permission(led, 1) if h.id != h1.id]  # the next one is asked, not denied
            claude.term.wait_for(shows("Do you want to proceed?"), 60)
            claude.term.press(b"\x1b")  # Esc: Claude ends the hook
            wait_until(lambda: led.handoff(h2.id).status == "resolved", "the cancelled question closed")
            assert "answered at the Claude Code terminal: refused or cancelled" in led.handoff(h2.id).resolution_answer
            assert not (claude.setup.project / "no-at-terminal").exists()
            task = claude_task(led)
            assert "yes-at-terminal" in all_said(led.observations(task, "turn-1"))
            claude.prompt("again")  # a new turn: its permission is asked as usual
            [h3] = [h for h in open_permission(led, 1) if h.id not in (h1.id, h2.id)]
            led.apply(led.plan_resolve(h3.id, option="allow"), operator="op@console")
            claude.term.wait_for(shows("all done"), 60)
            assert (claude.setup.project / "third").exists()
            assert led.handoffs(task_id=task) == []


def test_interactive_permission_nobody_answers_is_denied(where, interactive):
    with ModelServer([Reply(calls=(bash("touch nobody"),)), Reply(text="denied, moving on")]) as model:
        claude = interactive(setup_claude(where, model, "--permission-wait", "2"))
        claude.prompt("try it")
        claude.term.wait_for(shows("denied, moving on"), 60)
        assert "nobody answered in time" in model.scripted()[-1].text()
        assert not (claude.setup.project / "nobody").exists()


def test_interactive_park_mid_tool_then_abort_stops_claude(where, interactive):
    script = [Reply(calls=(bash("touch started; sleep 1; touch first-done"),)), Reply(calls=(bash("touch second"),)),
              Reply(text="never")]
    with ModelServer(script) as model:
        claude = interactive(setup_claude(where, model))
        claude.prompt("work")  # the session starts with Bash allowed below
        with Ledger.open(where["ledger"]) as led:
            [h] = open_permission(led)
            led.apply(led.plan_resolve(h.id, option="allow"), operator="op@console")
            wait_until(lambda: (claude.setup.project / "started").exists(), "the first command running")
            task = claude_task(led)
            led.apply(led.plan_park(task, reason="hold on"), operator="op@console")  # mid-tool
            wait_until(lambda: (claude.setup.project / "first-done").exists(), "the running command's end")
            wait_until(lambda: _hook_waiting(where), "Claude held after the call (its PostToolUse waits)")
            assert len(model.scripted()) == 1  # parked: no model call after the running command
            led.apply(led.plan_abort(task, reason="wrong approach"), operator="op@console")
            claude.term.wait_for(shows("Aborted by the operator in Warden: wrong approach"), 60, "Claude stopped")
            assert not (claude.setup.project / "second").exists() and len(model.scripted()) == 1


def test_interactive_rewind_tells_claude_the_reason(where, interactive):
    script = [Reply(calls=(bash("touch one; sleep 1"),)), Reply(calls=(bash("touch two"),)), Reply(text="redone")]
    with ModelServer(script) as model:
        claude = interactive(setup_claude(where, model))
        claude.prompt("work")
        with Ledger.open(where["ledger"]) as led:
            [h] = open_permission(led)
            led.apply(led.plan_resolve(h.id, option="allow"), operator="op@console")
            wait_until(lambda: (claude.setup.project / "one").exists(), "the first command running")
            task = claude_task(led)
            led.apply(led.plan_rewind(task, "turn-1", reason="use the staging database"), operator="op@console")
            second = model.wait_requests(2)[1]  # after the running call: the reason goes back with its result
            assert "The operator rewound this turn in Warden: use the staging database" in second.text()
            [h2] = [x for x in open_permission(led) if x.id != h.id]  # the turn goes on, asked as usual
            led.apply(led.plan_resolve(h2.id, option="allow"), operator="op@console")
            claude.term.wait_for(shows("redone"), 60)
            assert led.node(task, "turn-1").attempt == 2  # the rewound turn's second attempt


# ---------------------------------------------------------------------- Claude Code with warden mcp
def test_claude_with_warden_mcp_asks_and_each_answer_comes_back_to_its_call(where, capsys):
    """Two ask_human calls in one model reply: Claude Code 2.1.197 makes MCP calls one after the
    other (measured), so each is answered as it opens; the step keeps its claim and its attempt.
    Concurrent calls from one client are tests/store/test_mcp_server.py's (the SDK's client)."""
    task_args = ["mcp", "--ledger", where["ledger"], "--task", "fix-7", "--worker", "claude-fix-7",
                 "--sessions", where["sessions"], "--ask-wait", "60"]
    import sys
    mcp = {"warden": {"command": sys.executable, "args": ["-m", "console", *task_args]}}
    # Claude Code connects MCP servers in the background: the model waits for them first, as told
    script = [wait_for_mcp("warden"), Reply(calls=(bash_mcp("claim_next", {}),)),
              Reply(calls=(bash_mcp("ask_human", {"question": "Which branch?", "options": mcp_options("main", "dev"),
                                                  **MCP_PARTS}),
                           bash_mcp("ask_human", {"question": "Open a PR?", "options": mcp_options("yes", "no"),
                                                  **MCP_PARTS}))),
              Reply(calls=(bash_mcp("commit", {"output": {"done": True}}),)), Reply(text="committed")]
    with ModelServer(script) as model:
        s = ClaudeSetup(where["tmp"] / "home", where["tmp"] / "proj", model.url, mcp=mcp).write()
        out: dict = {}
        t = threading.Thread(target=lambda: out.setdefault("p", run_claude_p(
            s, "fix it", "--allowedTools", "WaitForMcpServers", "mcp__warden__claim_next", "mcp__warden__ask_human",
            "mcp__warden__commit", timeout=180)))
        t.start()
        with Ledger.open(where["ledger"]) as led:
            for n in (1, 2):
                wait_until(lambda: len(led.handoffs(task_id="fix-7", status=None)) == n, f"question {n}",
                           timeout=120)
                [h] = led.handoffs(task_id="fix-7")
                assert led.node("fix-7", "main").status == "running"  # the step is not blocked by it
                led.apply(led.plan_resolve(h.id, option=h.options[0]["id"], answer=f"for {h.question}"),
                          operator="op@console")
        t.join(180)
        results = "\n".join(model.scripted()[-1].tool_results())  # each answer came back to its own call
        assert "for Which branch?" in results and "for Open a PR?" in results and results.count("answered") >= 2
    with Ledger.open(where["ledger"]) as led:
        assert led.node("fix-7", "main").status == "succeeded" and led.node("fix-7", "main").attempt == 1


def bash_mcp(tool: str, args: dict) -> Call:
    return Call(f"mcp__warden__{tool}", args)


# ---------------------------------------------------------------------- Codex under warden hook codex
def setup_codex(where, model, config: str = "") -> CodexSetup:
    return CodexSetup(where["tmp"] / "home", where["tmp"] / "proj", model.url,
                      hooks=codex_hooks(where["ledger"], where["sessions"]), config=config).write()


def test_codex_exec_under_its_hooks(where):
    script = [Reply(calls=(shell("echo codex output"),), usage=Usage(500, 20)),
              Reply(calls=(shell("touch /tmp/never-escalated", escalate=True),), usage=Usage(600, 20)),
              Reply(text="Codex done.", usage=Usage(700, 30))]
    with ModelServer(script) as model:
        s = setup_codex(where, model)
        done = run_codex_exec(s, "Run it", "--dangerously-bypass-hook-trust", "-s", "workspace-write")
        assert done.returncode == 0, done.stderr
    with Ledger.open(where["ledger"]) as led:
        [t] = [t for t in led.tasks() if t.origin == "codex"]
        turn = led.node(t.task_id, "turn-1")
        assert turn.title == "Run it" and turn.status == "succeeded" and turn.output["last_message"] == "Codex done."
        results = [o.result for o in led.observations(t.task_id, "turn-1")]
        assert results[0] == "codex output\n"
        assert results[1].startswith("refused: approval policy is Never")  # the policy's rejection, from the rollout
        assert turn.tokens_used >= 1800
        # (Codex gives SessionEnd hooks at most 3 s: on a loaded machine the session's end may not be heard)


def test_codex_abort_denies_every_call(where):
    held = Reply(calls=(shell("touch never-made"),), hold=True)
    with ModelServer([Reply(calls=(shell("echo one"),)), held, Reply(text="stopped")]) as model:
        s = setup_codex(where, model)
        out: dict = {}
        t = threading.Thread(target=lambda: out.setdefault("p", run_codex_exec(
            s, "go", "--dangerously-bypass-hook-trust", "-s", "workspace-write")))
        t.start()
        model.wait_requests(2)
        with Ledger.open(where["ledger"]) as led:
            [task] = [x for x in led.tasks() if x.origin == "codex"]
            led.apply(led.plan_abort(task.task_id, reason="not this repo"), operator="op@console")
        held.release()
        t.join(120)
        assert not (s.project / "never-made").exists()
        assert "not this repo" in model.scripted()[-1].text()


def test_codex_permission_request_answered_in_warden(where):
    proj = where["tmp"] / "proj"
    config = (f'approval_policy = "on-request"\nsandbox_mode = "workspace-write"\n'
              f'[projects."{proj}"]\ntrust_level = "trusted"\n')
    target = where["tmp"] / "escalated.txt"
    with ModelServer([Reply(calls=(shell(f"touch {target}", escalate=True),)), Reply(text="Codex TUI done.")]) as model:
        s = setup_codex(where, model, config)
        subprocess.run(["git", "init", "-q", str(proj)], check=True)
        term = Terminal(s.argv("--dangerously-bypass-hook-trust"), cols=100, rows=30, env=s.env(), cwd=proj,
                        clean_env=True)
        try:
            term.wait_for(shows("Ask Codex"), 60)
            term.press(b"do it")
            time.sleep(0.3)  # pacing, as a person types
            term.press(b"\r")
            with Ledger.open(where["ledger"]) as led:
                [h] = open_permission(led)
                assert f"touch {target}" in h.question and h.question.startswith("Allow Codex to use Bash?")
                led.apply(led.plan_resolve(h.id, option="allow"), operator="op@console")
            term.wait_for(shows("Codex TUI done."), 60)
            assert target.exists()
        finally:
            term.proc.kill()
            term.proc.wait()


def test_the_measured_table_holds_for_these_versions():
    """docs/agents.md states the versions its table was measured with: the ones this suite runs."""
    from tests.support.clients import CLAUDE_VERSION, CODEX_VERSION
    guide = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    assert f"Claude Code {CLAUDE_VERSION}" in guide and f"Codex {CODEX_VERSION}" in guide


def test_interactive_always_allow_grants_claudes_own_rule_for_the_session(where, interactive):
    """The rule Claude Code suggests, chosen in Warden, is applied by Claude Code itself: the same
    command later in the session runs without asking (no second question, no dialog)."""
    cmd = "python3 -c \"open('always-1.txt', 'w').close()\""  # (for touch, Claude suggests a directory, not a rule)
    script = [Reply(calls=(bash(cmd),)), Reply(text="first done"), Reply(calls=(bash(cmd),)), Reply(text="second done")]
    with ModelServer(script) as model:
        claude = interactive(setup_claude(where, model))
        claude.prompt("first")
        with Ledger.open(where["ledger"]) as led:
            [h] = open_permission(led)
            offered = {r["option"]: r["rule"] for r in h.context["rules"]}  # what Claude Code suggested
            assert {str(o["id"]) for o in h.options} >= {"allow", "deny", *offered}, h.options
            option, rule = next((k, r) for k, r in offered.items() if r["type"] == "addRules")
            assert rule["rules"][0]["toolName"] == "Bash", rule
            led.apply(led.plan_resolve(h.id, option=option), operator="ana (phone page from 10.0.0.7)")
            claude.term.wait_for(shows("first done"), 60)
            assert (claude.setup.project / "always-1.txt").exists()
            (claude.setup.project / "always-1.txt").unlink()
            claude.prompt("again")
            claude.term.wait_for(shows("second done"), 60, "the second call run without asking")
            assert (claude.setup.project / "always-1.txt").exists()
            task = claude_task(led)
            assert [x.id for x in led.handoffs(status=None, task_id=task) if x.kind == "permission"] == [h.id]
            [granted] = rules_for(led, task)
            assert granted["by"] == "ana (phone page from 10.0.0.7)" and granted["rule"] == rule

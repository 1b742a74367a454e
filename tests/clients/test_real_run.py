"""``warden run --json-stream claude|codex`` with the real Claude Code 2.1.197 and Codex 0.171.0
against the scripted model: the final answer, the cost and the tokens reach the node; park and
abort reach the commands the agents' own tools start (Claude's Bash tool and Codex's exec start
each in a session of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from store import Ledger
from tests.support.clients import ClaudeSetup, CodexSetup, need
from tests.support.model_server import ModelServer, Reply, Usage, bash, shell, write
from tests.support.observed import all_said
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
TICKER = "i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo $i >> ticks.txt; sleep 0.05; done"


def warden_run(ledger: str, task: str, stream: str, argv: list[str], env: dict[str, str], cwd: Path,
               timeout: float = 180) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "console", "run", "--ledger", ledger, "--runs", str(cwd.parent / "runs"),
           "--task", task, "--lease", "6", "--grace", "3", "--json-stream", stream, "--", *argv]
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


def _mounts() -> dict[str, Path]:
    """Where cgroup v2 (``""``) and v1's freezer (``"freezer"``) are mounted."""
    found: dict[str, Path] = {}
    for line in Path("/proc/mounts").read_text().splitlines():
        _, where, kind, opts = line.split()[:4]
        if kind == "cgroup2":
            found.setdefault("", Path(where))
        elif kind == "cgroup" and "freezer" in opts.split(","):
            found.setdefault("freezer", Path(where))
    return found


def _frozen(pid: Path) -> bool:
    """Whether the process's cgroup is frozen (cgroup v2's cgroup.events, v1's freezer.state)."""
    try:
        lines = (pid / "cgroup").read_text().splitlines()
    except OSError:
        return False
    mounts = _mounts()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        try:
            if controllers == "" and "" in mounts:
                if "frozen 1" in (mounts[""] / path.lstrip("/") / "cgroup.events").read_text():
                    return True
            elif "freezer" in controllers.split(",") and "freezer" in mounts:
                if (mounts["freezer"] / path.lstrip("/") / "freezer.state").read_text().strip() == "FROZEN":
                    return True
        except OSError:
            continue
    return False


def ticker_states(marker: str) -> list[str]:
    """How each process running the ticker command (found by its marker) stands: ``T`` stopped
    (a signal, or its cgroup frozen: a frozen task shows as sleeping in /proc), else its state."""
    out = []
    for pid in Path("/proc").iterdir():
        if not pid.name.isdigit():
            continue
        try:
            cmd = (pid / "cmdline").read_bytes()
            if marker.encode() not in cmd or b"console" in cmd:
                continue
            state = (pid / "stat").read_text().rsplit(")", 1)[1].split()[0]
            out.append("T" if state == "t" or _frozen(pid) else state)
        except OSError:
            continue
    return out


def test_claude_p_under_warden_run_final_answer_cost_and_tokens_reach_the_node(tmp_path):
    ledger = str(tmp_path / "ledger.db")
    big = "x" * 3000
    script = [Reply(calls=(bash("seq 1 400"),), usage=Usage(2000, 50)),
              Reply(calls=(write("big.txt", big),), usage=Usage(2100, 60, cache_read=1000)),
              Reply(text="The answer is 42.", usage=Usage(2200, 70))]
    with ModelServer(script) as model:
        s = ClaudeSetup(tmp_path / "home", tmp_path / "proj", model.url).write()
        argv = [str(need("claude")), "-p", "compute", "--output-format", "stream-json", "--verbose",
                "--allowedTools", "Bash", "Write"]
        p = warden_run(ledger, "answer", "claude", argv, s.env(), s.project)
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    with Ledger.open(ledger) as led:
        node = led.node("answer", "main")
        assert node.status == "succeeded"
        assert node.output["final"] == "The answer is 42."
        assert node.output["cost_usd"] > 0
        assert node.tokens_used == 2050 + 3160 + 2270
        said = all_said(led.observations("answer", "main"))
        assert "seq 1 400" in said and "big.txt" in said  # both calls recorded, the 3000-character Write too


def test_park_and_abort_reach_claudes_bash_tool_commands(tmp_path):
    ledger = str(tmp_path / "ledger.db")
    marker = f"ticks-{os.getpid()}"
    with ModelServer([Reply(calls=(bash(f"{TICKER} # {marker}", timeout_ms=600000),)), Reply(text="x")]) as model:
        s = ClaudeSetup(tmp_path / "home", tmp_path / "proj", model.url).write()
        argv = [str(need("claude")), "-p", "tick", "--output-format", "stream-json", "--verbose",
                "--allowedTools", "Bash"]
        p = warden_run(ledger, "ticker", "claude", argv, s.env(), s.project)
        park_and_abort(ledger, "ticker", p, s.project / "ticks.txt", marker, "the tool's command", resume=True)
        assert p.returncode == 1


def park_and_abort(ledger: str, task: str, p: subprocess.Popen, ticks: Path, marker: str, what: str, *,
                   resume: bool) -> None:
    """Once ``what`` (the agent's ticking command) runs: park the task — every process of the
    command stopped, not just the agent — resume it when asked (it goes on), abort it; warden run
    ends and nothing of the command is left. ``p`` is killed whatever happened."""
    try:
        wait_until(lambda: ticks.exists() and ticker_states(marker), f"{what} running", timeout=120)
        with Ledger.open(ledger) as led:
            led.apply(led.plan_park(task, reason="hold"), operator="op@console")
            wait_until(lambda: ticker_states(marker) and all(st == "T" for st in ticker_states(marker)),
                       f"{what} stopped", timeout=60)
            if resume:
                size = ticks.stat().st_size
                led.apply(led.plan_resume(task), operator="op@console")
                wait_until(lambda: ticks.stat().st_size > size, "the command going on after resume", timeout=60)
            led.apply(led.plan_abort(task, reason="enough"), operator="op@console")
        p.wait(120)
        wait_until(lambda: not ticker_states(marker), "nothing of the command left", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_codex_exec_under_warden_run_and_its_sandboxed_command_parked_and_ended(tmp_path):
    ledger = str(tmp_path / "ledger.db")
    marker = f"cticks-{os.getpid()}"
    script = [Reply(calls=(shell("echo hello from codex"),), usage=Usage(500, 20)),
              Reply(calls=(shell(f"{TICKER} # {marker}"),), usage=Usage(600, 20)), Reply(text="codex final")]
    with ModelServer(script) as model:
        s = CodexSetup(tmp_path / "home", tmp_path / "proj", model.url).write()
        subprocess.run(["git", "init", "-q", str(s.project)], check=True)
        argv = [str(need("codex")), "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "tick"]
        p = warden_run(ledger, "cticker", "codex", argv, s.env(), s.project)
        park_and_abort(ledger, "cticker", p, s.project / "ticks.txt", marker, "the sandboxed command", resume=False)
        with Ledger.open(ledger) as led:
            assert "hello from codex" in all_said(led.observations("cticker", "main"))
            assert led.task("cticker").status == "aborted"


def test_codex_exec_under_warden_run_final_answer_and_tokens(tmp_path):
    ledger = str(tmp_path / "ledger.db")
    script = [Reply(calls=(shell("seq 1 300"),), usage=Usage(500, 20)), Reply(text="codex final", usage=Usage(700, 30))]
    with ModelServer(script) as model:
        s = CodexSetup(tmp_path / "home", tmp_path / "proj", model.url).write()
        subprocess.run(["git", "init", "-q", str(s.project)], check=True)
        argv = [str(need("codex")), "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "count"]
        p = warden_run(ledger, "ccount", "codex", argv, s.env(), s.project)
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    with Ledger.open(ledger) as led:
        node = led.node("ccount", "main")
        assert node.status == "succeeded" and node.output["final"] == "codex final"
        assert node.tokens_used == 520 + 730
        assert "300" in all_said(led.observations("ccount", "main"))


"""What supervising an agent costs it: one command, one JSON report and a table.

    python tests/bench/bench_agents.py                # SQLite in a temp dir, 20 rounds each
    python tests/bench/bench_agents.py --rounds 5     # a quick look

Measured, each the shipped path:

* ``hook``: one Claude Code hook event, ``warden hook claude`` as Claude Code runs it — a new
  process per event, the recorded payload on stdin (tests/fixtures/agents/claude_hooks) —
  PreToolUse and PostToolUse of a session in progress: wall time per event (p50/p95/max), and the
  part of it that is the event's own work (``handle()`` in a process already started);
* ``run``: ``warden run -- sh -c 'seq N'`` against the bare ``sh -c 'seq N'``: wall time of the
  whole run (start-up, claim, supervision, commit) and the lines per second the supervisor passes
  through and records (N = ``--lines``);
* ``mcp``: one ``heartbeat`` tool call of ``warden mcp`` over stdio with the SDK's client (round
  trip p50/p95/max), and the server's start-up to its first answer.

``uptime`` is recorded before and after: figures taken on a busy machine say so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from store import Ledger  # noqa: E402
from store.adapters.claude_hooks import HookConfig, handle  # noqa: E402
from store.adapters.sessions import SessionStore  # noqa: E402

HOOKS = ROOT / "tests" / "fixtures" / "agents" / "claude_hooks"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(xs) * 1000, 1), "p95_ms": round(pct(xs, 95) * 1000, 1),
            "max_ms": round(max(xs) * 1000, 1), "n": len(xs)}


def uptime() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def bench_hook(d: Path, rounds: int) -> dict:
    ledger, sessions = str(d / "hook.db"), str(d / "sessions")
    cmd = [sys.executable, "-m", "console", "hook", "claude", "--ledger", ledger, "--sessions", sessions]
    start = (HOOKS / "session_start.json").read_bytes()
    subprocess.run(cmd, input=start, env=ENV, check=True, capture_output=True)
    walls: list[float] = []
    for i in range(rounds):
        for name in ("pre_tool_use", "post_tool_use"):
            t = time.perf_counter()
            subprocess.run(cmd, input=(HOOKS / f"{name}.json").read_bytes(), env=ENV, check=True, capture_output=True)
            walls.append(time.perf_counter() - t)
    own: list[float] = []
    store = SessionStore(sessions)
    with Ledger.open(ledger) as led:
        for i in range(rounds):
            for name in ("pre_tool_use", "post_tool_use"):
                payload = json.loads((HOOKS / f"{name}.json").read_text())
                t = time.perf_counter()
                handle(led, store, HookConfig(), payload)
                own.append(time.perf_counter() - t)
    return {"process_per_event": summary(walls), "event_work_in_process": summary(own)}


def bench_run(d: Path, rounds: int, lines: int) -> dict:
    script = f"seq {lines}"
    bare, supervised = [], []
    for i in range(rounds):
        t = time.perf_counter()
        subprocess.run(["sh", "-c", script], check=True, capture_output=True)
        bare.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "console", "run", "--ledger", str(d / "run.db"), "--runs",
                        str(d / "runs"), "--task", f"bench-{i}", "--", "sh", "-c", script],
                       env=ENV, check=True, capture_output=True)
        supervised.append(time.perf_counter() - t)
    with Ledger.open(str(d / "run.db")) as led:
        observations = len(led.observations("bench-0", "main", limit=100_000))
    start = [sys.executable, "-c", "import console.cli, store.adapters.command"]
    imports = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run(start, env=ENV, check=True)
        imports.append(time.perf_counter() - t)
    return {"lines": lines, "bare": summary(bare), "warden_run": summary(supervised),
            "python_start_and_imports": summary(imports), "observations_of_one_run": observations,
            "lines_per_s_through_the_supervisor": round(lines / max(1e-9, statistics.median(supervised)
                                                                   - statistics.median(imports)))}


def bench_mcp(d: Path, rounds: int) -> dict:
    from mcp import Client, StdioServerParameters

    async def go() -> dict:
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "console", "mcp", "--ledger", str(d / "mcp.db"), "--task", "bench", "--worker", "bench",
            "--sessions", str(d / "mcp-sessions")], env={"PYTHONPATH": str(ROOT)})
        t = time.perf_counter()
        async with Client(params) as client:
            await client.call_tool("claim_next", {})
            first = time.perf_counter() - t
            calls = []
            for i in range(rounds):
                t = time.perf_counter()
                r = await client.call_tool("heartbeat", {"action": f"step {i}", "result": f"found {i} things"})
                calls.append(time.perf_counter() - t)
                assert not r.is_error
        return {"start_to_first_answer_s": round(first, 2), "heartbeat_round_trip": summary(calls)}
    return asyncio.run(go())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--lines", type=int, default=100_000)
    args = ap.parse_args()
    report: dict = {"load_before": uptime()}
    with tempfile.TemporaryDirectory(prefix="warden-bench-agents-") as tmp:
        d = Path(tmp)
        report["hook"] = bench_hook(d, args.rounds)
        report["run"] = bench_run(d, max(3, args.rounds // 4), args.lines)
        try:
            report["mcp"] = bench_mcp(d, args.rounds * 5)
        except ImportError:
            report["mcp"] = "the mcp extra is not installed"
    report["load_after"] = uptime()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``warden demo``: worker processes, the supervisor, shutdown, and the console in tmux at 80×24.

These start real processes. They wait on conditions (a file, a ledger state, a screen's text) with
deadlines; the only sleeps are the pauses between polls of those conditions.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from console.cli import main
from console.demo import run_demo
from store import Ledger
from store.demo_agents import LIVE_TASKS, ledger_is_quiet

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def wait_for(predicate, timeout: float, what: str, every: float = 0.1):
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)  # the pause between two polls of the condition


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes whose command line mentions ``text`` (zombies excluded)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if text in cmd and stat.rsplit(")", 1)[-1].split()[0] != "Z":
            out.append((int(entry), cmd.strip()))
    return out


def open_ledger(path: Path) -> Ledger:
    return Ledger.open(path, create=False)


# ---------------------------------------------------------------------- headless: workers to the end
def test_headless_demo_runs_every_task_to_its_end_and_leaves_no_process(tmp_path):
    root = tmp_path / "demo"
    out = io.StringIO()
    resolved: list[str] = []

    def operator() -> None:  # answers the confirm handoff through the actions API, like the console
        ledger_path = root / "ledger.db"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not resolved:
            if ledger_path.exists() and "agents started" in out.getvalue():
                with open_ledger(ledger_path) as led:
                    for h in led.handoffs():
                        led.apply(led.plan_resolve(h.id, option="yes", answer="ship it"), operator="tester")
                        resolved.append(h.id)
            time.sleep(0.1)  # the pause between two polls

    t = threading.Thread(target=operator, daemon=True)
    t.start()
    rc = run_demo(directory=str(root), speed=40.0, seed=7, operator="tester", with_console=False, out=out)
    t.join(timeout=5)
    text = out.getvalue()
    assert rc == 0, text
    assert resolved == ["1"]
    with open_ledger(root / "ledger.db") as led:
        assert ledger_is_quiet(led, LIVE_TASKS)
        assert {led.task(t).status for t in LIVE_TASKS} == {"completed"}
        claims = [e for e in led.events(0, task_id="report-q3", limit=10_000)
                  if e.node == "verify-1" and e.kind == "node.claimed"]
        assert claims[0].actor == "w4" and claims[1].payload["reclaimed"] and claims[1].actor != "w4"
        assert len(led.effects("maint-billing")) == 19
    for t_id in LIVE_TASKS:
        assert f"{t_id}: completed" in text
    assert "restarted: w4" in text
    assert f"warden console --ledger {root.resolve() / 'ledger.db'} --runs {root.resolve() / 'runs'}" in text
    assert processes_mentioning(str(root)) == []
    assert (root / "logs" / "w4.log").read_text().count("crashing on purpose") == 1


def test_quitting_the_console_stops_every_worker(tmp_path):
    root = tmp_path / "demo"
    seen: dict[str, object] = {}

    def fake_console(*, ledger, runs, read_only, operator, project, records) -> int:
        # stands in for the app: waits until the agents are visibly at work, then "quits"
        def running() -> bool:
            with open_ledger(Path(ledger)) as led:
                return any(n.status == "running" for n in led.graph("maint-billing").nodes)

        wait_for(running, 30, "a running node")
        seen["workers"] = processes_mentioning(str(root))
        seen.update(runs=runs, project=project, read_only=read_only)
        return 0

    out = io.StringIO()
    rc = run_demo(directory=str(root), speed=2.0, seed=7, operator="tester", console=fake_console, out=out)
    assert rc == 0
    assert len(seen["workers"]) == 6 and all("store.demo_agents" in cmd for _, cmd in seen["workers"])
    assert seen["runs"] == str(root.resolve() / "runs") and seen["project"] == str(root.resolve())
    assert seen["read_only"] is False
    assert processes_mentioning(str(root)) == []
    assert "reopen it with:   warden console --ledger" in out.getvalue()


def test_headless_demo_stops_on_sigint_and_leaves_no_process(tmp_path):
    import queue
    import signal

    root = tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "console", "demo", "--no-console", "--dir", str(root),
                             "--speed", "0.5"], cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    seen = []
    try:
        deadline = time.monotonic() + 30
        while not any("agents started" in line for line in seen):
            seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        wait_for(lambda: len(processes_mentioning(str(root / "ledger.db"))) == 6, 15, "six workers")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert processes_mentioning(str(root)) == []
    while not lines.empty():
        seen.append(lines.get())
    assert any("reopen it with:" in line for line in seen)


def test_a_worker_exits_when_its_parent_dies(tmp_path):
    root = tmp_path / "demo"
    root.mkdir()
    Ledger.open(root / "ledger.db").close()  # an empty ledger: the worker just waits for work
    pidfile = tmp_path / "worker.pid"
    parent = (
        "import os, subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'store.demo_agents', '--ledger', {str(root / 'ledger.db')!r},"
        f" '--worker', 'orphan', '--stop-file', {str(root / 'STOP')!r}, '--parent-pid', str(os.getpid())],"
        f" cwd={str(ROOT)!r})\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
    )  # ... and the parent exits at once, leaving the worker behind
    subprocess.run([sys.executable, "-c", parent], check=True, cwd=str(ROOT))
    pid = int(pidfile.read_text())
    try:
        wait_for(lambda: not processes_mentioning(str(root / "ledger.db")), 10, f"worker {pid} to exit")
    finally:
        if processes_mentioning(str(root / "ledger.db")):  # the test failed: do not leave it behind
            os.kill(pid, 9)


def test_demo_refuses_a_directory_that_already_holds_one(tmp_path, capsys):
    (tmp_path / "ledger.db").write_bytes(b"")
    assert main(["demo", "--dir", str(tmp_path), "--no-console"]) == 1
    err = capsys.readouterr().err
    assert "already holds a demo" in err and "warden console --ledger" in err
    assert processes_mentioning(str(tmp_path)) == []


# ---------------------------------------------------------------------- the real thing in tmux
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_warden_demo_in_tmux_shows_the_scenarios_and_quits_clean(tmp_path):
    """80×24: within 20 s of the console's first screen, a stall mark and an open handoff on the
    maintenance task and running nodes in its graph; `q` leaves no process behind."""
    root = tmp_path / "demo"
    sock = f"warden-test-{os.getpid()}"
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    cmd = f"{sys.executable} -m console demo --dir {root}; echo DEMO-EXIT=$?; sleep 60"
    subprocess.run([*tmux, "new-session", "-d", "-s", "demo", "-x", "80", "-y", "24", cmd], check=True, env=env,
                   cwd=str(tmp_path))

    def screen() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-J", "-t", "demo"], capture_output=True,
                              text=True).stdout

    def screen_with(*needles: str) -> str:
        text = screen()
        return text if all(n in text for n in needles) else ""

    def row(text: str, key: str) -> str:
        return next((line for line in text.splitlines() if line.startswith(key)), "")

    try:
        maint = "maint-bill"  # the task column may shorten the id to "maint-billi…" at 80 columns
        wait_for(lambda: row(screen(), maint), 30, "the console's first screen")
        first = time.monotonic()
        wait_for(lambda: "✋" in row(screen(), maint), 20, "an open handoff on maint-billing")
        left = 20 - (time.monotonic() - first)
        wait_for(lambda: "⚠" in row(screen(), maint), max(left, 0.5), "a stall mark on maint-billing")
        text = screen()
        assert row(text, maint).split()[1:3] == ["▶", "active"]
        order = [line.split()[0] for line in text.splitlines()[2:8]]
        down = next(i for i, key in enumerate(order) if key.startswith(maint))
        subprocess.run([*tmux, "send-keys", "-t", "demo", *(["j"] * down), "Enter"], check=True)
        graph = wait_for(lambda: screen_with("task maint-billing", "▶ running"), 10,
                         "the maintenance graph with running nodes")
        assert "✋ blocked" in graph
        subprocess.run([*tmux, "send-keys", "-t", "demo", "q"], check=True)
        done = wait_for(lambda: screen_with("DEMO-EXIT="), 15, "the demo to exit")
        assert "DEMO-EXIT=0" in done
        assert f"warden console --ledger {root.resolve() / 'ledger.db'}" in done
        left_behind = [(pid, c) for pid, c in processes_mentioning(str(root)) if "DEMO-EXIT" not in c]
        assert left_behind == []
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)

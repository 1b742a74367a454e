"""``warden demo``: the scenarios on screen (seeded, on a ManualClock: deterministic), worker
processes, the supervisor, shutdown, and the real thing in tmux at 80×24.

The process tests start real processes. They wait on conditions (a file, a ledger state, a
screen's text) with deadlines; the only sleeps are the pauses between polls of those conditions.
None of them depends on what the randomly timed live agents have done by a given wall time.
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

from console.app import WardenApp
from console.cli import main
from console.demo import LIVE_TASKS, ROSTER, build_demo_ledger, ledger_is_quiet, maint_simulation, run_demo
from console.widgets import RowList
from store import Ledger, ManualClock

from tests.support.console_app import settle, graph_of
from tests.support.console_app import wait_for as pilot_wait_for
from tests.support.waiting import Deadline, stretch

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
SEED = 7


def wait_for(predicate, timeout: float, what: str, every: float = 0.1):
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = Deadline(timeout)
    while True:
        got = predicate()
        if got:
            return got
        if deadline.expired():
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
@pytest.mark.slow
def test_headless_demo_runs_every_task_to_its_end_and_leaves_no_process(tmp_path):
    root = tmp_path / "demo"
    out = io.StringIO()
    resolved: list[str] = []

    def operator() -> None:  # answers the confirm handoff through the actions API, like the console
        ledger_path = root / "ledger.db"
        deadline = Deadline(60)
        while not deadline.expired() and not resolved:
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
        # whoever claimed verify-1 first (w4, the writer, or w6, who takes anything: a race between
        # two processes) is the one that crashes; the ledger says who, and another worker reclaims it
        crashed = claims[0].actor
        assert crashed in ("w4", "w6") and claims[1].payload["reclaimed"] and claims[1].actor != crashed
        assert len(led.effects("maint-billing")) == 19
    for t_id in LIVE_TASKS:
        assert f"{t_id}: completed" in text
    assert f"restarted: {crashed}" in text
    assert f"warden console --ledger {root.resolve() / 'ledger.db'} --runs {root.resolve() / 'runs'}" in text
    assert processes_mentioning(str(root)) == []
    assert (root / "logs" / f"{crashed}.log").read_text().count("crashing on purpose") == 1


@pytest.mark.slow
def test_quitting_the_console_stops_every_worker(tmp_path):
    root = tmp_path / "demo"
    seen: dict[str, object] = {}

    def fake_console(*, ledger, runs, read_only, operator, project, records, bell, on_alert) -> int:
        # stands in for the app: waits until the agents are visibly at work, then "quits"
        def running() -> bool:
            with open_ledger(Path(ledger)) as led:
                return any(n.status == "running" for n in led.graph("maint-billing").nodes)

        wait_for(running, 30, "a running node")
        seen["workers"] = processes_mentioning(str(root))
        seen.update(runs=runs, project=project, read_only=read_only, bell=bell, on_alert=on_alert)
        return 0

    out = io.StringIO()
    rc = run_demo(directory=str(root), speed=2.0, seed=7, operator="tester", console=fake_console, out=out)
    assert rc == 0
    assert len(seen["workers"]) == len(ROSTER) and all("console.demo.worker" in cmd for _, cmd in seen["workers"])
    assert seen["runs"] == str(root.resolve() / "runs") and seen["project"] == str(root.resolve())
    assert seen["read_only"] is False and seen["bell"] is True and seen["on_alert"] is None
    assert processes_mentioning(str(root)) == []
    assert "reopen it with:   warden console --ledger" in out.getvalue()


@pytest.mark.slow
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
        deadline = Deadline(30)
        while not any("agents started" in line for line in seen):
            seen.append(lines.get(timeout=max(0.1, deadline.left())))
        wait_for(lambda: len(processes_mentioning(str(root / "ledger.db"))) == len(ROSTER), 15, "every worker")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=stretch(15)) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert processes_mentioning(str(root)) == []
    while not lines.empty():
        seen.append(lines.get())
    assert any("reopen it with:" in line for line in seen)


@pytest.mark.slow
def test_a_worker_exits_when_its_parent_dies(tmp_path):
    root = tmp_path / "demo"
    root.mkdir()
    Ledger.open(root / "ledger.db").close()  # an empty ledger: the worker just waits for work
    pidfile = tmp_path / "worker.pid"
    parent = (
        "import os, subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'console.demo.worker', '--ledger', {str(root / 'ledger.db')!r},"
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


@pytest.mark.slow
def test_demo_refuses_a_directory_that_already_holds_one(tmp_path, capsys):
    (tmp_path / "ledger.db").write_bytes(b"")
    assert main(["demo", "--dir", str(tmp_path), "--no-console"]) == 1
    err = capsys.readouterr().err
    assert "already holds a demo" in err and "warden console --ledger" in err
    assert processes_mentioning(str(tmp_path)) == []


# ---------------------------------------------------------------------- the scenarios, seeded
def visible_rows(app) -> list[str]:
    lst = app.screen.query_one(RowList)
    return ["".join(seg.text for seg in lst.render_line(y)) for y in range(lst.size.height)]


def row(rows: list[str], key: str) -> str:
    return next((line for line in rows if line.split() and line.split()[0] == key), "")


async def test_demo_scenarios_on_screen_seeded_on_a_manual_clock(tmp_path):
    """The demo's live agents, seeded and run 20 simulated seconds on a ManualClock (what the real
    demo shows within 20 s at speed 1), then the console at 80×24 on a clock fixed at that moment:
    the maintenance task is active with a stall mark and an open handoff; its graph has running
    nodes, the looping fixer among them with its signal, and the approval blocked on the human."""
    clock = ManualClock(T0)
    paths, sim = build_demo_ledger(tmp_path / "demo", seed=SEED, clock=clock, advance_s=20.0)
    sim.ledger.close()
    loop_node = f"fix-{maint_simulation(SEED, faults=True)['loop_module']}"
    app = WardenApp(str(paths.ledger), str(paths.runs), clock=ManualClock(clock.now), project=str(paths.root))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot_wait_for(pilot, lambda: "⚠" in row(visible_rows(app), "maint-billing"), timeout=30,
                             what="the stall mark on maint-billing (estimates and signals computed)")
        rows = visible_rows(app)
        maint = row(rows, "maint-billing")
        assert maint.split()[1:3] == ["▶", "active"] and "✋1" in maint, maint
        for task in LIVE_TASKS:
            assert "▶ active" in row(rows, task), (task, rows)
        keys = [line.split()[0] for line in rows[1:] if line.split()]
        await pilot.press(*["j"] * keys.index("maint-billing"), "enter")
        await pilot_wait_for(pilot, lambda: graph_of(app) is not None and graph_of(app).complete
                             and graph_of(app).task_id == "maint-billing", what="the maintenance graph")
        await settle(pilot)
        await pilot_wait_for(pilot, lambda: "⚠" in row(visible_rows(app), loop_node), timeout=30,
                             what=f"the looping fixer's signal on {loop_node}")
        graph = [line.strip() for line in visible_rows(app)]
        assert any("▶ running" in line for line in graph), graph
        assert "▶ running" in row(graph, loop_node), graph
        assert "✋ blocked" in row(graph, "approve-prs"), graph


# ---------------------------------------------------------------------- the real thing in tmux
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_warden_demo_in_tmux_opens_a_dialog_and_quits_clean(tmp_path):
    """A smoke test of the real thing at 80×24: the console's first screen lists the live tasks,
    a dialog opens and cancels, `q` leaves no process behind. (What the agents have done by then
    is random; nothing here depends on it: the scenarios are checked seeded, above.)"""
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

    def keys(*k: str) -> None:
        subprocess.run([*tmux, "send-keys", "-t", "demo", *k], check=True)

    try:
        # the task column may shorten ids at 80 columns ("maint-billi…")
        first = wait_for(lambda: screen_with("maint-bill", "report-q3", "triage-inbox"), 30,
                         "the console's first screen")
        assert "TASK" in first and "▶ active" in first
        keys("p")  # park, on the selected task
        wait_for(lambda: screen_with("Park task", "Cancel", "reason"), 15, "the park dialog")
        keys("Escape")
        wait_for(lambda: screen_with("maint-bill", "TASK") and not screen_with("Park task"), 15,
                 "the task list again")
        keys("q")
        done = wait_for(lambda: screen_with("DEMO-EXIT="), 15, "the demo to exit")
        assert "DEMO-EXIT=0" in done
        assert f"warden console --ledger {root.resolve() / 'ledger.db'}" in done
        left_behind = [(pid, c) for pid, c in processes_mentioning(str(root)) if "DEMO-EXIT" not in c]
        assert left_behind == []
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)

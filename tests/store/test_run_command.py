"""``warden run -- CMD``: a real command supervised as one node (store/adapters/command.py).

Every test starts ``warden run`` as a real process around a real ``sh -c`` script. They wait on
what the script writes (its pid, a line per start) and on ledger state, with deadlines; the sleeps
are the scripts' own pace and the pauses between two polls of a condition. A stopped process is
seen in ``/proc/PID/stat`` (state ``T``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import random
import sys
import threading
import time
from pathlib import Path

import pytest

from store import Ledger
from tests.support.observed import all_said  # noqa: E402
from tests.support.procstate import gone, running, state_of, stopped
from store.adapters.command import RunSpec, Supervisor, failure_for
from store.adapters.process import LINE_READ_CAP, Child
from tests.support.waiting import Deadline, stretch

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "agents"
LEASE = "1.5"  # a heartbeat every 0.5 s
NOTICE_S = 8.0  # an operator's action reaches the command within a few heartbeats, even on a busy machine
TICKING = 'echo $$ > pid; i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.05; done'


def wait_for(predicate, timeout: float, what: str, every: float = 0.05):
    deadline = Deadline(timeout)
    while True:
        got = predicate()
        if got:
            return got
        if deadline.expired():
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)  # the pause between two polls of the condition


class Run:
    """``warden run`` around ``sh -c SCRIPT`` in ``cwd``; its output goes to files. ``warden``: how
    Python starts it (the shipped entry, or ``tests/support/hang_at.py`` stopping it at a point)."""

    def __init__(self, ledger: str, cwd: Path, script: str, *extra: str, task: str = "t", node: str = "main",
                 grace: str = "2", stdin=subprocess.DEVNULL, argv: list[str] | None = None,
                 warden: tuple[str, ...] = ("-m", "console")) -> None:
        self.cwd = cwd
        self.out = open(cwd / "run.out", "wb")
        self.err = open(cwd / "run.err", "wb")
        cmd = [sys.executable, *warden, "run", "--ledger", ledger, "--runs", str(cwd / "runs"),
               "--task", task, "--node", node, "--lease", LEASE, "--grace", grace, *extra, "--",
               *(argv or ["sh", "-c", script])]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self.out, stderr=self.err, stdin=stdin)

    def wait(self, timeout: float = 60.0) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.out.close()
            self.err.close()

    @property
    def stderr(self) -> str:
        return (self.cwd / "run.err").read_text(errors="replace")

    def pid(self, name: str = "pid") -> int:
        f = self.cwd / name
        return int(wait_for(lambda: f.exists() and f.read_text().strip(), 30, f"the script's {name} file"))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()






def apply(ledger_path: str, planner, **kw):
    with Ledger.open(ledger_path) as led:
        return led.apply(planner(led)(**kw), operator="op@test")


def node(ledger_path: str, task="t", key="main"):
    with Ledger.open(ledger_path) as led:
        return led.node(task, key)


# ---------------------------------------------------------------------- park, resume
@pytest.mark.parametrize("how", ["task", "task-now", "node-now"])
def test_park_stops_the_process_group_and_resume_continues_it(ledger_path, workdir, runs_started, how):
    run = Run(ledger_path, workdir, TICKING)
    runs_started.append(run)
    pid = run.pid()
    wait_for(lambda: node(ledger_path).status == "running" and running(pid), 30, "running")
    with Ledger.open(ledger_path) as led:
        if how == "task":
            plan = led.plan_park("t", reason="waiting for the CI quota")
        elif how == "task-now":
            plan = led.plan_park("t", reason="stop now", now=True)
        else:
            plan = led.plan_park("t", node="main", reason="this node only", now=True)
        parked_at = time.monotonic()
        led.apply(plan, operator="op@test")
    wait_for(lambda: stopped(pid), NOTICE_S, "the command stopped (state T)")
    assert time.monotonic() - parked_at < stretch(NOTICE_S)
    log = workdir / "runs"
    ticks = lambda: sum(p.read_bytes().count(b"tick") for p in log.glob("*/output.log"))  # noqa: E731
    n = node(ledger_path)
    if how == "task":  # the task park keeps the lease: the supervisor goes on heartbeating
        assert n.status == "running" and n.lease_owner and n.lease_owner.startswith("run:")
        beat = n.heartbeat_at
        wait_for(lambda: node(ledger_path).heartbeat_at > beat, 10, "a heartbeat while parked")
    else:
        assert n.status == "parked"
    before = ticks()
    assert stopped(pid) and ticks() == before  # stopped: nothing more printed
    with Ledger.open(ledger_path) as led:
        led.apply(led.plan_resume("t", node="main" if how == "node-now" else None), operator="op@test")
    wait_for(lambda: running(pid), NOTICE_S, "the command continued")
    wait_for(lambda: ticks() > before + 3, 10, "more output after the resume")
    n = node(ledger_path)
    assert n.status == "running" and n.lease_owner.startswith("run:")
    apply(ledger_path, lambda led: led.plan_abort, task_id="t", reason="done with the test")
    assert run.wait() == 1 and "aborted: done with the test" in run.stderr


# ---------------------------------------------------------------------- abort
def test_abort_ends_the_whole_group_even_a_grandchild_that_ignores_sigterm(ledger_path, workdir, runs_started):
    script = ('(trap "" TERM; exec sleep 1000) & echo $! > gpid; '
              'sh -c \'echo $$ > cpid; while :; do sleep 0.05; done\' & '
              'echo $$ > pid; while :; do sleep 0.05; done')
    run = Run(ledger_path, workdir, script, grace="1")
    runs_started.append(run)
    pids = [run.pid(), run.pid("gpid"), run.pid("cpid")]
    wait_for(lambda: node(ledger_path).status == "running", 30, "running")
    assert not any(gone(p) for p in pids)
    apply(ledger_path, lambda led: led.plan_abort, task_id="t", reason="wrong branch")
    assert run.wait() == 1
    assert all(gone(p) for p in pids), [(p, state_of(p)) for p in pids]
    assert "aborted: wrong branch" in run.stderr
    n = node(ledger_path)
    assert n.status == "abandoned"
    [state] = [json.loads(p.read_text()) for p in (workdir / "runs").glob("*/state.json")]
    assert state["status"] == "interrupted" and state["why"] == "aborted: wrong branch"


# ---------------------------------------------------------------------- rewind
def test_rewind_restarts_the_command_with_the_reason(ledger_path, workdir, runs_started):
    script = ('echo "start:${WARDEN_REWIND_REASON-none}:$$" >> starts; '
              'while [ ! -e finish ]; do sleep 0.05; done; echo "finished on attempt $WARDEN_ATTEMPT"')
    run = Run(ledger_path, workdir, script)
    runs_started.append(run)
    starts = workdir / "starts"
    wait_for(lambda: starts.exists() and starts.read_text().count("\n") == 1, 30, "the first start")
    first = int(starts.read_text().split(":")[-1])
    wait_for(lambda: node(ledger_path).status == "running", 30, "running")
    reason = 'use the v2 API — "not v1"; $HOME stays literal'
    apply(ledger_path, lambda led: led.plan_rewind, task_id="t", node="main", reason=reason)
    wait_for(lambda: starts.read_text().count("\n") == 2, NOTICE_S + 5, "the second start")
    lines = starts.read_text().splitlines()
    assert lines[0] == f"start:none:{first}"
    assert lines[1].startswith(f"start:{reason}:")
    assert gone(first)
    (workdir / "finish").touch()
    assert run.wait() == 0, run.stderr
    n = node(ledger_path)
    assert n.status == "succeeded" and n.attempt == 2 and n.rejections == (reason,)
    assert n.output["last_lines"] == ["finished on attempt 2"]
    states = {p.parent.name: json.loads(p.read_text()) for p in (workdir / "runs").glob("*/state.json")}
    assert sorted(s["status"] for s in states.values()) == ["completed", "interrupted"]
    assert n.output["run"] in states and states[n.output["run"]]["status"] == "completed"


def test_a_rewind_while_the_task_is_parked_restarts_once_it_is_resumed(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    script = ('echo "start:${WARDEN_REWIND_REASON-none}" >> starts; echo $$ > pid; '
              'while [ ! -e finish ]; do sleep 0.05; done')
    spec = RunSpec(argv=("sh", "-c", script), task_id="t", lease_s=1.5, grace_s=2, runs=str(workdir / "runs"),
                   cwd=str(workdir), worker="run:test")
    outcome = {}
    with Ledger.open(ledger) as led:
        t = threading.Thread(target=lambda: outcome.update(o=Supervisor(led, spec, out=lambda b: None,
                                                                       say=lambda s: None).run()))
        t.start()
        starts = workdir / "starts"
        wait_for(lambda: starts.exists() and node(ledger).status == "running", 30, "the first start")
        pid = int(wait_for(lambda: (workdir / "pid").read_text().strip(), 10, "the pid"))
        led.apply(led.plan_park("t", reason="hold on"), operator="op")
        wait_for(lambda: stopped(pid), NOTICE_S, "stopped by the park")
        led.apply(led.plan_rewind("t", "main", reason="other approach"), operator="op")
        wait_for(lambda: gone(pid), NOTICE_S + 5, "the old command ended")
        assert starts.read_text().count("\n") == 1  # not restarted while the task is parked
        led.apply(led.plan_resume("t"), operator="op")
        wait_for(lambda: starts.read_text().count("\n") == 2, NOTICE_S + 5, "the restart after the resume")
        assert starts.read_text().splitlines()[1] == "start:other approach"
        (workdir / "finish").touch()
        t.join(60)
    assert outcome["o"].status == "committed" and outcome["o"].attempts == 2


def test_a_lease_that_ran_out_unclaimed_is_taken_back_and_the_command_goes_on(tmp_path, workdir):
    """The supervisor's heartbeats did not run for longer than the lease (a suspended machine, or a
    loaded one): nobody took the node meanwhile, so warden run takes it back and the command's
    success is committed — not "lost" with a commit refused. The ledger's clock jumps past the
    lease here, as a suspend makes it."""
    ledger = str(tmp_path / "l.db")
    script = 'echo $$ > pid; while [ ! -e finish ]; do sleep 0.05; done; echo done'
    spec = RunSpec(argv=("sh", "-c", script), task_id="t", lease_s=1.5, grace_s=2, runs=str(workdir / "runs"),
                   cwd=str(workdir), worker="run:test")
    jump = [0.0]
    outcome = {}
    with Ledger.open(ledger, clock=lambda: time.time() + jump[0]) as led:
        t = threading.Thread(target=lambda: outcome.update(o=Supervisor(led, spec, out=lambda b: None,
                                                                       say=lambda s: None).run()))
        t.start()
        try:
            wait_for(lambda: (workdir / "pid").exists() and node(ledger).status == "running", 30, "the command")
            first = node(ledger).claim_count
            jump[0] = 60.0  # past the 1.5 s lease: the next heartbeat finds it expired
            wait_for(lambda: taken_back(ledger), 30, "the node taken back")
        finally:
            (workdir / "finish").touch()  # the command ends whatever happened (the thread with it)
            t.join(60)
    assert outcome["o"].status == "committed", outcome["o"]
    n = node(ledger)
    assert n.status == "succeeded" and n.output["last_lines"][-1] == "done"
    assert (n.claim_count, n.attempt) == (first, 1)  # a renewal, not a new attempt: no claim spent


def taken_back(ledger: str) -> bool:
    with Ledger.open(ledger) as led:
        return any("lapsed_s" in e.payload for e in led.events(task_id="t"))


def test_steer_says_an_expired_lease_is_lost_even_while_the_node_is_still_ours_on_paper(tmp_path):
    from store import ManualClock
    from store.adapters.steering import steer

    clock = ManualClock(1_800_000_000.0)
    with Ledger.open(str(tmp_path / "l.db"), clock=clock) as led:
        led.create_task("t")
        led.add_node("t", "main")
        c = led.claim("t", "w", lease_s=1.5)
        assert steer(led, c).state == "running"
        clock.advance(2)
        st = steer(led, c)
        assert st.state == "lost" and "expired" in st.reason
        assert led.node("t", "main").status == "running"  # (nobody took it: lazily expired)


# ---------------------------------------------------------------------- how it ends on its own
# The supervisor in this process (the CLI's start-up is seconds on a busy machine), real children.
def supervise(ledger: str, workdir: Path, script: str = "", *, argv: list[str] | None = None, **kw):
    spec = RunSpec(argv=tuple(argv or ["sh", "-c", script]), task_id=kw.pop("task", "t"), lease_s=1.5, grace_s=2,
                   runs=str(workdir / "runs"), cwd=str(workdir), worker="run:test", **kw)
    said: list[str] = []
    printed: list[bytes] = []
    with Ledger.open(ledger) as led:
        outcome = Supervisor(led, spec, out=printed.append, say=said.append).run()
    return outcome, b"".join(printed), said


@pytest.mark.parametrize("script,code,failure_class,status", [
    ("echo bad; exit 3", 3, "transient", "pending"),          # retryable: pending with a back-off
    ("exit 127", 127, "spec", "failed"),                     # not found: retrying cannot help
    ("exit 64", 64, "spec", "failed"),                       # EX_USAGE
    ("exit 75", 75, "transient", "pending"),                 # EX_TEMPFAIL
    ("kill -9 $$", -9, "transient", "pending"),              # killed by a signal
])
def test_a_failing_command_fails_the_node_with_a_class(tmp_path, workdir, script, code, failure_class, status):
    ledger = str(tmp_path / "l.db")
    outcome, printed, _ = supervise(ledger, workdir, script)
    assert (outcome.status, outcome.exit_code) == ("failed", code)
    n = node(ledger)
    assert (n.status, n.failure_class) == (status, failure_class)
    assert failure_for(code) == (failure_class, status == "pending")
    if code == 3:
        assert printed == b"bad\n" and "last lines: bad" in n.error


def test_the_cli_exits_with_the_commands_status(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    run = Run(ledger, workdir, "echo out; echo err >&2; exit 7")
    assert run.wait() == 7
    assert (workdir / "run.out").read_bytes() == b"out\nerr\n"  # passed through, stderr merged
    assert "warden run: t/main failed: exit 7" in run.stderr
    run = Run(ledger, workdir, "kill -TERM $$", task="t2")
    assert run.wait() == 128 + 15


def test_a_command_that_cannot_start_is_a_spec_failure(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    outcome, _, _ = supervise(ledger, workdir, argv=["/nonexistent/agent-binary", "--flag"])
    assert (outcome.status, outcome.exit_code) == ("failed", 127)
    n = node(ledger)
    assert n.status == "failed" and n.failure_class == "spec" and "cannot start" in n.error


def test_stdin_is_never_attached(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    run = Run(ledger, workdir, 'cat; echo "stdin was closed"', stdin=subprocess.PIPE)  # our stdin stays open
    try:
        assert run.wait(60) == 0
    finally:
        run.proc.stdin.close()
    assert node(ledger).output["last_lines"] == ["stdin was closed"]


def test_output_lines_are_bounded_cleaned_observations(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    script = ("printf 'first\\n\\033[1;31mred\\033[0m\\n'; head -c 300000 /dev/zero | tr '\\0' x; echo; "
              "printf 'bidi \\342\\200\\256 kept\\n'; echo last")
    outcome, printed, _ = supervise(ledger, workdir, script)
    assert outcome.status == "committed"
    with Ledger.open(ledger) as led:
        text = "\n".join(o.text for o in led.observations("t", "main"))
        out = led.node("t", "main").output
    assert "first" in text and "red" in text and "\x1b" not in text
    assert "x" * 1000 + "…" in text and "x" * 1002 not in text  # one line cut to LINE_CAP
    assert "\u202e" in text  # kept as text; the console escapes it on display (tests/hostile)
    assert out["last_lines"][-1] == "last" and all(len(line) <= 1001 for line in out["last_lines"])
    log = next((workdir / "runs").glob("*/output.log")).read_bytes()
    assert log.count(b"x") == 300000 and b"\x1b[1;31m" in log and log == printed  # as printed


def test_a_flood_of_output_stays_bounded(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    t0 = time.monotonic()
    outcome, _, _ = supervise(ledger, workdir, "i=0; while [ $i -lt 20000 ]; do echo line $i; i=$((i+1)); done")
    took = time.monotonic() - t0
    assert outcome.status == "committed"
    with Ledger.open(ledger) as led:
        obs = led.observations("t", "main", limit=10_000)
    # In pieces, bounded: at most a piece per 500 lines of the flood, plus the heartbeats due by time
    # (one each lease_s / 3 = 0.5 s) that carried what had come since the one before. On an idle
    # machine the loop prints for a moment (a beat or two); on a loaded one the shell prints slower,
    # spread over more heartbeats: their number is counted from this run's own duration, not
    # assumed. How many pieces depends on how the flood and the loop interleave: one, when the loop
    # took the lines only as the flood ended (seen on a loaded machine; those past the bounds are
    # counted as left out) — the bound is the point.
    beats = took / 0.5 + 1
    assert 1 <= len(obs) <= 20000 // 500 + beats + 3, (len(obs), took)
    assert all(len(o.text) <= 4200 for o in obs)
    assert any("line 19999" in o.text for o in obs) and node(ledger).output["last_lines"][-1] == "line 19999"


def test_artifacts_are_taken_safely(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    script = ("mkdir -p out/sub && echo report > out/report.md && printf 'b\\0in' > out/sub/data.bin && "
              f"ln -s {secret} out/link.txt && mkfifo out/pipe && echo built")
    outcome, _, _ = supervise(ledger, workdir, script, artifacts="out")
    assert outcome.status == "committed"  # a FIFO among the artifacts never blocks the reading
    n = node(ledger)
    names = [a["name"] for a in n.output["artifacts"]]
    assert names == ["report.md", "sub/data.bin"]
    problems = " | ".join(n.output["artifact_problems"])
    assert "link.txt: symlink, not followed" in problems and "pipe: a fifo" in problems
    rundir = workdir / "runs" / n.output["run"]
    manifest = json.loads((rundir / "artifact" / "manifest.json").read_text())
    assert set(manifest["files"]) == {"report.md", "sub/data.bin"}
    assert (rundir / "artifact" / "sub" / "data.bin").read_bytes() == b"b\0in"
    assert not (rundir / "artifact" / "link.txt").exists()
    assert n.output_ref == f"run:{rundir.name}/artifact/report.md"


def test_one_artifact_is_exported_from_the_ledger(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    outcome, _, _ = supervise(ledger, workdir, "mkdir out && echo 'the answer' > out/answer.txt", artifacts="out")
    assert outcome.status == "committed"
    with Ledger.open(ledger) as led:
        art, data = led.latest_artifact("t")
    assert (art.name, data) == ("answer.txt", b"the answer\n")


def test_a_claude_stream_reports_actions_tokens_and_cost(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    outcome, _, _ = supervise(ledger, workdir, argv=["cat", str(FIXTURES / "claude_stream.jsonl")],
                              json_stream="claude")
    assert outcome.status == "committed"
    with Ledger.open(ledger) as led:
        n = led.node("t", "main")
        text = all_said(led.observations("t", "main"))
        assert led.task("t").tokens_used == 8545 == n.tokens_used
    assert n.output["final"] == "Fixed: x is 2 now and all 44 tests pass." and n.output["cost_usd"] == 0.0421
    assert "Bash" in text and "44 passed in 2.02s" in text


def test_a_codex_stream_reports_progress(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    outcome, _, _ = supervise(ledger, workdir, argv=["cat", str(FIXTURES / "codex_exec.jsonl")], json_stream="codex")
    assert outcome.status == "committed"
    n = node(ledger)
    assert (n.units_done, n.units_total) == (3.0, 3.0) and n.tokens_used == 24885
    assert n.output["final"] == "Fixed the parser in src/parser.py; the 12 tests pass."


def test_a_node_that_cannot_be_claimed_starts_nothing(tmp_path, workdir):
    ledger = str(tmp_path / "l.db")
    assert supervise(ledger, workdir, "echo once >> ran")[0].status == "committed"
    outcome, _, _ = supervise(ledger, workdir, "echo twice >> ran")
    assert outcome.status == "refused" and "already succeeded: rewind it to run it again" in outcome.detail
    assert (workdir / "ran").read_text() == "once\n"
    with Ledger.open(ledger) as led:
        led.create_task("held")
        led.add_node("held", "main")
        led.claim("held", "someone-else", lease_s=600)
    outcome, _, _ = supervise(ledger, workdir, "echo held >> ran", task="held")
    assert outcome.status == "refused" and "someone-else" in outcome.detail
    assert (workdir / "ran").read_text() == "once\n"


def test_stopping_warden_run_ends_the_command_and_leaves_the_node_to_retry(tmp_path, workdir, runs_started):
    ledger = str(tmp_path / "l.db")
    run = Run(ledger, workdir, TICKING, grace="5")
    runs_started.append(run)
    pid = run.pid()
    wait_for(lambda: node(ledger).status == "running", 30, "running")
    run.proc.send_signal(signal.SIGTERM)
    assert run.wait() == 130
    assert gone(pid)
    n = node(ledger)
    assert n.status == "pending" and n.failure_class == "transient" and "SIGTERM" in n.error


def test_the_run_directory_is_recorded_for_recovery(tmp_path, workdir, capsys):
    from console.cli import main as warden

    ledger = str(tmp_path / "l.db")
    assert supervise(ledger, workdir, "exit 5")[0].status == "failed"
    with Ledger.open(ledger) as led:
        notes = [e.summary for e in led.events(task_id="t") if e.kind == "node.note"]
    [run_id] = [p.name for p in (workdir / "runs").iterdir()]
    assert any(f"run directory {run_id}" in s for s in notes)
    assert warden(["recover", run_id, "--runs", str(workdir / "runs"), "--json"]) == 1
    rec = json.loads(capsys.readouterr().out)
    assert rec["run"] == run_id and rec["decision"] == "unsupported_state"  # failed: nothing to reuse


@pytest.mark.parametrize("size", [LINE_READ_CAP + 1, 300_000, 5 * LINE_READ_CAP + 17])
def test_a_line_longer_than_the_read_cap_is_one_cut_line(size):
    """However many reads a long line takes, it reaches the heartbeat as one line ending in
    "[line cut]", and the lines around it arrive whole and in order."""
    script = f"echo before; head -c {size} /dev/zero | tr '\\0' x; echo; echo after"
    child = Child(["/bin/sh", "-c", script], cwd=None, env=dict(os.environ), sink=lambda _: None).start()
    got = []
    while (line := child.lines.get(timeout=60)) is not None:
        got.append(line)
    assert child.wait(60) == 0
    child.close()
    assert [g[:6] for g in got] == [b"before", b"x" * 6, b"after"]
    assert got[1] == b"x" * LINE_READ_CAP + b" [line cut]"


@pytest.mark.parametrize("seed", range(40))
def test_long_lines_are_cut_once_whatever_the_reads_boundaries(seed):
    """Output split into reads at random places (a pipe gives no promise where): every line over
    the cap comes out as exactly its first LINE_READ_CAP bytes and " [line cut]", the others whole,
    in order — including a read that takes a line past the cap and brings its newline too."""
    from store.adapters.process import split_lines

    rng = random.Random(seed)
    sizes = [rng.choice([0, 1, LINE_READ_CAP - 1, LINE_READ_CAP, LINE_READ_CAP + 1, LINE_READ_CAP + 2,
                         rng.randrange(1, 3 * LINE_READ_CAP)]) for _ in range(rng.randrange(1, 8))]
    lines = [bytes([97 + i % 26]) * n for i, n in enumerate(sizes)]
    data = b"".join(line + b"\n" for line in lines)
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randrange(0, 12)))) if len(data) > 1 else []
    if rng.random() < 0.5 and LINE_READ_CAP + 1 < len(data):  # a read ending right past the cap
        cuts = sorted({*cuts, LINE_READ_CAP + 1})
    got: list[bytes] = []
    partial, cut = b"", False
    for a, b in zip([0, *cuts], [*cuts, len(data)]):
        out, partial, cut = split_lines(partial, data[a:b], cut)
        got += out
    assert partial == b"" and not cut
    want = [line[:LINE_READ_CAP] + b" [line cut]" if len(line) > LINE_READ_CAP else line for line in lines]
    assert got == want

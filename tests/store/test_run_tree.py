"""``warden run``: park and abort reach every process the command started, whatever session or
group it moved them to, and the command never outlives its supervisor (store/adapters/keeper.py,
store/adapters/proctree.py, store/adapters/leftovers.py).

The commands here start children that ``setsid`` and double-fork; each process appends to a
counter file of its own, so "nothing of it runs" is measured as counters that do not move.
Each containment the machine offers is tested (``WARDEN_RUN_CONTAINMENT``): the cgroup v2, the
v1 freezer, and the process tree under the keeper (always there).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from store import Ledger
from store.adapters.proctree import Cgroup, descendants
from tests.store.test_run_command import Run, apply, node, wait_for
from tests.support.procstate import gone, running, state_of, stopped

NOTICE_S = 8.0

# The command: itself, a child in a new session, and a double-forked grandchild (its parent ends
# at once, so it is handed to the keeper), each counting in its own file.
FAMILY = (
    'echo $$ > m.pid; '
    "setsid sh -c 'echo $$ > s.pid; while :; do echo x >> s.cnt; sleep 0.05; done' & "
    "sh -c '(sh -c \"echo \\$\\$ > d.pid; while :; do echo x >> d.cnt; sleep 0.05; done\" &)'; "
    'while :; do echo x >> m.cnt; sleep 0.05; done'
)
NAMES = ("m", "s", "d")


def _available(kind: str) -> bool:
    if kind == "tree":
        return True
    cg = Cgroup.make(f"probe.{os.getpid()}", kind)
    if cg is None:
        return False
    cg.remove()
    return True


CONTAINMENTS = [pytest.param(k, marks=pytest.mark.skipif(not _available(k), reason=f"no usable {k} here"))
                for k in ("cgroup2", "freezer", "tree")]


@pytest.fixture(params=CONTAINMENTS)
def containment(request, monkeypatch):
    monkeypatch.setenv("WARDEN_RUN_CONTAINMENT", request.param)
    return request.param


def counts(cwd: Path) -> dict[str, int]:
    return {n: (cwd / f"{n}.cnt").stat().st_size if (cwd / f"{n}.cnt").exists() else 0 for n in NAMES}


def family(run: Run) -> list[int]:
    return [run.pid(f"{n}.pid") for n in NAMES]


def all_counting(cwd: Path, before: dict[str, int]) -> bool:
    now = counts(cwd)
    return all(now[n] > before[n] for n in NAMES)


def keeper_of(run: Run) -> int:
    for pid in descendants(run.proc.pid):
        try:
            if b"keeper.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            pass
    raise AssertionError("no keeper below warden run")


def family_counting(tmp_path: Path, runs_started: list, *flags: str) -> tuple[str, Path, Run, list[int]]:
    """``warden run`` over FAMILY in tmp_path/w, once every process of the family counts: (the
    ledger, the working directory, the run, the family's pids)."""
    ledger = str(tmp_path / "l.db")
    cwd = tmp_path / "w"
    cwd.mkdir()
    run = Run(ledger, cwd, FAMILY, *flags, grace="1")
    runs_started.append(run)
    pids = family(run)
    wait_for(lambda: all_counting(cwd, {n: 0 for n in NAMES}), 30, "every process counting")
    return ledger, cwd, run, pids


def test_park_stops_every_process_and_abort_leaves_none(tmp_path, containment, runs_started):
    ledger, cwd, run, pids = family_counting(tmp_path, runs_started)
    sessions = {Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[3] for p in pids}
    assert len(sessions) >= 2  # the setsid child is in a session of its own
    apply(ledger, lambda led: led.plan_park, task_id="t", node="main", reason="look first", now=True)
    wait_for(lambda: all(stopped(p) for p in pids), NOTICE_S, "every process stopped")
    before = counts(cwd)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # a measured window: nothing may count during it
        assert counts(cwd) == before
        time.sleep(0.05)
    apply(ledger, lambda led: led.plan_resume, task_id="t", node="main")
    wait_for(lambda: all_counting(cwd, before), NOTICE_S + 5, "every process counting again")
    assert all(running(p) or state_of(p) == "S" for p in pids)
    apply(ledger, lambda led: led.plan_abort, task_id="t", reason="enough")
    assert run.wait() == 1
    assert all(gone(p) for p in pids), [(p, state_of(p)) for p in pids]
    err = run.stderr
    assert "warden run: parked by op@test: look first" in err
    assert "warden run: resumed by op@test" in err
    assert "warden run: aborted by op@test: enough" in err


def test_a_command_that_ends_leaves_nothing_and_a_grandchild_holding_stdout_does_not_fail_it(tmp_path, containment):
    ledger = str(tmp_path / "l.db")
    cwd = tmp_path / "w"
    cwd.mkdir()
    script = ("setsid sh -c 'echo $$ > g.pid; exec sleep 300' & "  # keeps stdout open, another session
              "while [ ! -s g.pid ]; do sleep 0.01; done; echo done")
    run = Run(ledger, cwd, script, grace="1")
    started = time.monotonic()
    assert run.wait(60) == 0, run.stderr
    took = time.monotonic() - started
    assert gone(int((cwd / "g.pid").read_text()))
    n = node(ledger)
    assert n.status == "succeeded" and n.output["last_lines"] == ["done"]
    assert took < 30  # not held by the grandchild's open stdout (a loaded machine starts Python slowly)


@pytest.mark.parametrize("parked", [False, True], ids=["running", "parked"])
def test_a_killed_supervisor_takes_the_command_with_it(tmp_path, containment, runs_started, parked):
    # --lease 6: the keeper loads the store within the lease
    ledger, cwd, run, pids = family_counting(tmp_path, runs_started, "--lease", "6")
    if parked:
        apply(ledger, lambda led: led.plan_park, task_id="t", reason="hold", now=True)
        wait_for(lambda: all(stopped(p) for p in pids), NOTICE_S, "every process stopped")
    keeper = keeper_of(run)
    run.proc.kill()
    run.wait()
    wait_for(lambda: all(gone(p) for p in pids) and gone(keeper), 30, "the command ended by its keeper")
    with Ledger.open(ledger) as led:
        events = led.events(task_id="t")
        n = led.node("t", "main")
    [state] = [json.loads(p.read_text()) for p in (cwd / "runs").glob("*/state.json")]
    assert state["status"] == "interrupted" and "supervisor" in state["why"]
    if parked:  # the park revoked the lease: nothing to fail, the node stays parked
        assert n.status == "parked"
    else:
        failed = [e for e in events if e.kind == "node.failed"]
        assert failed and "supervisor" in failed[-1].payload["error"] and "keeper ended" in failed[-1].payload["error"]
        assert n.status == "pending"  # retryable at once: not waiting for the lease to run out


def test_a_new_run_ends_what_a_dead_supervisor_and_keeper_left_before_it_starts(tmp_path, containment, runs_started):
    ledger, cwd, run, pids = family_counting(tmp_path, runs_started)
    keeper = keeper_of(run)
    os.kill(keeper, signal.SIGKILL)  # both at once: nobody is left to end the command
    run.proc.kill()
    run.wait()
    assert not any(gone(p) for p in pids)  # orphaned, still running
    wait_for(lambda: node(ledger).status != "running" or node(ledger).lease_until < time.time(), 30,
             "the lease ran out")
    marker = cwd / "second"
    second = Run(ledger, cwd, f'echo started > {marker.name}; exit 0', grace="1")
    runs_started.append(second)
    assert second.wait(60) == 0, second.stderr
    assert all(gone(p) for p in pids), [(p, state_of(p)) for p in pids]
    with Ledger.open(ledger) as led:
        notes = [e.summary for e in led.events(task_id="t") if e.kind == "node.note"]
    assert any("of the previous attempt" in s and "ended before this attempt started" in s for s in notes), notes
    assert "ended them before starting" in second.stderr


# ---------------------------------------------------------------------- kill -9 at random moments
# The command holds a lock on copy.lock in every process it starts (an inherited descriptor): a
# copy that starts while anything of an earlier one lives cannot take it and says so. Each kill
# comes at a random moment: while running (often inside one of the supervisor's heartbeats: a
# lease of 0.6 s beats every 0.2 s), or parked (every process stopped).
COPY = ('exec 9>>copy.lock; flock -n 9 || echo "$WARDEN_NODE" >> two-copies; echo $$ > "$WARDEN_NODE.pid"; '
        "setsid sh -c 'while :; do sleep 0.05; done' & (sh -c 'while :; do sleep 0.05; done' &); "
        'while :; do echo tick; sleep 0.02; done')
KILLS = 100
PARTS = 4


def _carrying(task: str) -> list[int]:
    needle = f"WARDEN_TASK={task}".encode()
    out = []
    for e in os.listdir("/proc"):
        try:
            if e.isdigit() and needle in Path(f"/proc/{e}/environ").read_bytes().split(b"\0") and not gone(int(e)):
                out.append(int(e))
        except OSError:
            pass
    return out


@pytest.mark.slow
@pytest.mark.parametrize("part", range(PARTS))
def test_kill_9_of_the_supervisor_at_random_moments_leaves_nothing(tmp_path, part, runs_started):
    import random

    rng = random.Random(part)
    ledger = str(tmp_path / "l.db")
    cwd = tmp_path / "w"
    cwd.mkdir()
    task = f"k{part}"
    took: list[float] = []
    for i in range(KILLS // PARTS):
        key = f"n{i}"
        run = Run(ledger, cwd, COPY, "--lease", "0.6", task=task, node=key, grace="0.5")
        runs_started.append(run)
        pid = run.pid(f"{key}.pid")
        if rng.random() < 1 / 3:
            apply(ledger, lambda led: led.plan_park, task_id=task, node=key, reason="park then kill", now=True)
            wait_for(lambda: stopped(pid), NOTICE_S, "parked")
        time.sleep(rng.uniform(0, 0.6))  # the random moment of the kill
        run.proc.kill()
        run.wait()
        t0 = time.monotonic()
        wait_for(lambda: not _carrying(task), 30, f"nothing left after kill {i}")
        took.append(time.monotonic() - t0)
        if node(ledger, task=task, key=key).status == "parked":
            apply(ledger, lambda led: led.plan_resume, task_id=task, node=key)
    assert not (cwd / "two-copies").exists(), (cwd / "two-copies").read_text()
    print(f"\n{KILLS // PARTS} kills: everything ended within {max(took):.2f}s (median "
          f"{sorted(took)[len(took) // 2]:.2f}s)", file=sys.stderr)


# ---------------------------------------------------------------------- kill -9 at a take-back
# The supervisor stopped past its lease (a suspended machine), then killed at its take-back of the
# lapsed lease (tests/support/hang_at.py): inside the renewal's transaction (rolled back: the keeper
# holds the token the ledger still has), or just after it committed (the keeper holds the old token;
# the node keeps the renewed lease until it lapses). Either way the keeper ends the command, and a
# new warden run of the node runs it once — never beside a copy of the first — and finishes it.
@pytest.mark.parametrize("point", ["renewal", "renewed"])
def test_kill_9_of_the_supervisor_at_its_take_back_runs_no_second_copy_and_wedges_nothing(tmp_path, point,
                                                                                         runs_started):
    ledger = str(tmp_path / "l.db")
    cwd = tmp_path / "w"
    cwd.mkdir()
    task = f"tb{os.getpid()}{point}"
    marker = tmp_path / "there"
    run = Run(ledger, cwd, COPY, task=task, grace="0.5",
              warden=("-m", "tests.support.hang_at", str(marker), point))
    runs_started.append(run)
    run.pid("main.pid")
    os.kill(run.proc.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: node(ledger, task=task).lease_until < time.time(), 30, "the lease lapsed")
    finally:
        os.kill(run.proc.pid, signal.SIGCONT)
    wait_for(marker.exists, 30, f"the supervisor at its take-back ({point})")
    run.proc.kill()
    run.wait()
    wait_for(lambda: not _carrying(task), 30, "the command ended by its keeper")
    with Ledger.open(ledger) as led:
        renewed = [e for e in led.events(task_id=task) if "lapsed_s" in e.payload]
    assert len(renewed) == (point == "renewed")  # killed inside the transaction: nothing of it committed
    wait_for(lambda: node(ledger, task=task).status != "running" or node(ledger, task=task).lease_until < time.time(),
             30, "the node claimable again")
    second = Run(ledger, cwd, 'exec 9>>copy.lock; flock -n 9 || echo "$WARDEN_NODE" >> two-copies; echo done',
                 task=task, grace="0.5")
    runs_started.append(second)
    assert second.wait(60) == 0, second.stderr
    assert not (cwd / "two-copies").exists(), (cwd / "two-copies").read_text()
    n = node(ledger, task=task)
    assert n.status == "succeeded" and n.output["last_lines"] == ["done"], (n.status, n.output)

"""Stopping a supervised process never stops the ledger (store/storage/stopguard.py): a park waits for
the command's writes under way, and nothing of it is stopped holding the write gate, SQLite's
write lock or a PostgreSQL transaction. Both backends.

The end-to-end test parks and resumes (the operator's task park, through the ledger) a
``warden run`` whose command writes to the same ledger in a tight loop, 100 times; at each park
another writer and the resume itself must go through within the busy timeout.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple

import pytest

from store import Ledger
from store.storage.db import write_tx
from store.errors import LedgerBusy
from store.storage.stopguard import ENV, StopGuard
from tests.store.test_run_command import Run, node, wait_for
from tests.support.procstate import running, stopped
from tests.support.waiting import stretch

BUSY_S = 5.0  # the other writers' busy timeout (the default is 30 s)
CYCLES = 100

WRITER = """
import os, sys
from store import Ledger
led = Ledger.open(sys.argv[1], busy_timeout_s=60)
led.create_task("side", title="the command's own work", exist_ok=True)
led.add_node("side", "n%d" % os.getpid(), kind="x", title="x")
claim = led.claim("side", "writer-%d" % os.getpid(), lease_s=3600, key="n%d" % os.getpid())
open("writer.pid", "w").write(str(os.getpid()))
i = 0
while True:
    led.heartbeat(claim, observation="write %d" % i)
    i += 1
    if i % 50 == 0:
        with open("writes.tmp", "w") as f:
            f.write(str(i))
        os.replace("writes.tmp", "writes")
"""


@pytest.fixture
def guard(monkeypatch):
    g = StopGuard()
    monkeypatch.setenv(ENV, g.env_value(None))
    yield g
    g.close()


def test_a_stop_waits_for_the_write_under_way_and_holds_new_ones_back(ledger_path, guard):
    with Ledger.open(ledger_path) as led:
        led.create_task("t", title="t")
    inside, release, written = threading.Event(), threading.Event(), threading.Event()

    def long_write() -> None:
        with Ledger.open(ledger_path) as led:
            with write_tx(led.db):
                inside.set()
                release.wait(30)

    w = threading.Thread(target=long_write)
    w.start()
    assert inside.wait(30)
    assert guard.writing_now()
    got: list[bool] = []
    stopper = threading.Thread(target=lambda: got.append(_hold(guard, written)))
    stopper.start()
    time.sleep(0.3)  # a window in which the stop must still be waiting
    assert not got
    release.set()
    w.join(30)
    stopper.join(30)
    assert got == [True]  # had once the write ended; the late write waited for the stop to let go
    assert written.wait(30)


def _hold(guard: StopGuard, written: threading.Event) -> bool:
    with guard.exclusive(20) as ok:
        # a write starting now waits for the guard (it is the stop's turn)
        t = threading.Thread(target=_late_write_into, args=(written,))
        t.start()
        time.sleep(0.3)  # the write must not get through while the guard is held
        held_back = not written.is_set()
    t.join(30)
    return ok and held_back


_PATH: list[str] = []


def _late_write_into(written: threading.Event) -> None:
    with Ledger.open(_PATH[0]) as led:
        led.create_task(f"late{time.monotonic_ns()}", title="late")
    written.set()


@pytest.fixture(autouse=True)
def _remember(ledger_path):
    _PATH[:] = [ledger_path]


def test_a_guard_not_had_in_time_is_busy(ledger_path, guard):
    # The busy timeout stretches with the load: opening a ledger on a busy shared server waits for
    # its own locks, and that wait is not what is tested here.
    with Ledger.open(ledger_path, busy_timeout_s=stretch(0.5)) as led:
        with guard.exclusive(5) as ok:
            assert ok
            started = time.monotonic()
            with pytest.raises(LedgerBusy):
                led.create_task("t", title="t")
            assert time.monotonic() - started < stretch(5)  # the busy timeout, not the guard's hold
        led.create_task("t", title="t")  # the guard let go: the write goes through


def test_without_a_guard_in_the_environment_writes_are_untouched(ledger_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with Ledger.open(ledger_path) as led:
        led.create_task("t", title="t")
    monkeypatch.setenv(ENV, "/nonexistent/guard")  # the supervisor is gone: no guard, no wait
    with Ledger.open(ledger_path, busy_timeout_s=0.5) as led:
        led.create_task("t2", title="t2")


class Writer(NamedTuple):
    run: Run
    pid: int
    count: Callable[[], int]
    cwd: Path


def writing(ledger_path: str, tmp_path: Path, runs_started: list, lease: str = "30") -> Writer:
    """``warden run`` over WRITER (ledger writes in a tight loop, counted in ./writes), once the
    command has written 50 times."""
    cwd = tmp_path / "w"
    cwd.mkdir()
    (cwd / "writer.py").write_text(WRITER)
    run = Run(ledger_path, cwd, "", "--lease", lease, grace="2", argv=[sys.executable, "writer.py", ledger_path])
    runs_started.append(run)
    pid = run.pid("writer.pid")
    writes = cwd / "writes"

    def count() -> int:
        return int(writes.read_text() or 0) if writes.exists() else 0

    wait_for(lambda: count() >= 50 and node(ledger_path).status == "running", 60, "the command writing")
    return Writer(run, pid, count, cwd)


@pytest.mark.slow
def test_a_command_writing_in_a_tight_loop_parked_and_resumed_100_times(ledger_path, tmp_path, runs_started):
    # a short lease (many beats around each park), stretched by the load: a lease that lapses while
    # parked is taken back (a renewal: no claim spent from max_claims)
    run, pid, count, cwd = writing(ledger_path, tmp_path, runs_started, lease=f"{stretch(0.6):.2f}")
    other = Ledger.open(ledger_path, busy_timeout_s=BUSY_S)
    waits: list[float] = []
    try:
        for i in range(CYCLES):
            t0 = time.monotonic()
            other.apply(other.plan_park("t", reason=f"cycle {i}"), operator="op@test")
            waits.append(time.monotonic() - t0)
            wait_for(lambda: stopped(pid), 30, f"the command stopped (cycle {i})")
            t0 = time.monotonic()
            other.create_task(f"other{i}", title="another writer while the command is stopped")
            waits.append(time.monotonic() - t0)
            t0 = time.monotonic()
            other.apply(other.plan_resume("t"), operator="op@test")
            waits.append(time.monotonic() - t0)
            before = count()
            wait_for(lambda: running(pid) and count() > before, 30, f"the command writing again (cycle {i})")
    finally:
        other.close()
    assert max(waits) < BUSY_S, max(waits)  # never LedgerBusy (which would have raised), never near it
    Path(cwd / "figures").write_text(f"{CYCLES} cycles; longest other write {max(waits):.3f}s\n")
    run.proc.send_signal(signal.SIGINT)
    assert run.wait(60) == 130
    print(f"\n{CYCLES} park/resume cycles, longest other write or action {max(waits) * 1000:.0f} ms, "
          f"writes by the command {count()}", file=sys.stderr)


def test_warden_run_ctrl_z_stops_the_command_between_its_writes(ledger_path, tmp_path, runs_started):
    """A terminal's ctrl+z (SIGTSTP to warden run) stops the command and warden run itself, neither
    inside a write: another writer goes on; ``fg`` (SIGCONT) continues both."""
    run, pid, count, _ = writing(ledger_path, tmp_path, runs_started)
    with Ledger.open(ledger_path, busy_timeout_s=BUSY_S) as other:
        for i in range(10):
            run.proc.send_signal(signal.SIGTSTP)
            wait_for(lambda: stopped(pid) and stopped(run.proc.pid), 30, "both stopped")
            other.create_task(f"z{i}", title="written while warden run is suspended")
            run.proc.send_signal(signal.SIGCONT)
            before = count()
            wait_for(lambda: count() > before, 30, "writing again")
    run.proc.send_signal(signal.SIGINT)
    assert run.wait(60) == 130
    assert run.stderr.count("warden run: suspended (ctrl+z)") == 10


def test_a_writer_stopped_by_someone_else_mid_write_is_let_finish(ledger_path, tmp_path, runs_started):
    """``kill -STOP`` straight to the command while it writes: warden run continues it until the
    write is done, then stops it again; other writers go on."""
    run, pid, count, _ = writing(ledger_path, tmp_path, runs_started)
    waits = []
    with Ledger.open(ledger_path, busy_timeout_s=BUSY_S) as other:
        for i in range(20):
            os.kill(pid, signal.SIGSTOP)
            wait_for(lambda: stopped(pid), 30, "stopped")
            t0 = time.monotonic()
            other.create_task(f"s{i}", title="written while the command is stopped")
            waits.append(time.monotonic() - t0)
            # the stop stands, with no write under way: re-applied once the write was done
            wait_for(lambda: stopped(pid) and not guard_held(pid), 30, "stopped again, outside a write")
            os.kill(pid, signal.SIGCONT)
            before = count()
            wait_for(lambda: count() > before, 30, "writing again")
    assert max(waits) < BUSY_S
    run.proc.send_signal(signal.SIGINT)
    assert run.wait(60) == 130


def guard_held(pid: int) -> bool:
    """Whether a write of the command is under way (its guard, named in its environment, is held)."""
    env = dict(kv.split(b"=", 1) for kv in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in kv)
    guard = StopGuard.__new__(StopGuard)
    guard.path = env[ENV.encode()].decode().split(":")[-1]
    return guard.writing_now()


def test_the_guard_costs_little_per_write(ledger_path, guard, monkeypatch):
    """Four flock calls and two opens a write: measured against the same writes without a guard."""
    def timed(n: int) -> float:
        with Ledger.open(ledger_path) as led:
            led.create_task("c", title="c", exist_ok=True)
            t0 = time.perf_counter()
            for i in range(n):
                led.create_task(f"c{i}-{time.monotonic_ns()}", title="c")
            return time.perf_counter() - t0
    timed(10)  # warm: the first writes of a connection pay for more than the guard
    with_guard, without = [], []
    for _ in range(3):  # alternated, the best of each: the machine's load is the noise here
        monkeypatch.setenv(ENV, guard.env_value(None))
        with_guard.append(timed(30))
        monkeypatch.delenv(ENV)
        without.append(timed(30))
    assert min(with_guard) < min(without) * 2 + 0.2  # not a benchmark: a guard that blocked would show here

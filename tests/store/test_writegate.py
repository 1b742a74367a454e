"""SQLite writers queue at the write gate (store/storage/writegate.py) — with real processes.

A process holding ``<ledger>-writers`` holds back every Warden write to that ledger until it lets
go; one that holds it past ``busy_timeout_s`` makes a write ``LedgerBusy`` (nothing written) and
the abandoned wait never keeps the gate; a gate that cannot be a plain file (a symlink, a FIFO, a
read-only directory) leaves writing as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from store import Ledger, NodeSpec
from store.errors import LedgerBusy
from store.storage.writegate import GATE_SUFFIX
from tests.support.waiting import Deadline

HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()
"""

PROBE = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("taken")
"""


def _hold(gate: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, gate], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _release(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None
    p.stdin.write("go\n")
    p.stdin.close()
    assert p.wait(30) == 0


def _probe(gate: str) -> str:
    return subprocess.run([sys.executable, "-c", PROBE, gate], capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()


@pytest.fixture
def led(tmp_path):
    led = Ledger.open(str(tmp_path / "l.db"), busy_timeout_s=30)
    led.create_task("t")
    led.add_nodes("t", [NodeSpec(f"n{i}") for i in range(3)])
    yield led
    led.close()


def test_a_write_waits_for_the_process_holding_the_gate_then_goes(led, tmp_path):
    gate = str(tmp_path / "l.db") + GATE_SUFFIX
    assert os.path.isfile(gate)  # made by the first write
    holder = _hold(gate)
    done = threading.Event()
    got: list[object] = []

    def write() -> None:
        got.append(led.claim("t", "w"))
        done.set()

    earlier = {th for th in threading.enumerate() if th.name == "warden-write-gate"}
    t = threading.Thread(target=write)
    t.start()
    try:
        # the write queues: its wait for the gate runs in a helper thread (a condition, not a sleep)
        deadline = Deadline(30)
        while not any(th.name == "warden-write-gate" and th not in earlier for th in threading.enumerate()):
            assert not deadline.expired(), "the write never queued at the gate"
            time.sleep(0.005)
        assert not done.is_set(), "the write went through a held gate"
        assert [e.kind for e in led.events(0, task_id="t")].count("node.claimed") == 0
    finally:
        _release(holder)
    assert done.wait(30)
    t.join(30)
    assert got and got[0] is not None and got[0].node_key == "n0"
    assert _probe(gate) == "free"  # let go when the transaction ended


def test_a_gate_held_past_the_busy_timeout_is_ledger_busy_and_nothing_is_written(tmp_path):
    path = str(tmp_path / "l.db")
    with Ledger.open(path) as setup:
        setup.create_task("t")
        setup.add_nodes("t", [NodeSpec("a")])
    led = Ledger.open(path, busy_timeout_s=0.3)
    holder = _hold(path + GATE_SUFFIX)
    try:
        for _ in range(3):  # an agent retrying: its waits are taken over, not piled up
            with pytest.raises(LedgerBusy, match=r"is busy: .*0\.3s \(busy_timeout_s\); nothing was written"):
                led.claim("t", "w")
        assert sum(t.name == "warden-write-gate" for t in threading.enumerate()) == 1
        before = led.last_event_id()
    finally:
        _release(holder)
    # the abandoned wait got the gate when the holder let go, and let it go at once
    c = led.claim("t", "w")
    assert c is not None and c.node_key == "a"
    assert led.events(before, task_id="t")[0].kind == "node.claimed"
    assert _probe(path + GATE_SUFFIX) == "free"
    led.close()


@pytest.mark.parametrize("what", ["symlink", "fifo", "directory"])
def test_a_gate_that_cannot_be_a_plain_file_leaves_writing_as_it_was(tmp_path, what):
    path = str(tmp_path / "l.db")
    gate = path + GATE_SUFFIX
    elsewhere = tmp_path / "elsewhere"
    if what == "symlink":
        os.symlink(elsewhere, gate)
    elif what == "fifo":
        os.mkfifo(gate)
    else:
        os.mkdir(gate)
    with Ledger.open(path) as led:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec("a")])
        c = led.claim("t", "w")
        led.commit(c, output={"ok": True})
        assert led.task("t").status == "completed"
    assert not elsewhere.exists()  # a link is never followed


def test_writers_of_two_processes_and_two_ledgers_each_all_land(tmp_path):
    """4 writers (2 processes × 2 Ledgers on threads) drain 200 nodes: every node committed once."""
    path = str(tmp_path / "l.db")
    with Ledger.open(path) as led:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec(f"n{i:03d}") for i in range(200)])
    worker = r"""
import sys, threading
from store import Ledger
def drain(name):
    led = Ledger.open(sys.argv[1], busy_timeout_s=60)
    while (c := led.claim("t", name)) is not None:
        led.commit(c, output={"by": name})
    led.close()
ts = [threading.Thread(target=drain, args=(f"{sys.argv[2]}-{i}",)) for i in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
"""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root)
    procs = [subprocess.Popen([sys.executable, "-c", worker, path, f"p{i}"], env=env) for i in range(2)]
    assert [p.wait(120) for p in procs] == [0, 0]
    with Ledger.open(path) as led:
        committed = [e.node for e in led.events(0, task_id="t", limit=10_000) if e.kind == "node.committed"]
        assert sorted(committed) == [f"n{i:03d}" for i in range(200)]
        assert led.task("t").status == "completed"


def test_a_ledger_at_rest_is_one_file_again(tmp_path):
    """The last Ledger to close (SQLite removed the -wal) removes the gate; one still open keeps it."""
    path = str(tmp_path / "l.db")
    a = Ledger.open(path)
    a.create_task("t")
    b = Ledger.open(path)
    b.create_task("u")
    b.close()
    assert os.path.exists(path + GATE_SUFFIX)  # a is still open: the gate stays
    a.close()
    assert sorted(os.listdir(tmp_path)) == ["l.db"]


@pytest.mark.parametrize("then", ["a refused write", "a read", "a write"])
def test_only_a_ledger_that_wrote_tidies_a_gate_it_found(tmp_path, then):
    """A gate left by another run (a process killed mid-run) stays where a Ledger only failed or
    read — a bad command changes nothing — and goes with the last Ledger that wrote through it."""
    from store.errors import NotFound

    path = str(tmp_path / "l.db")
    with Ledger.open(path) as led:
        led.create_task("t")
    assert sorted(os.listdir(tmp_path)) == ["l.db"]
    with open(path + GATE_SUFFIX, "w"):
        pass  # left behind by someone else
    with Ledger.open(path) as led:
        if then == "a refused write":
            with pytest.raises(NotFound):
                led.claim("nope", "w")
        elif then == "a read":
            assert [t.task_id for t in led.tasks()] == ["t"]
        else:
            led.create_task("u")
    want = ["l.db"] if then == "a write" else ["l.db", "l.db" + GATE_SUFFIX]
    assert sorted(os.listdir(tmp_path)) == want


@pytest.mark.parametrize("made", ["a plain file", "a symlink", "a FIFO"])
def test_a_writer_that_loses_the_race_to_make_the_gate_queues_at_the_one_made(tmp_path, monkeypatch, made):
    """Writers starting at once on a ledger at rest (no gate file): each finds no gate, and all but
    one find it made when they try to make it. Those queue at the gate the winner made; none
    writes without it (SQLite's busy handler alone: claims of 0.5-1.4 s at a fleet's start). What
    was made in its place that cannot be a gate (a symlink, a FIFO) is neither followed nor waited
    on: writing goes on under SQLite's lock alone, as for a gate found that way."""
    from store.storage import writegate

    path = str(tmp_path / "l.db")
    gate = path + GATE_SUFFIX
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    real_open = os.open

    def racing_open(p, flags, *args):
        if p == gate and flags & os.O_EXCL:  # another writer was quicker
            if made == "a plain file":
                os.close(real_open(gate, os.O_WRONLY | os.O_CREAT, 0o644))
            elif made == "a symlink":
                os.symlink(target, gate)
            else:
                os.mkfifo(gate)
        return real_open(p, flags, *args)

    monkeypatch.setattr(writegate.os, "open", racing_open)
    made_ours: list[bool] = []
    fd = writegate._open_gate(path, lambda: made_ours.append(True))
    assert made_ours == []  # not ours: the writer that made it tidies it
    if made != "a plain file":
        assert fd is None
        assert target.read_text() == "untouched"
        return
    assert fd is not None, "the writer went on without the gate"
    try:
        assert os.fstat(fd).st_ino == os.stat(gate).st_ino  # the gate the other writer made
    finally:
        os.close(fd)


def test_writers_starting_at_once_on_a_ledger_at_rest_all_queue_at_one_gate(tmp_path):
    """Threads of one process (each write opens the gate on its own descriptor, as processes do)
    told to go at once, 30 times on a ledger at rest: every one holds the same gate, never none."""
    from store.storage import writegate

    path = str(tmp_path / "l.db")
    gate = path + GATE_SUFFIX
    for _ in range(30):
        if os.path.exists(gate):
            os.unlink(gate)
        barrier = threading.Barrier(8)
        got: list[int | None] = []
        lock = threading.Lock()

        def writer() -> None:
            barrier.wait()
            fd = writegate._open_gate(path, lambda: None)
            with lock:
                got.append(None if fd is None else os.fstat(fd).st_ino)
            if fd is not None:
                os.close(fd)

        ts = [threading.Thread(target=writer) for _ in range(8)]
        [t.start() for t in ts]
        [t.join(30) for t in ts]
        assert None not in got and len(set(got)) == 1, got


SQLITE_HOLDER = r"""
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")  # SQLite's own write lock, taken by a program that knows no gate
print("held", flush=True)
sys.stdin.readline()
"""


def test_the_busy_timeout_is_the_whole_wait_gate_and_sqlite_together(tmp_path):
    """A program outside Warden holds SQLite's lock; a Warden writer queued at the gate behind
    another waits what is left of busy_timeout_s for SQLite's lock, not all of it again."""
    path = str(tmp_path / "l.db")
    with Ledger.open(path) as setup:
        setup.create_task("t")
        setup.add_nodes("t", [NodeSpec("a")])
    busy_s, at_gate_s = 2.0, 1.2
    led = Ledger.open(path, busy_timeout_s=busy_s)
    outside = subprocess.Popen([sys.executable, "-c", SQLITE_HOLDER, path], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert outside.stdout is not None and outside.stdout.readline().strip() == "held"
    gate = _hold(path + GATE_SUFFIX)  # a writer ahead at the gate (it waits on SQLite's lock too)
    released = threading.Timer(at_gate_s, _release, args=(gate,))
    try:
        before = led.last_event_id()
        start = time.monotonic()
        released.start()
        with pytest.raises(LedgerBusy, match=r"nothing was written"):
            led.claim("t", "w")
        waited = time.monotonic() - start
        # busy_s in all: twice as long before (1.2 s at the gate, then 2 s more inside SQLite)
        assert busy_s * 0.95 <= waited < busy_s + 0.9, waited
    finally:
        released.join(60)
        assert outside.stdin is not None
        outside.stdin.close()
        outside.wait(30)
    assert led.last_event_id() == before
    c = led.claim("t", "w")  # and SQLite's full busy timeout is back for the next write
    assert c is not None and c.node_key == "a"
    assert led.db.execute_sql("PRAGMA busy_timeout").fetchone()[0] == int(busy_s * 1000)
    led.close()

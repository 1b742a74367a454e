"""The claim-race, kill -9 and fencing suites with one, two and three ``Ledger``s
per process — threads with a Ledger each, sequential re-opens, read-only beside writable — while
other processes read, write and exit. With one Ledger per process a suite cannot see a second open dropping the first one's locks (test_lock_safety.py has the
mechanism); these check what an agent author relies on: every acknowledged write is seen by a fresh
process, no node is claimed or committed twice, the journal has no hole.

SQLite only: the locks at stake are SQLite's (PostgreSQL runs the same suites in
test_ledger_processes.py and test_postgres.py). Real processes (tests/store/agent_proc.py), a
shared file clock, synchronisation on their output lines, never on sleeps.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from store import Ledger, NodeSpec
from tests.support.fileclock import FileClockCtl
from tests.support.waiting import Deadline

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_proc.py")
ROOT = str(Path(__file__).resolve().parents[2])

pytestmark = pytest.mark.slow

# (Ledgers per process, style): see agent_proc.py.
SHAPES = [(1, "threads"), (2, "threads"), (2, "reopen"), (2, "ro-beside"), (3, "threads"), (3, "mixed")]
IDS = [f"{k}-{style}" for k, style in SHAPES]
NODES = 30


@pytest.fixture
def fclock(tmp_path):
    return FileClockCtl(str(tmp_path / "clock"), 1_800_000_000.0)


def _spawn(*args: str, clock: FileClockCtl | None = None) -> subprocess.Popen[str]:
    cmd = [sys.executable, AGENT, *args] + (["--clock", clock.path] if clock else [])
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


FRESH = """
import json, sys
from store import Ledger
led = Ledger.open(sys.argv[1], create=False)
task = sys.argv[2]
events = led.events(0, limit=1000000)
print(json.dumps({
    "nodes": {n.key: [n.status, n.output, n.attempt] for n in led.graph(task).nodes},
    "task": led.task(task).status,
    "tasks": sorted(t.task_id for t in led.tasks()),
    "ids": [e.id for e in events],
    "events": [[e.node, e.kind, e.actor] for e in events if e.task_id == task],
    "artifacts": [a.name for a in led.artifacts(task)],
}))
led.close()
"""


def _fresh(path: str, task: str) -> dict:
    """What a fresh process (holding nothing else) sees of ``task`` and the whole journal."""
    r = subprocess.run([sys.executable, "-c", FRESH, path, task], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    ids = seen["ids"]
    assert ids == list(range(ids[0], ids[0] + len(ids))), "a hole in the journal"
    return seen


class Churn:
    """Other processes writing, reading and exiting one after another while a suite runs."""

    def __init__(self, path: str, clock: FileClockCtl | None = None) -> None:
        self.path, self.clock = path, clock
        self.proc: subprocess.Popen[str] | None = None
        self.created: list[str] = []
        self.runs = 0

    def step(self) -> None:
        """Start the next churn process once the previous one has exited (call in a loop)."""
        if self.proc is not None and self.proc.poll() is None:
            return
        if self.proc is not None:
            out, err = self.proc.communicate()
            assert self.proc.returncode == 0, err
            self.created += [ev["task"] for ev in _lines(out)]
        self.runs += 1
        self.proc = _spawn("churn", self.path, "churn", f"c{self.runs}", "--rounds", "3", clock=self.clock)

    def finish(self) -> None:
        if self.proc is not None:
            out, err = self.proc.communicate(timeout=120)
            assert self.proc.returncode == 0, err
            self.created += [ev["task"] for ev in _lines(out)]
            self.proc = None


# ---------------------------------------------------------------------- the claim race
def _follow(procs: list[subprocess.Popen[str]]) -> "queue.Queue[tuple[int, dict | None]]":
    """Every output line of every process, as (index, event), and (index, None) at its end."""
    q: queue.Queue[tuple[int, dict | None]] = queue.Queue()

    def read(i: int, p: subprocess.Popen[str]) -> None:
        for line in p.stdout:
            if line.strip():
                q.put((i, json.loads(line)))
        q.put((i, None))

    for i, p in enumerate(procs):
        threading.Thread(target=read, args=(i, p), daemon=True).start()
    return q


def _churn_once(path: str, n: int) -> str:
    """Another process that opens, writes, closes, reads and exits — now, to the end."""
    r = subprocess.run([sys.executable, AGENT, "churn", path, "churn", f"p{n}", "--rounds", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return _lines(r.stdout)[0]["task"]


@pytest.mark.parametrize(("k", "style"), SHAPES, ids=IDS)
def test_claim_race_with_several_ledgers_per_process(tmp_path, k, style):
    """Three drainer processes with k Ledgers each claim a 30-node graph. Every 4 commits a
    drainer stops with its Ledgers open and idle (no transaction: the moment a dropped lock is
    fatal), and once all have stopped another process opens the ledger, writes, closes and exits;
    meanwhile churn processes write, read and exit while the drainers run."""
    path = str(tmp_path / "ledger.db")
    rng = random.Random(k * 10 + len(style))
    with Ledger.open(path) as led:
        led.create_task("big", max_claims=3)
        specs = []
        for i in range(NODES):
            deps = tuple(sorted({f"n{rng.randrange(i)}" for _ in range(rng.randrange(2))})) if i >= NODES - 8 else ()
            specs.append(NodeSpec(f"n{i}", kind="work", deps=deps))
        led.add_nodes("big", specs)
    procs = [_spawn("drain", path, "big", f"w{i}", "--lease", "300", "--gate", "--ledgers", str(k), "--style", style,
                    "--pause-every", "4") for i in range(3)]
    for p in procs:
        line = p.stdout.readline()
        assert line and json.loads(line) == {"event": "ready"}, p.stderr.read()
    events = _follow(procs)
    churn = Churn(path)
    churn.step()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    claimed: dict[str, list[str]] = {}
    committed: dict[str, list[str]] = {}
    state = ["running"] * len(procs)
    pauses = 0
    deadline = Deadline(300)
    while "running" in state or "paused" in state:
        assert not deadline.expired(), f"the drainers did not finish: {state}"
        try:
            i, ev = events.get(timeout=0.2)
        except queue.Empty:
            churn.step()  # other processes write, read and exit while the drainers work
            continue
        if ev is None:
            state[i] = "exited"
        elif ev["event"] == "paused":
            state[i] = "paused"
        else:
            book = claimed if ev["event"] == "claimed" else committed
            book.setdefault(ev["node"], []).append(ev["worker"])
        if "running" not in state and "paused" in state:
            # Every drainer idle with its Ledgers open: another process's open, write and close now.
            churn.created.append(_churn_once(path, pauses))
            pauses += 1
            for j, p in enumerate(procs):
                if state[j] == "paused":
                    state[j] = "running"
                    p.stdin.write("go\n")
                    p.stdin.flush()
    churn.finish()
    for p in procs:
        p.wait(timeout=60)
        assert p.returncode == 0, p.stderr.read()
    assert pauses >= 2
    assert len(claimed) == NODES and all(len(w) == 1 for w in claimed.values()), \
        {n: w for n, w in claimed.items() if len(w) > 1}
    assert committed == claimed  # every claim acknowledged as committed, once
    # A fresh process sees every acknowledged write: the commits, who made them, the churn's tasks;
    # each node claimed and committed once in the journal, which has no hole.
    seen = _fresh(path, "big")
    assert seen["nodes"] == {n: ["succeeded", {"by": who[0]}, 1] for n, who in committed.items()}
    assert set(churn.created) <= set(seen["tasks"]) and len(churn.created) >= 3
    assert seen["task"] == "completed"
    per_node: dict[str, list[str]] = {}
    for node, kind, _actor in seen["events"]:
        if kind in ("node.claimed", "node.committed"):
            per_node.setdefault(node, []).append(kind)
    assert all(v == ["node.claimed", "node.committed"] for v in per_node.values()) and len(per_node) == NODES


# ---------------------------------------------------------------------- kill -9
@pytest.mark.parametrize("k", [1, 2, 3])
def test_kill_9_inside_commit_with_several_ledgers_per_process(tmp_path, fclock, k):
    """An agent with k Ledgers (the others busy reading and re-opening in threads) is killed inside
    a commit, three times; the test process keeps a writable and a read-only Ledger open through
    it all and writes after each kill. Nothing of a killed commit is left; everything acknowledged is."""
    path = str(tmp_path / "ledger.db")
    mine = Ledger.open(path, clock=fclock)
    mine.create_task("t")
    beside = Ledger.open(path, clock=fclock, read_only=True)
    churn = Churn(path, fclock)
    acknowledged = []
    for round_ in range(3):
        mine.add_node("t", f"n{round_}", kind="work")
        marker = tmp_path / f"inside-{round_}"
        p = _spawn("hang-in-commit", path, "t", f"w{round_}", "--marker", str(marker), "--ledgers", str(k),
                   "--style", "ro-beside" if k > 1 else "threads", clock=fclock)
        try:
            deadline = Deadline(120)
            while not marker.exists():
                assert p.poll() is None, p.stderr.read()
                assert not deadline.expired(), "agent never reached commit"
                churn.step()
                time.sleep(0.01)  # polling a file the other process writes; not used to order events
            assert beside.node("t", f"n{round_}").status == "running"  # the commit is not visible yet
        finally:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        node = mine.node("t", f"n{round_}")
        assert node.status == "running" and node.output is None
        fclock.advance(60)  # its lease runs out; the test's own writer finishes the node
        claim = mine.claim("t", "survivor", key=f"n{round_}")
        assert claim is not None
        mine.commit(claim, output={"round": round_})
        acknowledged.append(f"n{round_}")
    churn.finish()
    assert os.path.exists(path + "-wal")  # the WAL of the live writers was never deleted under them
    seen = _fresh(path, "t")
    assert {k: v[:2] for k, v in seen["nodes"].items()} == {n: ["succeeded", {"round": i}]
                                                             for i, n in enumerate(acknowledged)}
    assert seen["artifacts"] == []  # no half-written artifact
    assert set(churn.created) <= set(seen["tasks"])
    beside.close()
    mine.close()


# ---------------------------------------------------------------------- fencing
MODES = ("revoked", "expired", "revoked")  # one per round


@pytest.mark.parametrize(("k", "style"), [(1, "threads"), (2, "reopen"), (3, "mixed")], ids=["1", "2-reopen", "3-mixed"])
def test_fencing_with_several_ledgers_per_process(tmp_path, fclock, k, style):
    """Agent A (a process with k Ledgers) holds a lease, idle. Then either an operator (``warden
    rewind --yes``, another process that exits) revokes it while it is still unexpired, or it
    expires; agent B (another process) claims and commits. A's late heartbeat and commit — through
    a Ledger other than the one that claimed, after re-opening the others — must be refused with
    LeaseLost naming what happened, and nothing of them written. (A that lost its SQLite locks
    would not see the operator's revocation at all, and its commit would be acknowledged.)"""
    path = str(tmp_path / "ledger.db")
    with Ledger.open(path, clock=fclock) as led:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec(f"n{i}", kind="work") for i in range(len(MODES))])
    churn = Churn(path, fclock)
    for i, mode in enumerate(MODES):
        a = _spawn("fence", path, "t", f"a{i}", "--lease", "30", "--ledgers", str(k), "--style", style, clock=fclock)
        try:
            first = json.loads(a.stdout.readline() or "{}")
            assert first.get("event") == "claimed", a.stderr.read()
            churn.step()
            if mode == "revoked":
                r = subprocess.run([sys.executable, "-m", "console", "rewind", "t", first["node"], "--reason",
                                    "wrong input", "--yes", "--operator", "op", "--ledger", path],
                                   capture_output=True, text=True, timeout=120, cwd=ROOT,
                                   env={**os.environ, "PYTHONPATH": ROOT})
                assert r.returncode == 0, r.stderr
            else:
                fclock.advance(31)  # A's lease has expired
            b = subprocess.run([sys.executable, AGENT, "step", path, "t", f"b{i}", "--lease", "30",
                                "--clock", fclock.path], capture_output=True, text=True, timeout=120)
            assert b.returncode == 0, b.stderr
            got = _lines(b.stdout)
            assert got[0] == {"event": "claimed", "node": first["node"], "attempt": 2}
            assert got[-1]["event"] == "committed"
            a.stdin.write("go\n")
            a.stdin.flush()
            out, err = a.communicate(timeout=120)
            assert a.returncode == 0, err
        finally:
            if a.poll() is None:
                a.kill()
        late = {ev["event"]: ev for ev in _lines(out)}
        assert late["heartbeat"]["result"] == "lease_lost" and late["commit"]["result"] == "lease_lost", late
        why = late["commit"]["why"]  # names what happened to the lease, not just "lost"
        if mode == "revoked":
            assert "revoked by operator action" in why and "rewind by op: wrong input" in why, why
        else:
            assert f"reclaimed by b{i} after it expired" in why, why
    churn.finish()
    seen = _fresh(path, "t")
    assert seen["nodes"] == {f"n{i}": ["succeeded", {"kind": "work"}, 2] for i in range(len(MODES))}
    commits = [(node, actor) for node, kind, actor in seen["events"] if kind == "node.committed"]
    assert sorted(commits) == [(f"n{i}", f"b{i}") for i in range(len(MODES))]  # once each, by B

"""Multi-process tests with real agent processes (tests/store/agent_proc.py) and a shared file clock."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from console.cli import main as warden
from store import Ledger, NodeSpec
from store.storage.core import sha256_hex
from tests.support.fileclock import FileClockCtl
from tests.support.waiting import Deadline


AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_proc.py")


def agent(*args: str, clock: FileClockCtl | None = None, timeout: float = 60) -> list[dict]:
    cmd = [sys.executable, AGENT, *args]
    if clock is not None:
        cmd += ["--clock", clock.path]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode in (0, 3), p.stderr
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


@pytest.fixture
def fclock(tmp_path):
    return FileClockCtl(str(tmp_path / "clock"), 1_800_000_000.0)


def test_report_workflow_with_a_crashing_verifier(tmp_path, fclock, capsys):
    db = str(tmp_path / "ledger.db")
    led = Ledger.open(db, clock=fclock)
    led.create_task("report-001", title="Pilot report", inputs={"required": ["Summary", "Findings", "Risks"]},
                    max_repairs=2)
    led.add_node("report-001", "draft", kind="draft")
    led.add_node("report-001", "verify", kind="verify", deps=["draft"])

    def step(worker: str, crash: bool = False) -> dict:
        args = ["step", db, "report-001", worker, "--lease", "30"]
        if crash:
            args.append("--crash-before-commit")
        out = agent(*args, clock=fclock)
        fclock.advance(5)
        return out[-1]

    assert step("w1") == {"event": "committed", "node": "draft", "attempt": 1}
    assert step("w2")["node"] == "verify"  # finds "Risks" missing → repair nodes
    assert led.task("report-001").repair_count == 1
    assert step("w1")["node"] == "draft.r1"
    crashed = step("w2", crash=True)
    assert crashed == {"event": "crashing", "node": "verify.r1", "attempt": 1}
    # Its lease is still live: nobody else may take the node yet.
    assert step("w3") == {"event": "nothing"}
    fclock.advance(30)  # lease expired
    assert step("w3") == {"event": "committed", "node": "verify.r1", "attempt": 2}
    assert step("w1") == {"event": "committed", "node": "finalize", "attempt": 1}

    task = led.task("report-001")
    assert task.status == "completed"
    events = led.events(0, task_id="report-001")
    committed = [e for e in events if e.kind == "node.committed"]
    assert [e.node for e in committed] == ["draft", "verify", "draft.r1", "verify.r1", "finalize"]
    assert task.claim_count == 6
    assert sum(1 for e in events if e.kind == "node.claimed") == 6
    reclaim = [e for e in events if e.kind == "node.claimed" and e.payload.get("reclaimed")]
    assert [(e.node, e.payload["previous_owner"]) for e in reclaim] == [("verify.r1", "w2")]

    view, data = led.latest_artifact("report-001")
    assert view.name == "report.md" and view.sha256 == sha256_hex(data)
    out = tmp_path / "report.md"
    assert warden(["export", "report-001", "--output", str(out), "--ledger", db]) == 0
    assert out.read_bytes() == data
    assert warden(["export", "report-001", "--output", str(out), "--ledger", db]) == 1
    err = capsys.readouterr().err
    assert "exists; not overwritten" in err and len(err.strip().splitlines()) == 1
    assert out.read_bytes() == data
    led.close()


def test_four_processes_claiming_from_a_200_node_graph(new_target):
    db = new_target("ledger")
    rng = random.Random(4)
    led = Ledger.open(db)
    led.create_task("big", max_claims=3)
    specs = []
    for i in range(200):
        deps = tuple(sorted({f"n{rng.randrange(i)}" for _ in range(rng.randrange(3))})) if i >= 40 else ()
        specs.append(NodeSpec(f"n{i}", kind="work", deps=deps))
    led.add_nodes("big", specs)
    procs = [subprocess.Popen([sys.executable, AGENT, "drain", db, "big", f"w{i}", "--lease", "300", "--gate"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    # All four open the ledger and say so before any claims: on a loaded machine the first one
    # started could otherwise drain the whole graph before the last one has imported Python.
    for p in procs:
        line = p.stdout.readline()
        assert line and json.loads(line) == {"event": "ready"}, p.stderr.read()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    claims: dict[str, list[str]] = {}
    for i, p in enumerate(procs):
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        for line in out.splitlines():
            ev = json.loads(line)
            if ev["event"] == "claimed":
                claims.setdefault(ev["node"], []).append(f"w{i}")
    assert len(claims) == 200
    assert all(len(who) == 1 for who in claims.values()), {k: v for k, v in claims.items() if len(v) > 1}
    assert len({w for who in claims.values() for w in who}) >= 2  # the work was really shared
    events = led.events(0, task_id="big", limit=100000)
    per_node: dict[str, list[str]] = {}
    for e in events:
        if e.kind in ("node.claimed", "node.committed"):
            per_node.setdefault(e.node, []).append(e.kind)
    assert all(kinds == ["node.claimed", "node.committed"] for kinds in per_node.values())
    g = led.graph("big")
    assert {n.status for n in g.nodes} == {"succeeded"} and g.task.status == "completed"
    led.close()


def _snapshot(target: str) -> dict:
    from store.storage.db import open_database

    db = open_database(target)  # SQLite file or PostgreSQL URL
    try:
        out = {}
        for table in ("task", "node", "event", "artifact", "observation", "effect", "handoff"):
            out[table] = db.execute_sql(f"SELECT * FROM {table} ORDER BY 1").fetchall()
        return out
    finally:
        db.close()


def test_a_process_killed_inside_commit_leaves_no_partial_state(tmp_path, fclock, new_target):
    db = new_target("ledger")
    led = Ledger.open(db, clock=fclock)
    led.create_task("t")
    led.add_node("t", "only", kind="work")
    led.close()
    marker = tmp_path / "inside"
    p = subprocess.Popen([sys.executable, AGENT, "hang-in-commit", db, "t", "w1", "--marker", str(marker),
                          "--clock", fclock.path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = Deadline(60)
    while not marker.exists():  # the agent writes the marker from inside the transaction
        assert p.poll() is None, p.stderr.read()
        assert not deadline.expired(), "agent never reached commit"
        time.sleep(0.01)  # polling a file the other process writes; not used to order events
    before_kill_reader = Ledger.open(db, clock=fclock, create=False)
    # A reader sees the state before the commit while the writer holds its transaction.
    assert before_kill_reader.node("t", "only").status == "running"
    before_kill_reader.close()
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    after = Ledger.open(db, clock=fclock, create=False)
    node = after.node("t", "only")
    assert node.status == "running" and node.output is None and node.tokens_used == 0
    assert after.task("t").status == "active" and after.task("t").tokens_used == 0
    assert after.artifacts("t") == []
    assert [e.kind for e in after.events(0, task_id="t")][-1] == "node.claimed"
    after.close()
    snap = _snapshot(db)
    assert snap["artifact"] == [] and all(row[0] != "completed" for row in snap["task"])

"""Agent helpers: work_once, the lease keeper, and the docs/agents.md example."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from console.cli import main as warden
from store import Ledger
from store.storage.db import write_tx
from store.worker import LeaseKeeper, StepFailed, StepResult, work_once

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def one(ledger):
    ledger.create_task("t", inputs={"x": [1, 2]})
    ledger.add_node("t", "a", kind="k")
    return ledger


def test_work_once_runs_the_step_on_a_copy_and_commits(one):
    seen = {}

    def step(inputs, keeper):
        inputs["task"]["x"].append(3)  # mutating the copy must not leak anywhere
        seen["inputs"] = inputs
        keeper.progress(units_done=1, units_total=1, observation="did it", now=True)
        return StepResult(output={"n": 1}, tokens=5)

    out = work_once(one, "t", "w", step, background=False)
    assert out.status == "committed"
    assert out.claim.inputs["task"]["x"] == [1, 2]
    assert one.node("t", "a").output == {"n": 1} and one.task("t").tokens_used == 5
    assert work_once(one, "t", "w", step, background=False) is None


def test_a_step_whose_heartbeat_failed_does_not_commit(one, clock):
    def step(inputs, keeper):
        clock.advance(31)  # the step took longer than its lease...
        other = one.claim("t", "someone-else")  # ...and the node was reclaimed
        assert other is not None
        assert keeper.progress(observation="still going", now=True) is False
        return StepResult(output={"late": True})

    out = work_once(one, "t", "w", step, lease_s=30, background=False)
    assert out.status == "lost" and "reclaimed" in out.detail
    assert one.node("t", "a").output is None and one.node("t", "a").lease_owner == "someone-else"


def test_a_step_that_raises_fails_the_node(one):
    def step(inputs, keeper):
        raise StepFailed("flaky upstream", failure_class="transient", retry_after_s=1)

    out = work_once(one, "t", "w", step, background=False)
    assert out.status == "failed"
    n = one.node("t", "a")
    assert n.status == "pending" and n.error == "flaky upstream" and n.next_retry_at is not None

    def crash(inputs, keeper):
        raise ValueError("bug")

    one.clock.advance(2)
    out = work_once(one, "t", "w", crash, background=False)
    assert out.status == "failed" and "ValueError" in one.node("t", "a").error


def test_lease_keeper_gives_up_after_the_max_step_time(one):
    claim = one.claim("t", "w", lease_s=30)
    fake = [0.0]
    keeper = LeaseKeeper(one, claim, max_step_s=100, clock=lambda: fake[0])
    assert keeper.beat()
    fake[0] = 101
    assert not keeper.beat() and "maximum" in keeper.lost


def test_lease_keeper_thread_heartbeats(ledger_path):
    # Real time here: the keeper's thread is what is under test; the assertion waits on an event.
    led = Ledger.open(ledger_path)
    led.create_task("t")
    led.add_node("t", "a")
    # a lease long enough that a loaded machine cannot let it lapse before the first beat (the
    # keeper beats at a third of it); the event waits for that beat, whatever the load
    claim = led.claim("t", "w", lease_s=3)
    import threading

    beaten = threading.Event()
    original = led.heartbeat

    def spy(*a, **k):
        p = original(*a, **k)
        beaten.set()
        return p

    led.heartbeat = spy
    with LeaseKeeper(led, claim):
        assert beaten.wait(10)
    assert led.node("t", "a").heartbeat_at is not None
    led.close()


def test_lease_keeper_reports_parked(one):
    claim = one.claim("t", "w")
    with write_tx(one.db):
        one.db.execute_sql("UPDATE task SET status = 'parked'")
    keeper = LeaseKeeper(one, claim)
    assert keeper.beat() and keeper.parked


def test_the_agents_guide_example_runs_and_status_shows_it(tmp_path, capsys):
    db = str(tmp_path / "ledger.db")
    env = dict(os.environ, PYTHONPATH=ROOT)
    for _ in range(2):  # run it twice: the second run finds the work done and is harmless
        p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "report_agent.py"), db],
                           capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip() == "completed"
    assert warden(["status", "--json", "--ledger", db]) == 0
    data = json.loads(capsys.readouterr().out)
    (task,) = data["tasks"]
    assert task["task_id"] == "report-001" and task["counts"] == {"succeeded": 3}
    assert warden(["graph", "report-001", "--json", "--ledger", db]) == 0
    graph = json.loads(capsys.readouterr().out)
    assert [n["key"] for n in graph["nodes"]] == ["draft", "verify", "finalize"]
    assert graph["nodes"][2]["deps"] == ["verify"]
    out = tmp_path / "report.md"
    assert warden(["export", "report-001", "--output", str(out), "--ledger", db]) == 0
    assert out.read_bytes() == b"# Report on pilot\n"


def test_events_json_lines(tmp_path, ledger, ledger_path, capsys):
    ledger.create_task("t")
    ledger.add_node("t", "a")
    assert warden(["events", "--json", "--ledger", ledger_path]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [e["kind"] for e in lines] == ["task.created", "graph.nodes_added"]
    assert set(lines[0]) >= {"id", "at", "task_id", "node", "layer", "kind", "actor", "summary", "payload"}
    assert lines[0]["at"].endswith("Z")
    assert warden(["events", "--json", "--since", str(lines[0]["id"]), "--ledger", ledger_path]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert warden(["events", "--task", "nope", "--ledger", ledger_path]) == 3  # not found

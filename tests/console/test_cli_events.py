"""`warden events --follow`: a new event written by another process appears without polling
the terminal user has to wait on; the cursor never skips or repeats an event."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time

from store import Ledger

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_line(proc: subprocess.Popen, timeout: float = 30.0) -> dict:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sel.select(timeout=deadline - time.monotonic()):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            return json.loads(line)
    raise AssertionError("no event line in time")


def test_follow_prints_existing_then_new_events(tmp_path):
    db = str(tmp_path / "ledger.db")
    led = Ledger.open(db)
    led.create_task("t")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "console", "events", "--follow", "--json", "--ledger", db],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = read_line(proc)
        assert first["kind"] == "task.created"
        led.add_node("t", "a")  # written after the follower started
        led.add_node("t", "b")
        got = [read_line(proc), read_line(proc)]
        assert [e["kind"] for e in got] == ["graph.nodes_added"] * 2
        assert [e["node"] for e in got] == ["a", "b"]
        assert first["id"] < got[0]["id"] < got[1]["id"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        led.close()


def test_without_follow_stops_at_the_last_event(tmp_path, capsys):
    from console.cli import main

    db = str(tmp_path / "ledger.db")
    led = Ledger.open(db)
    led.create_task("t")
    led.add_node("t", "a")
    assert main(["events", "--json", "--ledger", db, "--task", "t"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x)["kind"] for x in lines] == ["task.created", "graph.nodes_added"]
    led.close()

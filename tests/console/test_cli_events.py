"""`warden events --follow`: a new event written by another process appears without polling
the terminal user has to wait on; the cursor never skips or repeats an event."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading

from store import Ledger

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Lines:
    """The follower's stdout, line by line, read by a thread (a select on the pipe would miss lines
    already sitting in Python's buffer)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.q.put(line)
        self.q.put("")

    def next(self, timeout: float = 30.0) -> dict:
        try:
            line = self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no event line in time") from None
        assert line, self.proc.stderr.read()
        return json.loads(line)


def test_follow_prints_existing_then_new_events(tmp_path):
    db = str(tmp_path / "ledger.db")
    led = Ledger.open(db)
    led.create_task("t")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "console", "events", "--follow", "--json", "--ledger", db],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = Lines(proc)
    try:
        first = lines.next()
        assert first["kind"] == "task.created"
        led.add_node("t", "a")  # written after the follower started
        led.add_node("t", "b")
        got = [lines.next(), lines.next()]
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

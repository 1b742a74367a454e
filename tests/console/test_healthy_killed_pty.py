"""The shipped ``warden console`` on a real pty, killed (SIGKILL) inside the apply of a ``healthy``
mark it was confirmed for (tests/support/hang_at.py stops it there, every row of the mark
written): the ledger holds nothing of it — no mark on the node, nothing taught to its kind, no audit
row, no event, the same revision — and nothing is wedged: the agent beats on and the mark, made
again with ``warden healthy``, applies. Synchronised on the screen and the marker file only."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from console.cli import main as warden
from store import Ledger, NodeSpec
from store.clock import ManualClock
from tests.support.console_terminal import Terminal, shows
from tests.support.loop_alarms import loops
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

ENTER, CTRL_S = b"\r", b"\x13"
WAIT_S = 60.0


def test_the_console_killed_inside_a_healthy_apply_leaves_nothing_half_written(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    clock = ManualClock(time.time() - 120)  # the agent's past: the console reads it on the machine's clock
    ledger = Ledger.open(path, clock=clock)
    ledger.create_task("t", title="a CI watcher")
    ledger.add_nodes("t", [NodeSpec("a", "ci_watch")])
    c = ledger.claim("t", "w1", lease_s=3600)
    for _ in range(6):
        clock.advance(5)
        ledger.heartbeat(c, action="gh run view 42", result="status: queued")
    assert loops(ledger)
    revision = ledger.task("t").revision
    marker = tmp_path / "inside"
    term = Terminal([sys.executable, "-m", "tests.support.hang_at", str(marker), "apply:healthy", "console",
                     "--ledger", str(path), "--runs", str(tmp_path), "--operator", "carol"], cols=100, rows=30)
    try:
        term.wait_for(shows("a CI watcher"), WAIT_S, "the task list")
        term.press(ENTER)
        term.wait_for(shows("ci_watch"), WAIT_S, "the graph, node a selected")
        term.press(b"H")
        term.wait_for(shows("Mark a healthy"), WAIT_S, "the healthy preview")
        term.press(b"polls CI by design")
        term.wait_for(shows("polls CI by design"), WAIT_S, "the reason typed")
        term.press(CTRL_S)
        wait_until(lambda: marker.exists() or term.proc.poll() is not None, "the console inside its apply", WAIT_S)
        assert term.proc.poll() is None, "\n".join(term.lines())
        term.proc.kill()
        term.proc.wait(WAIT_S)
    finally:
        term.close()
    assert ledger.node("t", "a").healthy_at is None and loops(ledger)
    assert ledger.actions("t") == [] and ledger.task("t").revision == revision
    assert [e for e in ledger.events(task_id="t") if e.kind.startswith("operator.")] == []
    # nothing wedged: the agent beats on, and the mark made again applies
    clock.advance(5)
    ledger.heartbeat(c, action="gh run view 42", result="status: queued")
    assert warden(["healthy", "t", "a", "--reason", "polls CI by design", "--yes", "--operator", "carol",
                   "--ledger", str(path)]) == 0
    assert ledger.node("t", "a").healthy_at is not None
    assert [(a.action, a.result) for a in ledger.actions("t")] == [("healthy", "applied")]
    ledger.close()

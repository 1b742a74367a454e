"""The shipped ``warden console`` on a real pty: a busy task parked on the first ``ctrl+s``, and an
answer typed right after choosing an option kept.

Three agent processes (tests/support/step_agent.py) work one task at about ten steps a second
each. The operator presses ``p`` on it, waits until the agents have claimed and finished nodes
since the preview was drawn (read from the ledger: the reading time of a person), types a reason
and presses ``ctrl+s``: the park applies on that first press — no "review again" banner — and
the notice says what differed from the preview. The ledger then holds what the result said.

On the resolve screen, ``enter`` on an option, the answer and ``ctrl+s`` written in one burst (as
they arrive over SSH) resolve with that option and that answer, not ``answer: null``.

Synchronised on the screen and the ledger only; the agents' pauses only pace their writes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.console_app import build_ledger
from store import Ledger, NodeSpec
from tests.support import step_agent
from tests.support.console_terminal import Terminal, console_argv, shows
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

CTRL_S = b"\x13"
WAIT_S = 60.0
AGENTS = 3
TASK = "busy-001"


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        ledger.create_task(TASK, title="three agents at work")
        ledger.add_nodes(TASK, [NodeSpec(f"step-{i:03d}", "step") for i in range(300)])
    return path


@pytest.fixture
def agents(ledger_path: Path, tmp_path: Path) -> Iterator[list[subprocess.Popen]]:
    stop = tmp_path / "stop-agents"
    procs = [subprocess.Popen(step_agent.command(str(ledger_path), f"agent-{i}", str(stop), rate=10, task=TASK,
                                                 seed=i), stdout=subprocess.PIPE) for i in range(AGENTS)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        yield procs
    finally:
        stop.touch()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _kinds_since(ledger: Ledger, after: int) -> set[str]:
    return {e.kind for e in ledger.events(after, task_id=TASK, limit=5000)}


def _running(ledger: Ledger) -> list[str]:
    return [n.key for n in ledger.graph(TASK).nodes if n.status == "running"]


def test_p_parks_a_busy_task_on_the_first_ctrl_s_and_says_what_differed(ledger_path: Path, agents) -> None:
    watch = Ledger.open(ledger_path, create=False)
    term: Terminal | None = None
    try:
        wait_until(lambda: len(_running(watch)) == AGENTS, "every agent at work", WAIT_S)
        term = Terminal(console_argv(str(ledger_path)), cols=100, rows=30)
        term.wait_for(shows(TASK), WAIT_S, "the task list")
        term.press(b"p")
        term.wait_for(lambda s: shows("Park task", TASK)(s) and not shows("computing the plan")(s),
                      WAIT_S, "the park preview")
        drawn = watch.last_event_id()
        # the person reads: meanwhile the agents finish nodes and claim new ones
        wait_until(lambda: {"node.claimed", "node.committed"} <= _kinds_since(watch, drawn),
                   "agents to claim and finish nodes after the preview was drawn", WAIT_S)
        term.press(b"stop the run")
        term.wait_for(shows("reason", "stop the run"), WAIT_S, "the reason typed")
        term.press(CTRL_S)
        term.wait_for(shows("differed from the preview"), WAIT_S, "the notice of what differed")
        screen = "\n".join(term.lines())
        assert "review again" not in screen and "meanwhile" in screen, screen
        assert not shows("Park task")(term.screen)  # the dialog closed: applied on the first press
    finally:
        if term is not None:
            term.close()
    with watch as ledger:
        acts = ledger.actions(TASK)
        assert [(a.action, a.result) for a in acts] == [("park", "applied")]  # no refused attempt before it
        differed = acts[0].plan["differed"]
        assert differed["notes"] and "meanwhile" in differed["summary"]
        assert ledger.task(TASK).status == "parked"
        g = {n.key: n for n in ledger.graph(TASK).nodes}
        # What the apply made each node that differed is what the ledger holds (or an agent's own
        # commit since: a node left running under the preview's claim may finish its step).
        for d in differed["nodes"]:
            n = g[d["node"]]
            assert n.status == d["applied"] or (d["applied"] == "running" and n.status == "succeeded"), (d, n.status)
            if d["found"] == "running" and d["applied"] == "parked":
                assert n.lease_owner is None
        # Nothing is claimed after the park, and what ran under the preview's claims finishes its step.
        parked_at = next(e.id for e in ledger.events(0, task_id=TASK, limit=100_000) if e.kind == "operator.park")
        wait_until(lambda: not _running(ledger), "the steps the park let finish to finish", WAIT_S)
        assert "node.claimed" not in _kinds_since(ledger, parked_at)


def test_enter_then_the_answer_in_one_burst_resolves_with_that_answer(tmp_path: Path) -> None:
    path = build_ledger(tmp_path / "ledger.db")  # report-001: section-2 asks, options yes / no ("no" recommended)
    term = Terminal(console_argv(str(path)), cols=100, rows=30)
    try:
        term.wait_for(shows("report-001"), WAIT_S, "the task list")
        term.press(b"h")
        term.wait_for(shows("Include the unaudited Q3 figures?"), WAIT_S, "the inbox")
        term.press(b"\r")
        term.wait_for(shows("the cursor starts on the recommended option"), WAIT_S, "the resolve screen")
        term.press(b"\x1b[A" + b"\r" + b"deny: the figures are unaudited" + CTRL_S)  # up to "yes", enter, words, ctrl+s
        term.wait_for(shows("resolved handoff"), WAIT_S, "the resolution")
    finally:
        term.close()
    with Ledger.open(path, create=False) as ledger:
        [h] = ledger.handoffs(status=None, task_id="report-001")
        assert (h.status, h.resolution_option, h.resolution_answer) == (
            "resolved", "yes", "deny: the figures are unaudited")

"""Marking a loop alarm healthy as an operator does it: the agent keeps beating while the preview is
read, its lease is taken back or another agent claims the node, and the apply keeps the preview's
promise (the stretch it showed is what the kind is taught) and says what differed — or is refused
as stale when what the operator judged no longer runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main as warden
from store.errors import StaleRevision
from tests.support.loop_alarms import loops, start
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _looping(ledger, clock, c, times=5):
    for _ in range(times):
        clock.advance(5)
        ledger.heartbeat(c, action="gh run view 42", result="status: queued")


def _previewed(ledger, clock):
    c = start(ledger, kind="ci_watch")
    _looping(ledger, clock, c)
    plan = ledger.plan("healthy", {"task_id": "t", "node": "a", "reason": "polls CI by design"})
    assert (plan.params.quiet, plan.params.repeat) == (4, 5), plan.params
    return c, plan


def _taught(ledger):
    (event,) = [e for e in ledger.events(task_id="t") if e.kind == "operator.healthy"]
    return event.payload["quiet"], event.payload["repeat"]


def test_the_agent_beating_on_while_the_preview_is_read_is_taught_as_previewed_and_said(ledger, clock):
    c, plan = _previewed(ledger, clock)
    _looping(ledger, clock, c, 4)  # the operator reads; the agent polls on (the node's version stays)
    done = ledger.apply(plan, operator="alice")
    assert _taught(ledger) == (4, 5)  # the stretch the preview showed, not the longer one now
    (note,) = done.differed.notes
    assert "node a: it went on meanwhile (repeating now: 8 observations without news, 9 alike in a row)" in note, note
    assert "taught the stretch the preview showed (4 without news, 5 alike in a row)" in note, note
    assert loops(ledger) == []


def test_news_meanwhile_still_marks_as_previewed_and_says_the_alarm_cleared(ledger, clock):
    c, plan = _previewed(ledger, clock)
    clock.advance(5)
    ledger.heartbeat(c, action="gh run view 42", result="status: success", units_done=1)
    done = ledger.apply(plan, operator="alice")
    assert _taught(ledger) == (4, 5)
    assert "node a: its alarm cleared meanwhile (news came)" in done.differed.summary, done.differed


def test_a_take_back_while_the_preview_is_read_keeps_the_mark_and_says_what_differed(ledger, clock):
    c, plan = _previewed(ledger, clock)
    clock.advance(400)  # the lease lapsed; its holder takes it back (a renewal: same attempt, version moved)
    again = ledger.claim("t", "w1", lease_s=300, key="a", renew=c.token)
    assert again is not None and again.attempt == c.attempt
    _looping(ledger, clock, again, 4)
    done = ledger.apply(plan, operator="alice")
    assert done.params == plan.params and _taught(ledger) == (4, 5)
    assert "went on meanwhile" in done.differed.summary, done.differed
    assert ledger.node("t", "a").healthy_at is not None


def test_another_attempt_looping_by_the_apply_is_stale_and_nothing_is_taught(ledger, clock):
    _, plan = _previewed(ledger, clock)
    clock.advance(400)  # the lease lapsed: another agent claims the node and loops in its turn
    other = ledger.claim("t", "w2", lease_s=300)
    _looping(ledger, clock, other, 6)
    assert loops(ledger)  # an alarm again — but not the one the operator judged (w1's attempt)
    with pytest.raises(StaleRevision, match="node a was claimed again \\(attempt 2, by w2\\) since the preview"):
        ledger.apply(plan, operator="alice")
    assert ledger.node("t", "a").healthy_at is None
    assert [e for e in ledger.events(task_id="t") if e.kind == "operator.healthy"] == []


# ---------------------------------------------------------------------- killed mid-apply
# (tests/support/hang_at.py: the CLI as shipped, stopped inside the apply's transaction)
def test_warden_healthy_killed_inside_its_apply_writes_nothing_and_wedges_nothing(ledger, clock, tmp_path, capsys):
    c, plan = _previewed(ledger, clock)
    revision = ledger.task("t").revision
    marker = tmp_path / "inside"
    argv = ["healthy", "t", "a", "--reason", "polls CI by design", "--yes", "--operator", "carol",
            "--ledger", ledger.target]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "tests.support.hang_at", str(marker), "apply:healthy", *argv], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: marker.exists() or p.poll() is not None, "the CLI inside its apply", 60)
        assert p.poll() is None, p.communicate()
    finally:
        p.kill()
        p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL
    # nothing of the mark: no healthy_at, nothing taught, no audit row, no event, the same revision
    assert ledger.node("t", "a").healthy_at is None and loops(ledger)
    assert ledger.actions("t") == [] and ledger.task("t").revision == revision
    assert [e for e in ledger.events(task_id="t") if e.kind.startswith("operator.")] == []
    assert warden(["status", "--ledger", ledger.target, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["marked_healthy"] == []
    # … and nothing wedged: the agent beats on, the mark applies
    ledger.heartbeat(c, action="gh run view 42", result="status: queued")
    assert warden(argv) == 0
    assert ledger.node("t", "a").healthy_at is not None
    assert [(a.action, a.result) for a in ledger.actions("t")] == [("healthy", "applied")]

"""Work that cannot safely run twice is never reclaimed blindly after its worker dies.

A node added with ``retryable=False``, or one whose worker logged an effect and died before
confirming it, must not be taken again as attempt 2 when its lease expires: it goes to ``failed``
and asks a human (an ``exception`` handoff carrying the evidence), judged once by whoever writes
first — a claim, ``Ledger.check_expired`` / ``warden check-wakes``. Real processes die here (exit
without confirming), and several claimers and checkers race for the expired node on both backends.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading

import pytest

from console.cli import main as warden
from store import Ledger, NodeSpec
from store.recovery import advise
from tests.support.fileclock import FileClockCtl

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed_agent.py")
LEASE = 30.0


@pytest.fixture
def fclock(tmp_path):
    return FileClockCtl(str(tmp_path / "clock"), 1_800_000_000.0)


def _run(fclock, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, AGENT, *args, "--clock", fclock.path, "--lease", str(LEASE)],
                          capture_output=True, text=True, timeout=120)


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _race(fclock, db: str, task: str, claimers: int, checkers: int, effect: str | None = None) -> list[dict]:
    """Start claimers and checkers, wait until every one is ready, release them together."""
    procs = []
    for i in range(claimers):
        extra = ["--effect", effect] if effect else []
        procs.append(subprocess.Popen([sys.executable, AGENT, "claim", db, task, f"c{i}", *extra,
                                       "--clock", fclock.path, "--lease", str(LEASE)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for _ in range(checkers):
        procs.append(subprocess.Popen([sys.executable, AGENT, "check", db, "--clock", fclock.path],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    random.shuffle(procs)
    for p in procs:
        assert json.loads(p.stdout.readline()) == {"event": "ready"}, p.stderr.read()
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        out += _lines(stdout)
    return out


def _unsafe_events(ledger: Ledger, task: str) -> list:
    return [e for e in ledger.events(0, task_id=task, limit=10_000)
            if e.kind == "node.failed" and e.payload.get("unsafe_rerun")]


@pytest.mark.parametrize("case", ["effect_unconfirmed", "not_retryable"])
def test_a_dead_workers_unsafe_node_fails_and_asks_a_human_once(new_target, fclock, case):
    db = new_target("ledger")
    led = Ledger.open(db, clock=fclock)
    led.create_task("pay", title="charge the customer")
    led.add_nodes("pay", [NodeSpec("charge", kind="tool", retryable=(case == "effect_unconfirmed")),
                          NodeSpec("receipt", kind="tool", deps=("charge",)), NodeSpec("other", kind="tool")])
    if case == "effect_unconfirmed":
        died = _run(fclock, "die-after-intend", db, "pay", "w1", "charge", "charge:order-1")
    else:
        died = _run(fclock, "die-holding", db, "pay", "w1", "charge")
    assert died.returncode == 9, died.stderr  # the worker died mid-step
    assert led.claim("pay", "x", key="charge") is None  # its lease is still live
    fclock.advance(LEASE)  # lease_until <= now: expired

    out = _race(fclock, db, "pay", claimers=4, checkers=2, effect="charge:order-1")
    claimed = [o for o in out if o["event"] == "claimed"]
    assert all(o["node"] != "charge" for o in claimed), claimed  # never reclaimed as attempt 2
    assert [o["node"] for o in claimed] == ["other"]  # the one other ready node, claimed once
    judged = [j for o in out if o["event"] == "checked" for j in o["judged"]]
    assert len(judged) <= 1

    [failed] = _unsafe_events(led, "pay")  # judged and journalled exactly once
    node = led.node("pay", "charge")
    assert (node.status, node.failure_class, node.attempt) == ("failed", "irreversible_write", 1)
    assert "w1 was lost" in node.error and "not re-run blindly" in node.error
    [h] = led.handoffs(task_id="pay")
    assert (h.kind, h.status, h.node, h.opened_by) == ("exception", "open", "charge", "warden")
    assert [o["id"] for o in h.options] == ["rerun", "leave_failed"]
    ctx = h.context
    assert ctx["worker"] == "w1" and ctx["last_heartbeat"].endswith("Z") and ctx["lease_expired_at"].endswith("Z")
    assert failed.payload["handoff"] == h.id
    if case == "effect_unconfirmed":
        assert [e["effect_key"] for e in ctx["effects_unconfirmed"]] == ["charge:order-1"]
        assert ctx["advice"]["reason"] == "effect_unconfirmed"
        [eff] = led.effects("pay")
        assert (eff.status, eff.attempt) == ("intended", 1)  # nobody intended it a second time
    else:
        assert ctx["effects_unconfirmed"] == [] and ctx["advice"]["reason"] == "not_retryable"
    assert ctx["advice"]["recommendation"] == "needs_human"

    # The task waits on the person (it does not fail over it), and recovery advice agrees.
    assert led.task("pay").status == "active" and led.claim("pay", "y") is None
    a = advise(led, "pay", "charge")
    assert (a.recommendation, a.reason) == ("needs_human", ctx["advice"]["reason"])
    assert a.evidence[0] == ctx["advice"]["lead"]

    # Checking again judges nothing more.
    assert led.check_expired() == [] and len(_unsafe_events(led, "pay")) == 1

    # The person checked: rerun → a fresh attempt that carries the answer.
    led.apply(led.plan_resolve(h.id, option="rerun", answer="no charge on the card"), operator="ana")
    again = led.claim("pay", "w2", key="charge")
    assert again.attempt == 2 and again.inputs["resolution"]["option"] == "rerun"
    assert again.inputs["resolution"]["answer"] == "no charge on the card"
    led.commit(again, output={"charged": True})
    led.close()


def test_leave_failed_fails_the_task_when_nothing_else_can_move(ledger, clock):
    ledger.create_task("t")
    ledger.add_node("t", "send", retryable=False)
    ledger.claim("t", "w1", lease_s=10)
    clock.advance(10)
    assert ledger.claim("t", "w2") is None
    assert ledger.task("t").status == "active" and ledger.task("t").paused_for == "handoff"  # waiting on a person
    waited = ledger.task("t").wall_used_s
    clock.advance(3600)
    assert ledger.task("t").wall_used_s == waited  # the budget clock stands still while a person is asked
    [h] = ledger.handoffs(task_id="t")
    plan = ledger.plan_resolve(h.id, option="leave_failed", answer="it was sent")
    assert plan.changes == {} and any("stays failed" in w for w in plan.warnings)
    ledger.apply(plan, operator="op")
    assert ledger.node("t", "send").status == "failed" and ledger.task("t").status == "failed"


def test_a_rewind_of_the_failed_node_withdraws_its_question(ledger, clock):
    ledger.create_task("t")
    ledger.add_node("t", "send", retryable=False)
    ledger.claim("t", "w1", lease_s=10)
    clock.advance(10)
    assert ledger.check_expired(actor="cron") == [
        {"task_id": "t", "node": "send", "handoff": "1", "why": "the node was added with retryable=False"}]
    plan = ledger.plan_rewind("t", "send", reason="checked: not sent")
    assert plan.handoffs_withdrawn == ("1",)
    ledger.apply(plan, operator="op")
    assert ledger.handoff("1").status == "withdrawn" and ledger.node("t", "send").status == "pending"
    assert ledger.claim("t", "w2").attempt == 2  # the rewind is the operator's retry


def test_escalating_a_node_already_asking_is_refused(ledger, clock):
    from store import Refused

    ledger.create_task("t")
    ledger.add_node("t", "send", retryable=False)
    ledger.claim("t", "w1", lease_s=10)
    clock.advance(10)
    ledger.check_expired()
    with pytest.raises(Refused, match="already waiting for a human"):
        ledger.plan_escalate("t", "send", reason="?")


def test_a_safe_node_is_still_reclaimed_and_a_confirmed_effect_is_safe(ledger, clock):
    """The rule takes only what is unsafe: a retryable node without effects, or whose effects were
    all confirmed, is reclaimed as attempt 2 as before."""
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("plain"), NodeSpec("paid")])
    ledger.claim("t", "w1", lease_s=10, key="plain")
    c = ledger.claim("t", "w1", lease_s=10, key="paid")
    ledger.intend_effect(c, "pay:1")
    ledger.confirm_effect(c, "pay:1", external_id="#1")
    clock.advance(10)
    assert ledger.check_expired() == []
    got = {ledger.claim("t", "w2").node_key, ledger.claim("t", "w2").node_key}
    assert got == {"plain", "paid"}
    assert ledger.node("t", "plain").attempt == 2 and ledger.node("t", "paid").attempt == 2
    assert ledger.effects("t")[0].status == "confirmed"


def test_check_wakes_judges_it_when_no_worker_is_left(ledger_path, ledger, clock, capsys, monkeypatch):
    monkeypatch.setattr("store.storage.core.system_clock", clock)  # the CLI's ledger reads this clock
    ledger.create_task("t")
    ledger.add_node("t", "merge", retryable=False)
    ledger.claim("t", "w1", lease_s=10)
    clock.advance(11)
    assert advise(ledger, "t", "merge").reason == "not_retryable"  # a read: advice, nothing written
    assert ledger.node("t", "merge").status == "running"
    assert warden(["check-wakes", "--ledger", ledger_path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["woken"] == [] and [(x["task_id"], x["node"]) for x in out["expired"]] == [("t", "merge")]
    assert ledger.node("t", "merge").status == "failed"
    assert warden(["check-wakes", "--ledger", ledger_path]) == 0
    assert "failed: task" not in capsys.readouterr().out  # judged once
    assert warden(["recover", "--task", "t", "--node", "merge", "--json", "--ledger", ledger_path]) == 0
    advice = json.loads(capsys.readouterr().out)
    assert (advice["recommendation"], advice["reason"]) == ("needs_human", "not_retryable")


def test_several_ledgers_in_one_process_judge_it_once(ledger_path, ledger, clock):
    """Threads, each with its own Ledger, claim and check at once: one judgement, no reclaim."""
    for round_ in range(5):
        tid = f"t{round_}"
        ledger.create_task(tid)
        ledger.add_nodes(tid, [NodeSpec("u", retryable=False), NodeSpec("v", deps=("u",))])
        ledger.claim(tid, "w", lease_s=5)
        clock.advance(5)
        others = [Ledger.open(ledger_path, clock=clock) for _ in range(6)]
        gate = threading.Barrier(len(others))
        got: list = []

        def go(led: Ledger, i: int) -> None:
            gate.wait()
            got.append(led.claim(tid, f"x{i}") if i % 2 else led.check_expired([tid]))

        threads = [threading.Thread(target=go, args=(led, i)) for i, led in enumerate(others)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        for led in others:
            led.close()
        assert [g for g in got if g is not None and not isinstance(g, list)] == []  # nobody claimed u (or v)
        assert sum(len(g) for g in got if isinstance(g, list)) <= 1
        assert len(_unsafe_events(ledger, tid)) == 1 and len(ledger.handoffs(task_id=tid)) == 1
        assert ledger.node(tid, "u").status == "failed"

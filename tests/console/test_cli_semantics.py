"""The CLI side of what the operator relies on: ``warden report``, ``warden park --wake-on …
--auto-resume``, ``warden compensated``, the abort preview's compensations, "paused since" in
``warden status`` and effect statuses in ``warden graph``. Every agent-written string printed
literally (no escape byte reaches the terminal); bad input is one line and exit 1 or 2.
"""

from __future__ import annotations

import json

import pytest

from console.cli import main as warden
from store import Budget, Ledger, ManualClock, NodeSpec
from tests.support.asks import ask

T0 = 1_800_000_000.0
EVIL = "draft\x1b[31m\u202e[red]x[/red]"


@pytest.fixture
def clock():
    return ManualClock(T0)


@pytest.fixture
def db(new_target, clock, monkeypatch):
    """t: draft (succeeded, an artifact and a confirmed effect with a compensation), ask (blocked on
    a handoff), close (pending, always_admit), over its token cap (the stop gate)."""
    path = new_target("sem")
    with Ledger.open(path, clock=clock) as led:
        led.create_task("t", title="Pilot " + EVIL, budget=Budget(tokens=1000, wall_s=3600))
        led.add_nodes("t", [NodeSpec("draft", "llm"), NodeSpec("ask", "human"),
                            NodeSpec("close", "llm", ("draft",), always_admit=True)])
        c = led.claim("t", "w", lease_s=10**7, kinds=["llm"])
        clock.advance(10)
        led.intend_effect(c, "pr:" + EVIL, compensation="close PR " + EVIL)
        led.confirm_effect(c, "pr:" + EVIL, external_id="#7")
        led.commit(c, output={}, tokens=400, artifact=(EVIL + ".md", b"# report\n"))
        c = led.claim("t", "w", lease_s=10**7, kinds=["human"])
        ask(led, c, kind="acceptance", question="Accept " + EVIL + "?", options=[{"id": "yes"}])
    import store.clock as store_clock  # the CLI opens the ledger with the system clock: pin it
    monkeypatch.setattr(store_clock, "system_clock", clock)
    monkeypatch.setattr("store.storage.core.system_clock", clock)
    return path


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_report_json_has_the_contract_keys(db, capsys):
    assert warden(["report", "t", "--json", "--ledger", db]) == 0
    r = _json(capsys)
    for k in ("best_artifact", "unfinished", "budget", "handoffs_open", "effects_unconfirmed"):
        assert k in r
    assert r["best_artifact"]["name"] == EVIL + ".md" and r["best_artifact"]["node"] == "draft"
    assert {"name", "sha256", "node", "at"} <= set(r["best_artifact"])
    assert [(u["key"], u["status"]) for u in r["unfinished"]] == [("ask", "blocked"), ("close", "pending")]
    assert r["budget"]["paused_for"] == "handoff" and r["budget"]["gates"]["hard"]["tokens"] == 1000
    assert r["handoffs_open"][0]["question"] == "Accept " + EVIL + "?"


def test_report_text_is_literal_and_complete(db, capsys):
    assert warden(["report", "t", "--ledger", db]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b" in out and "[red]x[/red]" in out  # shown, escaped, never interpreted
    for what in ("best result so far", "unfinished (2)", "handoffs open (1)", "budget clock paused since",
                 "waiting on a human", "closing step"):
        assert what in out, what


def test_report_refuses_an_unknown_task_in_one_line(db, capsys):
    assert warden(["report", "nope", "--ledger", db]) == 3  # not found
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "nope" in err
    assert warden(["report", "nope", "--json", "--ledger", db]) == 3
    assert _json(capsys) == {"error": {"code": "not_found", "message": "unknown task 'nope'"}}
    assert warden(["--yes", "report", "t", "--ledger", db]) == 2  # a read takes no --yes, before or after
    assert "--yes does not apply to report" in capsys.readouterr().err
    assert warden(["report", "t", "--operator", "x", "--ledger", db]) == 2
    assert warden(["--json", "report", "t", "--ledger", db]) == 0  # shared flags before the subcommand
    assert _json(capsys)["task_id"] == "t"


def test_report_is_a_pure_read(db, capsys):
    with Ledger.open(db, create=False) as led:
        before = (led.last_event_id(), led.task("t").revision)
    assert warden(["report", "t", "--ledger", db]) == 0
    with Ledger.open(db, create=False) as led:
        assert (led.last_event_id(), led.task("t").revision) == before


def test_status_says_paused_since(db, capsys):
    assert warden(["status", "--json", "--ledger", db]) == 0
    b = _json(capsys)["tasks"][0]["budget"]
    assert b["paused_since"] == "2027-01-15T08:00:10.000Z" and b["paused_for"] == "handoff"
    assert {"tokens_used", "token_cap", "wall_used_s", "wall_cap_s", "gate"} <= set(b)
    assert warden(["status", "--ledger", db]) == 0
    assert "t: ◷ budget clock paused since 2027-01-15T08:00Z (waiting on a human)" in capsys.readouterr().out


@pytest.mark.parametrize("argv,why", [
    (["--wake-on", "tomorrow"], "unknown wake condition 'tomorrow'"),
    (["--wake-on", "node:ghost"], "no such node in task t"),
    (["--wake-on", "handoff:99"], "no such handoff"),
    (["--auto-resume"], "needs a wake condition"),
])
def test_park_refuses_bad_wake_conditions_in_one_line(db, capsys, argv, why):
    assert warden(["park", "t", "--reason", "w", "--yes", "--ledger", db, *argv]) == 1
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1


def test_park_with_wake_conditions_and_auto_resume(db, capsys, clock, tmp_path):
    """status shows a met condition (computed as it reads) but never writes; check-wakes (the
    console's periodic look, for cron) journals it and auto-resumes, once."""
    f = tmp_path / "go.flag"
    assert warden(["park", "t", "--reason", "wait for the flag", "--wake-on", f"file:{f}", "--wake-on", "handoff:1",
                   "--auto-resume", "--yes", "--json", "--ledger", db]) == 0
    res = _json(capsys)
    assert res["params"]["auto_resume"] is True
    assert [c["text"] for c in res["params"]["wake_conditions"]] == [f"file:{f}", "handoff:1"]
    assert warden(["check-wakes", "--json", "--ledger", db]) == 0
    assert _json(capsys) == {"woken": [], "expired": []}  # expired: unsafe leases judged (none here)
    assert warden(["status", "--json", "--ledger", db]) == 0
    task = _json(capsys)["tasks"][0]
    assert task["status"] == "parked" and not [s for s in task["signals"] if s["kind"] == "wake"]
    f.write_text("go")
    with Ledger.open(db, create=False) as led:
        before = (led.last_event_id(), led.task("t").revision, led.task("t").wake_state)
    assert warden(["status", "--json", "--ledger", db]) == 0  # status shows the wake, and only reads
    task = _json(capsys)["tasks"][0]
    [wake] = [s for s in task["signals"] if s["kind"] == "wake"]
    assert task["status"] == "parked" and "go.flag appeared" in wake["evidence"] and "check-wakes" in wake["evidence"]
    assert warden(["graph", "t", "--json", "--ledger", db]) == 0
    assert [s for s in _json(capsys)["task"]["signals"] if s["kind"] == "wake"]
    assert warden(["report", "t", "--ledger", db]) == 0
    capsys.readouterr()
    with Ledger.open(db, create=False) as led:
        assert (led.last_event_id(), led.task("t").revision, led.task("t").wake_state) == before
    assert warden(["check-wakes", "--json", "--ledger", db]) == 0
    [woken] = _json(capsys)["woken"]
    assert (woken["task_id"], woken["condition"], woken["resumed"]) == ("t", f"file:{f}", True)
    assert warden(["status", "--json", "--ledger", db]) == 0
    assert _json(capsys)["tasks"][0]["status"] == "active"
    assert warden(["check-wakes", "--ledger", db]) == 0  # once: nothing left to wake
    assert capsys.readouterr().out.strip() == "no wake condition met"
    with Ledger.open(db, create=False) as led:
        assert [a.operator for a in led.actions("t") if a.action == "resume"] == ["system"]
        assert len([e for e in led.events(0, task_id="t") if e.kind == "park.wake"]) == 1


def test_check_wakes_without_auto_resume_text_and_its_errors(db, capsys, clock, tmp_path):
    assert warden(["park", "t", "--reason", "until later", "--wake-on", "at:1h", "--yes", "--ledger", db]) == 0
    capsys.readouterr()
    clock.advance(3601)
    assert warden(["check-wakes", "--task", "t", "--task", "t", "--ledger", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith("woken: task t: the time ") and out.rstrip().endswith("— resume by hand")
    assert len(out.strip().splitlines()) == 1
    with Ledger.open(db, create=False) as led:
        assert led.task("t").status == "parked"
    assert warden(["check-wakes", "--task", "nope", "--json", "--ledger", db]) == 3
    assert _json(capsys)["error"]["code"] == "not_found"
    assert warden(["check-wakes", "--yes", "--ledger", db]) == 2  # nothing to confirm: not its flag
    assert "--yes does not apply to check-wakes" in capsys.readouterr().err
    assert warden(["check-wakes", "--json", "--ledger", str(tmp_path / "missing.db")]) == 4
    assert _json(capsys)["error"]["code"] == "unavailable"


def test_abort_preview_lists_compensations_and_compensated_marks_by_hand(db, capsys):
    assert warden(["abort", "t", "--reason", "stop", "--dry-run", "--ledger", db]) == 0
    out = capsys.readouterr().out
    assert "compensation nodes added (1)" in out and "1. compensate:" in out and "\x1b" not in out
    assert warden(["abort", "t", "--reason", "stop", "--dry-run", "--json", "--ledger", db]) == 0
    plan = _json(capsys)
    [comp] = plan["compensations"]
    assert comp["effect_key"] == "pr:" + EVIL and comp["node"].startswith("compensate:pr:draft_")
    assert warden(["abort", "t", "--reason", "stop", "--yes", "--ledger", db]) == 0
    capsys.readouterr()
    assert warden(["graph", "t", "--json", "--ledger", db]) == 0
    [e] = _json(capsys)["effects"]
    assert (e["status"], e["compensation_node"]) == ("confirmed", comp["node"])
    assert warden(["compensated", "t", "pr:" + EVIL, "--ledger", db, "--yes"]) == 2  # --reason required
    assert "reason" in capsys.readouterr().err
    assert warden(["compensated", "t", "pr:nope", "--reason", "x", "--yes", "--ledger", db]) == 3  # not found
    assert "unknown effect" in capsys.readouterr().err
    assert warden(["compensated", "t", "pr:" + EVIL, "--reason", "closed #7 by hand", "--yes", "--json",
                   "--operator", "alice", "--ledger", db]) == 0
    res = _json(capsys)
    assert res["applied"] and res["action"] == "compensated" and res["abandoned"] == [comp["node"]]
    assert warden(["graph", "t", "--ledger", db]) == 0
    out = capsys.readouterr().out
    assert "compensated" in out and "by alice" in out and "\x1b" not in out
    assert warden(["report", "t", "--json", "--ledger", db]) == 0
    r = _json(capsys)
    assert r["status"] == "aborted" and r["effects_to_compensate"] == []


def test_compensated_without_a_terminal_and_without_yes_changes_nothing(db, capsys):
    assert warden(["compensated", "t", "pr:" + EVIL, "--reason", "done", "--ledger", db]) == 1
    assert "not applied" in capsys.readouterr().err
    with Ledger.open(db, create=False) as led:
        assert led.effects("t")[0].status == "confirmed"

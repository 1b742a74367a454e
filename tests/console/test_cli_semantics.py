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
        led.request_human(c, kind="acceptance", question="Accept " + EVIL + "?", options=[{"id": "yes"}])
    import store.clock as store_clock  # the CLI opens the ledger with the system clock: pin it
    monkeypatch.setattr(store_clock, "system_clock", clock)
    monkeypatch.setattr("store.ledger.core.system_clock", clock)
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
    assert warden(["report", "nope", "--ledger", db]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "nope" in err


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
    assert "t: ⏸ budget clock paused since 2027-01-15T08:00Z (waiting on a human)" in capsys.readouterr().out


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
    f = tmp_path / "go.flag"
    assert warden(["park", "t", "--reason", "wait for the flag", "--wake-on", f"file:{f}", "--wake-on", "handoff:1",
                   "--auto-resume", "--yes", "--json", "--ledger", db]) == 0
    res = _json(capsys)
    assert res["params"]["auto_resume"] is True
    assert [c["text"] for c in res["params"]["wake_conditions"]] == [f"file:{f}", "handoff:1"]
    assert warden(["status", "--json", "--ledger", db]) == 0
    assert _json(capsys)["tasks"][0]["status"] == "parked"
    f.write_text("go")
    assert warden(["status", "--json", "--ledger", db]) == 0  # status looks: the file changed
    task = _json(capsys)["tasks"][0]
    assert task["status"] == "active"
    with Ledger.open(db, create=False) as led:
        assert [a.operator for a in led.actions("t") if a.action == "resume"] == ["system"]


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
    assert warden(["compensated", "t", "pr:nope", "--reason", "x", "--yes", "--ledger", db]) == 1
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

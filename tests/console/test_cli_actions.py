"""`warden park | resume | narrow | rewind | abort | handoffs | resolve` through console.cli.main."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from console.cli import actions as cli_actions
from console.cli import main as warden
from store import Ledger, ManualClock, NodeSpec
from tests.support.asks import ask

T0 = 1_800_000_000.0

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def db(new_target):
    """a → b → c (c scope=ext), d (a root, blocked on a handoff); a, b succeeded; c running.
    On each backend (tests/conftest.py: a SQLite file, or a PostgreSQL URL)."""
    path = new_target("actions")
    with Ledger.open(path, clock=ManualClock(T0)) as ledger:
        _build(ledger)
    return path


def _build(ledger: Ledger) -> None:
    ledger.create_task("t", title="cli", preconditions={"scope": "all"})
    ledger.add_nodes("t", [NodeSpec("a", "a"), NodeSpec("b", "b", ("a",)),
                           NodeSpec("c", "c", ("b",), preconditions={"scope": "ext"}), NodeSpec("d", "d")])
    for k in ("a", "b"):
        c = ledger.claim("t", "w0", kinds=[k])
        ledger.commit(c, output={"k": k})
    ledger.claim("t", "w1", lease_s=10 ** 9, kinds=["c"])
    d = ledger.claim("t", "w2", lease_s=10 ** 9, kinds=["d"])
    ask(ledger, d, kind="confirm", question="Ship it?\x1b[31m [red]now[/red]",
                         options=[{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}], recommendation="yes")


def statuses(path: str) -> dict[str, str]:
    with Ledger.open(path, create=False) as led:
        return {n.key: n.status for n in led.graph("t").nodes}


def actions(path: str):
    with Ledger.open(path, create=False) as led:
        return led.actions("t")


def test_dry_run_json_prints_the_plan_and_changes_nothing(db, capsys):
    before = statuses(db)
    rc = warden(["rewind", "t", "b", "--reason", "redo b", "--dry-run", "--json", "--ledger", db])
    out = capsys.readouterr().out
    assert rc == 0
    plan = json.loads(out)
    assert plan["action"] == "rewind" and plan["target"] == "b" and plan["reset"] == ["b", "c"]
    assert plan["revoked_leases"] == [{"node": "c", "owner": "w1"}] and "applied" not in plan
    assert out.count("\n") == 1  # one JSON object
    assert statuses(db) == before and actions(db) == []


def test_dry_run_text_preview(db, capsys):
    assert warden(["abort", "t", "--reason", "stop", "--dry-run", "--ledger", db]) == 0
    out = capsys.readouterr().out
    assert "DRY RUN" in out and "abort t" in out
    assert "▶ running → ⊘ abandoned (1): c" in out and "✋ blocked → ⊘ abandoned (1): d" in out
    assert "leases revoked (1): c (w1)" in out and "handoffs withdrawn: 1" in out


def test_yes_json_applies_and_records_the_operator(db, capsys):
    rc = warden(["rewind", "t", "b", "--reason", "redo b", "--yes", "--json", "--ledger", db, "--operator", "carol"])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["applied"] is True and isinstance(res["action_id"], int)
    assert statuses(db) == {"a": "succeeded", "b": "pending", "c": "pending", "d": "blocked"}
    [act] = actions(db)
    assert act.operator == "carol" and act.reason == "redo b" and act.id == res["action_id"]


def test_without_terminal_and_without_yes_nothing_changes(db, capsys):
    before = statuses(db)
    rc = warden(["park", "t", "--reason", "later", "--now", "--ledger", db])
    cap = capsys.readouterr()
    assert rc == 1 and cap.out == ""
    assert "park t" in cap.err and "no terminal" in cap.err and "--yes" in cap.err
    assert statuses(db) == before and actions(db) == []


def test_without_terminal_subprocess(db):
    env = {**os.environ, "PYTHONPATH": ROOT}
    before = statuses(db)
    p = subprocess.run([sys.executable, "-m", "console", "abort", "t", "--reason", "stop", "--ledger", db],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 1, p.stderr
    assert p.stdout == "" and "abort t" in p.stderr and "no terminal" in p.stderr
    assert "Traceback" not in p.stderr
    assert statuses(db) == before and actions(db) == []
    p = subprocess.run([sys.executable, "-m", "console", "abort", "t", "--reason", "stop", "--yes", "--ledger", db],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "applied" in p.stdout and set(statuses(db).values()) == {"succeeded", "abandoned"}


def test_terminal_prompt_defaults_to_no(db, capsys, monkeypatch):
    monkeypatch.setattr(cli_actions, "_interactive", lambda: True)
    asked = []
    monkeypatch.setattr(cli_actions, "_ask", lambda prompt: asked.append(prompt) or "")
    before = statuses(db)
    assert warden(["rewind", "t", "b", "--reason", "redo", "--ledger", db]) == 1
    cap = capsys.readouterr()
    assert asked == ["Apply? [y/N] "] and "rewind b" in cap.out and "not confirmed" in cap.err
    assert statuses(db) == before and actions(db) == []
    monkeypatch.setattr(cli_actions, "_ask", lambda prompt: "y")
    assert warden(["rewind", "t", "b", "--reason", "redo", "--ledger", db]) == 0
    assert "applied (action" in capsys.readouterr().out
    assert statuses(db)["b"] == "pending"


def test_abort_asks_for_the_task_id(db, capsys, monkeypatch):
    monkeypatch.setattr(cli_actions, "_interactive", lambda: True)
    monkeypatch.setattr(cli_actions, "_ask", lambda prompt: "y")
    before = statuses(db)
    assert warden(["abort", "t", "--reason", "stop", "--ledger", db]) == 1  # "y" is not the task id
    assert statuses(db) == before
    monkeypatch.setattr(cli_actions, "_ask", lambda prompt: "t")
    assert warden(["abort", "t", "--reason", "stop", "--ledger", db]) == 0
    with Ledger.open(db, create=False) as led:
        assert led.task("t").status == "aborted"


def test_reason_rules_and_usage_errors(db, capsys):
    assert warden(["rewind", "t", "b", "--ledger", db]) == 2  # missing --reason: usage error
    assert "--reason" in capsys.readouterr().err
    assert warden(["rewind", "t", "b", "--reason", " ", "--yes", "--ledger", db]) == 1
    err = capsys.readouterr().err
    assert err.startswith("warden: rewind needs a reason") and err.count("\n") == 1
    assert warden(["narrow", "t", "--set", "noequals", "--reason", "x", "--ledger", db]) == 2
    capsys.readouterr()
    assert warden(["narrow", "t", "--set", "a=1", "--exclude", "c", "--reason", "x", "--ledger", db]) == 2
    capsys.readouterr()
    assert warden(["narrow", "t", "--set", "a=" + "[" * 100_000, "--reason", "x", "--ledger", db]) == 2
    err = capsys.readouterr().err  # too deep for the parser: one line, not an internal error
    assert err == "warden narrow: --set a: the JSON value is nested too deeply\n"
    assert warden(["narrow", "t", "--reason", "x", "--ledger", db]) == 2
    capsys.readouterr()
    assert actions(db) == []


def test_refusals_are_one_line(db, capsys):
    for argv, msg, rc in [
        (["rewind", "nope", "b", "--reason", "x", "--yes"], "warden: unknown task 'nope'", 3),
        (["rewind", "t", "zz", "--reason", "x", "--yes"], "warden: unknown node 'zz'", 3),
        (["park", "t", "--node", "c", "--reason", "x", "--yes"], "warden: node c is running: use --now", 1),
        (["resolve", "1", "--option", "maybe", "--yes"], "warden: option 'maybe' is not offered by handoff 1: one of yes, no", 1),
        (["resolve", "42", "--option", "yes", "--yes"], "warden: unknown handoff '42'", 3),
    ]:
        assert warden([*argv, "--ledger", db]) == rc
        err = capsys.readouterr().err
        assert err.startswith(msg) and err.count("\n") == 1, err
    assert actions(db) == []


def test_missing_ledger_is_refused_without_creating_one(tmp_path, capsys):
    path = str(tmp_path / "nope.db")
    assert warden(["abort", "t", "--reason", "x", "--yes", "--ledger", path]) == 4  # ledger unavailable
    assert "no ledger" in capsys.readouterr().err and not os.path.exists(path)


def test_narrow_set_parses_json_values(db, capsys):
    rc = warden(["narrow", "t", "--set", 'scope=["all","core"]', "--reason", "core", "--dry-run", "--json",
                 "--ledger", db])
    plan = json.loads(capsys.readouterr().out)
    assert rc == 0 and plan["params"]["set"] == {"scope": ["all", "core"]} and plan["abandoned"] == ["c"]
    rc = warden(["narrow", "t", "--set", "scope=ext", "--reason", "ext", "--yes", "--json", "--ledger", db])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["applied"] and res["abandoned"] == [] and res["params"]["set"] == {"scope": "ext"}
    with Ledger.open(db, create=False) as led:
        assert led.task("t").preconditions == {"scope": "ext"}
    rc = warden(["narrow", "t", "--exclude", "c", "d", "--reason", "x", "--yes", "--json", "--ledger", db])
    assert rc == 0 and json.loads(capsys.readouterr().out)["abandoned"] == ["c", "d"]


def test_handoffs_and_resolve(db, capsys):
    assert warden(["handoffs", "--json", "--ledger", db]) == 0
    data = json.loads(capsys.readouterr().out)
    [h] = data["handoffs"]
    for k in ("id", "task_id", "node", "kind", "question", "options", "recommendation", "status", "age_s"):
        assert k in h
    assert (h["id"], h["task_id"], h["node"], h["kind"], h["status"], h["recommendation"]) == (
        "1", "t", "d", "confirm", "open", "yes")
    assert [o["id"] for o in h["options"]] == ["yes", "no"] and h["age_s"] >= 0
    assert warden(["handoffs", "--ledger", db]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[31m" in out and "[red]now[/red]" in out  # agent text shown literally
    assert warden(["resolve", "1", "--option", "no", "--answer", "not yet", "--yes", "--json", "--ledger", db,
                   "--operator", "bob"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["applied"] and res["reason"] == "no — not yet" and res["target"] == "1"
    assert statuses(db)["d"] == "pending"
    assert warden(["resolve", "1", "--option", "yes", "--yes", "--ledger", db]) == 1
    assert "handoff 1 was already resolved by bob at " in capsys.readouterr().err
    assert warden(["handoffs", "--json", "--ledger", db]) == 0
    assert json.loads(capsys.readouterr().out) == {"handoffs": []}
    assert warden(["handoffs", "--all", "--json", "--ledger", db]) == 0
    assert json.loads(capsys.readouterr().out)["handoffs"][0]["status"] == "resolved"


def test_park_and_resume_cli(db, capsys):
    assert warden(["park", "t", "--reason", "wait", "--until", "2h", "--wake-on", "node:c", "--yes", "--json",
                   "--ledger", db]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["applied"] and res["params"]["until"] and res["params"]["wake_on"] == "node:c"
    with Ledger.open(db, create=False) as led:
        assert led.task("t").status == "parked"
    assert warden(["resume", "t", "--yes", "--ledger", db]) == 0
    assert "applied" in capsys.readouterr().out
    with Ledger.open(db, create=False) as led:
        assert led.task("t").status == "active"
    assert warden(["park", "t", "--reason", "x", "--until", "soon", "--yes", "--ledger", db]) == 1
    assert "not a duration" in capsys.readouterr().err

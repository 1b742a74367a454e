"""`warden mind | plans | memory [confirm|reject]` through console.cli.main: the text at
80 columns with agent text escaped, the --json shapes of docs/console.md, the exit codes, and the
memory decision as an audited operator action (dry run, --yes, no terminal). Both backends."""

from __future__ import annotations

import json

import pytest

from console.cli import main as warden
from store import Ledger, ManualClock, NodeSpec

T0 = 1_800_000_000.0
LONG = 10**7
NASTY = "\x1b[31mred\x1b[0m [b]bold[/b] \u202eevil"


@pytest.fixture
def db(new_target):
    path = new_target("mind")
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock) as led:
        led.create_task("t", title="cycles", workflow="repo", constraints=["no public API change"],
                        requirements=[{"id": "r1", "text": "break every cycle"}, {"id": "r2", "text": NASTY}])
        led.add_nodes("t", [NodeSpec("a", serves=("r1",)), NodeSpec("b", serves=("r1",)), NodeSpec("loose"),
                            NodeSpec("report", deps=("a", "b"), serves=("r2",))])
        c = led.claim("t", "w", lease_s=LONG, key="a")
        clock.advance(30)
        led.conclude(c, "a imports b for a type " + NASTY, source="src/a.py")
        led.conclude(c, "renaming the module", kind="rejected", reason="breaks " + NASTY, source="tests")
        led.propose_memory(c, "build before tests " + NASTY, source="tests")
        led.commit(c, output={})
        led.replan("t", remove=["b"], add=[NodeSpec("root", serves=("r1",))], trigger="pattern",
                   reason="one root cause", actor="w")
    return path


def test_mind_text_shows_every_section_with_agent_text_escaped(db, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert warden(["mind", "t", "--ledger", db]) == 0
    out = capsys.readouterr().out
    for needle in ("requirements (2):", "r1  break every cycle", "2 nodes (1 done): a ✔, root ○",
                   "serving no requirement (1): loose ○", "constraints (1):", "no public API change",
                   "conclusions (1, newest first):", "(src/a.py)", "rejected paths (2, newest first):",
                   "why: breaks", "plan versions (2):", "v2  pattern by w", "- removed (1): b",
                   "memories proposed (1):", "#1  pending"):
        assert needle in out, (needle, out)
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[31m" in out and "[b]bold[/b]" in out


def test_mind_plans_and_memory_json_shapes(db, capsys):
    assert warden(["mind", "t", "--json", "--ledger", db]) == 0
    m = json.loads(capsys.readouterr().out)
    assert list(m) == ["task", "state", "signals", "requirements", "unserving", "constraints", "conclusions",
                       "rejected", "plans", "memories"]
    assert m["requirements"][0] == {"id": "r1", "text": "break every cycle", "status": "active", "dropped_in": None,
                                    "total": 2, "done": 1, "nodes": [{"key": "a", "status": "succeeded"},
                                                                     {"key": "root", "status": "pending"}]}
    assert m["requirements"][1]["text"] == NASTY  # as written; a reader escapes it
    assert m["unserving"] == {"total": 1, "nodes": [{"key": "loose", "status": "pending"}]}
    assert set(m["conclusions"][0]) == {"id", "node", "attempt", "kind", "text", "source", "reason", "origin",
                                        "actor", "at"}
    assert [e["origin"] for e in m["rejected"]] == ["replan", "agent"]
    assert m["state"]["plan_version"] == 2 and m["state"]["drift"]["after"] == 8
    assert [p["version"] for p in m["plans"]] == [1, 2]

    assert warden(["plans", "t", "--json", "--ledger", db]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["task_id"] == "t" and p["current"] == 2
    assert set(p["versions"][1]) == {"version", "at", "actor", "trigger", "in_flight", "reason", "added", "removed",
                                     "reordered", "narrowed", "in_flight_nodes", "dependents_kept", "revision"}
    assert (p["versions"][1]["added"], p["versions"][1]["removed"]) == (["root"], ["b"])

    assert warden(["memory", "--pending", "--json", "--ledger", db]) == 0
    mem = json.loads(capsys.readouterr().out)["memories"]
    assert len(mem) == 1 and set(mem[0]) == {"id", "scope", "workflow", "kind", "text", "status", "task_id", "node",
                                             "attempt", "proposed_by", "proposed_at", "decided_by", "decided_at",
                                             "reason", "source"}


def test_not_found_and_usage_errors_have_their_exit_codes(db, capsys):
    assert warden(["mind", "nope", "--ledger", db]) == 3
    assert warden(["plans", "nope", "--json", "--ledger", db]) == 3
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "not_found"
    assert warden(["memory", "confirm", "999", "--reason", "x", "--yes", "--ledger", db]) == 3
    assert warden(["memory", "confirm", "--ledger", db]) == 2
    assert warden(["memory", "confirm", "1", "--ledger", db]) == 2  # --reason is required
    capsys.readouterr()
    assert warden(["memory", "confirm", "1", "--yes", "--ledger", db]) == 2  # --yes is its flag: the reason is missing
    err = capsys.readouterr().err
    assert "required: --reason" in err and "does not apply" not in err
    assert warden(["memory", "--yes", "--ledger", db]) == 2
    assert warden(["memory", "maybe", "1", "--ledger", db]) == 2
    assert warden(["memory", "confirm", "1", "--pending", "--reason", "x", "--ledger", db]) == 2
    assert warden(["memory", "1", "--ledger", db]) == 2
    assert warden(["mind", "t", "--yes", "--ledger", db]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    with Ledger.open(db, create=False) as led:
        assert led.memory("1").status == "pending" and led.actions() == []


def test_memory_confirm_is_previewed_confirmed_and_audited(db, capsys, monkeypatch):
    assert warden(["memory", "confirm", "1", "--reason", "seen it", "--dry-run", "--json", "--ledger", db]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["action"] == "memory-confirm" and plan["params"]["decision"] == "confirm" and "applied" not in plan
    monkeypatch.setattr("console.cli.actions._interactive", lambda: False)
    assert warden(["memory", "confirm", "1", "--reason", "seen it", "--ledger", db]) == 1  # no terminal, no --yes
    assert "not applied" in capsys.readouterr().err
    with Ledger.open(db, create=False) as led:
        assert led.memory("1").status == "pending"
    assert warden(["memory", "confirm", "1", "--reason", "seen it", "--yes", "--operator", "ana", "--ledger", db]) == 0
    assert "applied (action" in capsys.readouterr().out
    with Ledger.open(db, create=False) as led:
        m = led.memory("1")
        assert (m.status, m.decided_by, m.decision_reason) == ("confirmed", "ana", "seen it")
        assert [(a.action, a.operator, a.result) for a in led.actions()] == [("memory-confirm", "ana", "applied")]
    assert warden(["memory", "confirm", "1", "--reason", "again", "--yes", "--ledger", db]) == 1
    assert "already confirmed by ana" in capsys.readouterr().err
    assert warden(["memory", "reject", "1", "--reason", "wrong after all", "--yes", "--json", "--ledger", db]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["applied"] is True and done["params"]["status_after"] == "rejected"
    assert warden(["memory", "--ledger", db]) == 0
    out = capsys.readouterr().out
    assert "#1  rejected" in out and "\x1b" not in out and "\u202e" not in out

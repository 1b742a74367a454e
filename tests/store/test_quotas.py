"""Shared external quotas are first-class (schedule a shared rate limit as a resource,
and mark in the state that two branches run one after the other because of it). A quota is
declared on the ledger or a task; nodes name the quotas they draw on; claims respect them across
tasks and processes; a node waiting on one stays pending with a ``quota_wait`` signal saying
"waiting on quota X (serialised by quota policy)" — never a stall, never wall clock as work.
Both backends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main as warden
from store import Ledger, NodeSpec, Refused
from store.reading.signals import signals_for_task

CLAIMER = str(Path(__file__).with_name("quota_claimer.py"))
LONG = 10**6


def keys_claimed(ledger, task, n, worker="w"):
    out = []
    for _ in range(n):
        c = ledger.claim(task, worker, lease_s=LONG)
        out.append(None if c is None else c.node_key)
    return out


def test_a_rate_quota_lets_capacity_claims_start_in_each_window(ledger, clock):
    ledger.declare_quota("search", 2, window_s=60)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec(f"s{i}", quotas=("search",)) for i in range(4)] + [NodeSpec("plain")])
    assert keys_claimed(ledger, "t", 4) == ["s0", "s1", "plain", None]  # s2, s3 wait: the quota is full
    sigs = [s for s in signals_for_task(ledger, ledger.task("t")) if s.kind == "quota_wait"]
    assert [s.node for s in sigs] == ["s2", "s3"] and all(s.severity == "info" for s in sigs)
    assert sigs[0].evidence.startswith("waiting on quota search (serialised by quota policy): 2 of 2 claims")
    clock.advance(59)
    assert keys_claimed(ledger, "t", 1) == [None]
    clock.advance(1)  # the first draws leave the window
    assert keys_claimed(ledger, "t", 3) == ["s2", "s3", None]
    assert ledger.quotas()[0].in_use == 2


def test_a_concurrency_quota_frees_when_a_holder_finishes_or_its_lease_expires(ledger, clock):
    ledger.declare_quota("gpu", 1)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", quotas=("gpu",)), NodeSpec("b", quotas=("gpu",)),
                           NodeSpec("c", quotas=("gpu",))])
    a = ledger.claim("t", "w", lease_s=30)
    assert a.node_key == "a" and ledger.claim("t", "w2", lease_s=30) is None
    ledger.commit(a, output={})
    b = ledger.claim("t", "w2", lease_s=30)
    assert b.node_key == "b" and ledger.claim("t", "w3", lease_s=30) is None
    clock.advance(30)  # b's lease expires: its hold on the quota ends; b is reclaimed first
    again = ledger.claim("t", "w3", lease_s=30)
    assert again.node_key == "b" and ledger.claim("t", "w4", lease_s=30) is None


def test_a_ledger_quota_is_shared_across_tasks_and_a_task_quota_wins_for_its_own(ledger):
    ledger.declare_quota("api", 1)
    ledger.create_task("t1")
    ledger.create_task("t2")
    ledger.create_task("t3")
    ledger.declare_quota("api", 2, task_id="t3")  # t3's own: its nodes draw on it, not the ledger's
    for t in ("t1", "t2", "t3"):
        ledger.add_nodes(t, [NodeSpec("x", quotas=("api",)), NodeSpec("y", quotas=("api",))])
    assert ledger.claim("t1", "w", lease_s=LONG).node_key == "x"
    assert ledger.claim("t2", "w", lease_s=LONG) is None  # the ledger's quota is held by t1
    assert keys_claimed(ledger, "t3", 3) == ["x", "y", None]
    assert ledger.claim(None, "w", lease_s=LONG) is None  # a claim of any task finds nothing either
    assert {(q.scope, q.name, q.in_use) for q in ledger.quotas("t3")} == {("", "api", 1), ("t3", "api", 2)}


def test_an_undeclared_quota_or_a_bad_declaration_is_refused_and_nothing_added(ledger):
    ledger.create_task("t")
    with pytest.raises(Refused, match="no quota 'nope'"):
        ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", quotas=("nope",))])
    assert ledger.graph("t").nodes == () or not ledger.graph("t").nodes
    for capacity, window in ((0, None), (2, 0), (2, -5)):
        with pytest.raises(Refused):
            ledger.declare_quota("q", capacity, window_s=window)
    with pytest.raises(Refused):
        ledger.declare_quota("has space", 1)
    assert ledger.quotas() == []


def test_waiting_on_a_quota_is_not_a_stall_nor_work(ledger, clock):
    ledger.declare_quota("gpu", 1)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", quotas=("gpu",)), NodeSpec("b", quotas=("gpu",))])
    a = ledger.claim("t", "w", lease_s=LONG)
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa " \
            "quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber bronze copper silver".split()
    for w in words:  # the holder works for an hour, heartbeating new information
        clock.advance(120)
        ledger.heartbeat(a, observation=f"module {w} compiled cleanly")
    kinds = {s.kind for s in signals_for_task(ledger, ledger.task("t"))}
    assert kinds == {"quota_wait"}  # b waited an hour: no stall, no alarm of any kind
    b = ledger.node("t", "b")
    assert b.status == "pending" and b.wall_used_s == 0 and b.attempt == 0
    ledger.commit(a, output={})
    c = ledger.claim("t", "w2", lease_s=LONG)
    clock.advance(5)
    ledger.commit(c, output={})
    assert ledger.node("t", "b").wall_used_s == pytest.approx(5)  # its wall clock ran only once claimed


def test_the_graph_json_and_text_say_why_a_node_waits(ledger, ledger_path, capsys):
    ledger.declare_quota("search", 1, window_s=600)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", quotas=("search",)), NodeSpec("b", quotas=("search",))])
    ledger.claim("t", "w", lease_s=LONG)
    assert warden(["graph", "t", "--json", "--ledger", ledger_path]) == 0
    nodes = {n["key"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    [sig] = nodes["b"]["signals"]
    assert sig["kind"] == "quota_wait" and "waiting on quota search (serialised by quota policy)" in sig["evidence"]
    assert nodes["a"]["signals"] == []
    assert warden(["quotas", "--json", "--ledger", ledger_path]) == 0
    [q] = json.loads(capsys.readouterr().out)["quotas"]
    assert (q["name"], q["capacity"], q["window_s"], q["in_use"], q["scope"]) == ("search", 1, 600.0, 1, None)
    assert warden(["quotas", "--ledger", ledger_path]) == 0
    assert "search" in capsys.readouterr().out


@pytest.mark.parametrize("mode,window", [("hold", None), ("drain", 3600.0)])
def test_processes_claiming_at_once_never_exceed_the_capacity(new_target, mode, window):
    db = new_target("ledger")
    with Ledger.open(db) as led:
        led.declare_quota("api", 3, window_s=window)
        led.create_task("t")
        led.add_nodes("t", [NodeSpec(f"n{i}", quotas=("api",)) for i in range(24)])
    procs = [subprocess.Popen([sys.executable, CLAIMER, db, "t", f"w{i}", mode], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(6)]
    for p in procs:  # every claimer has opened the ledger before any claims
        line = p.stdout.readline()
        assert line and json.loads(line) == {"event": "ready"}, p.stderr.read()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    claimed = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        claimed += [json.loads(x)["node"] for x in out.splitlines() if json.loads(x)["event"] == "claimed"]
    assert len(claimed) == 3 and len(set(claimed)) == 3  # exactly the capacity, each node once
    with Ledger.open(db) as led:
        assert sum(n.status != "pending" for n in led.graph("t").nodes) == 3


def test_the_console_graph_shows_the_quota_in_the_lease_column_not_as_a_warning(ledger, clock):
    from console.model import GraphModel
    from console.tasklist import severities
    from store.reading.cli_json import signal_json

    ledger.declare_quota("search", 1, window_s=600)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", quotas=("search",)), NodeSpec("b", quotas=("search",))])
    ledger.claim("t", "w", lease_s=LONG)
    sigs = [signal_json(s) for s in signals_for_task(ledger, ledger.task("t"))]
    g = GraphModel.of(ledger.graph("t"), clock)
    g.set_signals(sigs)
    cells = g.row_cells(g.index["b"])
    assert cells[3] == ("quota search", "dim") and cells[6][0] == "—"  # lease column; no ⚠ count
    assert severities(ledger.task("t"), sigs)[:2] == (0, 0)  # the task list counts no warning

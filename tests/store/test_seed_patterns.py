"""Repeated failures of one shape among siblings suggest a replan (several nodes in a row
with results of the same shape — recognise the pattern and replan). Siblings share their
dependencies; one shape is one failure class and one normalised first line of the error. The
signal is ``failure_pattern`` in ``warden status --json``, ``warden graph --json`` and the
console's incremental analysis, naming the nodes and the shared error; a replan with
``trigger="pattern"`` that removes them clears it. Both backends."""

from __future__ import annotations

import json

from console.cli import main as warden
from console.explain import suggestion
from store import NodeSpec
from store.reading.analysis import TaskAnalysis
from store.reading.cli_json import graph_json, status_json

LONG = 10**7


def patterns(ledger, task="t"):
    return [s for s in graph_json(ledger, task)["task"]["signals"] if s["kind"] == "failure_pattern"]


def fail(ledger, key, error, failure_class="transient", task="t"):
    c = ledger.claim(task, "w", lease_s=LONG, key=key)
    ledger.fail(c, error=error, failure_class=failure_class, retryable=False)


def fan_out(ledger, n=5):
    """plan → fetch-0..n-1 → merge, and a node of its own that keeps the task active (a failed task
    raises no signal: there is nothing left to replan)."""
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("plan"), *[NodeSpec(f"fetch-{i}", deps=("plan",)) for i in range(n)],
                           NodeSpec("merge", deps=tuple(f"fetch-{i}" for i in range(n))), NodeSpec("notes")])
    ledger.commit(ledger.claim("t", "w", lease_s=LONG, key="plan"), output={})


def test_five_siblings_failing_the_same_way_raise_one_pattern_with_the_nodes_and_the_error(ledger):
    fan_out(ledger)
    for i in range(5):
        fail(ledger, f"fetch-{i}", f"ConnectionError: connection refused by 10.0.0.{i}:5432 after {i + 2} tries\n"
                                   f"  at attempt {i}")
        assert len(patterns(ledger)) == (1 if i >= 2 else 0)  # from the third on
    (p,) = patterns(ledger)
    assert p["severity"] == "warn" and p["node"] is None
    assert all(f"fetch-{i}" in p["evidence"] for i in range(5)) and "5 sibling nodes" in p["evidence"]
    assert "ConnectionError: connection refused by 10.0.0.4:5432 after 6 tries" in p["evidence"]
    assert "replan" in p["evidence"] and "'pattern'" in p["evidence"]
    status = next(t for t in status_json(ledger)["tasks"] if t["task_id"] == "t")
    assert [s["evidence"] for s in status["signals"] if s["kind"] == "failure_pattern"] == [p["evidence"]]
    assert suggestion(p) is not None


def test_different_shapes_or_non_siblings_raise_nothing(ledger):
    fan_out(ledger, n=6)
    fail(ledger, "fetch-0", "ConnectionError: refused")
    fail(ledger, "fetch-1", "ConnectionError: refused", failure_class="spec")  # another class
    fail(ledger, "fetch-2", "KeyError: 'title' missing in record 12")  # another message
    fail(ledger, "fetch-3", "ConnectionError: refused")
    assert patterns(ledger) == []  # two of one shape only
    ledger.create_task("u")  # the same error on nodes of different parents: not siblings
    ledger.add_nodes("u", [NodeSpec("a"), NodeSpec("b"), NodeSpec("x", deps=("a",)), NodeSpec("y", deps=("b",)),
                           NodeSpec("z")])
    for k in ("a", "b"):
        ledger.commit(ledger.claim("u", "w", lease_s=LONG, key=k), output={})
    for k in ("x", "y", "z"):
        fail(ledger, k, "TimeoutError: read timed out after 30 s", task="u")
    assert patterns(ledger, "u") == []


def test_a_replan_naming_the_pattern_clears_it_and_the_console_analysis_agrees(ledger):
    fan_out(ledger, n=4)
    analysis = TaskAnalysis(ledger, "t")
    for i in range(3):
        fail(ledger, f"fetch-{i}", f"HTTP 429 from api.example.com: rate limited, retry after {i + 30} s")
    for e in ledger.events(since=analysis.cursor, task_id="t"):
        analysis.apply_event(e, ledger.nodes("t", [e.node]) if e.node else (), task=ledger.task("t"))
    mine = [(s.kind, s.evidence) for s in analysis.signals(ledger.now()) if s.kind == "failure_pattern"]
    assert mine == [(p["kind"], p["evidence"]) for p in patterns(ledger)] and len(mine) == 1
    ledger.replan("t", remove=["fetch-0", "fetch-1", "fetch-2"], add=[NodeSpec("fetch-batched", deps=("plan",))], actor="w",
                  trigger="pattern", reason="three fetches hit the rate limit alike: one batched fetch instead")
    assert patterns(ledger) == []
    assert ledger.plans("t")[-1].trigger == "pattern"


def test_the_cli_shows_it(ledger, ledger_path, capsys):
    fan_out(ledger, n=3)
    for i in range(3):
        fail(ledger, f"fetch-{i}", f"ValueError: bad row {i * 7}")
    ledger.close()
    assert warden(["status", "--json", "--ledger", ledger_path]) == 0
    out = json.loads(capsys.readouterr().out)
    task = next(t for t in out["tasks"] if t["task_id"] == "t")
    assert [s["kind"] for s in task["signals"]].count("failure_pattern") == 1
    assert warden(["graph", "t", "--ledger", ledger_path]) == 0
    assert "3 sibling nodes failed the same way" in capsys.readouterr().out

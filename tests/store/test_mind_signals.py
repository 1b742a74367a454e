"""Goal drift: ``drift_suspected`` (N completed nodes in a row serve no requirement) and
``alignment_due`` (an alignment check every K completed nodes, a node of kind ``alignment`` whose
answer records the verdict: a person's handoff, or an agent that claims the kind). The same
signals in ``warden status --json``, ``warden graph --json`` and the incremental TaskAnalysis."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import Ledger, ManualClock, NodeSpec, Refused
from store.reading.analysis import TaskAnalysis
from store.reading.cli_json import graph_json, status_json

LONG = 10**7
REQS = [{"id": "r1", "text": "find the performance problems of the whole service"}]


def kinds(ledger, task="t"):
    return [s["kind"] for s in graph_json(ledger, task)["task"]["signals"]]


def signal(ledger, kind, task="t"):
    found = [s for s in graph_json(ledger, task)["task"]["signals"] if s["kind"] == kind]
    return found[0] if found else None


def open_task(ledger, task="t", **kw):
    """A task with requirements and one node that stays pending (so the task stays active: a
    finished task raises neither signal)."""
    ledger.create_task(task, requirements=REQS, **kw)
    ledger.add_node(task, "anchor", serves=["r1"])


def run(ledger, clock, task, serves_pattern, *, prefix="n"):
    """Add and complete one node per entry: True serves r1, False serves nothing."""
    for i, serves in enumerate(serves_pattern):
        key = f"{prefix}{i:03d}"
        ledger.add_node(task, key, serves=["r1"] if serves else [])
        c = ledger.claim(task, "w", lease_s=LONG, key=key)
        clock.advance(3)
        ledger.commit(c, output={})


def test_eight_unserving_completions_in_a_row_raise_drift_with_the_nodes_as_evidence(ledger, clock):
    open_task(ledger, alignment_every=0)
    run(ledger, clock, "t", [True] + [False] * 7)
    assert "drift_suspected" not in kinds(ledger)
    run(ledger, clock, "t", [False], prefix="late")
    s = signal(ledger, "drift_suspected")
    assert s["severity"] == "warn" and s["node"] is None
    assert s["evidence"].startswith("8 completed nodes in a row serve no requirement: n001, n002")
    assert "late000" in s["evidence"] and "n000" not in s["evidence"]
    run(ledger, clock, "t", [True], prefix="back")  # a node that serves one ends the run
    assert "drift_suspected" not in kinds(ledger)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.lists(st.booleans(), max_size=30), n=st.integers(min_value=0, max_value=6))
def test_drift_is_exactly_a_trailing_run_of_n_unserving_completions(tmp_path_factory, pattern, n):
    clock = ManualClock(1_800_000_000.0)
    path = tmp_path_factory.mktemp("drift") / "ledger.db"
    with Ledger.open(path, clock=clock) as ledger:
        open_task(ledger, drift_after=n, alignment_every=0)
        run(ledger, clock, "t", pattern)
        trailing = 0
        for serves in reversed(pattern):
            if serves:
                break
            trailing += 1
        want = n > 0 and trailing >= n
        got = signal(ledger, "drift_suspected")
        assert (got is not None) == want, (pattern, n)
        if got:
            assert got["evidence"].startswith(f"{trailing} completed nodes in a row")
        assert ledger.task("t").mind.run == trailing


def test_a_task_without_requirements_never_drifts_and_gets_no_alignment_checks(ledger, clock):
    ledger.create_task("t")
    run(ledger, clock, "t", [False] * 30)
    assert kinds(ledger) == [] and ledger.task("t").status == "completed"
    assert all(n.kind != "alignment" for n in ledger.graph("t").nodes)


def test_an_alignment_check_asks_a_person_with_the_requirement_the_plan_and_the_work(ledger, clock):
    open_task(ledger, alignment_every=12, drift_after=8)
    run(ledger, clock, "t", [True] * 2 + [False] * 9)
    assert "alignment_due" not in kinds(ledger)
    run(ledger, clock, "t", [False], prefix="twelfth")
    check = ledger.node("t", "alignment-1")
    assert check.kind == "alignment" and check.status == "blocked"
    h = ledger.handoffs(task_id="t")[0]
    assert h.kind == "alignment" and h.node == "alignment-1" and {o["id"] for o in h.options} == {"aligned", "drifting"}
    assert h.recommendation == "drifting"  # 10 in a row serve nothing
    ctx = h.context
    assert ctx["requirements"] == [{"id": "r1", "text": REQS[0]["text"]}]
    assert [a["node"] for a in ctx["plan"]["ahead"]] == ["anchor"] and len(ctx["done"]) == 12
    assert ctx["done"][0]["node"] == "twelfth000"
    due = signal(ledger, "alignment_due")
    assert due["node"] == "alignment-1" and "a person" in due["evidence"]
    assert {"drift_suspected", "alignment_due", "handoff_waiting"} <= set(kinds(ledger))
    # the task does not complete with its check unanswered
    c = ledger.claim("t", "w", lease_s=LONG, key="anchor")
    ledger.commit(c, output={})
    assert ledger.task("t").status == "active"
    # answered "aligned": the drift run and the count restart; the verdict is a finding
    ledger.apply(ledger.plan_resolve(h.id, option="aligned", answer="hot spots first is right"), operator="alice")
    done = ledger.node("t", "alignment-1")
    assert done.status == "succeeded" and done.output["verdict"] == "aligned"
    assert kinds(ledger) == [] and ledger.task("t").status == "completed"
    m = ledger.task("t").mind
    assert (m.run, m.check, m.verdict) == (0, None, "aligned")
    f = ledger.conclusions("t")[0]
    assert f.origin == "alignment" and "aligned" in f.text and f.actor == "alice"


def test_a_drifting_verdict_raises_an_alarm_until_a_replan(ledger, clock):
    open_task(ledger, alignment_every=3, drift_after=0)
    run(ledger, clock, "t", [True, False, True])
    h = ledger.handoffs(task_id="t")[0]
    ledger.apply(ledger.plan_resolve(h.id, option="drifting", answer="it polishes one query"), operator="bob")
    s = signal(ledger, "drift_suspected")
    assert s["severity"] == "alarm" and "drifting" in s["evidence"]
    ledger.add_node("t", "more")
    c = ledger.claim("t", "w", lease_s=LONG, key="more")
    assert c.inputs["memory"]["alignment"]["verdict"] == "drifting"
    ledger.replan("t", add=[NodeSpec("profile-all", serves=("r1",))], trigger="operator",
                  reason="bob: profile the whole service", actor="w")
    assert "drift_suspected" not in kinds(ledger)


def _status_signals(ledger, task="t"):
    return [s["kind"] for t in status_json(ledger)["tasks"] if t["task_id"] == task for s in t.get("signals", [])]


def test_a_drifting_verdict_on_the_last_open_node_keeps_the_task_active_with_its_alarm(ledger, clock):
    """The alignment check is the plan's last open node: a person answering "drifting" used to
    complete the task (no alarm anywhere). Drift is judged first: the task stays active, the alarm
    shows, the preview says so; a narrow answers it and the task completes."""
    ledger.create_task("t", requirements=REQS, alignment_every=3, drift_after=0)
    run(ledger, clock, "t", [True, False, True])
    assert ledger.node("t", "alignment-1").status == "blocked"
    h = ledger.handoffs(task_id="t")[0]
    plan = ledger.plan_resolve(h.id, option="drifting", answer="it polishes one query")
    assert plan.task_status == ("active", "active")
    assert any("drifting verdict keeps the task active" in w for w in plan.warnings)
    ledger.apply(plan, operator="bob")
    assert ledger.node("t", "alignment-1").status == "succeeded"
    assert ledger.task("t").status == "active"
    s = signal(ledger, "drift_suspected")
    assert s is not None and s["severity"] == "alarm"
    assert "drift_suspected" in _status_signals(ledger)
    # the operator narrows the task: that answers the verdict, and with nothing left it completes
    narrow = ledger.plan_narrow("t", reason="the one query was the scope after all", set={"scope": "one-query"})
    assert narrow.task_status == ("active", "completed")
    ledger.apply(narrow, operator="bob")
    assert ledger.task("t").status == "completed" and ledger.task("t").mind.verdict is None


def test_an_agents_drifting_verdict_holds_the_task_open_until_a_replan(ledger, clock):
    ledger.create_task("t", requirements=REQS, alignment_every=2, drift_after=0, alignment_by="agent")
    run(ledger, clock, "t", [True, False])
    a = ledger.claim("t", "aligner", lease_s=LONG, kinds=["alignment"])
    ledger.commit(a, output={"verdict": "drifting", "notes": "one query is not the whole service"})
    assert ledger.task("t").status == "active" and signal(ledger, "drift_suspected")["severity"] == "alarm"
    ledger.replan("t", add=[NodeSpec("profile-all", serves=("r1",))], trigger="operator",
                  reason="profile the whole service", actor="w")
    assert "drift_suspected" not in kinds(ledger) and ledger.task("t").status == "active"
    c = ledger.claim("t", "w", lease_s=LONG, key="profile-all")
    ledger.commit(c, output={})
    assert ledger.task("t").status == "completed"


def test_work_finishing_after_a_drifting_verdict_does_not_complete_the_task(ledger, clock):
    """Mid-plan "drifting", then the rest of the plan runs to its end without a replan."""
    open_task(ledger, alignment_every=2, drift_after=0)
    run(ledger, clock, "t", [True, False])
    ledger.apply(ledger.plan_resolve(ledger.handoffs(task_id="t")[0].id, option="drifting"), operator="bob")
    c = ledger.claim("t", "w", lease_s=LONG, key="anchor")
    ledger.commit(c, output={})
    assert ledger.task("t").status == "active" and signal(ledger, "drift_suspected")["severity"] == "alarm"


def test_an_agent_answers_alignment_checks_when_the_task_says_so(ledger, clock):
    open_task(ledger, alignment_every=4, alignment_by="agent")
    run(ledger, clock, "t", [True, True, False, True])
    check = ledger.node("t", "alignment-1")
    assert check.status == "pending" and ledger.handoffs(task_id="t") == []
    assert "an agent" in signal(ledger, "alignment_due")["evidence"]
    c = ledger.claim("t", "generic", lease_s=LONG)
    assert c.node_key == "anchor"  # a claim that does not ask for kind alignment never gets one
    ledger.commit(c, output={})
    assert ledger.claim("t", "generic", lease_s=LONG) is None
    assert ledger.task("t").status == "active"  # the unanswered check holds it open
    a = ledger.claim("t", "aligner", lease_s=LONG, kinds=["alignment"])
    assert a.node_key == "alignment-1"
    mat = a.inputs["alignment"]
    assert mat["requirements"][0]["id"] == "r1"
    assert {d["node"] for d in mat["done"]} == {"n000", "n001", "n002", "n003", "anchor"}  # up to the claim
    with pytest.raises(Refused, match="verdict"):
        a_out = {"looks": "fine"}
        ledger.commit(a, output=a_out)
    ledger.commit(a, output={"verdict": "aligned", "notes": "every node maps to r1"})
    assert ledger.task("t").mind.verdict == "aligned" and "alignment_due" not in kinds(ledger)


def test_drift_and_alignment_signals_agree_between_status_graph_and_the_incremental_analysis(ledger, clock):
    open_task(ledger, alignment_every=5, drift_after=3)
    analysis = TaskAnalysis(ledger, "t")
    run(ledger, clock, "t", [True, False, False, False, False])
    for e in ledger.events(since=analysis.cursor, task_id="t"):
        analysis.apply_event(e, ledger.nodes("t", [e.node]) if e.node else (), task=ledger.task("t"))
    now = ledger.now()
    mine = sorted((s.kind, s.node, s.severity, s.evidence) for s in analysis.signals(now)
                  if s.kind in ("drift_suspected", "alignment_due"))
    graph = sorted((s["kind"], s["node"], s["severity"], s["evidence"]) for s in graph_json(ledger, "t")["task"]["signals"]
                   if s["kind"] in ("drift_suspected", "alignment_due"))
    status = next(t for t in status_json(ledger)["tasks"] if t["task_id"] == "t")
    stat = sorted((s["kind"], s["node"], s["severity"], s["evidence"]) for s in status["signals"]
                  if s["kind"] in ("drift_suspected", "alignment_due"))
    assert mine == graph == stat and {k for k, *_ in mine} == {"drift_suspected", "alignment_due"}
    assert status["mind"]["drift"]["run"] == 4 and status["mind"]["alignment"]["open"] == "alignment-1"

"""Plan versions: ``Ledger.replan`` — what add, remove, reorder and narrow do to the graph,
how each in-flight mode treats running nodes, the journal event, the revision, and the version
recorded with its diff, trigger and actor. Both backends (the ``ledger`` fixture)."""

from __future__ import annotations

import random

import pytest

from store import LeaseLost, NodeSpec, NotFound, Refused
from store.errors import InvalidValue
from tests.support.asks import ask

LONG = 10**7
REQS = [{"id": "r1", "text": "fix the cycles"}, {"id": "r2", "text": "document them"},
        {"id": "r3", "text": "benchmark the build"}]


def statuses(ledger, task="t"):
    return {n.key: n.status for n in ledger.graph(task).nodes}


def twenty_fixes(ledger):
    ledger.create_task("t", requirements=REQS)
    ledger.add_nodes("t", [NodeSpec(f"fix-{i:02d}", serves=("r1",)) for i in range(20)]
                     + [NodeSpec("report", deps=tuple(f"fix-{i:02d}" for i in range(20)), serves=("r2",))])


def test_a_replan_removes_adds_and_records_a_version_with_its_diff(ledger, clock):
    """At fix 15 the last five share one root cause."""
    twenty_fixes(ledger)
    for _ in range(15):
        c = ledger.claim("t", "w", lease_s=LONG)
        ledger.commit(c, output={})
    rev = ledger.task("t").revision
    clock.advance(60)
    last = [f"fix-{i:02d}" for i in range(15, 20)]
    v = ledger.replan("t", add=[NodeSpec("root-cause", serves=("r1",))], remove=last, trigger="pattern",
                      reason="the last five cycles all come from utils/ importing app/", actor="agent-7")
    assert (v.version, v.trigger, v.in_flight, v.actor) == (2, "pattern", "wait", "agent-7")
    assert v.added == ("root-cause",) and v.removed == tuple(last) and v.at == clock()
    assert v.dependents_kept == ("report",)  # it runs without them (an abandoned dependency counts as met)
    s = statuses(ledger)
    assert all(s[k] == "abandoned" for k in last) and s["root-cause"] == "pending"
    assert ledger.task("t").revision > rev and v.revision == ledger.task("t").revision
    ev = [e for e in ledger.events(task_id="t") if e.kind == "graph.replanned"]
    assert len(ev) == 1 and ev[0].layer == "decision" and ev[0].actor == "agent-7"
    assert set(ev[0].payload["nodes"]) == {"root-cause", *last} and ev[0].payload["version"] == 2
    assert [p.version for p in ledger.plans("t")] == [1, 2] and ledger.plans("t")[0].trigger == "initial"
    assert ledger.task("t").mind.plan_version == 2


def test_a_dependent_is_rewired_by_removing_it_and_adding_its_replacement(ledger):
    """A replan never adds edges to an existing node: the report that must wait for the new
    root-cause node is removed and added again under a new key with the new dependencies."""
    twenty_fixes(ledger)
    keep = tuple(f"fix-{i:02d}" for i in range(15))
    v = ledger.replan("t", remove=[f"fix-{i:02d}" for i in range(15, 20)] + ["report"],
                      add=[NodeSpec("root-cause", serves=("r1",)),
                           NodeSpec("report-2", deps=(*keep, "root-cause"), serves=("r2",))],
                      trigger="pattern", reason="one root cause", actor="a")
    assert v.dependents_kept == () and set(v.removed) >= {"report"}
    assert set(ledger.node("t", "report-2").deps) == {*keep, "root-cause"}


def test_remove_refuses_finished_work_and_unknown_keys_and_skips_abandoned(ledger):
    twenty_fixes(ledger)
    c = ledger.claim("t", "w", lease_s=LONG)
    ledger.commit(c, output={})
    before = ledger.last_event_id()
    with pytest.raises(Refused, match="already succeeded"):
        ledger.replan("t", remove=["fix-00"], trigger="pattern", reason="x", actor="a")
    with pytest.raises(NotFound):
        ledger.replan("t", remove=["nope"], trigger="pattern", reason="x", actor="a")
    with pytest.raises(InvalidValue, match="replan trigger"):
        ledger.replan("t", remove=["fix-01"], trigger="whim", reason="x", actor="a")
    with pytest.raises(InvalidValue, match="in-flight"):
        ledger.replan("t", remove=["fix-01"], trigger="pattern", in_flight="ignore", reason="x", actor="a")
    with pytest.raises(InvalidValue, match="reason"):
        ledger.replan("t", remove=["fix-01"], trigger="pattern", reason=" ", actor="a")
    assert ledger.last_event_id() == before and len(ledger.plans("t")) == 1
    ledger.replan("t", remove=["fix-01"], trigger="pattern", reason="x", actor="a")
    # a retried replan (the agent died before it knew): no new version, nothing changes
    again = ledger.replan("t", remove=["fix-01"], trigger="pattern", reason="x", actor="a")
    assert again.version == 2 and len(ledger.plans("t")) == 2


@pytest.mark.parametrize("mode", ["wait", "discard", "cancel"])
def test_in_flight_modes_for_a_running_node_the_version_removes(ledger, mode):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b"), NodeSpec("after-a", deps=("a",))])
    c = ledger.claim("t", "w", lease_s=LONG, key="a")
    v = ledger.replan("t", remove=["a"], trigger="evidence_conflict", in_flight=mode, reason="its premise is false",
                      actor="planner")
    assert v.in_flight_nodes[0]["node"] == "a" and v.in_flight_nodes[0]["was"] == "running"
    if mode == "cancel":
        assert ledger.node("t", "a").status == "abandoned"
        with pytest.raises(LeaseLost, match="abandoned"):
            ledger.commit(c, output={"x": 1})
        return
    assert ledger.node("t", "a").status == "running"  # it finishes its attempt
    ledger.heartbeat(c, units_done=1)
    ledger.commit(c, output={"x": 1}, next_nodes=[NodeSpec("follow-up")])
    n = ledger.node("t", "a")
    if mode == "wait":
        assert n.status == "succeeded" and "follow-up" in statuses(ledger)
    else:
        assert n.status == "abandoned" and n.output == {"x": 1}  # kept for audit, not handed on
        assert "follow-up" not in statuses(ledger)
        assert [e.kind for e in ledger.events(task_id="t")][-1] == "node.discarded"
    assert n.removed_in == 2 and n.removed_mode == mode


@pytest.mark.parametrize("mode", ["wait", "discard"])
def test_a_removed_running_node_that_fails_or_dies_is_abandoned_never_retried(ledger, clock, mode):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b")])
    ca = ledger.claim("t", "w", lease_s=LONG, key="a")
    cb = ledger.claim("t", "w", lease_s=30, key="b")
    ledger.replan("t", remove=["a", "b"], trigger="pattern", in_flight=mode, reason="dead end", actor="p")
    ledger.fail(ca, error="boom", retryable=True)
    assert ledger.node("t", "a").status == "abandoned"
    clock.advance(31)  # b's agent died: its lease expires; the next claim abandons it, never reclaims
    assert ledger.claim("t", "w2", lease_s=30) is None
    assert ledger.node("t", "b").status == "abandoned" and ledger.task("t").status == "completed"
    with pytest.raises(LeaseLost):
        ledger.commit(cb, output={})  # its late write changes nothing
    assert ledger.node("t", "b").status == "abandoned"


def test_blocked_nodes_removed_have_their_handoffs_withdrawn(ledger):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("ask"), NodeSpec("other")])
    c = ledger.claim("t", "w", lease_s=LONG, key="ask")
    hid = ask(ledger, c, kind="direction", question="which way?")
    v = ledger.replan("t", remove=["ask"], trigger="operator", reason="alice: we drop that question", actor="w")
    assert ledger.handoff(hid).status == "withdrawn" and ledger.node("t", "ask").status == "abandoned"
    assert v.in_flight_nodes[0]["was"] == "blocked"


def test_reorder_changes_what_is_claimed_next_and_keeps_dependencies(ledger):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b"), NodeSpec("c"), NodeSpec("d", deps=("c",)),
                           NodeSpec("e")])
    v = ledger.replan("t", reorder=["d", "e"], add=[NodeSpec("new")], trigger="evidence_conflict",
                      reason="d answers the open question", actor="p")
    assert v.reordered == ("d", "e")
    order = [n.key for n in ledger.graph("t").nodes]
    assert order.index("c") < order.index("d") < order.index("e") < order.index("a")
    got = []
    while (c := ledger.claim("t", "w", lease_s=LONG)) is not None:
        got.append(c.node_key)
        ledger.commit(c, output={})
    assert got[:3] == ["c", "d", "e"]  # c first: d depends on it
    with pytest.raises(Refused, match="not started"):
        ledger.replan("t", reorder=["a"], trigger="pattern", reason="x", actor="p")


def test_reorder_refuses_an_order_against_the_dependencies(ledger):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    with pytest.raises(Refused, match="puts b before a, but b depends on a"):
        ledger.replan("t", reorder=["b", "a"], trigger="pattern", reason="x", actor="p")
    assert [n.key for n in ledger.graph("t").nodes] == ["a", "b"] and len(ledger.plans("t")) == 1


@pytest.mark.parametrize("seed", range(6))
def test_reorder_on_random_graphs_is_topological_and_puts_the_listed_first(ledger, seed):
    rnd = random.Random(seed)
    n = rnd.randint(5, 40)
    ledger.create_task("t")
    specs = []
    for i in range(n):
        deps = tuple(f"n{j}" for j in rnd.sample(range(i), min(i, rnd.randint(0, 2))))
        specs.append(NodeSpec(f"n{i}", deps=deps))
    ledger.add_nodes("t", specs)
    deps_of = {s.key: s.deps for s in specs}
    for _ in range(rnd.randint(0, n // 3)):  # some work done
        c = ledger.claim("t", "w", lease_s=LONG)
        if c is None:
            break
        ledger.commit(c, output={})
    pending = [k for k, s in statuses(ledger).items() if s == "pending"]
    listed = rnd.sample(pending, min(len(pending), rnd.randint(1, 4)))

    def ancestors(k):
        out, stack = set(), list(deps_of[k])
        while stack:
            d = stack.pop()
            if d not in out:
                out.add(d)
                stack.extend(deps_of[d])
        return out

    bad = any(listed[j] in ancestors(listed[i]) for i in range(len(listed)) for j in range(i + 1, len(listed)))
    if bad:
        with pytest.raises(Refused, match="depends on"):
            ledger.replan("t", reorder=listed, trigger="pattern", reason="x", actor="p")
        return
    ledger.replan("t", reorder=listed, trigger="pattern", reason="x", actor="p")
    nodes = ledger.graph("t").nodes
    pos = {v.key: v.position for v in nodes}
    assert len(set(pos.values())) == n  # positions stay distinct
    for k, ds in deps_of.items():
        assert all(pos[d] < pos[k] for d in ds), (k, ds)
    # among pending nodes, each listed one comes before every pending node not listed or an ancestor of one
    first = set(listed) | {a for k in listed for a in ancestors(k)}
    rest = [pos[k] for k in pending if k not in first]
    if rest:
        assert all(pos[k] < min(rest) for k in listed)
    assert [k for k in sorted(listed, key=pos.get)] == listed


def test_narrow_drops_requirements_and_the_nodes_serving_only_them(ledger):
    ledger.create_task("t", requirements=REQS)
    ledger.add_nodes("t", [NodeSpec("fix", serves=("r1",)), NodeSpec("bench", serves=("r3",)),
                           NodeSpec("both", serves=("r1", "r3")), NodeSpec("plain")])
    v = ledger.replan("t", narrow={"drop": ["r3"], "goal": "cycles and their docs only"}, trigger="operator",
                      reason="alice: benchmarks are out of scope", actor="agent")
    assert v.narrowed == {"dropped": ["r3"], "goal": "cycles and their docs only"} and v.removed == ("bench",)
    assert statuses(ledger) == {"fix": "pending", "bench": "abandoned", "both": "pending", "plain": "pending"}
    r = {x.id: (x.status, x.dropped_in) for x in ledger.requirements("t")}
    assert r["r3"] == ("dropped", 2) and r["r1"] == ("active", None)
    assert ledger.task("t").mind.requirements == 2
    with pytest.raises(Refused, match="a replan dropped"):
        ledger.add_node("t", "more-bench", serves=["r3"])
    with pytest.raises(Refused, match="every requirement"):
        ledger.replan("t", narrow={"drop": ["r1", "r2"]}, trigger="pattern", reason="x", actor="a")
    with pytest.raises(InvalidValue, match="narrows nothing"):
        ledger.replan("t", narrow={}, trigger="pattern", reason="x", actor="a")


def test_an_aborted_task_cannot_be_replanned_and_a_failed_one_reopens_with_new_work(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a", retryable=False)
    c = ledger.claim("t", "w", lease_s=LONG)
    ledger.fail(c, error="spec was wrong", failure_class="spec", retryable=False)
    assert ledger.task("t").status == "failed"
    ledger.replan("t", add=[NodeSpec("a2")], remove=["a"], trigger="evidence_conflict", reason="new spec",
                  actor="p")
    assert ledger.task("t").status == "active"
    ledger.apply(ledger.plan_abort("t", reason="stop"), operator="op")
    with pytest.raises(Refused, match="aborted"):
        ledger.replan("t", add=[NodeSpec("a3")], trigger="pattern", reason="x", actor="p")

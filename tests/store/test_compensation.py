"""Compensations as work: abort turns each confirmed effect with a compensation into a claimable
node (kind ``compensation``, key ``compensate:<effect_key>``) chained in reverse confirmation
order; committing one marks its effect ``compensated``; an operator can mark one by hand.

Generated effect sets (how many, which have a compensation, which are only intended, in which
order they were confirmed, keys a node key cannot hold) are checked against what abort must do.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import Budget, LeaseLost, Ledger, NodeSpec, NotFound, Refused, StaleRevision
from store.ledger.compensation import KIND, node_key
from store.storage.core import NODE_KEY_RE
from store.reading.cli_json import graph_json

LONG = 10**7


def _effects(ledger: Ledger, clock, task: str, specs) -> None:
    """specs: [(effect_key, compensation or None, confirmed?)] made by one node each, in order."""
    ledger.add_nodes(task, [NodeSpec(f"n{i}", f"k{i}") for i in range(len(specs))])
    for i, (key, comp, confirmed) in enumerate(specs):
        c = ledger.claim(task, "w", lease_s=LONG, kinds=[f"k{i}"])
        ledger.intend_effect(c, key, compensation=comp)
        if confirmed:
            clock.advance(1)
            ledger.confirm_effect(c, key, external_id=f"#{i}")
        ledger.commit(c, output={})


def _abort(ledger: Ledger, task: str):
    plan = ledger.plan_abort(task, reason="wrong repository")
    return plan, ledger.apply(plan, operator="op")


def _run_all(ledger: Ledger, task: str) -> list[str]:
    order = []
    while True:
        c = ledger.claim(task, "undoer", lease_s=LONG)
        if c is None:
            return order
        assert c.kind == KIND and c.inputs["effect"] is not None
        order.append(c.inputs["effect"]["effect_key"])
        ledger.commit(c, output={"undone": c.inputs["effect"]["effect_key"]})


def test_abort_turns_compensations_into_a_chain(ledger, clock):
    ledger.create_task("t")
    _effects(ledger, clock, "t", [("pr:a", "close PR a", True), ("msg:b", None, True), ("pr:c", "close PR c", True),
                                  ("pr:d", "close PR d", False), ("pr:e", "close PR e", True)])
    ledger.add_node("t", "later")
    plan, done = _abort(ledger, "t")
    assert [c["node"] for c in plan.compensations] == ["compensate:pr:e", "compensate:pr:c", "compensate:pr:a"]
    assert [c["after"] for c in plan.compensations] == [None, "compensate:pr:e", "compensate:pr:c"]
    assert plan.to_json()["compensations"][0] == {"node": "compensate:pr:e", "effect_key": "pr:e",
                                                  "effect_node": "n4", "compensation": "close PR e",
                                                  "external_id": "#4", "after": None}
    assert any("msg:b" not in w and "no compensation" in w for w in plan.warnings)
    assert any("never confirmed" in w and "pr:d" in w for w in plan.warnings)
    g = ledger.graph("t")
    comp = [n for n in g.nodes if n.kind == KIND]
    assert [(n.key, n.status, n.deps) for n in comp] == [
        ("compensate:pr:e", "pending", ()), ("compensate:pr:c", "pending", ("compensate:pr:e",)),
        ("compensate:pr:a", "pending", ("compensate:pr:c",))]
    assert ledger.node("t", "later").status == "abandoned"
    ev = [e for e in ledger.events(0, task_id="t") if e.kind == "operator.abort"][0]
    assert ev.payload["compensations"] == [n.key for n in comp] and "compensate:pr:e" in ev.payload["nodes"]
    # only compensations are claimable, one at a time, newest effect first
    assert ledger.claim("t", "w", kinds=["k0"]) is None
    first = ledger.claim("t", "undoer", lease_s=LONG)
    assert ledger.claim("t", "other", lease_s=LONG) is None  # the next waits for this one
    assert first.inputs["effect"] == {"effect_key": "pr:e", "node": "n4", "status": "confirmed", "external_id": "#4",
                                      "compensation": "close PR e", "payload_digest": None,
                                      "confirmed_at": first.inputs["effect"]["confirmed_at"]}
    ledger.commit(first, output={})
    effects = {e.effect_key: e for e in ledger.effects("t")}
    assert effects["pr:e"].status == "compensated" and effects["pr:e"].compensated_by == "undoer"
    assert effects["pr:e"].compensation_node == "compensate:pr:e"
    assert effects["pr:c"].status == "confirmed"
    assert _run_all(ledger, "t") == ["pr:c", "pr:a"]
    statuses = {e.effect_key: e.status for e in ledger.effects("t")}
    assert statuses == {"pr:a": "compensated", "msg:b": "confirmed", "pr:c": "compensated", "pr:d": "intended",
                        "pr:e": "compensated"}
    assert ledger.task("t").status == "aborted"
    kinds = [e.kind for e in ledger.events(0, task_id="t")]
    assert kinds.count("effect.compensated") == 3


def test_compensations_run_whatever_the_budget(ledger, clock):
    ledger.create_task("t", budget=Budget(tokens=100))
    _effects(ledger, clock, "t", [("pr:a", "close a", True)])
    ledger.add_node("t", "spend")
    c = ledger.claim("t", "w", lease_s=LONG, kinds=["tool"])
    ledger.commit(c, tokens=500)  # 500 % of the cap: the stop gate
    ledger.add_node("t", "more")
    assert ledger.claim("t", "w") is None
    _abort(ledger, "t")
    c = ledger.claim("t", "w")
    assert c.node_key == "compensate:pr:a" and c.admission == "admit"


def test_a_claim_across_tasks_gets_compensations_only_when_it_asks(ledger, clock):
    ledger.create_task("t")
    _effects(ledger, clock, "t", [("pr:a", "close a", True)])
    _abort(ledger, "t")
    ledger.create_task("u")
    ledger.add_node("u", "work", kind="tool")
    c = ledger.claim(None, "w")
    assert (c.task_id, c.node_key) == ("u", "work")  # a generic pool is not handed an undo by surprise
    assert ledger.claim(None, "w") is None
    c = ledger.claim(None, "undoer", kinds=["compensation", "tool"])
    assert (c.task_id, c.node_key, c.kind) == ("t", "compensate:pr:a", KIND)


def test_a_failed_compensation_retries_and_can_be_marked_by_hand(ledger, clock):
    ledger.create_task("t")
    _effects(ledger, clock, "t", [("pr:a", "close a", True), ("pr:b", "close b", True)])
    _abort(ledger, "t")
    c = ledger.claim("t", "w", lease_s=LONG)
    assert c.node_key == "compensate:pr:b"
    ledger.fail(c, error="the API is down", retryable=True, retry_after_s=10)
    assert ledger.claim("t", "w") is None
    clock.advance(10)
    c = ledger.claim("t", "w", lease_s=LONG)
    assert c.node_key == "compensate:pr:b" and c.attempt == 2
    # the operator closed the PR by hand meanwhile
    plan = ledger.plan_compensated("t", "pr:b", reason="closed PR #1 by hand in the web UI")
    assert plan.action == "compensated" and plan.target == "pr:b" and plan.task_status == ("aborted", "aborted")
    assert dict(plan.changes) == {"compensate:pr:b": ("running", "abandoned")}
    assert [dict(r) for r in plan.revoked_leases] == [{"node": "compensate:pr:b", "owner": "w"}]
    done = ledger.apply(plan, operator="alice")
    e = {x.effect_key: x for x in ledger.effects("t")}["pr:b"]
    assert (e.status, e.compensated_by, e.compensation_note) == ("compensated", "alice",
                                                                 "closed PR #1 by hand in the web UI")
    with pytest.raises(LeaseLost):
        ledger.commit(c, output={})
    row = ledger.actions("t", limit=1)[0]
    assert (row.action, row.operator, row.result, row.id) == ("compensated", "alice", "applied", done.action_id)
    ev = [x for x in ledger.events(0, task_id="t") if x.kind == "operator.compensated"]
    assert len(ev) == 1 and ev[0].payload["effect_key"] == "pr:b"
    # the chain goes on
    c = ledger.claim("t", "w", lease_s=LONG)
    assert c.node_key == "compensate:pr:a"


def test_marking_by_hand_refuses_what_it_cannot_mean(ledger, clock):
    ledger.create_task("t")
    _effects(ledger, clock, "t", [("pr:a", "close a", True), ("pr:i", "close i", False)])
    ledger.add_node("t", "next")
    with pytest.raises(NotFound, match="unknown effect"):
        ledger.plan_compensated("t", "pr:nope", reason="x")
    with pytest.raises(NotFound):
        ledger.plan_compensated("nope", "pr:a", reason="x")
    with pytest.raises(Refused, match="never confirmed"):
        ledger.plan_compensated("t", "pr:i", reason="x")
    with pytest.raises(Refused, match="reason"):
        ledger.plan_compensated("t", "pr:a", reason="  ")
    plan = ledger.plan_compensated("t", "pr:a", reason="undone by hand")  # on an active task too
    assert plan.changes == {} and plan.task_status == ("active", "active")
    other = ledger.plan_compensated("t", "pr:a", reason="me too")
    ledger.apply(plan, operator="alice")
    with pytest.raises(StaleRevision, match="already|since the preview"):
        ledger.apply(other, operator="bob")
    with pytest.raises(Refused, match="already marked compensated by alice"):
        ledger.plan_compensated("t", "pr:a", reason="again")
    plan, _ = _abort(ledger, "t")
    assert plan.compensations == ()  # nothing left to compensate


def test_an_effect_confirmed_after_the_preview_makes_abort_stale(ledger, clock):
    ledger.create_task("t")
    ledger.add_node("t", "a")
    c = ledger.claim("t", "w", lease_s=LONG)
    ledger.intend_effect(c, "pr:late", compensation="close it")
    plan = ledger.plan_abort("t", reason="stop")
    assert plan.compensations == ()
    ledger.confirm_effect(c, "pr:late", external_id="#9")  # no node version moves with this
    with pytest.raises(StaleRevision, match="pr:late was confirmed"):
        ledger.apply(plan, operator="op")
    plan = ledger.plan_abort("t", reason="stop")
    assert [x["effect_key"] for x in plan.compensations] == ["pr:late"]
    ledger.apply(plan, operator="op")


def test_the_compensation_node_commit_races_a_hand_mark(ledger, clock):
    ledger.create_task("t")
    _effects(ledger, clock, "t", [("pr:a", "close a", True)])
    _abort(ledger, "t")
    c = ledger.claim("t", "w", lease_s=LONG)
    plan = ledger.plan_compensated("t", "pr:a", reason="did it myself")
    ledger.commit(c, output={})
    with pytest.raises(StaleRevision):
        ledger.apply(plan, operator="op")
    e = ledger.effects("t")[0]
    assert (e.status, e.compensated_by) == ("compensated", "w")


def test_graph_json_shows_effect_statuses(ledger, clock):
    ledger.create_task("t")
    _effects(ledger, clock, "t", [("pr:a", "close a", True), ("pr:b", None, False)])
    _abort(ledger, "t")
    g = graph_json(ledger, "t")
    assert [(e["effect_key"], e["status"], e["compensation_node"]) for e in g["effects"]] == [
        ("pr:a", "confirmed", "compensate:pr:a"), ("pr:b", "intended", None)]
    _run_all(ledger, "t")
    g = graph_json(ledger, "t")
    assert g["effects"][0]["status"] == "compensated" and g["effects"][0]["compensated_by"] == "undoer"
    assert {n["key"]: n["kind"] for n in g["nodes"]}["compensate:pr:a"] == KIND


WEIRD_KEYS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=260)


@settings(max_examples=200, deadline=None)
@given(key=WEIRD_KEYS, taken=st.sets(st.text(min_size=1, max_size=10), max_size=3))
def test_a_compensation_node_key_is_always_a_valid_unique_key(key, taken):
    k = node_key(key, taken)
    assert NODE_KEY_RE.fullmatch(k) and k not in taken and k.startswith("compensate:")
    if NODE_KEY_RE.fullmatch("compensate:" + key) and "compensate:" + key not in taken:
        assert k == "compensate:" + key
    assert node_key(key + "x") != node_key(key)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=st.lists(st.tuples(st.sampled_from(["pr:", "msg/", "pay ", "ünï:", "x" * 199]),
                                # (NUL: PostgreSQL text cannot hold it; a lone surrogate is no text; refusing
                                # them is input validation's job: tests/hostile/test_hostile_api.py)
                                st.one_of(st.none(), st.text(st.characters(exclude_characters="\x00",
                                                                           exclude_categories=("Cs",)),
                                                             min_size=1, max_size=12)), st.booleans()),
                      min_size=0, max_size=6))
def test_abort_compensates_exactly_the_confirmed_effects_with_a_compensation(ledger, clock, specs):
    _N["n"] = _N.get("n", 0) + 1
    tid = f"g{_N['n']}"
    ledger.create_task(tid)
    effects = [(f"{p}{i}", comp, conf) for i, (p, comp, conf) in enumerate(specs)]
    _effects(ledger, clock, tid, effects)
    plan, _ = _abort(ledger, tid)
    want = [k for k, comp, conf in reversed(effects) if conf and comp and comp.strip()]
    assert [c["effect_key"] for c in plan.compensations] == want
    assert _run_all(ledger, tid) == want
    status = {e.effect_key: e.status for e in ledger.effects(tid)}
    for k, comp, conf in effects:
        assert status[k] == ("compensated" if k in want else ("confirmed" if conf else "intended"))


_N: dict[str, int] = {}


def test_a_compensation_lease_lost_says_why_not_aborted(ledger, clock):
    ledger.create_task("t")
    _effects(ledger, clock, "t", [("pr:a", "close a", True)])
    _abort(ledger, "t")
    c = ledger.claim("t", "slow", lease_s=10)
    clock.advance(10)
    c2 = ledger.claim("t", "other", lease_s=10)  # reclaimed after expiry
    assert c2.node_key == c.node_key and c2.attempt == 2
    with pytest.raises(LeaseLost, match="reclaimed by other after it expired") as e:
        ledger.commit(c, output={})
    assert "aborted" not in str(e.value)
    ledger.commit(c2, output={})
    assert ledger.effects("t")[0].status == "compensated"

"""Operator actions on a fixed 16-node graph with diamonds and two preconditions (scope, lang).

Graph (→ means "is needed by"); node kind == node key so a test can claim exactly one node:

    a → b1 → c → d → f → j → k → o          c → e → f         (diamond c/d/e/f)
    a → b2 → c                              (diamond a/b1/b2/c)
    a → g → h → i → j                       b1 → m → n → o
    p (a root of its own)

Preconditions: d scope=core, e scope=[core, ext], m scope=ext, g lang=py, h lang=go.
State: a b1 b2 c d e g h i m n succeeded; f running (w1); p blocked on handoff; j k o pending.
Effects: d confirmed pr:d, then e confirmed pr:e; g intended pr:g only.
"""

from __future__ import annotations

import json

import pytest

from store import LeaseLost, Ledger, NodeSpec, NotFound, ReadOnly, Refused, StaleRevision
from store.actions import Plan
from store.storage.models import Action
from tests.support.asks import ask

ORDER = ["a", "b1", "b2", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "n", "o", "p"]
SPECS = [
    NodeSpec("a", "a"),
    NodeSpec("b1", "b1", ("a",)),
    NodeSpec("b2", "b2", ("a",)),
    NodeSpec("c", "c", ("b1", "b2")),
    NodeSpec("d", "d", ("c",), preconditions={"scope": "core"}),
    NodeSpec("e", "e", ("c",), preconditions={"scope": ["core", "ext"]}),
    NodeSpec("f", "f", ("d", "e")),
    NodeSpec("g", "g", ("a",), preconditions={"lang": "py"}),
    NodeSpec("h", "h", ("g",), preconditions={"lang": "go"}),
    NodeSpec("i", "i", ("h",)),
    NodeSpec("j", "j", ("f", "i")),
    NodeSpec("k", "k", ("j",)),
    NodeSpec("m", "m", ("b1",), preconditions={"scope": "ext"}),
    NodeSpec("n", "n", ("m",)),
    NodeSpec("o", "o", ("k", "n")),
    NodeSpec("p", "p"),
]
OPTIONS = [{"id": "yes", "label": "Yes", "consequence": "open the PR"},
           {"id": "no", "label": "No", "consequence": "stop here"}]


def run(ledger: Ledger, key: str, worker: str = "w0", **commit):
    c = ledger.claim("t", worker, lease_s=60, kinds=[key])
    assert c is not None and c.node_key == key, (key, c)
    ledger.commit(c, output={"node": key}, **commit)
    return c


@pytest.fixture
def world(ledger, clock):
    return build_world(ledger, clock)


def build_world(ledger, clock):
    """The fixed graph in the state the module docstring says (tests/store/test_action_promise.py too)."""
    ledger.create_task("t", title="fixed graph", preconditions={"scope": "all", "lang": "py"})
    ledger.add_nodes("t", SPECS)
    for k in ["a", "b1", "b2", "c"]:
        run(ledger, k)
    c = ledger.claim("t", "w0", lease_s=60, kinds=["d"])
    ledger.intend_effect(c, "pr:d", compensation="close PR d")
    ledger.confirm_effect(c, "pr:d", external_id="#1")
    ledger.commit(c, output={"node": "d"})
    clock.advance(1)
    c = ledger.claim("t", "w0", lease_s=60, kinds=["e"])
    ledger.intend_effect(c, "pr:e", compensation="close PR e")
    ledger.confirm_effect(c, "pr:e", external_id="#2")
    ledger.commit(c, output={"node": "e"})
    c = ledger.claim("t", "w0", lease_s=60, kinds=["g"])
    ledger.intend_effect(c, "pr:g", compensation="close PR g")
    ledger.commit(c, output={"node": "g"})
    for k in ["h", "i", "m", "n"]:
        run(ledger, k)
    f = ledger.claim("t", "w1", lease_s=60, kinds=["f"])
    assert f.node_key == "f"
    p = ledger.claim("t", "w2", lease_s=60, kinds=["p"])
    hid = ask(ledger, p, kind="confirm", question="Open the PR?", options=OPTIONS, recommendation="yes")
    clock.advance(1)
    return {"f": f, "hid": hid}


def statuses(ledger: Ledger) -> dict[str, str]:
    return {n.key: n.status for n in ledger.graph("t").nodes}


def keys(seq) -> list[str]:
    return sorted(seq, key=ORDER.index)


def assert_applied_exactly(ledger: Ledger, before: dict[str, str], plan: Plan) -> None:
    after = statuses(ledger)
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert changed == dict(plan.changes)


def test_initial_state(ledger, world):
    s = statuses(ledger)
    assert [k for k in ORDER if s[k] == "succeeded"] == ["a", "b1", "b2", "c", "d", "e", "g", "h", "i", "m", "n"]
    assert (s["f"], s["p"], s["j"], s["k"], s["o"]) == ("running", "blocked", "pending", "pending", "pending")


# ---------------------------------------------------------------------- rewind
def test_rewind_plan_sets_and_apply(ledger, world, clock):
    before = statuses(ledger)
    rev = ledger.task("t").revision
    plan = ledger.plan_rewind("t", "c", reason="c used the wrong API")
    assert plan.action == "rewind" and plan.target == "c" and plan.task_id == "t" and plan.revision == rev
    assert list(plan.reset) == ["c", "d", "e", "f"]
    assert list(plan.kept) == ["j", "k", "o"]
    assert plan.abandoned == () and plan.parked == ()
    assert set(plan.versions) == {"c", "d", "e", "f", "j", "k", "o"}
    assert [dict(r) for r in plan.revoked_leases] == [{"node": "f", "owner": "w1"}]
    assert [e["effect_key"] for e in plan.effects_not_undone] == ["pr:e", "pr:d"]
    assert plan.effects_not_undone[0]["compensation"] == "close PR e"
    assert plan.task_status == ("active", "active")
    # a plan is a pure read
    assert statuses(ledger) == before and ledger.task("t").revision == rev
    versions_before = {n.key: n.version for n in ledger.graph("t").nodes}

    done = ledger.apply(plan, operator="alice@host")
    assert done.applied and done.action_id and done.revision_after == rev + 1
    assert_applied_exactly(ledger, before, plan)
    assert ledger.task("t").revision == rev + 1
    g = {n.key: n for n in ledger.graph("t").nodes}
    for k in plan.reset:
        assert g[k].version == versions_before[k] + 1
        assert g[k].rejections == ("c used the wrong API",)
        assert g[k].claim_count == 0 and g[k].lease_owner is None
    for k in ORDER:
        if k not in plan.reset:
            assert g[k].version == versions_before[k]
    # upstream untouched, outputs of the upstream kept
    assert g["b1"].status == "succeeded" and g["b1"].output == {"node": "b1"}
    # the agent holding f's lease learns it at its next heartbeat and commit
    with pytest.raises(LeaseLost, match="revoked"):
        ledger.heartbeat(world["f"])
    with pytest.raises(LeaseLost):
        ledger.commit(world["f"], output={})
    # the next claim of c carries the rejection
    c = ledger.claim("t", "w3", kinds=["c"])
    assert c.inputs["rejections"] == ["c used the wrong API"]
    assert c.attempt == 2  # attempt keeps counting
    # audit row and operator event
    [act] = ledger.actions("t")
    assert (act.operator, act.action, act.target, act.reason, act.result) == (
        "alice@host", "rewind", "c", "c used the wrong API", "applied")
    assert (act.revision_before, act.revision_after) == (rev, rev + 1)
    # the plan as applied (here: exactly as previewed) and what differed (nothing)
    assert {k: v for k, v in act.plan.items() if k != "differed"} == plan.to_json()
    assert act.plan["differed"] == {"summary": "", "notes": [], "nodes": [], "preview": {}}
    assert done.to_json()["differed"]["summary"] == ""
    ev = [e for e in ledger.events(0, task_id="t") if e.layer == "operator"]
    assert len(ev) == 1 and ev[0].kind == "operator.rewind" and ev[0].node == "c"
    assert ev[0].payload["nodes"] == ["c", "d", "e", "f"] and ev[0].payload["action_id"] == done.action_id


def test_rewind_of_a_leaf_and_json_shape(ledger, world):
    plan = ledger.plan_rewind("t", "h", reason="wrong language")
    assert list(plan.reset) == ["h", "i"] and list(plan.kept) == ["j", "k", "o"]
    j = plan.to_json()
    for key in ("action", "task_id", "target", "reason", "revision", "versions", "reset", "abandoned", "parked",
                "kept", "revoked_leases", "handoffs_withdrawn", "resolutions_reapplied", "effects_not_undone",
                "warnings"):
        assert key in j
    assert isinstance(j["target"], str) and "applied" not in j
    json.dumps(j)  # serialisable
    done = ledger.apply(plan, operator="op").to_json()
    assert done["applied"] is True and isinstance(done["action_id"], int)


def test_rewind_blocked_node_withdraws_its_handoff(ledger, world):
    plan = ledger.plan_rewind("t", "p", reason="ask later")
    assert list(plan.reset) == ["p"] and list(plan.handoffs_withdrawn) == [world["hid"]]
    ledger.apply(plan, operator="op")
    h = ledger.handoff(world["hid"])
    assert h.status == "withdrawn" and h.resolved_by == "op"
    assert ledger.node("t", "p").status == "pending"


def test_rewind_reopens_a_completed_task_and_failed_node_is_a_retry(ledger, clock):
    ledger.create_task("t", max_claims=1)
    ledger.add_nodes("t", [NodeSpec("x", "x"), NodeSpec("y", "y", ("x",))])
    run(ledger, "x")
    run(ledger, "y")
    assert ledger.task("t").status == "completed"
    plan = ledger.plan_rewind("t", "y", reason="redo y")
    assert plan.task_status == ("completed", "active")
    ledger.apply(plan, operator="op")
    assert ledger.task("t").status == "active"
    c = ledger.claim("t", "w", kinds=["y"])
    assert c is not None  # claim_count was reset: a fresh max_claims allowance
    ledger.fail(c, error="boom", retryable=False)
    assert ledger.node("t", "y").status == "failed" and ledger.task("t").status == "failed"
    plan = ledger.plan_rewind("t", "y", reason="retry")
    assert list(plan.reset) == ["y"] and plan.task_status == ("failed", "active")
    ledger.apply(plan, operator="op")
    assert ledger.task("t").status == "active"
    c = ledger.claim("t", "w", kinds=["y"])
    assert c.inputs["rejections"] == ["redo y", "retry"]
    ledger.commit(c, output=1)
    assert ledger.task("t").status == "completed"


def test_rewind_keeps_abandoned_downstream(ledger, world):
    ledger.apply(ledger.plan_narrow("t", exclude=["k"], reason="not needed"), operator="op")
    plan = ledger.plan_rewind("t", "h", reason="again")
    assert "k" in plan.kept and "k" not in plan.reset
    ledger.apply(plan, operator="op")
    assert ledger.node("t", "k").status == "abandoned"


# ---------------------------------------------------------------------- narrow
def test_narrow_on_two_preconditions(ledger, world):
    before = statuses(ledger)
    plan = ledger.plan_narrow("t", set={"scope": "core", "lang": "py"}, reason="core modules only")
    assert list(plan.abandoned) == ["h", "m"]
    assert list(plan.reset) == ["i", "n"]
    assert list(plan.kept) == ["j", "k", "o"]  # downstream of the abandoned nodes, left as they are
    assert plan.params.to_json()["unaffected"] == 16 - 4 - 3
    assert set(plan.versions) == {"h", "i", "j", "k", "o", "m", "n"}
    assert plan.revoked_leases == ()
    assert plan.params.to_json()["out_of_scope"] == {"h": 'lang="go"', "m": 'scope="ext"'}
    ledger.apply(plan, operator="op")
    assert_applied_exactly(ledger, before, plan)
    t = ledger.task("t")
    assert t.preconditions == {"scope": "core", "lang": "py"}
    # outputs of kept and abandoned nodes stay (kept for audit)
    assert ledger.node("t", "m").output == {"node": "m"}
    # abandoned counts as finished: i (inputs changed) is ready again
    c = ledger.claim("t", "w", kinds=["i"])
    assert c is not None and c.inputs["deps"]["h"]["status"] == "abandoned"


def test_narrow_list_value_and_running_out_of_scope(ledger, world):
    before = statuses(ledger)
    plan = ledger.plan_narrow("t", exclude=["f"], reason="skip f")
    assert list(plan.abandoned) == ["f"] and list(plan.reset) == []
    assert [dict(r) for r in plan.revoked_leases] == [{"node": "f", "owner": "w1"}]
    ledger.apply(plan, operator="op")
    assert_applied_exactly(ledger, before, plan)
    with pytest.raises(LeaseLost, match="abandoned"):
        ledger.heartbeat(world["f"])
    # scope=ext keeps e (a list naming ext) and m, drops d; f is already abandoned
    plan = ledger.plan_narrow("t", set={"scope": "ext"}, reason="ext only")
    assert list(plan.abandoned) == ["d"] and list(plan.reset) == []


def test_narrow_that_changes_nothing_is_refused(ledger, world):
    ledger.apply(ledger.plan_narrow("t", set={"lang": "py"}, reason="python"), operator="op")
    with pytest.raises(Refused, match="changes nothing"):
        ledger.plan_narrow("t", set={"lang": "py"}, reason="same")
    with pytest.raises(Refused, match="changes nothing"):
        ledger.plan_narrow("t", exclude=["h"], reason="already abandoned")
    with pytest.raises(NotFound):
        ledger.plan_narrow("t", exclude=["nope"], reason="x")
    with pytest.raises(Refused, match="--set"):
        ledger.plan_narrow("t", reason="x")


# ---------------------------------------------------------------------- park / resume
def test_park_task_without_now_lets_running_work_finish(ledger, world):
    before = statuses(ledger)
    plan = ledger.plan_park("t", reason="waiting for the API key", until="2h", wake_on="at:1h")
    assert plan.changes == {} and list(plan.kept) == ORDER
    # every unfinished node's version is recorded: one claimed after the preview makes it stale
    assert plan.versions == {n.key: n.version for n in ledger.graph("t").nodes
                             if n.status not in ("succeeded", "abandoned")}
    assert any("f" in w for w in plan.warnings)
    ledger.apply(plan, operator="op")
    assert statuses(ledger) == before
    t = ledger.task("t")
    assert t.status == "parked" and t.park_reason == "waiting for the API key" and t.wake_on == "at:2027-01-15T09:00:02.000Z"
    assert t.park_until == pytest.approx(ledger.now() + 7200)
    assert ledger.heartbeat(world["f"]).parked is True
    assert ledger.claim("t", "w9") is None  # nothing new is claimed
    ledger.commit(world["f"], output={"node": "f"})  # the current step may finish
    assert ledger.node("t", "f").status == "succeeded"
    assert ledger.claim("t", "w9") is None
    with pytest.raises(Refused, match="already parked"):
        ledger.plan_park("t", reason="again")
    plan = ledger.plan_resume("t")
    assert plan.changes == {} and plan.task_status == ("parked", "active")
    ledger.apply(plan, operator="op")
    assert ledger.task("t").status == "active" and ledger.task("t").park_reason is None
    assert ledger.claim("t", "w9", kinds=["j"]) is not None


def test_park_task_now_revokes_and_resume_restores(ledger, world):
    before = statuses(ledger)
    plan = ledger.plan_park("t", reason="stop everything", now=True)
    assert list(plan.parked) == ["f"] and [dict(r) for r in plan.revoked_leases] == [{"node": "f", "owner": "w1"}]
    ledger.apply(plan, operator="op")
    assert_applied_exactly(ledger, before, plan)
    with pytest.raises(LeaseLost, match="parked"):
        ledger.heartbeat(world["f"])
    mid = statuses(ledger)
    plan = ledger.plan_resume("t")
    assert dict(plan.changes) == {"f": ("parked", "pending")}
    ledger.apply(plan, operator="op")
    assert_applied_exactly(ledger, mid, plan)
    assert ledger.claim("t", "w1", kinds=["f"]) is not None


def test_park_node(ledger, world, clock):
    with pytest.raises(Refused, match="node f is running: use --now"):
        ledger.plan_park("t", node="f", reason="hold")
    with pytest.raises(Refused, match="nothing to park"):
        ledger.plan_park("t", node="a", reason="hold")
    plan = ledger.plan_park("t", node="j", reason="wait for review")
    assert plan.target == "j" and list(plan.parked) == ["j"] and plan.kept == ()
    ledger.apply(plan, operator="op")
    n = ledger.node("t", "j")
    assert n.status == "parked" and n.park_reason == "wait for review"
    # a node parked on its own stays parked when the task is parked and resumed
    clock.advance(5)
    ledger.apply(ledger.plan_park("t", reason="all", now=True), operator="op")
    plan = ledger.plan_resume("t")
    assert dict(plan.changes) == {"f": ("parked", "pending")} and list(plan.kept) == ["j"]
    ledger.apply(plan, operator="op")
    plan = ledger.plan_resume("t", node="j")
    assert dict(plan.changes) == {"j": ("parked", "pending")}
    ledger.apply(plan, operator="op")
    assert ledger.node("t", "j").status == "pending"
    # a blocked node parked and resumed goes back to blocked (its handoff is still open)
    ledger.apply(ledger.plan_park("t", node="p", reason="later"), operator="op")
    plan = ledger.plan_resume("t", node="p")
    assert dict(plan.changes) == {"p": ("parked", "blocked")}
    ledger.apply(plan, operator="op")
    assert ledger.node("t", "p").status == "blocked"


def test_park_refusals(ledger, world):
    with pytest.raises(Refused, match="not in the future"):
        ledger.plan_park("t", reason="x", until="2020-01-01T00:00:00Z")
    with pytest.raises(Refused, match="not parked"):
        ledger.plan_resume("t")
    with pytest.raises(Refused, match="not parked"):
        ledger.plan_resume("t", node="j")


# ---------------------------------------------------------------------- abort
def test_abort(ledger, world):
    before = statuses(ledger)
    plan = ledger.plan_abort("t", reason="wrong repository")
    assert list(plan.abandoned) == ["f", "j", "k", "o", "p"]
    assert list(plan.kept) == ["a", "b1", "b2", "c", "d", "e", "g", "h", "i", "m", "n"]
    assert list(plan.handoffs_withdrawn) == [world["hid"]]
    assert [(e["node"], e["effect_key"], e["compensation"]) for e in plan.effects_not_undone] == [
        ("e", "pr:e", "close PR e"), ("d", "pr:d", "close PR d")]
    assert any("pr:g" in w and "never confirmed" in w for w in plan.warnings)
    assert plan.task_status == ("active", "aborted")
    assert [(c["node"], c["after"]) for c in plan.compensations] == [("compensate:pr:e", None),
                                                                     ("compensate:pr:d", "compensate:pr:e")]
    ledger.apply(plan, operator="op")
    assert_applied_exactly(ledger, before, plan)
    assert ledger.task("t").status == "aborted"
    assert ledger.handoff(world["hid"]).status == "withdrawn"
    with pytest.raises(LeaseLost, match="aborted"):
        ledger.commit(world["f"], output={})
    for kind in ORDER:  # nothing further can be claimed …
        assert ledger.claim("t", "w", kinds=[kind]) is None
    assert ledger.claim(None, "w") is None
    c = ledger.claim("t", "w")  # … except the compensations, newest effect first
    assert (c.node_key, c.kind, c.inputs["effect"]["effect_key"]) == ("compensate:pr:e", "compensation", "pr:e")
    for fn in (lambda: ledger.plan_rewind("t", "c", reason="x"), lambda: ledger.plan_abort("t", reason="x"),
               lambda: ledger.plan_park("t", reason="x"), lambda: ledger.plan_narrow("t", exclude=["a"], reason="x"),
               lambda: ledger.plan_resume("t")):
        with pytest.raises(Refused, match="aborted"):
            fn()


# ---------------------------------------------------------------------- resolve
def test_resolve(ledger, world, clock):
    hid = world["hid"]
    with pytest.raises(Refused, match="not offered.*yes, no"):
        ledger.plan_resolve(hid, option="maybe")
    with pytest.raises(Refused, match="needs --option"):
        ledger.plan_resolve(hid)
    before = statuses(ledger)
    plan = ledger.plan_resolve(hid, option="yes", answer="use the draft branch")
    assert plan.target == hid and plan.reason == "yes — use the draft branch"
    assert dict(plan.changes) == {"p": ("blocked", "pending")}
    done = ledger.apply(plan, operator="bob@host")
    assert_applied_exactly(ledger, before, plan)
    h = ledger.handoff(hid)
    assert (h.status, h.resolution_option, h.resolution_answer, h.resolved_by) == (
        "resolved", "yes", "use the draft branch", "bob@host")
    c = ledger.claim("t", "w", kinds=["p"])
    assert c.inputs["resolution"]["option"] == "yes" and c.inputs["resolution"]["answer"] == "use the draft branch"
    with pytest.raises(Refused, match=f"handoff {hid} was already resolved by bob@host at 20"):
        ledger.plan_resolve(hid, option="no")
    # rewinding p re-applies the resolution to its next claim
    ledger.commit(c, output=1)
    plan = ledger.plan_rewind("t", "p", reason="again")
    assert list(plan.resolutions_reapplied) == [hid]
    assert done.action_id


def test_second_resolver_with_a_stale_plan_is_told_who(ledger, world):
    hid = world["hid"]
    p1 = ledger.plan_resolve(hid, option="yes")
    p2 = ledger.plan_resolve(hid, option="no")
    ledger.apply(p1, operator="alice")
    with pytest.raises(StaleRevision, match="already resolved by alice at .*option yes"):
        ledger.apply(p2, operator="bob")
    acts = ledger.actions("t")
    assert [(a.operator, a.result) for a in acts] == [("bob", "refused"), ("alice", "applied")]
    assert ledger.handoff(hid).resolution_option == "yes"


# ---------------------------------------------------------------------- stale plans and refusals
def test_heartbeat_does_not_make_a_preview_stale(ledger, world):
    plan = ledger.plan_abort("t", reason="stop")
    ledger.heartbeat(world["f"], units_done=3, tokens=10, observation="x")
    ledger.apply(plan, operator="op")
    assert ledger.task("t").status == "aborted"





def test_refusals_write_nothing(ledger, world, ledger_path):
    rev = ledger.task("t").revision
    events = ledger.last_event_id()
    for fn, exc, msg in [
        (lambda: ledger.plan_rewind("t", "c", reason="  "), Refused, "needs a reason"),
        (lambda: ledger.plan_park("t", reason=""), Refused, "needs a reason"),
        (lambda: ledger.plan_narrow("t", set={"scope": "core"}, reason=""), Refused, "needs a reason"),
        (lambda: ledger.plan_abort("t", reason=None), Refused, "needs a reason"),
        (lambda: ledger.plan_rewind("nope", "c", reason="x"), NotFound, "unknown task"),
        (lambda: ledger.plan_rewind("t", "zz", reason="x"), NotFound, "unknown node"),
        (lambda: ledger.plan_resolve("999", option="yes"), NotFound, "unknown handoff"),
        (lambda: ledger.plan_resolve("x1", option="yes"), NotFound, "unknown handoff"),
        (lambda: ledger.plan_rewind("t", "j", reason="x"), Refused, "node j is pending: nothing to rewind"),
    ]:
        with pytest.raises(exc, match=msg) as ei:
            fn()
        assert "\n" not in str(ei.value)
    ro = Ledger.open(ledger_path, read_only=True, create=False)
    try:
        plan = ro.plan_abort("t", reason="x")  # a preview is a read: allowed read-only
        with pytest.raises(ReadOnly):
            ro.apply(plan, operator="op")
    finally:
        ro.close()
    assert ledger.task("t").revision == rev and ledger.last_event_id() == events
    assert ledger.actions("t") == []
    with pytest.raises(Refused, match="operator"):
        ledger.apply(ledger.plan_abort("t", reason="x"), operator="  ")
    assert ledger.actions("t") == []


def test_applied_plan_cannot_be_applied_twice(ledger, world):
    done = ledger.apply(ledger.plan_park("t", node="j", reason="x"), operator="op")
    with pytest.raises(Refused, match="already applied"):
        ledger.apply(done, operator="op")


def test_every_applied_action_has_row_and_event(ledger, world, clock):
    plans = [
        lambda: ledger.plan_park("t", node="j", reason="a"),
        lambda: ledger.plan_resume("t", node="j"),
        lambda: ledger.plan_narrow("t", exclude=["k"], reason="b"),
        lambda: ledger.plan_rewind("t", "i", reason="c"),
        lambda: ledger.plan_resolve(world["hid"], option="no"),
        lambda: ledger.plan_park("t", reason="d", now=True),
        lambda: ledger.plan_resume("t"),
        lambda: ledger.plan_abort("t", reason="e"),
    ]
    revs = [ledger.task("t").revision]
    ids = []
    for mk in plans:
        clock.advance(1)
        ids.append(ledger.apply(mk(), operator="op").action_id)
        revs.append(ledger.task("t").revision)
    assert revs == sorted(revs) and len(set(revs)) == len(revs)
    acts = {a.id: a for a in ledger.actions("t")}
    ev = {e.payload.get("action_id"): e for e in ledger.events(0, task_id="t") if e.layer == "operator"}
    for i in ids:
        assert acts[i].result == "applied"
        assert ev[i].kind == f"operator.{acts[i].action}" and ev[i].actor == "op"
    with ledger.db.bind_ctx([Action]):
        assert Action.select().count() == len(ids)


def test_narrow_abandoning_the_rest_completes_the_task(ledger, clock):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("x", "x"), NodeSpec("y", "y", preconditions={"scope": "b"})])
    run(ledger, "x")
    plan = ledger.plan_narrow("t", set={"scope": "a"}, reason="a only")
    assert plan.task_status == ("active", "completed")
    ledger.apply(plan, operator="op")
    assert ledger.task("t").status == "completed"

"""A confirmed action applies what its preview promised, through what agents did meanwhile.

Each test plans an action on the fixed graph of tests/store/test_actions.py, lets agents (or
another operator) change the ledger, then applies: agents' progress keeps the promise — the action
applies on the first try, to the nodes as they now are, and its result (and audit row) says what
differed; another operator's action or a change of the graph under it refuses, naming the change.
Both backends.
"""

from __future__ import annotations

import pytest

from store import LeaseLost, StaleRevision
from tests.store.test_actions import build_world, run, statuses
from tests.support.asks import ask

STALE = r" since the preview; review again$"


@pytest.fixture
def world(ledger, clock):
    return build_world(ledger, clock)


def _refused(ledger, task="t"):
    act = ledger.actions(task, limit=1)[0]
    assert act.result == "refused"
    return act


# ---------------------------------------------------------------------- park
# What each change an agent makes after a task park's preview leads to (the promise: what ran at the
# preview finishes its step, or is parked with --now; nothing else runs), and what the result says.
PARK_AFTER = {
    #  change: (f with --now, f without, another node and its status after, the note without --now)
    "claim": ("succeeded", "succeeded", ("j", "parked"), "1 node was claimed meanwhile and is parked too: j"),
    "human": ("blocked", "blocked", None, "1 node asked a human meanwhile (left as it is): f"),
    "commit": ("succeeded", "succeeded", None, "1 node finished meanwhile (left as it is): f"),
    "fail": ("pending", "pending", None, "1 node went back to pending meanwhile (left as it is): f"),
    "add": ("parked", "running", ("late", "pending"), "1 node was added meanwhile (left as it is): late"),
}


@pytest.mark.parametrize("now", [False, True], ids=["park", "park-now"])
@pytest.mark.parametrize("change", list(PARK_AFTER))
def test_a_task_park_goes_through_what_agents_did_since_the_preview(ledger, world, clock, now, change):
    """Agents claim, ask, finish, fail and add nodes while the operator reads: the park applies on
    the first try, to the nodes as they now are, and says what differed. Nothing claimed after the
    preview runs on under a live lease."""
    plan = ledger.plan_park("t", reason="hold", now=now)
    assert set(plan.versions) == {"f", "j", "k", "o", "p"}
    f = world["f"]
    if change == "claim":
        ledger.commit(f, output={})
        clock.advance(1)
        plan = ledger.plan_park("t", reason="hold", now=now)
        assert ledger.claim("t", "late", kinds=["j"]) is not None  # claimed after the preview
    elif change == "human":
        ask(ledger, f, kind="confirm", question="ok?")
    elif change == "commit":
        ledger.commit(f, output={})
    elif change == "fail":
        ledger.fail(f, error="x", retryable=True)
    else:
        ledger.add_node("t", "late")
    done = ledger.apply(plan, operator="op")
    with_now, without, other, note = PARK_AFTER[change]
    s = statuses(ledger)
    assert ledger.task("t").status == "parked" and done.applied
    assert s["f"] == (with_now if now else without)
    if other:
        assert ledger.node("t", other[0]).status == other[1]
    if change == "claim":
        assert ledger.node("t", "j").lease_owner is None  # revoked: it started after the operator said stop
    running = sorted(k for k, st in s.items() if st == "running")
    assert running == (["f"] if change == "add" and not now else [])
    if not now:
        assert done.differed.summary == note
    act = ledger.actions("t", limit=1)[0]
    assert act.result == "applied" and act.plan["differed"]["summary"] == done.differed.summary
    assert act.plan["changes"] == done.to_json()["changes"]  # the plan as applied


def test_a_task_park_refuses_when_another_operator_parked_it_since(ledger, world, clock):
    mine = ledger.plan_park("t", reason="hold")
    clock.advance(3)
    ledger.apply(ledger.plan_park("t", reason="bob's", now=True), operator="bob")
    with pytest.raises(StaleRevision, match=r"^task t was parked by bob at 2027-01-15T08:00:05\.000Z "
                                            r"\(action \d+\)" + STALE):
        ledger.apply(mine, operator="alice")
    assert ledger.task("t").park_reason == "bob's" and _refused(ledger).operator == "alice"


def test_a_task_park_refuses_when_the_task_finished_since(ledger, world, clock):
    ledger.create_task("s")
    ledger.add_node("s", "only", kind="only")
    c = ledger.claim("s", "w", kinds=["only"])
    plan = ledger.plan_park("s", reason="hold")
    ledger.commit(c, output={})
    assert ledger.task("s").status == "completed"
    with pytest.raises(StaleRevision, match=r"^the ledger changed since the preview: task s is completed: nothing "
                                            r"runs, nothing to park; review again$"):
        ledger.apply(plan, operator="op")
    assert ledger.task("s").status == "completed"


def test_a_node_park_parks_it_even_if_claimed_since_the_preview(ledger, world, clock):
    plan = ledger.plan_park("t", node="j", reason="wait")
    ledger.commit(world["f"], output={})
    c = ledger.claim("t", "late", kinds=["j"])
    done = ledger.apply(plan, operator="op")
    assert ledger.node("t", "j").status == "parked" and done.changes == {"j": ("running", "parked")}
    assert [dict(r) for r in done.revoked_leases] == [{"node": "j", "owner": "late"}]
    assert done.differed.summary == "1 node was claimed meanwhile and is parked too: j"
    with pytest.raises(LeaseLost):
        ledger.heartbeat(c)


def test_a_node_park_refuses_when_the_node_finished_since(ledger, world, clock):
    plan = ledger.plan_park("t", node="j", reason="wait")
    ledger.commit(world["f"], output={})
    run(ledger, "j")
    with pytest.raises(StaleRevision, match=r"^the ledger changed since the preview: node j is succeeded: nothing "
                                            r"to park; review again$"):
        ledger.apply(plan, operator="op")
    assert ledger.node("t", "j").status == "succeeded"


def test_a_node_added_to_a_parked_task_waits_with_the_rest(ledger, world):
    plan = ledger.plan_park("t", reason="later")
    ledger.add_node("t", "late", kind="late")  # graph shape: a revision bump
    done = ledger.apply(plan, operator="op")
    assert ledger.task("t").status == "parked" and ledger.node("t", "late").status == "pending"
    assert done.differed.summary == "1 node was added meanwhile (left as it is): late"
    assert ledger.claim("t", "w9") is None


# ---------------------------------------------------------------------- abort
def test_abort_goes_through_everything_agents_did(ledger, world, clock):
    plan = ledger.plan_abort("t", reason="stop")
    ledger.commit(world["f"], output={})  # f finished
    j = ledger.claim("t", "late", kinds=["j"])  # j claimed
    hid = ask(ledger, j, kind="confirm", question="go on?")  # and asking
    ledger.add_node("t", "late", kind="late")
    done = ledger.apply(plan, operator="op")
    s = statuses(ledger)
    assert ledger.task("t").status == "aborted"
    assert (s["f"], s["j"], s["k"], ledger.node("t", "late").status) == ("succeeded", "abandoned", "abandoned",
                                                                         "abandoned")
    assert ledger.handoff(hid).status == "withdrawn"
    assert done.differed.notes == (
        "1 node finished meanwhile (left as it is): f",
        "1 node asked a human meanwhile and is abandoned too: j",
        "1 node was added meanwhile and is abandoned too: late",
        f"1 handoff(s) opened meanwhile is withdrawn too: {hid}",
    )


def test_abort_refuses_when_someone_else_aborted_it(ledger, world, clock):
    mine = ledger.plan_abort("t", reason="stop")
    ledger.apply(ledger.plan_abort("t", reason="bob stops it"), operator="bob")
    with pytest.raises(StaleRevision, match=r"^task t was aborted by bob at .* \(action \d+\)" + STALE):
        ledger.apply(mine, operator="alice")
    assert _refused(ledger).operator == "alice"


# ---------------------------------------------------------------------- rewind
def test_an_agent_finishing_a_node_of_the_rewind_keeps_its_promise(ledger, world, clock):
    """f (running, to be reset) commits after the preview: its work is the agents' progress, the
    rewind still resets it, and the result says so."""
    plan = ledger.plan_rewind("t", "d", reason="redo")
    ledger.heartbeat(world["f"], units_done=1, observation="still working")
    ledger.commit(world["f"], output={"node": "f"})  # f's version moves
    done = ledger.apply(plan, operator="op")
    s = statuses(ledger)
    assert [s[k] for k in ("d", "f", "j", "k", "o")] == ["pending"] * 5
    assert done.changes["f"] == ("succeeded", "pending") and plan.changes["f"] == ("running", "pending")
    assert done.differed.notes == ("1 node finished meanwhile and is reset too: f",)
    assert done.to_json()["differed"]["nodes"] == [
        {"node": "f", "previewed": "running", "promised": "pending", "found": "succeeded", "applied": "pending"}]
    [act] = ledger.actions("t")
    assert act.result == "applied" and act.plan["changes"]["f"] == {"from": "succeeded", "to": "pending"}
    assert act.plan["differed"]["summary"] == "1 node finished meanwhile and is reset too: f"
    assert act.plan["differed"]["preview"]["summary"] == plan.summary()


def test_a_rewound_running_node_that_went_back_to_pending_is_rewound_still(ledger, world, clock):
    plan = ledger.plan_rewind("t", "f", reason="wrong approach")
    ledger.fail(world["f"], error="flaky", retryable=True)  # f → pending, waiting for a retry
    done = ledger.apply(plan, operator="op")
    f = ledger.node("t", "f")
    assert f.status == "pending" and f.rejections == ("wrong approach",) and f.claim_count == 0
    assert done.differed.summary == "1 node went back to pending meanwhile and is reset too: f"


def test_a_node_added_below_the_rewound_one_refuses_it(ledger, world, clock):
    """The graph's shape changed inside what the rewind resets: refused, saying which node."""
    plan = ledger.plan_rewind("t", "d", reason="redo")
    ledger.add_node("t", "late", kind="late", deps=["k"])
    before = statuses(ledger)
    rev = ledger.task("t").revision
    events = ledger.last_event_id()
    with pytest.raises(StaleRevision, match=r"^node late was added below d" + STALE):
        ledger.apply(plan, operator="op")
    assert statuses(ledger) == before and ledger.task("t").revision == rev
    assert ledger.last_event_id() == events  # no journal event
    act = _refused(ledger)
    assert act.refused_why.startswith("node late was added below d") and act.plan == plan.to_json()


def test_a_node_the_rewind_resets_rewound_by_someone_else_refuses_it(ledger, world, clock):
    mine = ledger.plan_rewind("t", "d", reason="redo d")
    theirs = ledger.plan_rewind("t", "f", reason="redo f")
    clock.advance(5)
    ledger.apply(theirs, operator="bob")
    before = statuses(ledger)
    with pytest.raises(StaleRevision, match=r"^node f was rewound by bob at 2027-01-15T08:00:07\.000Z "
                                            r"\(action \d+\)" + STALE):
        ledger.apply(mine, operator="alice")
    assert statuses(ledger) == before
    assert ledger.node("t", "f").rejections == ("redo f",)


# ---------------------------------------------------------------------- narrow
def test_narrow_goes_through_agents_elsewhere(ledger, world, clock):
    plan = ledger.plan_narrow("t", set={"scope": "core"}, reason="core only")  # m (ext) out, n → pending
    assert plan.changes == {"m": ("succeeded", "abandoned"), "n": ("succeeded", "pending")}
    ledger.commit(world["f"], output={})  # progress elsewhere
    ledger.add_node("t", "elsewhere")  # the graph's shape, outside the narrow's closure
    done = ledger.apply(plan, operator="op")
    assert done.changes == plan.changes and done.differed.summary == ""
    assert ledger.node("t", "m").status == "abandoned"


def test_narrow_abandons_an_out_of_scope_node_claimed_since(ledger, world, clock):
    plan = ledger.plan_narrow("t", exclude=["j"], reason="not needed")
    ledger.commit(world["f"], output={})
    c = ledger.claim("t", "late", kinds=["j"])
    done = ledger.apply(plan, operator="op")
    assert ledger.node("t", "j").status == "abandoned" and done.changes["j"] == ("running", "abandoned")
    assert done.differed.summary == "1 node was claimed meanwhile and is abandoned too: j"
    with pytest.raises(LeaseLost):
        ledger.commit(c, output={})


def test_narrow_refuses_when_another_narrow_changed_the_scope(ledger, world, clock):
    mine = ledger.plan_narrow("t", set={"lang": "py"}, reason="python")
    ledger.apply(ledger.plan_narrow("t", set={"lang": ["py", "go"]}, reason="both"), operator="bob")
    with pytest.raises(StaleRevision, match=r"^the task's preconditions were narrowed by bob at .*" + STALE):
        ledger.apply(mine, operator="alice")
    assert ledger.task("t").preconditions["lang"] == ["py", "go"]


# ---------------------------------------------------------------------- resolve, escalate, resume
def test_resolve_goes_through_a_park_of_its_node(ledger, world, clock):
    plan = ledger.plan_resolve(world["hid"], option="yes", answer="go ahead")
    ledger.apply(ledger.plan_park("t", node="p", reason="hold p"), operator="bob")
    done = ledger.apply(plan, operator="alice")
    assert ledger.handoff(world["hid"]).resolution_answer == "go ahead"
    assert ledger.node("t", "p").status == "parked"
    assert done.differed.summary == "1 node was parked meanwhile (left as it is): p"


def test_escalate_revokes_a_claim_made_since_the_preview(ledger, world, clock):
    plan = ledger.plan_escalate("t", "j", reason="looks wrong")
    ledger.commit(world["f"], output={})
    c = ledger.claim("t", "late", kinds=["j"])
    done = ledger.apply(plan, operator="op")
    assert ledger.node("t", "j").status == "blocked" and done.differed.summary == (
        "1 node was claimed meanwhile and is blocked too: j")
    with pytest.raises(LeaseLost):
        ledger.heartbeat(c)


def test_escalate_refuses_when_the_agent_asked_itself(ledger, world, clock):
    plan = ledger.plan_escalate("t", "f", reason="looks wrong")
    ask(ledger, world["f"], kind="confirm", question="is this right?")
    with pytest.raises(StaleRevision, match=r"^the ledger changed since the preview: node f is already waiting for "
                                            r"a human"):
        ledger.apply(plan, operator="op")
    assert len(ledger.handoffs(task_id="t")) == 2  # p's and f's own: no third


def test_resume_refuses_when_someone_else_resumed_and_parked_again(ledger, world, clock):
    ledger.apply(ledger.plan_park("t", reason="hold", now=True), operator="op")
    mine = ledger.plan_resume("t")
    ledger.apply(ledger.plan_resume("t"), operator="bob")
    clock.advance(1)
    ledger.apply(ledger.plan_park("t", reason="bob holds it"), operator="bob")
    with pytest.raises(StaleRevision, match=r"^task t was resumed by bob at .*" + STALE):
        ledger.apply(mine, operator="alice")
    assert ledger.task("t").park_reason == "bob holds it"

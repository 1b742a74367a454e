"""Wake conditions that wake: ``--wake-on handoff:<id> | node:<key> | effect:<key> | file:<path> |
at:<time>``, checked when the park is planned; when one is met a ``wake`` signal (alarm) names it,
a ``park.wake`` event is journalled once, and with ``auto_resume`` the system resumes the park
(an Action row by operator ``system``). A park without an until asks to be re-confirmed after 48 h.
"""

from __future__ import annotations

import os

import pytest

from store import Ledger, NodeSpec, Refused
from store.reading.cli_json import graph_json, status_json
from store.reading.signals import Thresholds, signals_for_task
from tests.support.asks import ask

LONG = 10**7


def _signals(ledger: Ledger, task: str, kind: str, **kw):
    return [s for s in signals_for_task(ledger, ledger.task(task), **kw) if s.kind == kind]


def _park(ledger: Ledger, task: str = "t", **kw):
    plan = ledger.plan_park(task, reason="waiting", **kw)
    return plan, ledger.apply(plan, operator="op")


@pytest.fixture
def two_tasks(ledger, clock):
    """t: a running (in flight), b pending after a, h blocked on a handoff; u: x blocked on a handoff."""
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", "a"), NodeSpec("b", "b", ("a",)), NodeSpec("h", "h")])
    a = ledger.claim("t", "w", lease_s=LONG, kinds=["a"])
    h = ledger.claim("t", "w", lease_s=LONG, kinds=["h"])
    hid = ask(ledger, h, kind="confirm", question="go?", options=[{"id": "yes"}])
    ledger.create_task("u")
    ledger.add_node("u", "x")
    x = ledger.claim("u", "w", lease_s=LONG)
    uid = ask(ledger, x, kind="direction", question="which way?")
    return {"a": a, "hid": hid, "uid": uid}


# ---------------------------------------------------------------------- planning
@pytest.mark.parametrize("spec,why", [
    ("soon", "unknown wake condition 'soon'"), ("ci:done", "unknown wake condition"),
    ("handoff:", "names nothing"), ("handoff:999", "no such handoff"), ("handoff:abc", "no such handoff"),
    ("node:nope", "no such node in task t"), ("at:yesterday", "not a duration"), ("at:-5m", "not in the future"),
    ("at:2020-01-01T00:00:00Z", "not in the future"),
])
def test_bad_conditions_are_refused_in_one_line(ledger, two_tasks, spec, why):
    before = ledger.task("t").revision
    with pytest.raises(Refused, match=why) as e:
        ledger.plan_park("t", reason="wait", wake_on=spec)
    assert "\n" not in str(e.value) and ledger.task("t").revision == before


def test_conditions_already_met_are_refused(ledger, two_tasks, clock):
    ledger.commit(two_tasks["a"], output={})
    with pytest.raises(Refused, match="node:a: the node is already succeeded"):
        ledger.plan_park("t", reason="w", wake_on="node:a")
    ledger.apply(ledger.plan_resolve(two_tasks["uid"], answer="left"), operator="op")
    with pytest.raises(Refused, match=f"handoff:{two_tasks['uid']}: the handoff is already resolved"):
        ledger.plan_park("t", reason="w", wake_on=f"handoff:{two_tasks['uid']}")
    with pytest.raises(Refused, match="needs a wake condition"):
        ledger.plan_park("t", reason="w", auto_resume=True)


def test_the_plan_shows_the_conditions(ledger, two_tasks, tmp_path):
    f = tmp_path / "drop.csv"
    plan = ledger.plan_park("t", reason="w", wake_on=[f"handoff:{two_tasks['uid']}", "node:a", "effect:pr:x",
                                                      f"file:{f}", "at:2h", "node:a"], auto_resume=True)
    p = plan.to_json()["params"]
    assert [c["text"] for c in p["wake_conditions"]] == [f"handoff:{two_tasks['uid']}", "node:a", "effect:pr:x",
                                                         f"file:{f}", "at:2027-01-15T10:00:00.000Z"]
    assert p["auto_resume"] is True and p["wake_on"].startswith(f"handoff:{two_tasks['uid']}, node:a")
    assert any("effect:pr:x: no such effect yet" in w for w in plan.warnings)
    assert any("no such file yet" in w for w in plan.warnings)


# ---------------------------------------------------------------------- each condition wakes
def test_handoff_resolved_wakes_at_once_and_auto_resumes(ledger, two_tasks, clock):
    uid = two_tasks["uid"]
    _park(ledger, wake_on=f"handoff:{uid}", auto_resume=True)
    assert ledger.task("t").status == "parked" and _signals(ledger, "t", "wake") == []
    clock.advance(30)
    ledger.apply(ledger.plan_resolve(uid, option=None, answer="go left"), operator="bob")
    t = ledger.task("t")
    assert t.status == "active" and t.wake_state is None and t.wake_on is None
    [wake] = [e for e in ledger.events(0, task_id="t") if e.kind == "park.wake"]
    assert wake.layer == "system" and f"handoff {uid} resolved by bob" in wake.summary
    [resume] = [a for a in ledger.actions("t") if a.action == "resume"]
    assert resume.operator == "system" and resume.reason == f"wake: handoff:{uid}" and resume.result == "applied"
    op = [e for e in ledger.events(0, task_id="t") if e.kind == "operator.resume"]
    assert len(op) == 1 and op[0].actor == "system" and op[0].id > wake.id


def test_handoff_resolved_without_auto_resume_raises_the_wake_signal(ledger, two_tasks, clock):
    uid = two_tasks["uid"]
    _park(ledger, wake_on=f"handoff:{uid}")
    clock.advance(60)
    ledger.apply(ledger.plan_resolve(uid, answer="right"), operator="bob")
    assert ledger.task("t").status == "parked"
    [s] = _signals(ledger, "t", "wake")
    assert s.severity == "alarm" and s.node is None and s.since == pytest.approx(clock.now)
    assert f"handoff {uid} resolved by bob" in s.evidence and "resume task t" in s.evidence
    assert [x["kind"] for x in status_json(ledger)["tasks"][0]["signals"]].count("wake") == 1
    ledger.check_wakes()
    ledger.check_wakes()  # journalled once
    assert len([e for e in ledger.events(0, task_id="t") if e.kind == "park.wake"]) == 1
    ledger.apply(ledger.plan_resume("t"), operator="op")
    assert _signals(ledger, "t", "wake") == [] and ledger.task("t").wake_state is None


def test_a_node_committing_in_a_parked_task_wakes_it(ledger, two_tasks, clock):
    _park(ledger, wake_on="node:a", auto_resume=True)  # a is in flight (no --now)
    clock.advance(5)
    ledger.commit(two_tasks["a"], output={})  # the commit's own transaction notices and resumes
    assert ledger.task("t").status == "active"
    c = ledger.claim("t", "w", kinds=["b"])
    assert c is not None and c.node_key == "b"


def test_an_effect_confirmed_in_a_parked_task_wakes_it(ledger, two_tasks, clock):
    a = two_tasks["a"]
    ledger.intend_effect(a, "ci:run-7", compensation=None)
    _park(ledger, wake_on="effect:ci:run-7")
    assert _signals(ledger, "t", "wake") == []
    ledger.confirm_effect(a, "ci:run-7", external_id="green")
    [s] = _signals(ledger, "t", "wake")
    assert "effect ci:run-7 confirmed (green)" in s.evidence
    assert len([e for e in ledger.events(0, task_id="t") if e.kind == "park.wake"]) == 1


def test_at_wakes_when_somebody_looks(ledger, two_tasks, clock):
    _park(ledger, wake_on="at:2h", auto_resume=True)
    clock.advance(7199)
    assert ledger.check_wakes() == [] and ledger.task("t").status == "parked"
    assert _signals(ledger, "t", "wake") == []
    clock.advance(1)
    [s] = _signals(ledger, "t", "wake")  # a reader sees it before anybody writes
    assert "has come" in s.evidence and "resumes on its own" in s.evidence
    woken = ledger.check_wakes()
    assert [w["condition"] for w in woken] == ["at:2027-01-15T10:00:00.000Z"]
    assert ledger.task("t").status == "active"


@pytest.mark.parametrize("change", ["modify", "append", "remove", "same-content"])
def test_file_changed_since_the_park(ledger, two_tasks, clock, tmp_path, change):
    f = tmp_path / "signal.txt"
    f.write_bytes(b"waiting\n")
    _park(ledger, wake_on=f"file:{f}", auto_resume=True)
    assert ledger.check_wakes() == []
    if change == "modify":
        f.write_bytes(b"ready!!\n")  # same size, new content
        os.utime(f, ns=(1, 1))
    elif change == "append":
        with open(f, "ab") as fh:
            fh.write(b"done\n")
    elif change == "remove":
        f.unlink()
    else:
        f.write_bytes(b"waiting\n")
        os.utime(f, ns=(2, 2))  # touched, same content: no change
    woken = ledger.check_wakes()
    if change == "same-content":
        assert woken == [] and ledger.task("t").status == "parked"
    else:
        assert len(woken) == 1 and str(f) in woken[0]["evidence"]
        assert ledger.task("t").status == "active"


def test_a_file_that_appears(ledger, two_tasks, tmp_path):
    f = tmp_path / "later" / "drop.csv"
    _park(ledger, wake_on=f"file:{f}")
    assert _signals(ledger, "t", "wake") == []
    f.parent.mkdir()
    f.write_text("x")
    [s] = _signals(ledger, "t", "wake")  # a read-only reader sees it too
    assert "appeared" in s.evidence


def test_any_condition_wakes_and_node_parks_wake_too(ledger, two_tasks, clock):
    _park(ledger, node="b", wake_on=["at:1d", "node:a"], auto_resume=True)
    assert ledger.node("t", "b").wake_on == "at:2027-01-16T08:00:00.000Z, node:a"
    ledger.commit(two_tasks["a"], output={})
    assert ledger.node("t", "b").status == "pending"  # resumed by the system
    assert [a.operator for a in ledger.actions("t") if a.action == "resume"] == ["system"]
    assert ledger.task("t").wake_state is None


def test_a_read_only_reader_sees_the_wake_but_writes_nothing(ledger_path, ledger, two_tasks, clock):
    _park(ledger, wake_on="at:1m", auto_resume=True)
    clock.advance(120)
    ro = Ledger.open(ledger_path, read_only=True, clock=clock)
    try:
        assert ro.check_wakes() == []
        assert len(_signals(ro, "t", "wake")) == 1
        assert ro.task("t").status == "parked"
    finally:
        ro.close()


def test_a_failed_auto_resume_is_recorded_and_said(ledger, two_tasks, clock, monkeypatch):
    from store.parks import wake

    _park(ledger, wake_on="at:1m", auto_resume=True)
    clock.advance(61)

    def refuse(*a, **k):
        raise Refused("simulated refusal")

    monkeypatch.setattr(wake, "apply_within", refuse)
    ledger.check_wakes()
    assert ledger.task("t").status == "parked"
    [s] = _signals(ledger, "t", "wake")
    assert "automatic resume failed (simulated refusal)" in s.evidence
    assert graph_json(ledger, "t")["task"]["park"]["wake_conditions"][0]["met_at"] is not None


# ---------------------------------------------------------------------- parks expire
@pytest.mark.parametrize("node", [None, "b"])
def test_a_park_without_until_expires_after_48h(ledger, two_tasks, clock, node):
    _park(ledger, node=node)
    clock.advance(48 * 3600 - 1)
    assert _signals(ledger, "t", "park_expired") == []
    clock.advance(1)
    [s] = _signals(ledger, "t", "park_expired")
    assert s.node == node and s.severity == "warn" and "without an until" in s.evidence
    assert "re-confirm" in s.evidence


def test_the_expiry_is_configurable(ledger, two_tasks, clock):
    _park(ledger)
    clock.advance(3601)
    assert _signals(ledger, "t", "park_expired") == []
    assert len(_signals(ledger, "t", "park_expired", thresholds=Thresholds(park_expiry_s=3600))) == 1
    assert _signals(ledger, "t", "park_expired", thresholds=Thresholds(park_expiry_s=0)) == []


def test_a_park_with_until_expires_at_its_until_only(ledger, two_tasks, clock):
    _park(ledger, until="72h")
    clock.advance(49 * 3600)
    assert _signals(ledger, "t", "park_expired") == []
    clock.advance(23 * 3600)
    assert len(_signals(ledger, "t", "park_expired")) == 1

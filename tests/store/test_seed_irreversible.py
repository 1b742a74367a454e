"""Irreversible work waits for a person (ordering, paying, deleting resources — a human
confirmation node is mandatory). A node added as irreversible (``failure_class=
"irreversible_write"`` or ``retryable=False``) or of a kind the task lists (``confirm_kinds``)
cannot intend an effect until a person — not an agent of the task — has answered ``proceed`` to
an ordinary confirm handoff carrying that effect's details; the answer is audited and the intent
names it. Both backends."""

from __future__ import annotations

import json

import pytest

from console.cli import main as warden
from store import NodeSpec, Refused

LONG = 10**7
KEY = "pay:acme/invoice-7:charge:9f2c"
DETAILS = {"to": "ACME Ltd", "amount": "1,200.00 EUR", "invoice": "INV-7"}


def payment_task(ledger):
    ledger.create_task("t", confirm_kinds=["payment"])
    ledger.add_nodes("t", [NodeSpec("pay", kind="payment"), NodeSpec("draft"),
                           NodeSpec("delete", failure_class="irreversible_write"), NodeSpec("send", retryable=False)])


@pytest.mark.parametrize("key", ["pay", "delete", "send"])
def test_an_irreversible_node_cannot_intend_an_effect_before_a_person_confirms(ledger, key):
    payment_task(ledger)
    c = ledger.claim("t", "w", lease_s=LONG, key=key)
    with pytest.raises(Refused, match="a person confirms effect"):
        ledger.intend_effect(c, KEY, payload=DETAILS)
    assert ledger.effects("t") == [] or not ledger.effects("t")  # nothing intended
    d = ledger.claim("t", "w", lease_s=LONG, key="draft")  # an ordinary node is not held back
    ledger.intend_effect(d, "file:draft.md:write", payload={})


def test_a_persons_proceed_lets_the_effect_be_intended_and_the_intent_names_it(ledger):
    payment_task(ledger)
    c = ledger.claim("t", "w", lease_s=LONG, key="pay")
    hid = ledger.request_effect_confirmation(c, KEY, details=DETAILS, done="invoice INV-7 checked against the PO",
                                             why="the invoice matches the purchase order line for line")
    h = ledger.handoff(hid)
    assert h.kind == "confirm" and h.recommendation == "proceed" and ledger.node("t", "pay").status == "blocked"
    assert h.context["effect"] == {"key": KEY, "details": DETAILS} and h.context["done"] and h.context["why"]
    assert all(o["consequence"] for o in h.options)
    ledger.apply(ledger.plan_resolve(hid, option="proceed"), operator="alice@laptop")
    c = ledger.claim("t", "w", lease_s=LONG, key="pay")
    assert c.inputs["resolution"]["option"] == "proceed"
    ledger.intend_effect(c, KEY, payload=DETAILS)
    ev = [e for e in ledger.events(0, task_id="t", limit=1000) if e.kind == "effect.intended"][-1]
    assert ev.payload["confirmed_by"]["by"] == "alice@laptop" and ev.payload["confirmed_by"]["handoff"] == hid
    audit = [a for a in ledger.actions(limit=10) if a.action == "resolve"]
    assert audit[-1].operator == "alice@laptop" and audit[-1].result == "applied"
    # a confirmation covers that effect only: another key is asked again
    with pytest.raises(Refused, match="a person confirms effect"):
        ledger.intend_effect(c, KEY + "-again", payload=DETAILS)


def test_stop_leaves_it_unconfirmed(ledger):
    payment_task(ledger)
    c = ledger.claim("t", "w", lease_s=LONG, key="pay")
    hid = ledger.request_effect_confirmation(c, KEY, details=DETAILS, done="checked", why="matches the PO")
    ledger.apply(ledger.plan_resolve(hid, option="stop"), operator="alice")
    c = ledger.claim("t", "w", lease_s=LONG, key="pay")
    with pytest.raises(Refused, match="a person confirms effect"):
        ledger.intend_effect(c, KEY, payload=DETAILS)


@pytest.mark.parametrize("operator", ["w", "mcp:bot@host"])
def test_an_agent_of_the_task_cannot_confirm_it(ledger, ledger_path, operator, capsys):
    payment_task(ledger)
    c = ledger.claim("t", "w", lease_s=LONG, key="pay")
    hid = ledger.request_effect_confirmation(c, KEY, details=DETAILS, done="checked", why="matches the PO")
    with pytest.raises(Refused, match="person"):
        ledger.apply(ledger.plan_resolve(hid, option="proceed"), operator=operator)
    assert ledger.handoff(hid).status == "open"
    assert [a.result for a in ledger.actions(limit=10) if a.action == "resolve"] == ["refused"]
    ledger.close()
    rc = warden(["resolve", hid, "--option", "proceed", "--operator", operator, "--yes", "--json",
                 "--ledger", ledger_path])
    assert rc == 1 and "person" in json.loads(capsys.readouterr().out)["error"]["message"]


def test_a_confirmation_needs_the_effects_details(ledger):
    payment_task(ledger)
    c = ledger.claim("t", "w", lease_s=LONG, key="pay")
    with pytest.raises(Refused, match="details"):
        ledger.request_effect_confirmation(c, KEY, details={}, done="checked", why="matches")
    assert ledger.node("t", "pay").status == "running" and not ledger.handoffs(task_id="t")


# warden mcp: intend_effect asks the person itself (a confirm question of its own), then intends

def _mcp(ledger, tmp_path, **kw):
    from store.adapters.agent_session import AgentSession, SessionConfig
    from store.adapters.sessions import SessionStore
    return AgentSession(ledger, SessionStore(str(tmp_path / "sessions")),
                        SessionConfig(worker="mcp-agent", task="t", lease_s=600.0, **kw), say=lambda line: None)


def _closed(s):
    if s.keeper is not None:
        s.keeper.stop()
    s.stack.close()


def test_mcp_intend_effect_asks_a_person_and_intends_once_they_say_proceed(ledger, tmp_path):
    import threading
    from tests.support.waiting import wait_until
    ledger.create_task("t", confirm_kinds=["payment"])
    ledger.add_nodes("t", [NodeSpec("pay", kind="payment", title="pay invoice INV-7")])
    s = _mcp(ledger, tmp_path, ask_wait_s=60.0)
    try:
        assert s.claim_next()["node"] == "pay"
        got: dict = {}
        t = threading.Thread(target=lambda: got.update(s.intend_effect(KEY, DETAILS, why="matches the PO")))
        t.start()
        wait_until(lambda: ledger.handoffs(task_id="t"), "the confirm question is open")
        h = ledger.handoffs(task_id="t")[0]
        assert h.kind == "confirm" and h.recommendation == "proceed" and all(o["consequence"] for o in h.options)
        assert h.context["effect"] == {"key": KEY, "details": DETAILS} and h.context["why"] == "matches the PO"
        assert "pay invoice INV-7" in h.context["done"] and not ledger.effects("t")
        ledger.apply(ledger.plan_resolve(h.id, option="proceed"), operator="alice")
        t.join(60)
        assert got["status"] == "intended" and got["confirmed_by"] == "alice"
        assert [e.effect_key for e in ledger.effects("t")] == [KEY]
        assert ledger.node("t", "pay").status == "running"  # the step kept its claim throughout
    finally:
        _closed(s)


def test_mcp_intend_effect_declined_or_pending_intends_nothing(ledger, tmp_path):
    ledger.create_task("t", confirm_kinds=["payment"])
    ledger.add_nodes("t", [NodeSpec("pay", kind="payment")])
    s = _mcp(ledger, tmp_path, ask_wait_s=0.1)
    try:
        s.claim_next()
        with pytest.raises(Refused, match="details"):
            s.intend_effect(KEY)
        assert not ledger.handoffs(task_id="t")
        got = s.intend_effect(KEY, DETAILS)
        assert got["status"] == "pending" and "wait_for_human" in got["message"] and not ledger.effects("t")
        ledger.apply(ledger.plan_resolve(got["handoff"], option="stop"), operator="alice")
        assert s.wait_for_human(got["handoff"])["option"] == "stop"
        with pytest.raises(Refused, match="a person confirms effect"):
            ledger.intend_effect(s.claim, KEY, payload=DETAILS)
        assert not ledger.effects("t")
    finally:
        _closed(s)


def test_the_console_shows_the_effect_a_person_is_asked_to_confirm(ledger):
    from console.screens.resolve import render_handoff
    payment_task(ledger)
    c = ledger.claim("t", "w", lease_s=LONG, key="pay")
    hid = ledger.request_effect_confirmation(c, KEY, details=DETAILS, done="invoice INV-7 checked",
                                             why="matches the PO")
    text = render_handoff(ledger.handoff(hid), ledger.now()).plain
    assert "Irreversible effect (cannot be undone)" in text and KEY in text
    assert "to: ACME Ltd" in text and "amount: 1,200.00 EUR" in text
    assert "invoice INV-7 checked" in text and "Recommended: proceed" in text and "why: matches the PO" in text

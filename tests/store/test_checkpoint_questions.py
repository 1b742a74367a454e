"""A checkpoint question carries what a person decides from (store/ledger/checkpoint.py): what was
done, where the agent is stuck, each option's consequence, and a recommendation with why or why
none. A missing part is refused in one line naming it, nothing written — through the API,
``warden mcp``'s ask_human, and the hooks (which build the parts from what they know)."""

from __future__ import annotations

import threading

import pytest

from store import Ledger
from store.adapters.agent_session import AgentSession, SessionConfig
from store.adapters.claude_hooks import HookConfig, handle
from store.adapters.sessions import SessionStore
from store.errors import Refused
from tests.store.test_claude_hooks import TASK, event, turn
from tests.support.waiting import wait_until

OPTIONS = [{"id": "a", "label": "Approach A", "consequence": "the parser is rewritten (two days)"},
           {"id": "b", "label": "Approach B", "consequence": "the parser is patched; the bug class stays"}]
WHOLE = {"done": "read the parser and reproduced the failure", "stuck": "two fixes, each with a cost",
         "why": "B ships today"}

# (what is left out, the call's arguments, the words the refusal must name)
MISSING = {
    "done": (dict(context={k: v for k, v in WHOLE.items() if k != "done"}, recommendation="b"), "context['done']"),
    "stuck": (dict(context={**WHOLE, "stuck": "  "}, recommendation="b"), "context['stuck']"),
    "consequence": (dict(context=WHOLE, recommendation="b", options=[OPTIONS[0], {"id": "b", "label": "B"}]),
                    "option 'b' needs a consequence"),
    "why": (dict(context={k: v for k, v in WHOLE.items() if k != "why"}, recommendation="b"), "context['why']"),
    "recommendation": (dict(context={k: v for k, v in WHOLE.items() if k != "why"}),
                       "context['no_recommendation']"),
    "bare": (dict(), "context['done']"),
}


@pytest.mark.parametrize("kind", ["confirm", "direction", "exception", "acceptance"])
@pytest.mark.parametrize("missing", list(MISSING))
def test_a_checkpoint_missing_a_part_is_refused_naming_it_and_nothing_is_written(ledger, kind, missing):
    ledger.create_task("t")
    ledger.add_node("t", "fix")
    claim = ledger.claim("t", "w1", lease_s=600)
    events = len(ledger.events(0, task_id="t"))
    args, words = MISSING[missing]
    args = {"options": OPTIONS, **args}
    with pytest.raises(Refused) as e:
        ledger.request_human(claim, kind=kind, question="Which fix?", **args)
    assert words in str(e.value) and "\n" not in str(e.value)
    assert ledger.handoffs(task_id="t") == [] and len(ledger.events(0, task_id="t")) == events
    assert ledger.node("t", "fix").status == "running"
    ledger.heartbeat(claim)  # the claim is still held: nothing changed


def test_a_whole_checkpoint_is_taken_with_its_parts_and_none_needs_a_reason(ledger):
    ledger.create_task("t")
    for key in ("fix", "ask"):
        ledger.add_node("t", key)
    c1 = ledger.claim("t", "w1", lease_s=600, key="fix")
    h = ledger.handoff(ledger.request_human(c1, kind="direction", question="Which fix?", options=OPTIONS,
                                            recommendation="b", context=WHOLE))
    assert (h.recommendation, h.context["why"], h.context["done"]) == ("b", "B ships today", WHOLE["done"])
    c2 = ledger.claim("t", "w1", lease_s=600, key="ask")
    free = {"done": "drafted the summary", "stuck": "the audience is not said",
            "no_recommendation": "a matter of who reads it"}
    h2 = ledger.handoff(ledger.request_human(c2, kind="direction", question="Who reads this?", context=free))
    assert h2.recommendation is None and h2.context["no_recommendation"] == "a matter of who reads it"


# ---------------------------------------------------------------------- warden mcp's ask_human
@pytest.fixture
def session(ledger, tmp_path):
    s = AgentSession(ledger, SessionStore(str(tmp_path / "sessions")),
                     SessionConfig(worker="agent-1", task="t", lease_s=600.0, ask_wait_s=0.2), say=lambda line: None)
    yield s
    if s.keeper is not None:
        s.keeper.stop()
    s.stack.close()


@pytest.mark.parametrize("missing", list(MISSING))
def test_ask_human_missing_a_part_is_refused_naming_it_and_nothing_is_written(ledger, session, missing):
    assert session.claim_next()["status"] == "claimed"
    args, words = MISSING[missing]
    ctx = dict(args.get("context") or {})
    with pytest.raises(Refused) as e:
        session.ask_human("Which fix?", args.get("options", OPTIONS), "direction", done=ctx.get("done"),
                          stuck=ctx.get("stuck"), recommendation=args.get("recommendation"), why=ctx.get("why"))
    assert words in str(e.value) and "\n" not in str(e.value)
    assert ledger.handoffs(task_id="t") == []
    assert [n.key for n in ledger.graph("t").nodes] == ["main"]  # not even the question's node


def test_ask_human_hands_over_every_part(ledger, session):
    session.claim_next()
    got = session.ask_human("Which fix?", OPTIONS, "direction", done=WHOLE["done"], stuck=WHOLE["stuck"],
                            recommendation="b", why=WHOLE["why"])
    assert got["status"] == "pending"
    h = ledger.handoff(got["handoff"])
    assert (h.recommendation, h.context["done"], h.context["stuck"], h.context["why"]) == (
        "b", WHOLE["done"], WHOLE["stuck"], WHOLE["why"])
    assert [o["consequence"] for o in h.options] == [o["consequence"] for o in OPTIONS]


# ---------------------------------------------------------------------- the hooks build them
FAST = HookConfig(permission_wait_s=30, park_wait_s=30, poll_s=0.05)


def whole(h) -> None:
    assert h.context["done"].strip() and h.context["stuck"].strip()
    assert all(str(o.get("consequence") or "").strip() for o in h.options)
    assert (h.recommendation is not None and h.context["why"].strip()) or h.context["no_recommendation"].strip()


def test_a_hooks_permission_question_carries_every_part(ledger_path, clock, tmp_path):
    store = SessionStore(str(tmp_path / "sessions"))
    got: dict = {}
    with Ledger.open(ledger_path, clock=clock) as led:
        turn(led, store, prompt="Clean the build and rerun the suite")

        def run():
            with Ledger.open(ledger_path, clock=clock) as other:
                got["answer"] = handle(other, store, FAST, event("permission_request"))
        t = threading.Thread(target=run)
        t.start()
        wait_until(lambda: led.handoffs(task_id=TASK), "the permission question open")
        [h] = led.handoffs(task_id=TASK)
        whole(h)
        assert "Clean the build and rerun the suite" in h.context["done"]  # the turn's prompt: what it was doing
        assert "Bash" in h.context["stuck"] and "rm -rf build/" in h.context["stuck"]  # the tool and its input
        assert h.recommendation is None and "the agent's own permission request" in h.context["no_recommendation"]
        led.apply(led.plan_resolve(h.id, option="deny"), operator="op")
        t.join(60)
        assert not t.is_alive()


def test_a_hooks_notice_carries_every_part(ledger, tmp_path):
    store = SessionStore(str(tmp_path / "sessions"))
    turn(ledger, store)
    handle(ledger, store, FAST, event("stop"))
    handle(ledger, store, FAST, event("notification_idle_prompt"))
    [h] = ledger.handoffs(task_id=TASK)
    assert h.kind == "direction"
    whole(h)

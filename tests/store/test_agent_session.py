"""The MCP tools' meaning (store/adapters/agent_session.py), in this process: claims, answers to the
operator's actions, questions to a person, commits that survive a reconnect, hostile values.
The protocol end to end (the SDK's client, a real stdio server) is tests/store/test_mcp_server.py."""

from __future__ import annotations

import threading

import pytest

from tests.support.asks import MCP_PARTS, mcp_options
from tests.support.observed import said
from tests.support.waiting import wait_until
from store import Ledger, NodeSpec
from store.adapters.agent_session import AgentSession, SessionConfig
from store.adapters.sessions import SessionStore
from store.errors import InvalidValue, Refused


OPENED: list[AgentSession] = []


@pytest.fixture
def store(tmp_path):
    yield SessionStore(str(tmp_path / "sessions"))
    while OPENED:  # stop every lease keeper before the ledger (a PostgreSQL schema) goes away
        s = OPENED.pop()
        if s.keeper is not None:
            s.keeper.stop()
        s.stack.close()


def session(ledger, store, **kw) -> AgentSession:
    kw.setdefault("worker", "agent-1")
    kw.setdefault("task", "t")
    kw.setdefault("lease_s", 600.0)
    kw.setdefault("ask_wait_s", 0.2)
    s = AgentSession(ledger, store, SessionConfig(**kw), say=lambda line: None)
    OPENED.append(s)
    return s


def apply(ledger, plan):
    return ledger.apply(plan, operator="op@test")


def test_claim_heartbeat_commit_and_a_new_task_is_made_with_its_origin(ledger, store):
    s = session(ledger, store)
    got = s.claim_next()
    assert got["status"] == "claimed" and (got["task"], got["node"], got["kind"]) == ("t", "main", "agent")
    assert ledger.task("t").origin == "mcp"
    assert s.heartbeat(progress=0.5, action="read the spec", result="three endpoints", tokens=120)["status"] == "ok"
    n = ledger.node("t", "main")
    assert (n.units_done, n.units_total, n.tokens_used) == (0.5, 1.0, 120)
    text = said(ledger.observations("t", "main")[0])
    assert "read the spec" in text and "three endpoints" in text
    assert s.claim_next()["resumed"] is True  # asking again hands back the same claim
    done = s.commit({"summary": "done"})
    assert done["status"] == "committed" and done["already"] is False
    assert ledger.node("t", "main").output == {"summary": "done"}
    assert s.commit({"summary": "done"})["already"] is True  # repeated: answered, not redone
    assert s.commit({"summary": "other"})["status"] == "no_claim"
    assert s.claim_next()["status"] == "none"
    s.close()


def test_an_existing_graph_is_claimed_step_by_step(ledger, store):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", kind="llm"), NodeSpec("b", kind="tool", deps=("a",)),
                           NodeSpec("c", kind="llm", deps=("a",))])
    s = session(ledger, store)
    assert s.claim_next()["node"] == "a"
    s.commit(1)
    assert s.claim_next(kinds=["llm"])["node"] == "c"
    s.fail("no good", failure_class="spec", retryable=False)
    assert ledger.node("t", "c").status == "failed"
    got = s.claim_next()
    assert got["node"] == "b" and got["inputs"]["deps"]["a"]["output"] == 1
    with pytest.raises(Refused, match="works on task t"):
        s.claim_next("other")


@pytest.mark.parametrize("how", ["task", "task-now", "node-now"])
def test_park_answers_parked_and_resume_goes_on(ledger, store, how):
    s = session(ledger, store)
    s.claim_next()
    if how == "task":
        apply(ledger, ledger.plan_park("t", reason="quota"))
    elif how == "task-now":
        apply(ledger, ledger.plan_park("t", reason="quota", now=True))
    else:
        apply(ledger, ledger.plan_park("t", node="main", reason="quota", now=True))
    s.keeper.beat()  # the next heartbeat of the lease keeper (its thread beats every lease/3)
    got = s.heartbeat(observation="still here")
    assert got["status"] == "parked" and got["answer"] == "parked" and got["reason"] == "quota"
    if how != "task":
        assert s.commit({"x": 1})["status"] == "parked"  # no lease: nothing is committed
        assert ledger.node("t", "main").status == "parked"
    apply(ledger, ledger.plan_resume("t", node="main" if how == "node-now" else None))
    assert s.heartbeat(observation="back")["status"] == "ok"
    assert s.commit({"x": 1})["status"] == "committed"
    assert ledger.node("t", "main").status == "succeeded"


def test_abort_answers_aborted_and_drops_the_claim(ledger, store):
    s = session(ledger, store)
    s.claim_next()
    apply(ledger, ledger.plan_abort("t", reason="wrong repository"))
    got = s.heartbeat()
    assert (got["status"], got["answer"], got["reason"]) == ("aborted", "aborted", "wrong repository")
    assert s.commit({"x": 1})["status"] == "no_claim" and ledger.node("t", "main").status == "abandoned"
    assert s.claim_next()["status"] == "aborted"


def test_rewind_answers_rewound_with_the_reason_and_a_fresh_claim(ledger, store):
    s = session(ledger, store)
    first = s.claim_next()
    s.heartbeat(action="wrote v1", result="ok")
    apply(ledger, ledger.plan_rewind("t", "main", reason="use the v2 API"))
    got = s.commit({"v": 1})
    assert got["status"] == "rewound" and got["answer"] == "rewound: use the v2 API"
    assert got["attempt"] == first["attempt"] + 1 and got["inputs"]["rejections"] == ["use the v2 API"]
    assert ledger.node("t", "main").status == "running"
    assert s.commit({"v": 2})["status"] == "committed"
    assert ledger.node("t", "main").output == {"v": 2}


def test_a_reconnected_server_goes_on_with_the_claim_and_never_commits_twice(ledger_path, clock, store):
    with Ledger.open(ledger_path, clock=clock) as led:
        s1 = session(led, store)
        claim = s1.claim_next()
        s1.commit({"report": "v1"})  # the answer is lost with the connection...
        s1.close()
        s2 = session(led, store)  # ... the client starts a new server (same worker, same task)
        assert s2.commit({"report": "v1"})["already"] is True
        assert s2.claim_next()["status"] == "none"
        s2.close()
        events = [e.kind for e in led.events(task_id="t")]
        assert events.count("node.committed") == 1

        led.create_task("u")
        led.add_nodes("u", [NodeSpec("a"), NodeSpec("b")])
        s3 = session(led, store, task="u")
        a = s3.claim_next()
        s3.close()  # gone before committing: the claim is kept for the next server
        s4 = session(led, store, task="u")
        assert s4.claim_next() == {**a, "resumed": True}
        assert s4.commit("A")["status"] == "committed" and claim["node"] == "main"
        s4.close()


def test_a_lease_that_ran_out_unclaimed_is_taken_back_and_the_agent_goes_on(ledger, clock, store):
    """The heartbeats stopped for longer than the lease (a suspended or loaded machine) and nobody
    took the node: the next call takes it back — not "lost", which would send the agent off to
    claim_next with its step half done."""
    s = session(ledger, store, lease_s=30.0)
    assert s.claim_next()["status"] == "claimed"
    claims = ledger.node("t", "main").claim_count
    clock.advance(31)  # past the lease, on the ledger's clock
    got = s.heartbeat(progress=0.5, observation="still at it")
    assert got["status"] == "ok", got
    n = ledger.node("t", "main")  # a renewal: the same attempt, no claim spent (max_claims)
    assert (n.claim_count, n.attempt) == (claims, 1)
    assert [e.payload["lapsed_s"] for e in ledger.events(task_id="t") if "lapsed_s" in e.payload] == [1.0]
    assert s.commit({"summary": "done"})["status"] == "committed"


def test_a_commit_that_happened_before_the_session_was_saved_is_recognised(ledger, store):
    s1 = session(ledger, store)
    s1.claim_next()
    ledger.commit(s1.claim, output={"done": True})  # committed, then the process died before saving
    s1.keeper.stop()
    s1.stack.close()
    s2 = session(ledger, store)
    assert s2.commit({"done": True})["already"] is True
    assert s2.commit({"done": False})["status"] == "no_claim"  # another output is not that commit


def test_two_servers_with_one_worker_do_not_share_a_claim(ledger, store):
    a = session(ledger, store)
    b = session(ledger, store, lock_wait_s=0.1)
    assert b.worker != a.worker  # the second works under its own name
    a.claim_next()
    assert b.claim_next()["status"] == "none"  # the only node is a's
    a.close()
    b.close()


def test_ask_human_waits_then_answers_pending_and_the_answer_comes_later(ledger, store):
    s = session(ledger, store)
    s.claim_next()
    got = s.ask_human("Open the PR?", options=[mcp_options("yes")[0], {"id": "no", "label": "Not yet",
                                                                       "consequence": "no PR"}],
                      kind="confirm", **MCP_PARTS)
    assert got["status"] == "pending"
    hid = got["handoff"]
    h = ledger.handoff(hid)
    assert (h.kind, h.question, [o["id"] for o in h.options]) == ("confirm", "Open the PR?", ["yes", "no"])
    assert h.node == "main.ask-1" and ledger.node("t", "main").status == "running"  # the step keeps its claim
    assert s.heartbeat()["status"] == "ok"
    assert s.commit({"x": 1})["status"] == "waiting_for_human"  # not while its question is open
    apply(ledger, ledger.plan_resolve(hid, option="yes", answer="go ahead"))
    got = s.wait_for_human(hid)
    assert (got["status"], got["option"], got["answer"], got["by"]) == ("answered", "yes", "go ahead", "op@test")
    assert ledger.node("t", "main").status == "running" and ledger.node("t", "main").attempt == 1
    assert s.inputs()["last_answer"]["answer"] == "go ahead"
    assert s.commit({"pr": 42})["status"] == "committed"
    assert ledger.node("t", "main.ask-1").status == "succeeded" and ledger.task("t").status == "completed"


def test_concurrent_questions_are_each_their_own_handoff_answered_to_its_own_call(ledger_path, clock, store):
    with Ledger.open(ledger_path, clock=clock) as led:
        s = AgentSession(led, store, SessionConfig(worker="w", task="t", ask_wait_s=60.0))
        s.claim_next()
        got: dict[int, dict] = {}
        threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, s.ask_human(f"question {i}?",
                                                                                       options=mcp_options("a", "b"), **MCP_PARTS)))
                   for i in range(20)]
        for t in threads:
            t.start()
        wait_until(lambda: len(led.handoffs(task_id="t")) == 20, "20 questions open")
        for h in led.handoffs(task_id="t"):
            i = int(h.question.split()[1].rstrip("?"))
            apply(led, led.plan_resolve(h.id, option="a" if i % 2 else "b", answer=f"for {i}"))
        for t in threads:
            t.join(60)
        assert all(got[i]["status"] == "answered" and got[i]["answer"] == f"for {i}"
                   and got[i]["option"] == ("a" if i % 2 else "b") for i in range(20))
        assert led.node("t", "main").status == "running"
        s.close()


def test_ask_human_answered_while_it_waits(ledger, store):
    s = session(ledger, store, ask_wait_s=30.0)
    s.claim_next()
    answered = {}
    t = threading.Thread(target=lambda: answered.update(s.ask_human("Which region?", options=mcp_options("eu", "us"),
                                                                          **MCP_PARTS)))
    t.start()
    hid = None
    while hid is None:  # the question shows up in the ledger
        hs = ledger.handoffs(task_id="t")
        hid = hs[0].id if hs else None
        t.join(0.02)
    apply(ledger, ledger.plan_resolve(hid, option="eu"))
    t.join(30)
    assert answered["status"] == "answered" and answered["option"] == "eu"


def test_a_question_withdrawn_by_an_abort_answers_aborted(ledger, store):
    s = session(ledger, store)
    s.claim_next()
    hid = s.ask_human("Proceed?", **MCP_PARTS)["handoff"]
    apply(ledger, ledger.plan_abort("t", reason="cancelled"))
    got = s.wait_for_human(hid)
    assert got["status"] == "aborted" and got["handoff_status"] == "withdrawn"


def test_report_and_resources(ledger, store):
    ledger.create_task("t", constraints=["never push to main"], inputs={"repo": "a/b"})
    ledger.add_node("t", "main")
    s = session(ledger, store)
    s.claim_next()
    assert s.constraints() == ["never push to main"]
    assert s.inputs()["task"] == {"repo": "a/b"}
    rep = s.report()
    assert rep["session"]["claim"]["node"] == "main" and "unfinished" in rep


@pytest.mark.parametrize("call", [
    lambda s: s.heartbeat(progress=-1),
    lambda s: s.heartbeat(progress=1.5),
    lambda s: s.ask_human("?", options=[str(i) for i in range(21)]),
    lambda s: s.heartbeat(progress=float("nan")),
    lambda s: s.heartbeat(tokens=-5),
    lambda s: s.fail("x", failure_class="cosmic"),
    lambda s: s.ask_human("?", options=[{"label": "no id"}]),
    lambda s: s.ask_human("?", kind="nonsense"),
    lambda s: s.ask_human("?", options=[3]),
    lambda s: s.commit({"x": float("inf")}),
    lambda s: s.commit("y" * 70_000),
    lambda s: s.intend_effect(""),
])
def test_bad_values_are_refused_with_one_line_and_the_claim_is_kept(ledger, store, call):
    s = session(ledger, store)
    s.claim_next()
    with pytest.raises((Refused, InvalidValue, ValueError)) as e:
        call(s)
    assert "\n" not in str(e.value)
    assert s.heartbeat()["status"] == "ok"  # still holding the lease
    assert ledger.node("t", "main").status == "running"


def test_hostile_options_are_bounded(ledger, store):
    s = session(ledger, store)
    s.claim_next()
    hid = s.ask_human("Pick", options=[{"id": "a", "label": "L" * 50_000, "consequence": "C" * 50_000,
                                        "extra": "dropped"}], **MCP_PARTS)["handoff"]
    [opt] = ledger.handoff(hid).options
    assert len(opt["label"]) <= 1001 and len(opt["consequence"]) <= 1001 and "extra" not in opt


def test_hostile_text_is_stored_as_text_bounded(ledger, store):
    s = session(ledger, store)
    s.claim_next()
    evil = "\x1b]52;c;aGFja2Vk\x07 [@click=app.quit]x[/] \u202e" * 2000
    assert s.heartbeat(observation=evil, action=evil, result=evil)["status"] == "ok"
    obs = ledger.observations("t", "main")[0]
    assert "[@click=app.quit]" in obs.text and len(obs.text) <= 4 * 8001 + 100

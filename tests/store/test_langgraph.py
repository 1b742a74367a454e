"""The LangGraph adapter, with the real ``langgraph`` package and deterministic Python nodes.

A graph with a loop (a conditional edge back), an interrupt and a node that fails once is
supervised, resolved, retried, rewound by an operator and completed; a stuck loop raises a stall
signal; park and abort stop a run cleanly; a durable checkpointer resumes in a new supervisor.
"""

from __future__ import annotations

import operator
import threading
import time
from collections import Counter
from typing import Annotated, Any, Literal, TypedDict

import pytest

langgraph = pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

from store import Refused  # noqa: E402
from store.adapters.langgraph import supervise  # noqa: E402
from store.reading.signals import signals_for_task  # noqa: E402
from store.worker import StepFailed  # noqa: E402
from tests.support.waiting import Deadline  # noqa: E402

QUESTION = {
    "question": "Publish this draft?",
    "options": [{"id": "publish", "label": "Publish", "consequence": "it goes out"},
                {"id": "stop", "label": "Stop", "consequence": "nothing is published"}],
    "recommendation": "publish",
}


class State(TypedDict, total=False):
    topic: str
    drafts: int
    text: str
    decision: Any
    log: Annotated[list[str], operator.add]


class S(TypedDict, total=False):
    x: int
    answer: Any


def report_graph(calls: Counter, checkpointer: Any = None, drafts_needed: int = 3):
    def plan(s: State) -> State:
        return {"drafts": 0, "log": ["plan"]}

    def draft(s: State) -> State:
        n = s["drafts"] + 1
        return {"drafts": n, "text": f"draft {n} on {s['topic']}", "log": [f"draft{n}"]}

    def check(s: State) -> State:
        return {"log": [f"check{s['drafts']}"]}

    def route(s: State) -> Literal["draft", "review"]:
        return "draft" if s["drafts"] < drafts_needed else "review"

    def review(s: State) -> State:
        answer = interrupt(QUESTION)
        return {"decision": answer["option"], "log": [f"review:{answer['option']}:{answer['answer']}"]}

    def publish(s: State) -> State:
        calls["publish"] += 1
        if calls["publish"] == 1:
            raise ConnectionError("the publishing service hung up")
        return {"log": ["published"]}

    b = StateGraph(State)
    for fn in (plan, draft, check, review, publish):
        b.add_node(fn.__name__, fn)
    b.add_edge(START, "plan")
    b.add_edge("plan", "draft")
    b.add_edge("draft", "check")
    b.add_conditional_edges("check", route)
    b.add_edge("review", "publish")
    b.add_edge("publish", END)
    return b.compile(checkpointer=checkpointer or InMemorySaver())


def _resolve(ledger, hid: str, option: str, answer: str) -> None:
    ledger.apply(ledger.plan_resolve(hid, option=option, answer=answer), operator="op")


def test_a_graph_is_supervised_resolved_retried_rewound_and_completed(ledger, clock):
    calls: Counter = Counter()
    s = supervise(report_graph(calls), ledger, task_id="lg", worker="w1", background=False)

    # 1. The loop goes round three times, then the review interrupts: blocked on a handoff.
    r = s.run({"topic": "pilot", "log": []})
    assert (r.status, r.reason, r.node) == ("blocked", "handoff", "review")
    h = ledger.handoff(r.handoff_id)
    assert (h.question, h.recommendation, h.status, h.kind) == (QUESTION["question"], "publish", "open", "confirm")
    assert [o["id"] for o in h.options] == ["publish", "stop"] and h.options[0]["consequence"] == "it goes out"
    status = {n.key: n.status for n in ledger.graph("lg").nodes}
    assert status == {"plan": "succeeded", "draft": "succeeded", "check": "succeeded", "review": "blocked"}
    draft = ledger.node("lg", "draft")
    assert draft.output["drafts"] == 3 and draft.output_digest  # committed with its last update
    assert len(ledger.observations("lg", "draft")) == 3  # one observation per loop iteration
    assert draft.attempt == 1 and ledger.node("lg", "check").attempt == 1

    # still blocked while the handoff is open
    assert s.run(None).reason == "handoff"

    # 2. Resolved: the graph resumes with the resolution; publish fails (retryable).
    _resolve(ledger, r.handoff_id, "publish", "ship it")
    r = s.run(None)
    assert (r.status, r.reason, r.node, r.failure_class, r.retryable) == ("failed", "error", "publish", "transient",
                                                                         True)
    assert "ConnectionError" in r.error and r.retry_at
    assert ledger.node("lg", "review").status == "succeeded"
    assert ledger.node("lg", "review").output["decision"] == "publish"

    # 3. Not before its back-off; then it succeeds.
    r = s.run(None)
    assert (r.status, r.reason) == ("failed", "retry_wait")
    clock.advance(3600)
    r = s.run(None)
    assert r.status == "completed", r
    assert r.output["log"][-2:] == ["review:publish:ship it", "published"]
    assert ledger.task("lg").status == "completed"
    assert ledger.node("lg", "publish").attempt == 2

    # 4. An operator rewinds draft: the next run re-runs from the checkpoint before draft.
    ledger.apply(ledger.plan_rewind("lg", "draft", reason="too short"), operator="op")
    r = s.run(None)
    assert (r.status, r.reason, r.node) == ("blocked", "handoff", "review")
    assert ledger.node("lg", "draft").attempt == 2 and ledger.node("lg", "draft").status == "succeeded"
    assert ledger.node("lg", "plan").attempt == 1  # upstream untouched
    state = s.graph.get_state(s.config).values
    assert state["log"].count("plan") == 1 and state["drafts"] == 3
    _resolve(ledger, r.handoff_id, "publish", "again")
    r = s.run(None)
    assert r.status == "completed" and r.output["log"][-2:] == ["review:publish:again", "published"]
    assert ledger.task("lg").status == "completed"
    kinds = [e.kind for e in ledger.events(0, task_id="lg", limit=10_000)]
    assert kinds.count("handoff.opened") == 2 and kinds.count("operator.rewind") == 1


def test_a_stuck_loop_raises_a_stall_signal_and_park_stops_it(ledger):
    """The same update again and again: ``repeating`` on the looping node; a park stops the
    run after its current step."""
    def spin(s: S) -> S:
        return {"x": 1}

    def again(s: S) -> Literal["spin", "__end__"]:
        return "spin"

    b = StateGraph(S)
    b.add_node("spin", spin)
    b.add_edge(START, "spin")
    b.add_conditional_edges("spin", again)
    s = supervise(b.compile(checkpointer=InMemorySaver()), ledger, task_id="loop", worker="w")  # keeper threads
    out: list[Any] = []
    th = threading.Thread(target=lambda: out.append(s.run({"x": 0})))
    th.start()
    deadline = Deadline(60)
    kinds: set[str] = set()
    while not kinds & {"repeating", "no_new_info"}:
        assert not deadline.expired() and th.is_alive(), out
        kinds = {g.kind for g in signals_for_task(ledger, ledger.task("loop")) if g.node == "spin"}
        time.sleep(0.01)  # polling a condition with a deadline
    assert ledger.node("loop", "spin").status == "running"  # held: one ledger node, many observations
    ledger.apply(ledger.plan_park("loop", reason="stuck in a loop"), operator="op")
    th.join(60)
    assert not th.is_alive()
    assert (out[0].status, out[0].reason) == ("blocked", "parked")
    assert s.run(None).reason == "parked"  # still parked: nothing claimed


def test_abort_stops_a_running_graph(ledger):
    def spin(s: S) -> S:
        return {"x": s["x"] + 1}

    def again(s: S) -> Literal["spin", "__end__"]:
        return "spin"

    b = StateGraph(S)
    b.add_node("spin", spin)
    b.add_edge(START, "spin")
    b.add_conditional_edges("spin", again)
    s = supervise(b.compile(checkpointer=InMemorySaver()), ledger, task_id="ab", worker="w", background=False)
    out: list[Any] = []
    th = threading.Thread(target=lambda: out.append(s.run({"x": 0})))
    th.start()
    deadline = Deadline(60)
    while len(ledger.observations("ab", "spin")) < 3 if _has(ledger, "ab", "spin") else True:
        assert not deadline.expired() and th.is_alive(), out
        time.sleep(0.01)
    ledger.apply(ledger.plan_abort("ab", reason="not needed"), operator="op")
    th.join(60)
    assert (out[0].status, out[0].reason) == ("failed", "aborted")
    assert s.run(None).reason == "aborted"


def _has(ledger, task: str, key: str) -> bool:
    return any(n.key == key for n in ledger.graph(task).nodes) if task in {t.task_id for t in ledger.tasks()} else False


def test_failure_classes_come_from_step_failed_or_the_classifier(ledger):
    def bad(s: S) -> S:
        raise StepFailed("the spec is contradictory", failure_class="spec", retryable=False)

    b = StateGraph(S)
    b.add_node("bad", bad)
    b.add_edge(START, "bad")
    s = supervise(b.compile(checkpointer=InMemorySaver()), ledger, task_id="f", worker="w", background=False)
    r = s.run({"x": 0})
    assert (r.status, r.failure_class, r.retryable) == ("failed", "spec", False)
    assert ledger.task("f").status == "failed"  # one non-retryable failure fails the task
    assert s.run(None).reason in ("error", "aborted")

    def oops(s: S) -> S:
        raise KeyError("x")

    b = StateGraph(S)
    b.add_node("oops", oops)
    b.add_edge(START, "oops")
    s = supervise(b.compile(checkpointer=InMemorySaver()), ledger, task_id="g", worker="w", background=False,
                  classify=lambda e: ("conclusion", False) if isinstance(e, KeyError) else ("transient", None))
    r = s.run({"x": 0})
    assert (r.failure_class, r.retryable) == ("conclusion", False)


def test_a_durable_checkpointer_resumes_in_a_new_supervisor(ledger, tmp_path):
    """Process A runs to the interrupt; process B (a new graph object, a new saver on the same
    file, a new supervisor) resumes once the handoff is resolved."""
    import sqlite3

    sqlite_saver = pytest.importorskip("langgraph.checkpoint.sqlite")
    path = str(tmp_path / "checkpoints.db")
    calls: Counter = Counter({"publish": 1})  # publish will not fail here
    g1 = report_graph(calls, sqlite_saver.SqliteSaver(sqlite3.connect(path, check_same_thread=False)), 1)
    r = supervise(g1, ledger, task_id="dur", worker="a", background=False).run({"topic": "t", "log": []})
    assert r.reason == "handoff"
    _resolve(ledger, r.handoff_id, "publish", "ok")
    g2 = report_graph(calls, sqlite_saver.SqliteSaver(sqlite3.connect(path, check_same_thread=False)), 1)
    r2 = supervise(g2, ledger, task_id="dur", worker="b", background=False).run(None)
    assert r2.status == "completed" and r2.output["log"][-1] == "published"
    claims = [(e.node, e.actor) for e in ledger.events(0, task_id="dur") if e.kind == "node.claimed"]
    assert ("review", "a") in claims and ("review", "b") in claims and ("publish", "b") in claims


def test_a_graph_without_a_checkpointer_is_refused(ledger):
    b = StateGraph(S)
    b.add_node("a", lambda s: s)
    b.add_edge(START, "a")
    with pytest.raises(Refused):
        supervise(b.compile(), ledger, task_id="n", worker="w")


def test_interrupt_with_a_plain_value_asks_a_direction_question(ledger):
    def ask(s: S) -> S:
        return {"answer": interrupt("Which region first?")}

    b = StateGraph(S)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    b.add_edge("ask", END)
    s = supervise(b.compile(checkpointer=InMemorySaver()), ledger, task_id="q", worker="w", background=False)
    r = s.run({})
    h = ledger.handoff(r.handoff_id)
    assert (h.kind, h.question, h.options) == ("direction", "Which region first?", ())
    ledger.apply(ledger.plan_resolve(r.handoff_id, answer="EU"), operator="op")
    r = s.run(None)
    assert r.status == "completed" and r.output["answer"]["answer"] == "EU"
    assert r.output["answer"]["at"].endswith("Z")  # ISO-8601 UTC


def test_the_example_runs_across_processes(tmp_path):
    """examples/langgraph_agent.py: one process runs to the question, a person answers, a second
    process resumes from the durable checkpoints and completes."""
    import os
    import subprocess
    import sys

    pytest.importorskip("langgraph.checkpoint.sqlite")
    from store import Ledger

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    example = os.path.join(root, "examples", "langgraph_agent.py")
    db = str(tmp_path / "ledger.db")
    env = dict(os.environ, PYTHONPATH=root)

    def run() -> str:
        p = subprocess.run([sys.executable, example, db], capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        return p.stdout

    assert run().startswith("blocked handoff 1")
    with Ledger.open(db) as led:
        led.apply(led.plan_resolve("1", option="publish", answer="ship it"), operator="op")
    out = run()
    assert out.startswith("completed") and out.strip().splitlines()[-2:] == ["review: publish (ship it)", "published"]
    with Ledger.open(db) as led:
        assert led.task("lg-report").status == "completed"
        assert {n.key: n.status for n in led.graph("lg-report").nodes} == {
            k: "succeeded" for k in ("plan", "draft", "check", "review", "publish")}


def test_a_loop_node_held_across_a_park_keeps_its_lease_and_finishes(ledger, clock):
    """Parked mid-loop (by an operator, here from inside the node: deterministic), the held loop
    node's lease clock stands still while the task is parked (parked time is not
    running time); after the resume the next run carries on with the same attempt and finishes."""
    box: dict[str, Any] = {}

    def spin(s: S) -> S:
        if s["x"] == 2 and not box.get("parked"):
            box["parked"] = True
            ledger.apply(ledger.plan_park("exp", reason="lunch"), operator="op")
        return {"x": s["x"] + 1}

    def again(s: S) -> Literal["spin", "__end__"]:
        return "spin" if s["x"] < 5 else "__end__"

    b = StateGraph(S)
    b.add_node("spin", spin)
    b.add_edge(START, "spin")
    b.add_conditional_edges("spin", again)
    s = supervise(b.compile(checkpointer=InMemorySaver()), ledger, task_id="exp", worker="w", lease_s=30,
                  background=False)
    r = s.run({"x": 0})
    assert (r.status, r.reason) == ("blocked", "parked")
    assert ledger.node("exp", "spin").status == "running"  # held across the park (no --now)
    clock.advance(120)  # four leases' worth of park: the lease does not run out meanwhile
    ledger.apply(ledger.plan_resume("exp"), operator="op")
    held = ledger.node("exp", "spin")
    assert held.lease_until is not None and held.lease_until > clock() and held.paused_s == pytest.approx(120)
    r = s.run(None)
    assert r.status == "completed" and r.output == {"x": 5}
    spin_node = ledger.node("exp", "spin")
    assert spin_node.status == "succeeded" and spin_node.attempt == 1 and spin_node.output == {"x": 5}
    assert ledger.task("exp").status == "completed"

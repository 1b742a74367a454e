"""The LangGraph adapter and the operator's actions, with the real ``langgraph`` package: a parked
task runs nothing (not one more pass of a loop, however often a driver polls), a rewind's preview
says what the rerun will do with an interrupt's answer, the rewind's reasons reach the graph's
state, and a long-running driver waits for an operator without polling."""

from __future__ import annotations

import operator
import threading
from collections import Counter
from typing import Annotated, Any, Callable, Literal, TypedDict

import pytest

langgraph = pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

from store import NodeSpec  # noqa: E402
from store.adapters.langgraph import REJECTIONS_KEY, supervise  # noqa: E402
from tests.support.asks import ask  # noqa: E402


class Loop(TypedDict, total=False):
    x: int


class Doc(TypedDict, total=False):
    text: str
    decision: Any
    log: Annotated[list[str], operator.add]
    warden_rejections: dict


def _chain(state: type, *steps: Callable[[Any], Any]) -> Any:
    """START → each step in turn (a node named as its function) → END, on an in-memory checkpointer."""
    b = StateGraph(state)
    before = START
    for step in steps:
        b.add_node(step.__name__, step)
        b.add_edge(before, step.__name__)
        before = step.__name__
    b.add_edge(before, END)
    return b.compile(checkpointer=InMemorySaver())


def _loop_graph(ledger, task: str, calls: Counter, park_at: int | None, until: int = 6):
    def spin(s: Loop) -> Loop:
        calls["spin"] += 1
        if park_at is not None and s["x"] == park_at and not calls["parked"]:
            calls["parked"] += 1
            ledger.apply(ledger.plan_park(task, reason="lunch"), operator="op")  # mid-loop, deterministic
        return {"x": s["x"] + 1}

    def again(s: Loop) -> Literal["spin", "__end__"]:
        return "spin" if s["x"] < until else "__end__"

    b = StateGraph(Loop)
    b.add_node("spin", spin)
    b.add_edge(START, "spin")
    b.add_conditional_edges("spin", again)
    return b.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("park_at", [0, 1, 3])
def test_a_parked_task_runs_no_more_passes_however_often_it_is_run(ledger, park_at):
    calls: Counter = Counter()
    s = supervise(_loop_graph(ledger, "lp", calls, park_at), ledger, task_id="lp", worker="w", background=False)
    r = s.run({"x": 0})
    assert (r.status, r.reason) == ("blocked", "parked")
    passes, state = calls["spin"], s.graph.get_state(s.config).values
    observations = len(ledger.observations("lp", "spin"))
    for _ in range(9):  # a driver polling while parked
        r = s.run(None)
        assert (r.status, r.reason, r.steps) == ("blocked", "parked", 0) and "lunch" in r.error
    assert calls["spin"] == passes and s.graph.get_state(s.config).values == state  # nothing ran
    assert len(ledger.observations("lp", "spin")) == observations
    ledger.apply(ledger.plan_resume("lp"), operator="op")
    r = s.run(None)
    assert r.status == "completed" and r.output == {"x": 6} and calls["spin"] == 6


def test_a_park_between_runs_stops_the_next_run_before_anything(ledger):
    """Parked while the graph waits on a person: resolving the handoff does not start it."""
    calls: Counter = Counter()

    def ask(s: Doc) -> Doc:
        calls["ask"] += 1
        return {"decision": interrupt({"question": "Go?", "options": [{"id": "go"}]})["option"]}

    def after(s: Doc) -> Doc:
        calls["after"] += 1
        return {"log": ["after"]}

    s = supervise(_chain(Doc, ask, after), ledger, task_id="pk", worker="w", background=False)
    r = s.run({"log": []})
    ledger.apply(ledger.plan_park("pk", reason="waiting for legal"), operator="op")
    ledger.apply(ledger.plan_resolve(r.handoff_id, option="go"), operator="op")
    assert s.run(None).reason == "parked" and calls == Counter({"ask": 1})
    ledger.apply(ledger.plan_resume("pk"), operator="op")
    assert s.run(None).status == "completed" and calls["after"] == 1


def _doc_graph(calls: Counter, seen: list):
    def draft(s: Doc) -> Doc:
        calls["draft"] += 1
        seen.append(dict(s.get(REJECTIONS_KEY) or {}))
        return {"text": f"draft {calls['draft']}", "log": ["draft"]}

    def work(s: Doc) -> Doc:
        calls["work"] += 1
        answer = interrupt({"question": f"Publish {s['text']}?", "options": [{"id": "yes"}, {"id": "no"}]})
        return {"decision": answer["option"], "log": [f"work:{answer['option']}"]}

    return _chain(Doc, draft, work)


@pytest.mark.parametrize("rewound", ["work", "draft"])
def test_the_rewind_preview_agrees_with_what_the_rerun_does(ledger, rewound):
    calls: Counter = Counter()
    s = supervise(_doc_graph(calls, []), ledger, task_id="rw", worker="w", background=False)
    r = s.run({"log": []})
    first = r.handoff_id
    ledger.apply(ledger.plan_resolve(first, option="yes", answer="ship"), operator="op")
    assert s.run(None).status == "completed"
    plan = ledger.plan_rewind("rw", rewound, reason="not good enough")
    assert plan.resolutions_reapplied == ()  # not promised: the interrupt's answer is not given again …
    assert any(f"handoff {first} answered a LangGraph interrupt of work: its rerun asks again" in w
               for w in plan.warnings)  # … and the preview says so
    ledger.apply(plan, operator="op")
    r = s.run(None)
    assert (r.status, r.reason, r.node) == ("blocked", "handoff", "work") and r.handoff_id != first  # it asks again
    ledger.apply(ledger.plan_resolve(r.handoff_id, option="no"), operator="op")
    assert s.run(None).output["decision"] == "no"


def test_a_plain_agents_answer_is_still_given_again_and_said(ledger):
    ledger.create_task("plain")
    ledger.add_nodes("plain", [NodeSpec("ask"), NodeSpec("next", deps=("ask",))])
    c = ledger.claim("plain", "w")
    hid = ask(ledger, c, kind="direction", question="Which branch?")
    ledger.apply(ledger.plan_resolve(hid, answer="main"), operator="op")
    ledger.commit(ledger.claim("plain", "w"), output={})
    plan = ledger.plan_rewind("plain", "ask", reason="redo")
    assert plan.resolutions_reapplied == (hid,) and not any("asks again" in w for w in plan.warnings)
    ledger.apply(plan, operator="op")
    assert ledger.claim("plain", "w").inputs["resolution"]["answer"] == "main"


def test_rewind_reasons_reach_the_state_the_rerun_starts_from(ledger):
    calls: Counter = Counter()
    seen: list = []
    s = supervise(_doc_graph(calls, seen), ledger, task_id="rj", worker="w", background=False)
    r = s.run({"log": []})
    ledger.apply(ledger.plan_resolve(r.handoff_id, option="yes"), operator="op")
    s.run(None)
    assert seen == [{}]
    ledger.apply(ledger.plan_rewind("rj", "draft", reason="too short"), operator="op")
    s.run(None)
    assert seen[-1] == {"draft": ["too short"], "work": ["too short"]}  # the rewound node and its downstream
    ledger.apply(ledger.plan_rewind("rj", "draft", reason="cite the pilot figures"), operator="op")
    r = s.run(None)
    both = ["too short", "cite the pilot figures"]
    assert seen[-1] == {"draft": both, "work": both}
    assert s.graph.get_state(s.config).values[REJECTIONS_KEY]["draft"][-1] == "cite the pilot figures"
    assert (r.reason, calls["draft"]) == ("handoff", 3)


def test_a_graph_without_the_key_reruns_as_before(ledger):
    calls: Counter = Counter()

    def a(s: Loop) -> Loop:
        calls["a"] += 1
        return {"x": calls["a"]}

    s = supervise(_chain(Loop, a), ledger, task_id="nk", worker="w", background=False)
    assert s.run({"x": 0}).output == {"x": 1}
    ledger.apply(ledger.plan_rewind("nk", "a", reason="again"), operator="op")
    assert s.run(None).output == {"x": 2}


def test_a_driver_waits_for_the_operator_without_polling(ledger_path, ledger):
    calls: Counter = Counter()
    s = supervise(_loop_graph(ledger, "wt", calls, park_at=2), ledger, task_id="wt", worker="w", background=False)
    r = s.run({"x": 0})
    assert r.reason == "parked" and r.revision == ledger.task("wt").revision
    assert s.wait(timeout=0.2) is False  # nothing changed
    ledger.apply(ledger.plan_resume("wt"), operator="op")  # before wait is called: not missed
    assert s.wait(timeout=30) is True
    r = s.run(None)
    assert r.status == "completed"
    woke: list[bool] = []
    t = threading.Thread(target=lambda: woke.append(s.wait(timeout=60)))
    t.start()
    ledger.apply(ledger.plan_rewind("wt", "spin", reason="once more"), operator="op")  # after completed
    t.join(60)
    assert woke == [True]
    assert s.run(None).status == "completed" and calls["spin"] > 6  # the rewound loop ran again

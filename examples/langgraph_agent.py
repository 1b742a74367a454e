"""A LangGraph agent supervised by Warden, end to end (no LLM: deterministic Python nodes).

    pip install 'warden[langgraph]'
    python examples/langgraph_agent.py ledger.db            # runs until it asks a person
    warden handoffs                                         # the question, in another shell
    warden resolve 1 --option publish --answer "ship it" --yes
    python examples/langgraph_agent.py ledger.db            # resumes: publishes, completes

The graph: plan → draft ⇄ check (a loop until three drafts) → review (asks a person) → publish.
Its checkpoints are kept in ``<ledger>.checkpoints.db`` (LangGraph's SqliteSaver), so the second
run, in a new process, resumes where the first stopped. With ``--wait`` it waits for the answer
itself (``Ledger.wait_for_resolution``) instead of exiting.
"""

from __future__ import annotations

import operator
import sqlite3
import sys
from typing import Annotated, Any, Literal, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from store import Ledger
from store.adapters.langgraph import supervise


class State(TypedDict, total=False):
    topic: str
    drafts: int
    text: str
    decision: Any
    log: Annotated[list[str], operator.add]


def plan(s: State) -> State:
    return {"drafts": 0, "log": ["plan"]}


def draft(s: State) -> State:
    n = s["drafts"] + 1
    return {"drafts": n, "text": f"draft {n} on {s['topic']}", "log": [f"draft {n}"]}


def check(s: State) -> State:
    return {"log": [f"checked draft {s['drafts']}"]}


def enough(s: State) -> Literal["draft", "review"]:  # the Literal tells Warden where the loop can go
    return "draft" if s["drafts"] < 3 else "review"


def review(s: State) -> State:
    answer = interrupt({
        "question": f"Publish {s['text']!r}?",
        "options": [{"id": "publish", "label": "Publish", "consequence": "the report goes out"},
                    {"id": "stop", "label": "Stop", "consequence": "nothing is published"}],
        "recommendation": "publish",
    })
    return {"decision": answer["option"], "log": [f"review: {answer['option']} ({answer['answer']})"]}


def publish(s: State) -> State:
    return {"log": ["published" if s["decision"] == "publish" else "not published"]}


def build(checkpointer: Any) -> Any:
    b = StateGraph(State)
    for fn in (plan, draft, check, review, publish):
        b.add_node(fn.__name__, fn)
    b.add_edge(START, "plan")
    b.add_edge("plan", "draft")
    b.add_edge("draft", "check")
    b.add_conditional_edges("check", enough)
    b.add_edge("review", "publish")
    b.add_edge("publish", END)
    return b.compile(checkpointer=checkpointer)


def main(argv: list[str]) -> int:
    target = argv[1] if len(argv) > 1 else "ledger.db"
    wait = "--wait" in argv
    ledger = Ledger.open(target)
    saver = SqliteSaver(sqlite3.connect(f"{target}.checkpoints.db", check_same_thread=False))
    s = supervise(build(saver), ledger, task_id="lg-report", worker="example")
    started = bool(s.graph.get_state(s.config).values)
    r = s.run(None if started else {"topic": "the pilot", "log": []})
    while wait and r.status == "blocked" and r.handoff_id:
        print(f"waiting for a person: {r.question} (handoff {r.handoff_id})")
        ledger.wait_for_resolution(r.handoff_id)
        r = s.run(None)
    print(r.status, r.reason or "", r.handoff_id or "", r.question or "")
    if r.status == "completed":
        print("\n".join(r.output["log"]))
    ledger.close()
    return 0 if r.status != "failed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

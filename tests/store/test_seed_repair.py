"""The repair loop: draft → verify → (not good enough) → draft again → verify again …; only a
verified result is published, and a loop past ``max_repairs`` fails the task. Both ways a step
asks for a repair — in place, and unrolled into new nodes — on both backends, and generated
workflows of many lengths, budgets and failing rounds."""

from __future__ import annotations

import random

import pytest

from store import LeaseLost, NodeSpec, Refused
from store.worker import StepResult, work_once

REQUIRED = ["Background", "Risks", "Recommendation"]


def _report(ledger, max_repairs: int = 3, task: str = "r") -> None:
    ledger.create_task(task, inputs={"sections": REQUIRED}, max_repairs=max_repairs)
    ledger.add_nodes(task, [NodeSpec("draft", "draft"), NodeSpec("verify", "verify", ("draft",)),
                            NodeSpec("finalize", "finalize", ("verify",), always_admit=True)])


def test_a_failing_verify_sends_the_draft_back_and_finalize_waits(ledger):
    _report(ledger)
    d = ledger.claim("r", "w")
    ledger.commit(d, output={"sections": ["Background", "Recommendation"]})
    v = ledger.claim("r", "w")
    verdict = {"ok": False, "feedback": "Missing required sections: Risks"}
    ledger.commit(v, output=verdict, repair=True)
    status = {n.key: n.status for n in ledger.graph("r").nodes}
    assert status == {"draft": "pending", "verify": "pending", "finalize": "pending"}
    assert ledger.task("r").repair_count == 1
    assert ledger.claim("r", "w", key="finalize") is None  # never on a failing verdict
    assert ledger.claim("r", "w", key="verify") is None  # the draft comes first

    d2 = ledger.claim("r", "w")
    assert (d2.node_key, d2.attempt) == ("draft", 2)
    rep = d2.inputs["repair"]
    assert (rep["round"], rep["of"], rep["by"], rep["verdict"]) == (1, 3, "verify", verdict)
    ledger.commit(d2, output={"sections": REQUIRED})
    v2 = ledger.claim("r", "w")
    assert v2.node_key == "verify" and v2.inputs["repair"]["verdict"] == verdict  # what it checked last time
    assert v2.inputs["deps"]["draft"]["output"] == {"sections": REQUIRED}
    ledger.commit(v2, output={"ok": True})
    f = ledger.claim("r", "w")
    assert f.node_key == "finalize" and f.inputs["deps"]["verify"]["output"] == {"ok": True}
    assert f.inputs["repair"] is None
    ledger.commit(f, output={"published": True}, artifact=("report.md", b"# all three\n"))
    assert ledger.task("r").status == "completed"
    events = [e for e in ledger.events(0, task_id="r") if e.kind == "node.repair"]
    assert len(events) == 1 and events[0].payload["nodes"] == ["verify", "draft"]
    assert events[0].payload["waiting"] == ["finalize"]
    assert "repair round 1 of 3" in events[0].summary and "finalize wait" in events[0].summary


def test_past_max_repairs_the_node_and_the_task_fail(ledger):
    _report(ledger, max_repairs=1)
    for round_ in range(2):
        ledger.commit(ledger.claim("r", "w"), output={"sections": ["Background"]})
        ledger.commit(ledger.claim("r", "w"), output={"ok": False, "round": round_}, repair=True)
    verify = ledger.node("r", "verify")
    assert verify.status == "failed" and verify.failure_class == "conclusion"
    assert "repair budget exhausted (1/1" in verify.error and verify.output == {"ok": False, "round": 1}
    task = ledger.task("r")
    assert (task.status, task.repair_count) == ("failed", 1)
    assert ledger.claim("r", "w") is None and ledger.node("r", "finalize").status == "pending"
    kinds = [e.kind for e in ledger.events(0, task_id="r")]
    assert kinds[-2:] == ["node.failed", "task.failed"]
    # An operator may rewind to go on (a retry): the task reopens.
    ledger.apply(ledger.plan_rewind("r", "verify", reason="I fixed the draft by hand"), operator="op")
    assert ledger.task("r").status == "active"


def test_work_once_says_failed_when_the_budget_is_spent(ledger, clock):
    _report(ledger, max_repairs=0)
    assert work_once(ledger, "r", "w", lambda i, k: {"sections": []}, background=False).status == "committed"
    out = work_once(ledger, "r", "w", lambda i, k: StepResult(output={"ok": False}, repair=True), background=False)
    assert out.status == "failed" and "repair budget exhausted" in out.detail
    assert ledger.task("r").status == "failed"


def test_an_unrolled_repair_round_rewires_what_waited_on_the_failing_verify(ledger):
    _report(ledger)
    ledger.commit(ledger.claim("r", "w"), output={"sections": ["Background"]})
    v = ledger.claim("r", "w")
    ledger.commit(v, output={"ok": False}, repair=True, next_nodes=[
        NodeSpec("draft.r1", "draft", ("verify",)), NodeSpec("verify.r1", "verify", ("draft.r1",))])
    assert ledger.node("r", "verify").status == "succeeded"  # its verdict is a fact …
    assert ledger.node("r", "finalize").deps == ("verify.r1",)  # … finalize now waits for the round's end
    assert ledger.claim("r", "w", key="finalize") is None
    d = ledger.claim("r", "w")
    assert d.node_key == "draft.r1" and d.inputs["deps"]["verify"]["output"] == {"ok": False}
    ledger.commit(d, output={"sections": REQUIRED})
    ledger.commit(ledger.claim("r", "w"), output={"ok": True})
    f = ledger.claim("r", "w")
    assert f.node_key == "finalize" and set(f.inputs["deps"]) == {"verify.r1"}
    assert f.inputs["deps"]["verify.r1"]["output"] == {"ok": True}
    assert [e.kind for e in ledger.events(0, task_id="r") if e.kind == "graph.rewired"] == ["graph.rewired"]


def test_repair_from_names_what_runs_again(ledger):
    ledger.create_task("r", max_repairs=2)
    ledger.add_nodes("r", [NodeSpec("sources"), NodeSpec("draft"), NodeSpec("verify", deps=("sources", "draft")),
                           NodeSpec("summary", deps=("sources",)), NodeSpec("finalize", deps=("verify",))])
    for _ in range(2):
        ledger.commit(ledger.claim("r", "w"), output={"x": 1})
    s = ledger.claim("r", "w", key="summary")
    v = ledger.claim("r", "w", key="verify")
    with pytest.raises(Refused, match="not upstream of verify"):
        ledger.commit(v, output={"ok": False}, repair=True, repair_from=["summary"])
    assert ledger.node("r", "verify").status == "running" and ledger.task("r").repair_count == 0  # nothing written
    ledger.commit(v, output={"ok": False}, repair=True, repair_from=["draft"])
    status = {n.key: n.status for n in ledger.graph("r").nodes}
    assert status == {"sources": "succeeded", "draft": "pending", "verify": "pending", "summary": "running",
                      "finalize": "pending"}
    ledger.commit(s, output={"sum": 1})  # a sibling not downstream of the draft is untouched


def test_an_in_place_repair_revokes_work_running_on_the_rejected_draft(ledger):
    ledger.create_task("r")
    ledger.add_nodes("r", [NodeSpec("draft"), NodeSpec("verify", deps=("draft",)),
                           NodeSpec("translate", deps=("draft",))])
    ledger.commit(ledger.claim("r", "w"), output={"v": 1})
    v = ledger.claim("r", "w", key="verify")
    t = ledger.claim("r", "w2", key="translate")
    ledger.commit(v, output={"ok": False}, repair=True)
    with pytest.raises(LeaseLost, match="revoked by the repair round 1 of verify"):
        ledger.commit(t, output={"translated": "v1"})
    assert ledger.node("r", "translate").status == "pending"
    [e] = [e for e in ledger.events(0, task_id="r") if e.kind == "node.repair"]
    assert e.payload["revoked"] == ["translate"]


@pytest.mark.parametrize("seed", range(6))
def test_generated_repair_loops_publish_only_verified_drafts(ledger, seed):
    """Random budgets and numbers of failing rounds, both ways of asking: finalize runs exactly
    when the draft passed within the budget, and then only on an ok verdict."""
    rng = random.Random(seed)
    for i in range(6):
        task = f"r{i}"
        budget, fails, unrolled = rng.randrange(0, 4), rng.randrange(0, 5), rng.random() < 0.5
        _report(ledger, max_repairs=budget, task=task)
        verified = published = False
        n_fail = 0
        for _ in range(40):
            c = ledger.claim(task, "w")
            if c is None:
                break
            if c.kind == "draft":
                ledger.commit(c, output={"sections": REQUIRED if n_fail >= fails else REQUIRED[:1]})
            elif c.kind == "verify":
                draft = next(d["output"] for d in c.inputs["deps"].values() if "sections" in (d["output"] or {}))
                if draft["sections"] == REQUIRED:
                    ledger.commit(c, output={"ok": True})
                    verified = True
                else:
                    n_fail += 1
                    r = n_fail
                    nxt = [NodeSpec(f"draft.r{r}", "draft", (c.node_key,)),
                           NodeSpec(f"verify.r{r}", "verify", (f"draft.r{r}",))] if unrolled else []
                    ledger.commit(c, output={"ok": False}, repair=True, next_nodes=nxt)
            else:
                oks = [d["output"] for d in c.inputs["deps"].values()]
                assert oks == [{"ok": True}], (seed, i, oks)
                ledger.commit(c, output={"published": True})
                published = True
        within = fails <= budget
        assert published == within == verified, (seed, i, budget, fails, unrolled)
        assert ledger.task(task).status == ("completed" if within else "failed")
        assert ledger.task(task).repair_count == min(fails, budget)

"""What only a person decides, and what every remembered thing carries (semantic memory
is confirmed by a person at the end of a task; every memory carries when it was made and its
source). A memory is confirmed or rejected by an operator who is neither the worker that proposed
it nor any worker of its task (refused and audited otherwise); a conclusion and a memory are
refused without their source. The API, the CLI (`--json` too), both backends."""

from __future__ import annotations

import json

import pytest

from console.cli import main as warden
from store import Ledger, NodeSpec, Refused

LONG = 10**7


def proposed(ledger) -> str:
    ledger.create_task("t", workflow="repo")
    ledger.add_node("t", "a")
    ledger.add_node("t", "b")
    other = ledger.claim("t", "w2", lease_s=LONG, key="b")  # another worker of the same task
    ledger.commit(other, output={})
    c = ledger.claim("t", "w1", lease_s=LONG, key="a")
    mid = ledger.propose_memory(c, "the tests need `make build` first", source="make test, run 3")
    ledger.commit(c, output={})
    return mid


@pytest.mark.parametrize("operator", ["w1", " W1 ", "w2", "mcp:alice@host", "claude:abc123"])
def test_an_agent_of_the_task_cannot_decide_its_memory(ledger, operator):
    mid = proposed(ledger)
    for decision in ("confirm", "reject"):
        plan = ledger.plan_memory(mid, decision=decision, reason="looks right")
        with pytest.raises(Refused, match="person"):
            ledger.apply(plan, operator=operator)
    assert ledger.memory(mid).status == "pending"
    refused = [a for a in ledger.actions(limit=10) if a.action.startswith("memory-")]
    assert [a.result for a in refused] == ["refused", "refused"] and all(a.refused_why for a in refused)
    # a person may
    done = ledger.apply(ledger.plan_memory(mid, decision="confirm", reason="seen it"), operator="alice@laptop")
    assert done.applied and ledger.memory(mid).decided_by == "alice@laptop"


def test_the_cli_refuses_a_worker_as_the_operator_in_one_line(ledger, ledger_path, capsys):
    mid = proposed(ledger)
    ledger.close()
    rc = warden(["memory", "confirm", mid, "--reason", "ok", "--operator", "w1", "--yes", "--ledger", ledger_path])
    err = capsys.readouterr().err
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "w1" in err and "Traceback" not in err
    rc = warden(["memory", "confirm", mid, "--reason", "ok", "--operator", "w2", "--yes", "--json",
                 "--ledger", ledger_path])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and "worker of task t" in out["error"]["message"]
    with Ledger.open(ledger_path) as led:
        assert led.memory(mid).status == "pending"
    assert warden(["memory", "confirm", mid, "--reason", "ok", "--operator", "alice", "--yes",
                   "--ledger", ledger_path]) == 0


def test_a_conclusion_and_a_memory_need_their_source(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a")
    c = ledger.claim("t", "w", lease_s=LONG)
    for source in (None, "", "   "):
        with pytest.raises(Refused, match="source"):
            ledger.conclude(c, "the cache is cold", source=source)
        with pytest.raises(Refused, match="source"):
            ledger.propose_memory(c, "build first", source=source)
        with pytest.raises(Refused, match="source"):
            ledger.conclude(c, "tried the fast path", kind="rejected", reason="flaky", source=source)
    assert not ledger.mind("t").conclusions and not ledger.memories()
    ledger.conclude(c, "the cache is cold", source="cache stats at 10:02")
    mid = ledger.propose_memory(c, "build first", source="Makefile")
    assert ledger.mind("t").conclusions[0].source == "cache stats at 10:02"
    assert ledger.memory(mid).source == "Makefile"


def test_a_confirmed_memory_reaches_the_next_claim_with_its_source(ledger):
    mid = proposed(ledger)
    ledger.apply(ledger.plan_memory(mid, decision="confirm", reason="true"), operator="alice")
    ledger.create_task("t2", workflow="repo")
    ledger.add_node("t2", "x")
    c = ledger.claim("t2", "w9", lease_s=LONG)
    [m] = c.inputs["memory"]["memories"]
    assert m["source"].startswith("make test, run 3; proposed by task t node a, confirmed by alice")


# ---------------------------------------------------------------------- an operator's stop is not the agent's failure
def test_park_now_and_resume_cycles_do_not_spend_the_agents_claim_budget(ledger):
    ledger.create_task("t", max_claims=3)
    ledger.add_nodes("t", [NodeSpec("n")])
    for _ in range(6):  # an operator stops and resumes the work six times
        c = ledger.claim("t", "w", lease_s=LONG)
        assert c is not None and c.node_key == "n"
        ledger.apply(ledger.plan_park("t", node="n", now=True, reason="look at it"), operator="op")
        ledger.apply(ledger.plan_resume("t", node="n"), operator="op")
    c = ledger.claim("t", "w", lease_s=LONG)
    assert c is not None and c.attempt == 7  # attempts still count every claim
    assert ledger.node("t", "n").claim_count == 1
    ledger.commit(c, output={})
    assert ledger.node("t", "n").status == "succeeded"


def test_a_task_park_now_gives_back_each_revoked_claim_but_an_agents_own_failures_still_count(ledger, clock):
    ledger.create_task("t", max_claims=2)
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b")])
    a = ledger.claim("t", "w", lease_s=LONG, key="a")
    ledger.claim("t", "w", lease_s=LONG, key="b")
    ledger.apply(ledger.plan_park("t", now=True, reason="maintenance"), operator="op")
    ledger.apply(ledger.plan_resume("t"), operator="op")
    assert [ledger.node("t", k).claim_count for k in ("a", "b")] == [0, 0]
    a = ledger.claim("t", "w", lease_s=LONG, key="a")
    ledger.fail(a, error="flaky", retry_after_s=0)
    a = ledger.claim("t", "w", lease_s=LONG, key="a")
    ledger.fail(a, error="flaky", retry_after_s=0)
    assert ledger.node("t", "a").status == "failed"  # two claims the agent spent: its budget

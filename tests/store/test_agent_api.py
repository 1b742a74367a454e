"""The framework-friendly agent API on both backends: claim(key=), wait_for_resolution, times."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from store import Budget, Ledger, NodeSpec, NotFound, Refused
from tests.support.asks import ask

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def graph(ledger):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",)), NodeSpec("c"), NodeSpec("d")])
    return ledger


def test_claim_by_key_takes_exactly_that_node(graph):
    c = graph.claim("t", "w", key="c")
    assert c.node_key == "c"
    assert graph.node("t", "a").status == "pending"  # the first ready node was not taken instead


@pytest.mark.parametrize("why", ["dependency", "running", "succeeded", "blocked", "node_parked", "task_parked",
                                 "aborted", "retry_wait", "budget"])
def test_claim_by_key_of_a_node_that_is_not_ready_is_none(graph, clock, why):
    led = graph
    key = "b" if why == "dependency" else "a"
    if why in ("running", "succeeded", "blocked", "retry_wait"):
        c = led.claim("t", "w", key="a")
        if why == "succeeded":
            led.commit(c, output=1)
        elif why == "blocked":
            ask(led, c, kind="confirm", question="ok?", options=[{"id": "y"}])
        elif why == "retry_wait":
            led.fail(c, error="x", retry_after_s=60)
    elif why == "node_parked":
        led.apply(led.plan_park("t", node="a", reason="wait", now=True), operator="op")
    elif why == "task_parked":
        led.apply(led.plan_park("t", reason="wait"), operator="op")
    elif why == "aborted":
        led.apply(led.plan_abort("t", reason="stop"), operator="op")
    elif why == "budget":
        led.create_task("u", budget=Budget(tokens=10))
        led.add_node("u", "x")
        led.add_node("u", "y")
        c = led.claim("u", "w", key="x")
        led.commit(c, output=1, tokens=50)  # over the hard cap: only always_admit nodes
        assert led.claim("u", "w", key="y") is None
        return
    before = led.node("t", key).version
    assert led.claim("t", "w2", key=key) is None
    assert led.node("t", key).version == before  # nothing was written


def test_claim_by_key_reclaims_an_expired_lease_and_refuses_unknowns(graph, clock):
    c = graph.claim("t", "w", key="d", lease_s=10)
    clock.advance(11)
    again = graph.claim("t", "w2", key="d")
    assert again.node_key == "d" and again.attempt == c.attempt + 1
    with pytest.raises(NotFound, match="unknown node 'zz'"):
        graph.claim("t", "w", key="zz")
    with pytest.raises(NotFound, match="unknown task"):
        graph.claim("nope", "w", key="a")
    with pytest.raises(Refused):
        graph.claim(None, "w", key="a")


def test_claim_by_key_counts_a_dependency_under_the_claimers_own_lease(graph):
    held = graph.claim("t", "loop", key="a")
    assert graph.claim("t", "someone-else", key="b") is None  # another worker: a is not done
    b = graph.claim("t", "loop", key="b")  # the same worker holding a: b may run (a loop)
    assert b.node_key == "b" and graph.node("t", "a").status == "running"
    assert graph.claim("t", "loop") .node_key in ("c", "d")  # a plain claim is not affected
    graph.commit(held, output=1)


def _resolver(target: str, hid: str, how: str) -> subprocess.Popen[str]:
    script = (
        "import sys, time; from store import Ledger\n"
        "led = Ledger.open(sys.argv[1], create=False)\n"
        "sys.stdin.readline()\n"  # go when the test says (after the wait has started)
        "plan = led.plan_resolve(sys.argv[2], option='y', answer='go') if sys.argv[3] == 'resolve' "
        "else led.plan_abort('t', reason='no longer needed')\n"
        "led.apply(plan, operator='op')\n"
    )
    return subprocess.Popen([sys.executable, "-c", script, target, hid, how], stdin=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))


@pytest.mark.parametrize("how", ["resolve", "abort"])
def test_wait_for_resolution_wakes_on_another_process(graph, ledger_path, how):
    c = graph.claim("t", "w", key="a")
    hid = ask(graph, c, kind="confirm", question="ok?", options=[{"id": "y"}, {"id": "n"}])
    proc = _resolver(ledger_path, hid, how)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    got = graph.wait_for_resolution(hid, timeout=120)  # a safety net: the wake is what ends it
    assert proc.wait(60) == 0
    assert got is not None  # woken, not timed out (a timeout returns None): no wall time asserted
    if how == "resolve":
        assert (got["status"], got["option"], got["answer"], got["by"]) == ("resolved", "y", "go", "op")
        c2 = graph.claim("t", "w", key="a")
        res = c2.inputs["resolution"]
        assert res["at"] == got["at"] and res["at"].endswith("Z") and isinstance(res["at_ts"], float)
        assert res["handoff"] == hid and res["option"] == "y"
    else:
        assert got["status"] == "withdrawn" and got["option"] is None


def test_wait_for_resolution_timeouts_and_refusals(graph):
    c = graph.claim("t", "w", key="a")
    hid = ask(graph, c, kind="direction", question="which?")
    t0 = time.monotonic()
    assert graph.wait_for_resolution(hid, timeout=0.2) is None
    assert time.monotonic() - t0 >= 0.2
    assert graph.wait_for_resolution(hid, timeout=0) is None
    with pytest.raises(NotFound):
        graph.wait_for_resolution("999999", timeout=1)
    with pytest.raises(NotFound):
        graph.wait_for_resolution("not-a-number", timeout=1)
    with pytest.raises(Refused):
        graph.wait_for_resolution(hid, timeout=-1)

    async def inside_a_loop():
        graph.wait_for_resolution(hid, timeout=1)

    with pytest.raises(Refused, match="thread"):
        asyncio.run(inside_a_loop())
    graph.apply(graph.plan_resolve(hid, answer="the left one"), operator="op")
    done = graph.wait_for_resolution(hid)  # already resolved: at once, no timeout needed
    assert done["answer"] == "the left one" and done["status"] == "resolved"


def test_open_options_are_validated(tmp_path):
    with pytest.raises(Refused):
        Ledger.open(str(tmp_path / "x.db"), busy_timeout_s=-1)

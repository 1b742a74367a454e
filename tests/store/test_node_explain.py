"""What the node detail explains comes from the store as `warden graph` has it.

- ``signals_for_node`` gives a node exactly the signals ``signals_for_graph`` gives it (looping,
  stale, an open handoff, a park past its until, a node the budget cannot fit), without reading the
  rest of the graph;
- ``fail(..., retryable=False)`` journals the failure's own flag, and ``node_detail().failure`` is
  that event, even when it is older than the events the detail reads.
"""

from __future__ import annotations

from pathlib import Path

from store import Budget, Ledger, ManualClock
from store.reading.cli_json import signal_json
from store.reading.signals import signals_for_graph, signals_for_node
from tests.support.asks import ask as whole_ask

T0 = 1_800_000_000.0


def build(path: Path) -> tuple[Ledger, ManualClock]:
    clock = ManualClock(T0)
    ledger = Ledger.open(path, clock=clock)
    ledger.create_task("t", title="x", budget=Budget(tokens=10_000))
    for key in ("loop", "quiet", "ask", "held", "big", "flaky"):
        ledger.add_node("t", key, kind="fix", est_wall_s=60)
    ledger.add_node("t", "huge", kind="fix", est_tokens=50_000)
    loop = ledger.claim("t", worker="a", lease_s=3600, key="loop")
    quiet = ledger.claim("t", worker="b", lease_s=120, key="quiet")
    ask = ledger.claim("t", worker="c", lease_s=600, key="ask")
    flaky = ledger.claim("t", worker="d", lease_s=600, key="flaky")
    ledger.heartbeat(quiet, observation="started")
    whole_ask(ledger, ask, kind="confirm", question="go on?", options=[{"id": "yes"}, {"id": "no"}])
    ledger.fail(flaky, error="bad spec", failure_class="spec", retryable=False)
    for _ in range(8):
        clock.advance(10)
        ledger.heartbeat(loop, observation="same thing again\nand again")
    ledger.apply(ledger.plan_park("t", node="held", reason="wait", until=clock() + 30), operator="op")
    clock.advance(200)
    return ledger, clock


def test_a_node_gets_the_signals_the_graph_gives_it(tmp_path: Path) -> None:
    ledger, clock = build(tmp_path / "l.db")
    try:
        graph = ledger.graph("t")
        every = [signal_json(s) for s in signals_for_graph(ledger, graph)]
        by_node = {n.key: [s for s in every if s["node"] == n.key] for n in graph.nodes}
        assert {k for k, v in by_node.items() if v} >= {"loop", "quiet", "ask", "held", "huge"}  # it can fail
        for n in graph.nodes:
            got = [signal_json(s) for s in signals_for_node(ledger, graph.task, n)]
            assert got == by_node[n.key], n.key
    finally:
        ledger.close()


def test_a_failure_journals_its_own_retryable_flag(tmp_path: Path) -> None:
    ledger, clock = build(tmp_path / "l.db")
    try:
        node = ledger.node("t", "flaky")
        assert node.retryable and node.status == "failed"  # declared retryable, failed for good
        d = ledger.node_detail("t", "flaky")
        assert d.failure is not None and d.failure.kind == "node.failed"
        assert d.failure.payload["retryable"] is False and d.failure.payload["failure_class"] == "spec"
        ledger.apply(ledger.plan_escalate("t", "flaky", reason="look at it"), operator="op")  # a newer event
        old = ledger.node_detail("t", "flaky", events_limit=1)
        assert d.failure.id not in {e.id for e in old.events}  # the failure is not among the events read …
        assert old.failure == d.failure  # … and is found all the same
        assert ledger.node_detail("t", "loop").failure is None
    finally:
        ledger.close()

"""Memory and the UI thread, as structure (not timings): the open graph's incremental
analysis shares the console's lean rows instead of holding a second copy of the graph; the UI
thread hands it deltas by reference; its signal pass hands the interpreter back in slices."""

from __future__ import annotations

import sys

from store import Ledger, ManualClock, NodeSpec
from store.reading.analysis import TaskAnalysis
from store.views import NodeRow, NodeView

from console.analysis import OpenGraph
from console.model import GraphModel
from store.views import GraphView

from tests.console.conftest import T0


def ledger_with(path, nodes: int = 300, running: int = 5) -> Ledger:
    clock = ManualClock(T0)
    ledger = Ledger.open(path, clock=clock)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec(f"n{i:04d}", "tool", deps=(f"n{i - 10:04d}",) if i >= 10 else ())
                           for i in range(nodes)])
    for _ in range(running):
        c = ledger.claim("t", "w", lease_s=600)
        clock.advance(5)
        ledger.heartbeat(c, units_done=1, units_total=3, observation="same line")
    return ledger


def model_of(ledger: Ledger) -> GraphModel:
    pages = list(ledger.graph_pages("t", first=50, page=100))
    g = GraphModel.of(GraphView(task=pages[0].task, nodes=pages[0].nodes), lambda: T0, loaded_at=pages[0].at,
                   total=pages[0].total, complete=False)
    for p in pages[1:]:
        g.extend(p.nodes, last=p.last)
    return g


def test_the_analysis_shares_the_models_rows(tmp_path):
    with ledger_with(tmp_path / "l.db") as ledger:
        g = model_of(ledger)
        an = TaskAnalysis(ledger, "t", rows=g.nodes, task=g.task, cursor=g.loaded_at)
        assert len(an.nodes) == len(g.nodes) == 300
        shared = sum(1 for n in g.nodes if an.nodes[n.key] is n)
        running = [n for n in g.nodes if n.status == "running"]
        assert shared == 300 - len(running) == 295  # the same tuple objects, not copies
        # running nodes are re-read whole (signals read more of them); nothing else is
        assert all(type(an.nodes[n.key]) is NodeView for n in running)
        assert all(type(n) is NodeRow for n in g.nodes)
        # a lean row: one tuple of references per node
        assert sys.getsizeof(g.nodes[0]) <= sys.getsizeof(tuple(range(len(NodeRow._fields))))
        # one dependent per node here: kept as the key itself, not a list per node
        assert all(isinstance(v, str) for v in g.dependents._by.values())
        assert an.signals() == TaskAnalysis(ledger, "t").signals()  # and the same figures


def test_signals_hand_the_interpreter_back_between_slices(tmp_path):
    with ledger_with(tmp_path / "l.db", nodes=40, running=7) as ledger:
        an = TaskAnalysis(ledger, "t")
        pauses: list[int] = []
        sliced = an.signals(pause=lambda: pauses.append(1), every=2)
        assert len(pauses) == 3  # after running nodes 2, 4 and 6 of 7
        assert sliced == an.signals()


def test_the_ui_thread_hands_over_deltas_by_reference(tmp_path):
    with ledger_with(tmp_path / "l.db") as ledger:
        g = model_of(ledger)
        og = OpenGraph()
        og.seed(g.task, g.nodes)
        cursor = ledger.last_event_id()
        c = ledger.claim("t", "w2", lease_s=600)
        ledger.commit(c, output={})
        events = list(ledger.events(cursor))
        views = {("t", v.key): v for v in ledger.nodes("t", sorted({e.node for e in events if e.node}))}
        og.delta(events, views)
        assert og._inbox[-1][0] is events and og._inbox[-1][1] is views  # nothing copied or computed
        an = og.current(ledger, ledger.task("t"))
        assert an is not None and og._inbox == [] and og.analysis is an
        done = [k for k, n in an.nodes.items() if n.status == "succeeded"]
        assert len(done) == 1 and an.history.count("tool") == 1  # the commit reached it
        og.drop()
        assert og.analysis is None and og.current(ledger, ledger.task("t")) is None

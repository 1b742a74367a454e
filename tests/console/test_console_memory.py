"""Memory, as structure (not timings): an incremental analysis built from a graph's lean rows
shares them instead of holding a second copy of the graph; the analysis worker reads the open graph
once and then follows the journal."""

from __future__ import annotations

import sys

from store import Ledger, ManualClock, NodeSpec
from store.reading.analysis import TaskAnalysis
from store.views import NodeRow, NodeView

from console.model import GraphModel
from store.views import GraphView

from tests.support.console_app import T0


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


def test_an_analysis_built_from_lean_rows_shares_them(tmp_path):
    with ledger_with(tmp_path / "l.db") as ledger:
        pages = list(ledger.graph_pages("t", first=50, page=100))
        rows = [n for p in pages for n in p.nodes]
        an = TaskAnalysis(ledger, "t", rows=rows, task=pages[0].task, cursor=pages[0].at)
        assert len(an.nodes) == len(rows) == 300
        shared = sum(1 for n in rows if an.nodes[n.key] is n)
        running = [n for n in rows if n.status == "running"]
        assert shared == 300 - len(running) == 295  # the same tuple objects, not copies
        # running nodes are re-read whole (signals read more of them); nothing else is
        assert all(type(an.nodes[n.key]) is NodeView for n in running)
        assert an.signals() == TaskAnalysis(ledger, "t").signals()  # and the same figures


def test_the_graph_models_rows_are_lean_and_the_collector_does_not_walk_them(tmp_path):
    import gc

    with ledger_with(tmp_path / "l.db") as ledger:
        g = model_of(ledger)
        assert all(type(n) is NodeRow for n in g.nodes) and len(g.nodes) == 300
        # a lean row: one tuple of references per node
        assert sys.getsizeof(g.nodes[0]) <= sys.getsizeof(tuple(range(len(NodeRow._fields))))
        # one dependent per node here: kept as the key itself, not a list per node
        assert all(isinstance(v, str) for v in g.dependents._by.values())
        gc.collect()  # a tuple is untracked once what it holds is; one holding a tuple the same pass
        gc.collect()  # reached later (the order depends on what earlier tests left) waits for a second
        held = g.nodes._items
        untracked = [r for r in held if not gc.is_tracked(r)]
        assert len(untracked) == 300  # plain tuples of plain values: a full collection skips them
        # a node updated since is held whole, and read back as it was given
        view = ledger.nodes("t", [g.nodes[7].key])[0]
        g.apply([view], as_of=ledger.last_event_id() + 1)
        assert g.nodes[7] is view and g.node_at(7) is view
        g.set_filter("status:run")
        assert [g.node_at(p).status for p in range(g.row_count())] == ["running"] * 5


def test_the_workers_open_graph_reads_the_graph_once_then_follows_the_journal(tmp_path):
    """The worker's analysis of the open graph: read once (lean rows, from one snapshot), then fed
    the journal's events — a commit reaches it (its node, its duration) with no second read."""
    from store.reading.feed import Feed

    from console.analysis import Analyst, GraphRequest, RunRequest

    with ledger_with(tmp_path / "l.db") as ledger:
        feed = Feed(tmp_path / "l.db", read_only=True)
        try:
            an = Analyst(feed)
            now = T0 + 100
            an.run(RunRequest(now, GraphRequest("t"), (), frozenset({"eta", "signals"}), "graph"))
            first = an.graph.analysis
            assert first is not None and an.graph.builds == 1
            assert all(type(n) is NodeRow for n in first.nodes.values() if n.status != "running")
            c = ledger.claim("t", "w2", lease_s=600)
            ledger.commit(c, output={})
            an.run(RunRequest(now, GraphRequest("t"), (), frozenset({"eta", "signals"}), "graph"))
            assert an.graph.analysis is first and an.graph.builds == 1  # followed, not read again
            done = [k for k, n in first.nodes.items() if n.status == "succeeded"]
            assert done == [c.node_key] and first.history.count("tool") == 1  # the commit reached it
            assert first.cursor == ledger.last_event_id()
            an.run(RunRequest(now, None, (), frozenset({"signals"}), "signals"))  # no graph open: freed
            assert an.graph.analysis is None
        finally:
            feed.close()

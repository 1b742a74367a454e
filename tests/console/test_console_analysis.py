"""The open graph's estimates and signals come from the incremental ``store.reading.analysis.TaskAnalysis``
the analysis worker keeps (the graph read once, then fed the journal's events) and are the figures
``warden graph --json`` and ``warden status --json`` give for the same ledger state — before and
after agents write while the graph is open."""

from __future__ import annotations

import threading
from pathlib import Path

from store import Budget, Ledger, ManualClock, NodeSpec
from store.reading.cli_json import empty_eta, graph_json, status_json

from tests.support.console_app import NOW, T0, graph_loaded, make_app, settle, wait_for, graph_of
from tests.support.asks import ask


def build(path: Path) -> None:
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock) as ledger:
        ledger.create_task("hist")  # a duration history for two kinds
        ledger.add_nodes("hist", [NodeSpec(f"h{i}", "llm_call" if i % 3 else "tool") for i in range(9)])
        for i in range(9):
            c = ledger.claim("hist", "w0", lease_s=600)
            clock.advance(20 + 7 * i)
            ledger.commit(c, output={}, tokens=100 + i)
        ledger.create_task("t", title="parity", budget=Budget(tokens=20_000, wall_s=3 * 3600))
        ledger.add_nodes("t", [NodeSpec(f"n{i:02d}", "llm_call" if i % 2 else "tool",
                                        deps=(f"n{i - 1:02d}",) if i % 4 == 3 else (),
                                        est_wall_s=None if i % 3 else 40.0 + i) for i in range(14)])
        c1 = ledger.claim("t", "alice", lease_s=900)
        c2 = ledger.claim("t", "bob", lease_s=900)
        clock.advance(30)
        ledger.heartbeat(c1, units_done=1, units_total=4, tokens=400, observation="step one\nread the file")
        for _ in range(4):  # the same lines again and again: a stall signal
            clock.advance(15)
            ledger.heartbeat(c2, units_done=0, units_total=3, tokens=50, observation="retrying the same call")
        ledger.commit(c1, output={}, tokens=200)
        c3 = ledger.claim("t", "carol", lease_s=900)
        ask(ledger, c3, kind="confirm", question="ship it?", options=[{"id": "y", "label": "yes"}])
        clock.advance(NOW - clock() - 60)


def figures(path: Path) -> tuple[dict, dict]:
    with Ledger.open(path, clock=ManualClock(NOW)) as ledger:
        graph = graph_json(ledger, "t")
        status = next(t for t in status_json(ledger)["tasks"] if t["task_id"] == "t")
    return graph, status


async def test_console_estimates_and_signals_equal_graph_and_status_json(tmp_path, monkeypatch):
    path = tmp_path / "ledger.db"
    build(path)
    graph_reads: list[str] = []
    real_graph = Ledger.graph

    def spy(self, task_id, *a, **kw):
        if threading.current_thread() is not threading.main_thread():
            graph_reads.append(task_id)
        return real_graph(self, task_id, *a, **kw)

    monkeypatch.setattr(Ledger, "graph", spy)
    app = make_app(path)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        app.open_graph("t")
        await graph_loaded(pilot)
        g = graph_of(app)

        async def analysed(want_cursor: int) -> None:
            """Wait for the task row and the model to show the ledger up to ``want_cursor``, then for
            one full analysis run started after that."""
            await wait_for(pilot, lambda: app.cursor >= want_cursor, what="the writes in the model")
            await settle(pilot)
            await wait_for(pilot, lambda: not app.analysis.busy, what="the run under way")
            with Ledger.open(path, clock=ManualClock(NOW)) as ledger:
                counts = dict(ledger.task("t").counts)
            await wait_for(pilot, lambda: dict(g.task.counts) == counts, what="the task row")
            app.analysis.run_analysis()
            await wait_for(pilot, lambda: not app.analysis.busy, what="the full run")
            await settle(pilot)

        def check() -> None:
            graph, status = figures(path)
            assert app.analyst.stats["following"] == "t"  # the worker's incremental analysis made them
            assert g.task_eta == graph["task"]["eta"] == status["eta"]
            assert g.task_eta["p80_s"] is not None
            assert list(g.task_signals) == graph["task"]["signals"] == status["signals"]
            kinds = {s["kind"] for s in g.task_signals}
            assert {"handoff_waiting", "repeating"} <= kinds, kinds
            by_key = {n["key"]: n for n in graph["nodes"]}
            shown = 0
            for key in g.index:
                want = by_key[key]["eta"]
                got = g.etas.get(key)
                if got is None:
                    assert want == empty_eta(), key  # a finished node: no figure either way
                else:
                    assert got == want, key
                    shown += 1
                assert [s for s in g.signals.get(key, [])] == by_key[key]["signals"], key
            assert shown >= 10

        with Ledger.open(path, clock=ManualClock(NOW)) as ledger:
            first = ledger.last_event_id()
        await analysed(first)
        check()

        # Agents write while the graph is open: a claim, heartbeats with observations, a commit
        # (a new duration for its kind), a failure; the console follows them incrementally.
        clock = ManualClock(NOW)
        with Ledger.open(path, clock=clock) as ledger:
            c = ledger.claim("t", "dave", lease_s=900)
            ledger.heartbeat(c, units_done=2, units_total=5, tokens=300, observation="half way\nnew text")
            running = [n for n in ledger.graph("t").nodes if n.status == "running" and n.lease_owner == "bob"]
            assert running
            c4 = ledger.claim("t", "erin", lease_s=900)
            ledger.commit(c4, output={}, tokens=150)
            c5 = ledger.claim("t", "frank", lease_s=900)
            ledger.fail(c5, error="boom", failure_class="transient", retryable=True)
            last = ledger.last_event_id()
        await analysed(last)
        check()
    assert graph_reads == []  # the console never read the whole graph again for its figures
    assert app.analyst.stats["graph_builds"] == 1  # the worker read it once, then followed the journal


def test_a_non_finite_figure_shows_as_unknown_not_a_crash():
    """A P80 of inf (an estimator's overflow) once took the whole console down (OverflowError in
    the row's label): it shows as unknown."""
    from console.glyphs import duration_label, eta_label

    assert duration_label(float("inf")) == duration_label(float("nan")) == "—"
    assert eta_label({"p80_s": float("inf"), "confidence": "low"}).startswith("—")


def test_the_event_log_keeps_lean_rows_not_payloads():
    """The log's ring keeps what a row shows (the event without its payload): 20,000 payloads were
    most of its memory."""
    import sys

    from console.event_log import NO_PAYLOAD, EventLogModel
    from store.views import EventView

    m = EventLogModel(capacity=100)
    payload = {"observation": "x" * 5000, "lines": list(range(100))}
    m.extend([EventView(i, T0 + i, "t", f"n{i}", "execution", "node.heartbeat", "w", "beat", payload)
              for i in range(150)])
    assert len(m.events) == 100 and all(e.payload is NO_PAYLOAD for e in m.events)
    assert m.events[-1].id == 149 and m.rows[-1].kind == "node.heartbeat"
    assert sys.getsizeof(m.events[-1]) < 200  # 9 slots of references, no payload
    assert len({id(e.kind) for e in m.events}) == 1  # repeated names kept once

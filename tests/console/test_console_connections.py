"""The console holds at most three PostgreSQL connections whatever the fleet does: its feed's
LISTEN connection, one connection every reading thread shares (``store/storage/pgshared.py``), and
its analysis worker's (a process of its own, ``console/analysis_worker.py``).

Real agent processes write while the console follows them, opens a graph, a node, the handoff
inbox, a park dialog (its plan), runs its estimates and signals and looks at parks' wake
conditions — each of those a worker thread of its own, all started at once. ``pg_stat_activity`` is sampled every few
milliseconds throughout, counting the backends with the console's application_name (a name of
this test's own, given in the URL, which the console keeps as an operator's URL would)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from console.dialogs.park import ParkDialog
from tests.conftest import pg_admin
from tests.support.console_app import graph_loaded, make_app, wait_for, workers_done
from tests.support import fleet

pytestmark = [pytest.mark.postgres]


class Sampler(threading.Thread):
    def __init__(self, name: str) -> None:
        super().__init__(daemon=True)
        self.name_ = name
        self.counts: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with pg_admin() as c:
            while not self.stop.is_set():
                n = c.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                              (self.name_,)).fetchone()[0]
                self.counts.append(int(n))
                self.stop.wait(0.003)  # the sampling interval (not a synchronisation)


@pytest.fixture
def agents(pg_target, tmp_path):
    """(URL, the agent processes) — six agents working a six-task fleet for up to two minutes."""
    url = pg_target()
    fleet.build(url, 6, seed=3, sizes=(150, 200))
    procs = fleet.start([fleet.command(url, i, tasks=6, rate=8.0, until_wall=0, out=str(tmp_path / f"agent-{i}.json"))
                         for i in range(6)], 120.0)
    try:
        yield url, procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


async def test_the_console_holds_at_most_three_connections_whatever_it_does(agents):
    url, _ = agents
    name = "warden-console-t" + uuid.uuid4().hex[:8]
    sampler = Sampler(name)
    sampler.start()
    app = make_app(url + f"&application_name={name}", clock=time.time)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.loaded, what="the task list")
            start = app.cursor
            await wait_for(pilot, lambda: app.cursor > start + 20, what="the agents' writes followed")
            # every kind of reading thread at once: the graph's pages, a node's detail, estimates and
            # signals, parks' wake conditions, the handoff inbox, a park dialog's plan
            app.open_graph("t0000")
            app.open_node("t0000", "n000")
            node = app.screen
            if not app.analysis.busy:
                app.analysis.run_analysis()
            app.check_wakes()
            app.action_handoffs()  # the inbox reads the handoffs itself
            inbox = app.screen
            app.open_action("park", "t0000", "n001")
            await wait_for(pilot, lambda: isinstance(app.screen, ParkDialog), what="the park dialog")
            await workers_done(pilot, app.screen)
            await graph_loaded(pilot)
            await wait_for(pilot, lambda: node.detail is not None, what="the node detail")
            await wait_for(pilot, lambda: inbox.loaded, what="the handoff inbox")
            await wait_for(pilot, lambda: "full" in app.analyst.last_seconds and not app.analysis.busy,
                           what="an analysis run")
            app.analysis.run_graph()  # the worker reads the open graph (its pages) and keeps its analysis
            await wait_for(pilot, lambda: app.analyst.stats.get("following") == "t0000" and not app.analysis.busy,
                           what="the graph's own run")
            await wait_for(pilot, lambda: not any(w.group in ("wakes", "ledger") and not w.is_finished
                                                  for w in app.workers), what="the wakes and handoffs read")
            seen = app.cursor
            await wait_for(pilot, lambda: app.cursor > seen, what="still following")
    finally:
        sampler.stop.set()
        sampler.join()
    assert sampler.counts and max(sampler.counts) <= 3, max(sampler.counts)
    assert 3 in sampler.counts  # the sampler did see the three: LISTEN, the shared one, the worker's


def test_the_analysis_workers_connection_says_what_it_is(pg_target, monkeypatch):
    """Without a name in the URL, the worker's one connection is ``warden-analysis`` on the server."""
    import os
    import threading as th

    from console import analysis_worker
    from console.analysis import RunRequest
    from store import Ledger
    from store.reading import feed as feed_mod

    url = pg_target()
    with Ledger.open(url) as ledger:
        ledger.create_task("t")
    feeds: list = []
    real = feed_mod.Feed.__init__

    def init(self, *a, **kw):
        real(self, *a, **kw)
        feeds.append(self)

    monkeypatch.setattr(feed_mod.Feed, "__init__", init)
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    inp, to_worker = os.fdopen(r_in, "rb"), os.fdopen(w_in, "wb")
    from_worker, out = os.fdopen(r_out, "rb"), os.fdopen(w_out, "wb")
    worker = th.Thread(target=analysis_worker.serve, args=(inp, out), daemon=True)
    worker.start()
    try:
        to_worker.write(analysis_worker.encode(("open", {"target": url})))
        to_worker.write(analysis_worker.encode(("run", RunRequest(time.time(), None, ("t",)))))
        to_worker.flush()
        assert analysis_worker.read_frame(from_worker)[0] == "ready"
        tag, result, _stats = analysis_worker.read_frame(from_worker)
        assert tag == "result" and result.error is None
        (feed,) = feeds
        names = feed.read(lambda ledger: ledger.db.execute_sql(
            "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchall())
        assert names == [("warden-analysis",)]
    finally:
        to_worker.close()
        worker.join(30)
        from_worker.close()

"""The console holds at most two PostgreSQL connections whatever the fleet does: its
feed's LISTEN connection and one connection every reading thread shares (``store/storage/pgshared.py``).

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
from tests.console.conftest import graph_loaded, make_app, wait_for, workers_done
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


async def test_the_console_holds_at_most_two_connections_whatever_it_does(agents):
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
            await wait_for(pilot, lambda: "full" in app.analyst.last_seconds, what="an analysis run")
            await wait_for(pilot, lambda: not any(w.group in ("wakes", "ledger") and not w.is_finished
                                                  for w in app.workers), what="the wakes and handoffs read")
            seen = app.cursor
            await wait_for(pilot, lambda: app.cursor > seen, what="still following")
    finally:
        sampler.stop.set()
        sampler.join()
    assert sampler.counts and max(sampler.counts) <= 2, max(sampler.counts)
    assert 2 in sampler.counts  # the sampler did see the console's two: LISTEN and the shared one

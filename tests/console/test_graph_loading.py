"""How a big graph reaches the screen: in small pages, each read only once the UI has applied the
one before and no change of the ledger is on its way to the screen, so that no turn of the loading
thread or of the UI holds a live commit up for long. Structure, not timings."""

from __future__ import annotations

import threading

from store import Ledger, NodeSpec

from console.screens import graph as graph_screen
from tests.support.console_app import build_ledger, graph_loaded, graph_of, make_app, settle, wait_for

NODES = 2300  # the first page, then more than one page of the old size (2,000)


class Recorded(threading.Event):
    """The follower's ``quiet``, its waits, clears and sets noted in ``log``."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log
        self.set()

    def wait(self, timeout=None):
        self.log.append(f"wait {timeout}")
        return super().wait(timeout)

    def clear(self) -> None:
        self.log.append("clear")
        super().clear()

    def set(self) -> None:
        self.log.append("set")
        super().set()


async def test_a_big_graph_arrives_in_small_pages_each_after_the_last_was_applied(tmp_path, monkeypatch):
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        ledger.create_task("wide", title="many nodes")
        ledger.add_nodes("wide", [NodeSpec(f"n{i:05d}", deps=(f"n{i - 1:05d}",) if i else ()) for i in range(NODES)])
    app = make_app(path)
    sizes: list[int] = []
    log: list[str] = []
    waited_when_asked: list[bool] = []  # the loader waited for quiet before asking for another page
    held_when_asked: list[int] = []  # rows in the model each time the loader asked for another page
    lock = threading.Lock()
    real = graph_screen.graph_pages

    def recorded(feed, task_id, **kw):
        for page in real(feed, task_id, **kw):
            with lock:
                sizes.append(len(page.nodes))
            with lock:
                log.clear()
            yield page
            g = graph_of(app)
            with lock:
                held_when_asked.append(len(g.nodes) if g is not None else 0)
                waited_when_asked.append(f"wait {graph_screen.LIVE_FIRST_S}" in log)

    monkeypatch.setattr(graph_screen, "graph_pages", recorded)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.follower.quiet = Recorded(log)
        app.open_graph("wide")
        await graph_loaded(pilot)
        g = graph_of(app)
        assert [n.key for n in g.nodes] == [f"n{i:05d}" for i in range(NODES)]
    with lock:
        assert sum(sizes) == NODES
        # after the first (the rows on screen), no page holds more than LOAD_PAGE rows
        assert max(sizes[1:]) <= graph_screen.LOAD_PAGE == 500, sizes
        # the loader asks for the next page only once the UI has appended the previous one
        assert held_when_asked[:len(sizes) - 1] == [sum(sizes[:k + 1]) for k in range(len(sizes) - 1)]
        # ... and once no change is on its way (the follower quiet), waiting for it a bounded time
        assert waited_when_asked[:len(sizes) - 1] == [True] * (len(sizes) - 1)
        assert graph_screen.LIVE_FIRST_S <= 0.1
        assert app.follower.loaders == set()  # the loading over, a change is not waited on to be drawn


async def test_the_follower_is_quiet_once_a_change_is_applied_and_drawn(tmp_path):
    """From the feed's wake-up until the change it brought is applied and drawn the follower is not
    quiet (a loading graph waits for it between pages); then it is again."""
    path = build_ledger(tmp_path / "ledger.db")
    app = make_app(path)
    log: list[str] = []
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.follower.quiet.is_set()
        app.follower.quiet = Recorded(log)
        app.follower.loaders.add(-1)  # as while a graph loads: quiet again once the change is drawn
        hub = app.hub
        real_apply = hub.apply

        def apply(p):
            log.append("applied")
            return real_apply(p)

        hub.apply = apply
        with Ledger.open(path) as ledger:
            ledger.create_task("another", title="a change")
        await wait_for(pilot, lambda: "another" in app.tasks_model.index and "applied" in log
                       and app.follower.quiet.is_set(), what="the change applied and the follower quiet")
        applied = log.index("applied")
        before = [e for e in log[:applied] if e in ("clear", "set")]
        assert before and before[-1] == "clear"  # not quiet while the change was on its way
        assert "set" in log[applied:]  # quiet again once it is applied (and drawn)


async def test_a_filter_key_on_a_big_graph_looks_up_the_cursors_neighbours_not_every_row(tmp_path, monkeypatch):
    """A key typed into a big graph's filter keeps the cursor on its node by looking up the rows
    around it (``RowList.refilter``), each by a bisection: not a pass over every shown row."""
    from textual.widgets import Input

    from console.model import GraphModel
    from console.widgets.rowlist import NEIGHBOURS

    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        ledger.create_task("wide", title="many nodes")
        ledger.add_nodes("wide", [NodeSpec(f"n{i:05d}") for i in range(NODES)])
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await graph_loaded(pilot)
        await settle(pilot)
        calls = []
        node_at = GraphModel.node_at
        monkeypatch.setattr(GraphModel, "node_at", lambda self, pos: calls.append(pos) or node_at(self, pos))
        app.screen.query_one("#filter", Input).value = "n0"  # every node still shown
        await wait_for(pilot, lambda: graph_of(app).filter_text == "n0", what="the filter applied")
        await settle(pilot)
        assert app.screen.selected_node() == "n00000"
        assert len(calls) < NEIGHBOURS + 200 < NODES, len(calls)

"""Screens own their data: a screen subscribes to the feed hub on mount for what it
shows and is forgotten on unmount; the app keeps no screen's data. And the graph's early updates
(read before the page that holds their row) wait in one buffer, the model's."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from console.hub import TasksChanged
from console.model import GraphModel
from console.screens import NodeDetailScreen, TaskGraphScreen
from store.views import GraphView

from tests.support.console_app import NOW, graph_loaded, graph_of, make_app, settle, wait_for


def _views(path: Any) -> tuple[Any, dict[str, Any]]:
    from store import Ledger

    with Ledger.open(path, create=False) as ledger:
        g = ledger.graph("report-001")
    return g.task, {n.key: n for n in g.nodes}


def test_updates_before_the_first_page_wait_in_the_model(ledger_path):
    task, nodes = _views(ledger_path)
    page1 = [nodes["collect"], nodes["outline"]]
    page2 = [nodes[k] for k in ("section-1", "section-2", "section-3", "figures", "approve", "publish")]
    newer = replace(nodes["outline"], status="pending")  # read after the snapshot (at 20 > 10)
    stale = replace(nodes["collect"], status="running")  # read before it (at 5 ≤ 10): the page is newer
    later = replace(nodes["figures"], status="running")  # its row is on the second page
    added = replace(nodes["publish"], key="late", position=99, deps=("publish",))  # after the snapshot

    g = GraphModel("report-001", lambda: NOW)
    assert not g.started and g.row_count() == 0
    g.apply([newer, stale, later, added], {"outline": 20, "collect": 5, "figures": 30, "late": 40})
    assert g.row_count() == 0  # nothing shown before the first page
    g.start(task, page1, loaded_at=10, total=len(nodes), last=False)
    assert g.started and not g.complete
    assert g.nodes[g.index["outline"]].status == "pending"
    assert g.nodes[g.index["collect"]].status == "succeeded"  # the stale read was dropped
    g.extend(page2, last=True)
    assert g.complete
    assert g.nodes[g.index["figures"]].status == "running"
    assert [n.key for n in g.nodes][-1] == "late"  # added after the snapshot: appended at the end
    assert g.row_count() == len(nodes) + 1


def test_of_builds_a_started_model(ledger_path):
    task, nodes = _views(ledger_path)
    g = GraphModel.of(GraphView(task=task, nodes=tuple(nodes.values())), lambda: NOW)
    assert g.started and g.complete and g.row_count() == len(nodes)


async def test_screens_watch_what_they_show_and_are_forgotten(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert not app.follower.graphs and not app.follower.details
        app.open_graph("report-001")
        await graph_loaded(pilot)
        graph = app.screen
        assert isinstance(graph, TaskGraphScreen)
        assert dict(app.follower.graphs) == {"report-001": 1}
        assert graph in app.hub.shown()
        app.open_node("report-001", "figures")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen) and app.screen.detail is not None)
        assert dict(app.follower.details) == {("report-001", "figures"): 1}
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.follower.details, what="the detail's watch dropped")
        assert dict(app.follower.graphs) == {"report-001": 1}  # the graph underneath still watches
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.follower.graphs, what="the graph's watch dropped")
        assert graph not in app.hub.shown()
        assert graph_of(app) is None
        # the app holds no graph and no detail of its own
        assert not any(hasattr(app, name) for name in ("graph_model", "detail", "_early_nodes"))


async def test_two_details_of_the_same_node_share_one_watch(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.open_node("report-001", "figures")
        app.open_node("report-001", "figures")
        await wait_for(pilot, lambda: app.follower.details.get(("report-001", "figures")) == 2)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.follower.details.get(("report-001", "figures")) == 1)
        assert isinstance(app.screen, NodeDetailScreen) and app.screen.detail is not None


async def test_an_error_in_a_subscriber_is_not_swallowed(ledger_path):
    """Textual's Signal only logs an exception of an immediate callback; the hub raises it again in
    the subscriber's own queue, where Textual reports it (the app stops with it)."""
    app = make_app(ledger_path, analysis=False)

    def broken(_change: TasksChanged) -> None:
        raise RuntimeError("subscriber bug")

    with pytest.raises(RuntimeError, match="subscriber bug"):
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            app.hub.subscribe(app.screen, app.hub.tasks_changed, broken)
            app.hub.tasks_changed.publish(TasksChanged((), True, frozenset()))
            await pilot.pause()
            await pilot.pause()


async def test_the_task_list_cursor_follows_the_selected_task_when_rows_move(ledger_path):
    """The task list subscribes to the hub's task changes: when a change moves rows in the urgency
    order (another task gains handoffs) or the whole list is read afresh (a replaced ledger file),
    the cursor stays on the task the operator selected, not on its old position."""
    from console.follow import Pending

    app = make_app(ledger_path, analysis=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        await pilot.press("s")  # urgency: report-001 (an open handoff) first
        model = app.tasks_model
        order = [model.row_at(p).view.task_id for p in range(model.row_count())]
        assert order == ["report-001", "evil-task", "idle-002"]
        screen.row_list.cursor = 1
        await pilot.pause()
        assert screen.selected_task() == "evil-task"
        views = {r.view.task_id: r.view for r in model.rows}

        # a change: idle-002 gains handoffs and rises to the top, evil-task moves down a row
        app.hub.apply(Pending(tasks={"idle-002": replace(views["idle-002"], handoffs_open=3)}))
        await pilot.pause()
        assert model.position_of_task("evil-task") == 2
        assert screen.row_list.cursor == 2 and screen.selected_task() == "evil-task"

        # a full load: every row read afresh, evil-task first now
        fresh = [replace(views["report-001"], handoffs_open=0), replace(views["evil-task"], handoffs_open=9),
                 views["idle-002"]]
        app.hub.apply(Pending(all_tasks=fresh, tail=[], leases=[]))
        await pilot.pause()
        assert model.position_of_task("evil-task") == 0
        assert screen.row_list.cursor == 0 and screen.selected_task() == "evil-task"

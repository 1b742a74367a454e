"""Pilot tests: the console driven like an operator, on the fixed ledger."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from textual.widgets import Input

from console.screens import (
    EventLogScreen,
    HandoffInboxScreen,
    HelpScreen,
    LedgerErrorScreen,
    NodeDetailScreen,
    RunsScreen,
    TaskGraphScreen,
    TaskListScreen,
)
from console.widgets import RowList

from tests.support.console_app import build_ledger, graph_loaded, make_app, run_from_palette, settle, wait_for, graph_of

ROOT = Path(__file__).resolve().parents[2]



def visible_rows(app) -> list[str]:
    lst = app.screen.query_one(RowList)
    return ["".join(seg.text for seg in lst.render_line(y)) for y in range(lst.size.height)]


async def test_navigation_task_graph_node_and_back(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TaskListScreen)
        assert [r.view.task_id for r in app.tasks_model.rows] == ["report-001", "evil-task", "idle-002"]
        await pilot.press("escape")  # does nothing on the first screen
        assert isinstance(app.screen, TaskListScreen)
        await pilot.press("enter")
        assert isinstance(app.screen, TaskGraphScreen) and app.screen.selected_task() == "report-001"
        await wait_for(pilot, lambda: graph_of(app) is not None, what="graph")
        await settle(pilot)
        assert [n.key for n in graph_of(app).nodes][:2] == ["collect", "outline"]
        await pilot.press("j", "j")
        assert app.screen.selected_node() == "section-1"
        rows = visible_rows(app)
        assert rows[0].startswith("NODE") and "section-1" in rows[3] and "▶ running" in rows[3]
        assert "bob" in rows[3]  # lease owner and countdown
        await pilot.press("enter")
        assert isinstance(app.screen, NodeDetailScreen)
        await wait_for(pilot, lambda: app.screen.detail is not None, what="detail")
        d = app.screen.detail
        assert d.node.key == "section-1" and len(d.observations) == 4
        await pilot.press("escape")
        assert isinstance(app.screen, TaskGraphScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, TaskListScreen)
        assert graph_of(app) is None and not app.follower.graphs  # the closed graph is dropped, its watch with it


async def test_graph_filter_by_status_kind_and_text(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: graph_of(app) is not None)
        await pilot.press("slash")
        assert app.screen.focused is app.screen.query_one("#filter")
        await pilot.press(*"status:pending")
        keys = [graph_of(app).node_at(i).key for i in range(graph_of(app).row_count())]
        assert keys == ["figures", "approve", "publish"]
        # keys type into the input: q did not quit, e did not open the event log
        assert isinstance(app.screen, TaskGraphScreen)
        await pilot.press("escape")  # leaves the input, the filter stays
        assert isinstance(app.screen, TaskGraphScreen)
        assert isinstance(app.screen.focused, RowList)
        assert graph_of(app).row_count() == 3
        await pilot.press("slash", *["backspace"] * 14, *"kind:llm")
        assert graph_of(app).row_count() == 4
        await pilot.press("ctrl+a", "ctrl+k", *"section-2", "enter")
        assert app.screen.selected_node() == "section-2"
        assert isinstance(app.screen.focused, RowList)


async def test_a_graph_filter_keeps_the_cursor_on_its_node(ledger_path):
    """The selected node stays selected while the filter shows it; filtered out, the node after it."""
    app = make_app(ledger_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await graph_loaded(pilot)
        await pilot.press("j", "j", "j")
        assert app.screen.selected_node() == "section-2"
        await pilot.press("slash", *"kind:llm")  # outline, section-1, section-2, section-3
        assert app.screen.selected_node() == "section-2"
        await pilot.press(*["backspace"] * 8, *"nothing")  # no node: the cursor is kept in mind
        await pilot.press(*["backspace"] * 7)
        assert app.screen.selected_node() == "section-2"
        app.screen.query_one("#filter", Input).value = "status:pending"  # figures, approve, publish
        await pilot.pause()
        assert app.screen.selected_node() == "figures"  # section-2 is not shown: the node after it


async def test_the_palette_builds_its_entries_once_per_opening(ledger_path, monkeypatch):
    """Typing into the palette searches the entries built when it opened (up to 500 tasks'
    entries), not entries built again at every key."""
    from console.commands import WardenCommands

    builds = []
    build = WardenCommands._build
    monkeypatch.setattr(WardenCommands, "_build", lambda self: builds.append(1) or build(self))
    app = make_app(ledger_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await run_from_palette(pilot, "Open task idle-002", typed="open task idle")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), what="the graph")
        assert app.screen.selected_task() == "idle-002"
        assert len(builds) == 1, builds


async def test_task_filter(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"parked", "enter")
        assert app.screen.selected_task() == "idle-002"
        assert app.tasks_model.row_count() == 1


async def test_event_log_follow_and_filters(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("e")
        screen = app.screen
        assert isinstance(screen, EventLogScreen) and screen.follow
        lst = screen.row_list
        total = lst.row_count
        assert total == len(app.events_model.rows) > 10
        assert lst.cursor == total - 1
        await pilot.press("l")  # decision layer only
        assert app.events_model.layer == "decision"
        assert all(e.layer == "decision" for e in app.events_model.rows)
        await pilot.press("l", "l", "l", "l")
        assert app.events_model.layer is None
        await pilot.press("k")  # moving up pauses follow
        assert not screen.follow
        cur = lst.cursor
        # another process appends an event: the paused list does not jump
        _write(ledger_path, "ledger.add_node('report-001', 'appendix', kind='tool', deps=['outline'])")
        await wait_for(pilot, lambda: lst.row_count > total, what="the new event")
        assert lst.cursor == cur
        await pilot.press("f")
        assert screen.follow and lst.cursor == lst.row_count - 1
        await pilot.press("t")  # the selected event's task
        assert app.events_model.task_id == "report-001"
        await pilot.press("t")
        assert app.events_model.task_id is None


def _write(path: Path, code: str) -> None:
    """Change the ledger from ANOTHER process (a real agent would)."""
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(ROOT)!r})
        from store import Ledger
        ledger = Ledger.open({str(path)!r}, create=False)
        {code}
        ledger.close()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=60)


async def test_another_process_writes_and_the_row_changes(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: graph_of(app) is not None)
        await settle(pilot)
        calls = []
        screen = app.screen
        orig = screen.data_changed
        screen.data_changed = lambda rows, reshaped: (calls.append((list(rows), reshaped)), orig(rows, reshaped))
        _write(ledger_path, "ledger.claim('report-001', worker='zed', lease_s=600)")  # figures → running
        g = graph_of(app)
        await wait_for(pilot, lambda: g.nodes[g.index["figures"]].status == "running", what="figures running")
        await pilot.pause()
        rows = visible_rows(app)
        fig = next(r for r in rows if "figures" in r)
        assert "▶ running" in fig and "zed" in fig
        # exactly the changed row was invalidated, not the graph
        assert calls == [([graph_of(app).index["figures"]], False)]
        _write(ledger_path, "ledger.add_node('report-001', 'late', kind='tool', deps=['figures'])")
        await wait_for(pilot, lambda: "late" in g.index, what="the new node")
        assert g is graph_of(app)  # patched, not reloaded
        # the task list row (counts) follows too
        await wait_for(pilot, lambda: app.tasks_model.rows[0].view.total == 9, what="task counts")


async def test_node_detail_updates_live(ledger_path):
    app = make_app(ledger_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.open_node("report-001", "figures")
        await wait_for(pilot, lambda: app.screen.detail is not None)
        assert app.screen.detail.node.status == "pending"
        _write(ledger_path, "ledger.claim('report-001', worker='zed', lease_s=600)")
        await wait_for(pilot, lambda: app.screen.detail.node.status == "running", what="detail update")


async def test_actions_in_read_only_show_a_notice(ledger_path):
    app = make_app(ledger_path, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        for n, key in enumerate(["p", "u", "n", "r", "a", "R"], 1):
            await pilot.press(key)
            assert isinstance(app.screen, TaskListScreen)
            assert [n.message for n in app._notifications] == ["read-only (opened with --read-only): actions are disabled"] * n


async def test_read_only_every_view_works_and_follows(ledger_path):
    app = make_app(ledger_path, read_only=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.live
        for key, kind in (("e", EventLogScreen), ("h", HandoffInboxScreen), ("g", RunsScreen), ("question_mark", HelpScreen)):
            await pilot.press(key)
            assert isinstance(app.screen, kind)
            await settle(pilot)
            await pilot.press("escape")
        await pilot.press("enter")
        await wait_for(pilot, lambda: graph_of(app) is not None)
        _write(ledger_path, "ledger.claim('report-001', worker='zed', lease_s=600)")
        g = graph_of(app)
        await wait_for(pilot, lambda: g.nodes[g.index["figures"]].status == "running")


async def test_actions_without_read_only_reach_the_hook(ledger_path):
    app = make_app(ledger_path)
    seen = []
    app.open_action = lambda action, task, node: seen.append((action, task, node))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await pilot.press("enter")
        await wait_for(pilot, lambda: graph_of(app) is not None)
        await pilot.press("j", "r")
    assert seen == [("park", "report-001", None), ("rewind", "report-001", "outline")]


async def test_handoff_inbox_and_runs(ledger_path, tmp_path):
    app = make_app(ledger_path, runs=str(tmp_path / "no-such-runs"))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, HandoffInboxScreen) and app.screen.loaded,
                       what="the inbox")
        assert [(h.task_id, h.node) for h in app.screen.source.items] == [("report-001", "section-2")]
        app.screen.action_open()
        await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailScreen), what="the node")
        assert app.screen.key == "section-2"
        await pilot.press("escape", "escape", "g")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.loaded, what="the runs")
        assert app.screen.source.items == ()  # a missing runs dir is an empty list, not an error


def _classes_with_bindings() -> list[type]:
    """Every console class (app, screens, dialogs, widgets) that declares BINDINGS."""
    import importlib
    import inspect
    import pkgutil

    import console.dialogs
    import console.screens
    import console.widgets
    from textual.dom import DOMNode

    names = ["console.app"]
    for pkg in (console.dialogs, console.screens, console.widgets):
        names += [f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)]
    out = []
    for name in names:
        mod = importlib.import_module(name)
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, DOMNode) and cls.__dict__.get("BINDINGS"):
                out.append(cls)
    return out


def test_help_lists_every_binding():
    from console.screens.help import KEY_NAMES, help_keys, help_text

    classes = _classes_with_bindings()
    found = {c.__name__ for c in classes}
    # the walk finds the screens, dialogs and widgets it must (so it cannot pass by finding none)
    assert {"WardenApp", "TaskListScreen", "TaskGraphScreen", "NodeDetailScreen", "EventLogScreen",
            "HandoffInboxScreen", "RunsScreen", "HelpScreen", "RowList", "FilterInput", "ActionDialog",
            "AdviceDialog", "ResolveHandoffScreen", "RecoveryWizardScreen"} <= found, found
    text = help_text(False).plain
    missing = []
    for cls in classes:
        listed = help_keys(cls.__name__)
        for b in cls.BINDINGS:
            for key in b.key.split(","):
                shown = KEY_NAMES.get(key, key)
                if shown not in listed:
                    missing.append((cls.__name__, key, b.action))
                assert shown in text
    assert not missing, missing


@pytest.mark.parametrize("case", ["missing", "corrupt", "newer"])
async def test_unopenable_ledger_shows_a_clear_screen(tmp_path, case):
    path = tmp_path / "ledger.db"
    if case == "corrupt":
        path.write_bytes(b"this is not a database" * 100)
    elif case == "newer":

        build_ledger(path)
        con = sqlite3.connect(path)
        tbl = [r[0] for r in con.execute("select name from sqlite_master where type='table'") if "meta" in r[0].lower()][0]
        con.execute(f"update {tbl} set value = '999' where key = 'schema_version'")
        con.commit()
        con.close()
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        # the screen becomes current before it has mounted its children: wait for the message too
        await wait_for(pilot, lambda: isinstance(app.screen, LedgerErrorScreen) and bool(app.screen.query("#error")),
                       what="the error screen and its message")
        text = str(app.screen.query_one("#error").render())
        assert "How to fix" in text
        expect = {"missing": "warden demo", "corrupt": "not a readable Warden ledger", "newer": "Upgrade Warden"}[case]
        assert expect in text
        await pilot.press("q")
    assert app.failed


async def test_ledger_that_disappears_shows_a_banner_and_recovers(ledger_path, tmp_path):
    app = make_app(ledger_path, fallback_poll_s=0.2)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        aside = tmp_path / "aside.db"
        os.rename(ledger_path, aside)
        await wait_for(pilot, lambda: app.unavailable is not None, what="the banner")
        assert "disappeared" in app.unavailable
        bar = str(app.screen.query_one("#status").render())
        assert "UNAVAILABLE" in bar
        os.rename(aside, ledger_path)
        await wait_for(pilot, lambda: app.unavailable is None, what="recovery")
        assert "UNAVAILABLE" not in str(app.screen.query_one("#status").render())
        _write(ledger_path, "ledger.add_node('report-001', 'after', kind='tool')")
        await wait_for(pilot, lambda: app.tasks_model.rows[0].view.total == 9, what="updates after recovery")


async def test_time_based_signals_appear_without_any_new_event(tmp_path):
    """A running node's heartbeat goes stale and its lease lapses only because time passes: the
    slow tick's signals-only recompute shows it on the task list and in the graph, with no event."""
    from store import Ledger, ManualClock

    clock = ManualClock(1_800_000_000.0)
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as ledger:
        ledger.create_task("quiet", title="nothing happens")
        ledger.add_node("quiet", "work", kind="tool", est_wall_s=60)
        c = ledger.claim("quiet", worker="w1", lease_s=120)
        ledger.heartbeat(c, units_done=1, units_total=10)
        last = ledger.last_event_id()
    now = [clock() + 1]
    app = make_app(path, clock=lambda: now[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        row = app.tasks_model.rows[app.tasks_model.index["quiet"]]
        assert row.signals == ()  # fresh: nothing to say yet
        await pilot.press("enter")
        await graph_loaded(pilot)
        await settle(pilot)
        assert graph_of(app).signals == {}
        now[0] += 3 * 3600  # hours pass; nobody writes
        app.analysis.run_time_signals()
        await wait_for(pilot, lambda: bool(graph_of(app).signals.get("work")), what="node signals")
        await pilot.press("escape")
        app.analysis.run_time_signals()
        await wait_for(pilot, lambda: bool(app.tasks_model.rows[app.tasks_model.index["quiet"]].signals),
                       what="task signals")
        kinds = {s["kind"] for s in app.tasks_model.rows[app.tasks_model.index["quiet"]].signals}
        assert kinds and app.cursor == last  # no event was written or read

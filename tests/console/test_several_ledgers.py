"""Several ledgers in one console: one task list, each row marked with its ledger; a row is
(ledger, task) — the same task id in two ledgers is two rows; what is opened or done on a row
reads and writes that row's ledger, never the other; one ledger's outage is shown on its own while
the other keeps moving, and it comes back by itself."""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import pytest
from textual.widgets import Input

from console.merged_tasklist import MergedTaskList
from console.dialogs.park import ParkDialog
from console.screens import TaskGraphScreen
from console.screens.all_tasks import AllTasksScreen
from store import Ledger
from tests.support.console_app import (build_ledger, graph_loaded, make_app, run_from_palette, settle, wait_for,
                                       workers_done)
from tests.support.asks import ask
from tests.support.tcpproxy import TcpProxy


def build_b(target: str) -> str:
    """Ledger b: a task whose id is also in ledger a (report-001), and one of its own."""
    with Ledger.open(target) as led:
        led.create_task("report-001", title="b's own report")
        led.add_node("report-001", "only-in-b", kind="tool", title="A node ledger a has not")
        led.create_task("b-only", title="b's other task")
        led.add_node("b-only", "step", kind="tool")
    return target


@pytest.fixture
def two(tmp_path: Path) -> tuple[str, str]:
    return str(build_ledger(tmp_path / "a.db")), build_b(str(tmp_path / "b.db"))


def two_app(a: str, b: str, **kw):
    kw.setdefault("analysis", False)
    return make_app(a, ledger_name="a", more=[("b", b)], **kw)


def model_of(app) -> MergedTaskList:
    screen = app.screen_stack[1]
    assert isinstance(screen, AllTasksScreen)
    return screen.all_model()


def rows(app) -> list[tuple[str, str]]:
    """(ledger, task) of every row shown, as the LEDGER and TASK cells say."""
    model = model_of(app)
    out = []
    for pos in range(model.row_count()):
        cells = model.row_cells(pos)
        out.append((cells[0][0].split()[0], cells[1][0]))
    return out


async def loaded(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: all(s.loaded for s in app.every_side()), what="both ledgers read")
    await settle(pilot)


async def select(pilot, ledger: str, task: str) -> None:
    screen = pilot.app.screen_stack[1]
    pos = rows(pilot.app).index((ledger, task))
    screen.row_list.cursor = pos
    await pilot.pause()
    assert screen.selected_task() == task and screen.selected_side().ledger_name == ledger


def task_status(target: str, task: str) -> str:
    with Ledger.open(target, create=False) as led:
        return next(t.status for t in led.tasks() if t.task_id == task)


async def test_every_ledgers_tasks_in_one_list_each_row_marked(two):
    a, b = two
    app = two_app(a, b)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        shown = rows(app)
        # creation order: the ledgers' rows alternate (each one's first task, then each one's second)
        assert shown == [("a", "report-001"), ("b", "report-001"), ("a", "evil-task"), ("b", "b-only"),
                         ("a", "idle-002")]
        text = app.export_screenshot()
        assert "LEDGER" in text and "b-only" in text
        summary = str(app.screen.query_one("#summary").render())
        assert "1 parked" in summary  # a's idle-002, counted with b's tasks
        assert "2 ledgers" in str(app.screen.query_one("#status").render())
        # a new task in b shows in the same list, marked b
        with Ledger.open(b, create=False) as led:
            led.create_task("b-late", title="written while the console is open")
        await wait_for(pilot, lambda: ("b", "b-late") in rows(app), what="b's new task")


async def test_urgency_order_puts_the_most_urgent_task_of_any_ledger_first(two):
    a, b = two
    app = two_app(a, b)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("s")
        assert rows(app)[0] == ("a", "report-001")  # one open handoff: a's
        with Ledger.open(b, create=False) as led:  # two open handoffs in b's last task
            led.add_node("b-only", "more", kind="tool")
            for _ in range(2):
                ask(led, led.claim("b-only", worker="bea"), kind="confirm", question="go on?",
                    options=[{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}], recommendation="yes")
        await wait_for(pilot, lambda: rows(app)[:2] == [("b", "b-only"), ("a", "report-001")],
                       what="b's task first")
        assert rows(app)[-1] == ("a", "idle-002")  # parked, no alarm: after the active ones
        screen = app.screen
        assert screen.selected_side() is not None


async def test_l_shows_one_ledger_then_the_next_then_all(two):
    a, b = two
    app = two_app(a, b)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("l")
        assert {ledger for ledger, _ in rows(app)} == {"a"}
        assert "a only" in str(app.screen.query_one("#status").render())
        await pilot.press("l")
        assert rows(app) == [("b", "report-001"), ("b", "b-only")]
        await pilot.press("l")
        assert len(rows(app)) == 5
        # the palette's "Ledger: b" (:ctx) from a graph: back on the list, b's rows only
        await select(pilot, "a", "report-001")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), what="a graph")
        app.show_ledger("b")
        await wait_for(pilot, lambda: isinstance(app.screen, AllTasksScreen), what="back on the list")
        assert rows(app) == [("b", "report-001"), ("b", "b-only")]
        app.show_ledger(None)
        assert len(rows(app)) == 5


async def test_opening_a_row_reads_its_own_ledger(two):
    a, b = two
    app = two_app(a, b)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await select(pilot, "b", "report-001")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), what="the graph")
        await graph_loaded(pilot)
        graph = app.screen
        assert [n.key for n in graph.model.nodes] == ["only-in-b"]  # b's report-001, not a's
        assert str(graph.query_one("#status").render()).split("warden")[1].strip().startswith("b ")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, AllTasksScreen), what="back to the list")
        await select(pilot, "a", "report-001")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), what="a's graph")
        await graph_loaded(pilot)
        assert "only-in-b" not in [n.key for n in app.screen.model.nodes] and len(app.screen.model.nodes) == 8


async def test_the_palette_opens_a_task_in_the_ledger_its_entry_names(two):
    """The same task id in two ledgers is two palette entries, each naming its ledger and opening
    that ledger's graph — from the list and from the other ledger's graph alike."""
    a, b = two
    app = two_app(a, b)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await run_from_palette(pilot, "Open task report-001 in b")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), what="b's graph")
        await graph_loaded(pilot)
        assert [n.key for n in app.screen.model.nodes] == ["only-in-b"]
        b_graph = app.screen
        await run_from_palette(pilot, "Open task report-001 in a")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen) and app.screen is not b_graph,
                       what="a's graph")
        await graph_loaded(pilot)
        assert "only-in-b" not in [n.key for n in app.screen.model.nodes] and len(app.screen.model.nodes) == 8


async def park_row(pilot, ledger: str, task: str, reason: str) -> str:
    """Park (ledger, task) through the action registry's dialog with ``reason``; the dialog's title
    as it was with the plan read."""
    app = pilot.app
    await select(pilot, ledger, task)
    await pilot.press("p")
    await wait_for(pilot, lambda: isinstance(app.screen, ParkDialog) and app.screen.is_mounted, what=f"park {ledger}")
    dlg = app.screen
    await wait_for(pilot, lambda: not dlg.planning and dlg.plan is not None, what=f"{ledger}'s plan")
    title = str(dlg.query_one("#dialog-title").render())
    dlg.query_one("#reason", Input).focus()
    await pilot.press(*reason)
    await pilot.pause()
    await pilot.click("#apply")
    await wait_for(pilot, lambda: app.screen is not dlg, what=f"applied to {ledger}")
    await workers_done(pilot, dlg)
    return title


async def test_an_action_on_a_row_lands_in_its_ledger_and_not_the_other(two):
    a, b = two
    app = two_app(a, b, operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        assert "in ledger b" in await park_row(pilot, "b", "report-001", "b is over budget")
        assert task_status(b, "report-001") == "parked"
        assert task_status(a, "report-001") == "active"  # the same id in a: untouched
        await wait_for(pilot, lambda: app.sides[0].tasks_model.rows[0].view.status == "parked",
                       what="b's row parked on screen")
        assert app.tasks_model.rows[0].view.status == "active"
        # and the other way: a's row, a's ledger
        await park_row(pilot, "a", "report-001", "a too")
        assert task_status(a, "report-001") == "parked"
        with Ledger.open(b, create=False) as led:
            reasons = [x.reason for x in led.actions("report-001")]
        assert reasons == ["b is over budget"]


async def test_one_sqlite_ledger_gone_is_its_outage_and_the_other_keeps_moving(two):
    a, b = two
    app = two_app(a, b, clock=time.time)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        os.rename(b, b + ".away")
        side_b = app.sides[0]
        await wait_for(pilot, lambda: side_b.unavailable is not None, timeout=60, what="b's outage")
        screen = app.screen
        assert app.unavailable is None  # a is fine
        await wait_for(pilot, lambda: "down: b" in str(screen.query_one("#summary").render()), what="said")
        status = str(screen.query_one("#status").render())
        assert "UNAVAILABLE" in status and "b:" in status and "a:" not in status
        b_rows = [p for p, (ledger, _) in enumerate(rows(app)) if ledger == "b"]
        assert b_rows and all(model_of(app).row_cells(p)[0][1] == "alarm" for p in b_rows)  # b's rows stay, marked
        with Ledger.open(a, create=False) as led:
            led.create_task("a-during", title="written while b is away")
        await wait_for(pilot, lambda: ("a", "a-during") in rows(app), timeout=60, what="a still followed")
        os.rename(b + ".away", b)
        await wait_for(pilot, lambda: side_b.unavailable is None, timeout=60, what="b back by itself")
        with Ledger.open(b, create=False) as led:
            led.create_task("b-after", title="after")
        await wait_for(pilot, lambda: ("b", "b-after") in rows(app), timeout=60, what="b followed again")


async def test_a_ledger_missing_at_start_is_its_outage_not_the_consoles(tmp_path):
    a = str(build_ledger(tmp_path / "a.db"))
    b = str(tmp_path / "later.db")
    app = make_app(a, ledger_name="a", more=[("b", b)], analysis=False, clock=time.time)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.loaded and app.sides[0].unavailable is not None, timeout=60,
                       what="b cannot be opened")
        assert isinstance(app.screen, AllTasksScreen) and app.failed is None
        assert ("a", "report-001") in rows(app)
        build_b(b)
        await wait_for(pilot, lambda: app.sides[0].loaded and app.sides[0].unavailable is None, timeout=60,
                       what="b opened once it exists")
        await wait_for(pilot, lambda: ("b", "b-only") in rows(app), what="b's rows")
        # read later than a, b's rows are moved out of the collector's walks too (console/app.py
        # settle_heap), else every full collection walks its thousands of rows
        await settle(pilot)
        tracked = {id(o) for o in gc.get_objects()}
        assert id(app.tasks_model.rows[0]) not in tracked  # (a's, frozen as before)
        assert id(app.sides[0].tasks_model.rows[0]) not in tracked, "b's rows are walked by every full collection"


@pytest.mark.postgres
async def test_postgresql_stopped_is_that_ledgers_outage_the_sqlite_one_keeps_moving(pg_target, tmp_path):
    a = str(build_ledger(tmp_path / "a.db"))
    direct = build_b(pg_target())
    p = urlparse(direct)
    proxy = TcpProxy(p.hostname or "127.0.0.1", p.port or 5432)
    url = urlunparse(p._replace(netloc=f"{p.username + '@' if p.username else ''}127.0.0.1:{proxy.port}"))
    app = make_app(a, ledger_name="a", more=[("pg", url)], analysis=False, clock=time.time)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: all(s.loaded for s in app.every_side()) and
                           app.sides[0].feed.listener_pid is not None, what="both ledgers, pg listening")
            proxy.refuse()
            await wait_for(pilot, lambda: "unreachable" in (app.sides[0].unavailable or ""), timeout=60,
                           what="pg's outage")
            with Ledger.open(a, create=False) as led:
                led.create_task("a-during", title="written while pg is down")
            await wait_for(pilot, lambda: ("a", "a-during") in rows(app), timeout=60, what="a still followed")
            assert app.unavailable is None and ("pg", "b-only") in rows(app)  # pg's rows stay
            proxy.restore()
            await wait_for(pilot, lambda: app.sides[0].unavailable is None, timeout=60, what="pg back by itself")
            with Ledger.open(direct, create=False) as led:
                led.create_task("pg-after", title="after")
            await wait_for(pilot, lambda: ("pg", "pg-after") in rows(app), timeout=60, what="pg followed again")
    finally:
        proxy.close()


@pytest.mark.postgres
async def test_each_postgresql_ledger_keeps_to_three_connections_of_its_own(pg_target):
    """Two PostgreSQL ledgers: each one's connections (by the application_name in its URL) stay at
    most three — its LISTEN, its reading threads' shared one, its analysis worker's — while a graph,
    a node, the handoff inbox and a park dialog are open on b and estimates run on both."""
    import threading
    import uuid

    from tests.conftest import pg_admin

    names = {k: f"warden-ctx-{k}-" + uuid.uuid4().hex[:8] for k in ("a", "b")}
    a_url = pg_target()
    with Ledger.open(a_url) as led:
        led.create_task("report-001", title="a's report")
        led.add_node("report-001", "a-node", kind="tool")
    b_url = build_b(pg_target())
    counts: dict[str, list[int]] = {k: [] for k in names}
    stop = threading.Event()

    def sample() -> None:
        with pg_admin() as c:
            while not stop.is_set():
                for k, n in names.items():
                    counts[k].append(int(c.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                                   (n,)).fetchone()[0]))
                stop.wait(0.005)  # the sampling interval (not a synchronisation)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    app = make_app(a_url + f"&application_name={names['a']}", ledger_name="a",
                   more=[("b", b_url + f"&application_name={names['b']}")], clock=time.time)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: all(s.loaded for s in app.every_side()), what="both ledgers")
            await wait_for(pilot, lambda: all("full" in s.analyst.last_seconds for s in app.every_side()),
                           timeout=120, what="an analysis run on each")
            await select(pilot, "b", "report-001")
            await pilot.press("enter")
            await graph_loaded(pilot)
            app.open_node("report-001", "only-in-b")
            await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None, what="b's node")
            app.action_handoffs()
            app.open_action("park", "report-001", None)
            await wait_for(pilot, lambda: isinstance(app.screen, ParkDialog), what="the park dialog")
            await workers_done(pilot, app.screen)
            assert app.screen.plan is not None and app.screen.host.ledger_target.startswith(b_url)
            app.check_wakes()
            await wait_for(pilot, lambda: min(len(v) for v in counts.values()) > 20, what="samples")
    finally:
        stop.set()
        sampler.join()
    for k in names:
        assert counts[k] and max(counts[k]) <= 3, (k, max(counts[k]))
        assert 2 <= max(counts[k])  # each ledger's own LISTEN and reads at least


async def test_a_handoff_in_either_ledger_is_an_alert(two, tmp_path):
    """Each ledger's journal has its own ids: a handoff opened in b (whose ids are far below a's) is
    an alert as much as one in a; the --on-alert hook's JSON names the ledger each is in."""
    a, b = two
    hooked = tmp_path / "alerts.jsonl"
    code = f"import sys; open({str(hooked)!r}, 'a').write(sys.stdin.read().strip() + '\\n')"
    app = two_app(a, b, bell=False, on_alert=[sys.executable, "-c", code])
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        assert app.open_alerts == 0
        with Ledger.open(a, create=False) as led:
            led.create_task("a-new", title="a task that asks")
            led.add_node("a-new", "ask", kind="tool")
            ask(led, led.claim("a-new", worker="al"), kind="confirm", question="and this?",
                options=[{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}], recommendation="yes")
        await wait_for(pilot, lambda: app.open_alerts == 1, what="a's handoff alerted")
        with Ledger.open(b, create=False) as led:
            ask(led, led.claim("b-only", worker="bea"), kind="confirm", question="ship it?",
                options=[{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}], recommendation="yes")
        await wait_for(pilot, lambda: app.open_alerts == 2, what="b's handoff alerted too (its event ids are below a's)")

        def hooked_alerts() -> list[dict]:
            return [json.loads(x) for x in hooked.read_text().splitlines()] if hooked.exists() else []
        await wait_for(pilot, lambda: len(hooked_alerts()) == 2, what="the hook run for each")
        assert sorted((j["ledger"], j["task"]) for j in hooked_alerts()) == [("a", "a-new"), ("b", "b-only")]
        await select(pilot, "b", "b-only")
        await pilot.press("enter")  # opening b's task sees b's alert, not a's
        await wait_for(pilot, lambda: app.open_alerts == 1, what="b's alert seen")


def build_many(tmp_path: Path) -> tuple[str, str]:
    """Two ledgers of six tasks each, alpha-0… and beta-0… (their rows alternate in creation order)."""
    out = []
    for name in ("alpha", "beta"):
        target = str(tmp_path / f"{name}.db")
        with Ledger.open(target) as led:
            for i in range(6):
                led.create_task(f"{name}-{i}")
                led.add_node(f"{name}-{i}", "step", kind="tool")
        out.append(target)
    return out[0], out[1]


async def test_the_cursor_stays_on_its_row_or_the_one_that_took_its_place(tmp_path):
    """`l`, `/` and `s` keep the cursor on the selected (ledger, task) while it is shown, and move it
    to the row after it in the merged order (before it, at the end) when it is not: never to
    whatever row now has the same index."""
    a, b = build_many(tmp_path)
    app = make_app(a, ledger_name="alpha", more=[("beta", b)], analysis=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        screen = app.screen

        def at() -> tuple[str, str]:
            return screen.selected_side().ledger_name, screen.selected_task()

        await select(pilot, "beta", "beta-1")  # 4th row of all; alpha-only has alpha-3 there
        await pilot.press("l")  # alpha only: beta-1 is not shown; alpha-2 came after it
        assert at() == ("alpha", "alpha-2")
        await pilot.press("l")  # beta only: the beta row after alpha-2 in the merged order
        assert at() == ("beta", "beta-2")
        await pilot.press("l")  # all again: the same row
        assert at() == ("beta", "beta-2")
        await select(pilot, "alpha", "alpha-4")
        await pilot.press("l")
        assert at() == ("alpha", "alpha-4")  # still shown: still selected
        await pilot.press("enter")  # and it is what opens
        await wait_for(pilot, lambda: isinstance(app.screen, TaskGraphScreen), what="the graph")
        assert app.screen.task_id == "alpha-4"
        assert str(app.screen.query_one("#status").render()).split("warden")[1].strip().startswith("alpha ")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="back to the list")
        await pilot.press("l", "l")  # all
        await select(pilot, "alpha", "alpha-1")
        await pilot.press("slash", *"beta")  # alpha-1 filtered out: beta-1 came after it
        await pilot.press("escape")
        await wait_for(pilot, lambda: rows(app) == [("beta", f"beta-{i}") for i in range(6)], what="filtered")
        assert at() == ("beta", "beta-1")
        await select(pilot, "beta", "beta-5")
        await pilot.press("s")  # re-sorted: the same row, wherever it went
        assert at() == ("beta", "beta-5")


def info_line(app) -> str:
    return str(app.screen.query_one("#info").render())


async def test_the_line_under_the_list_names_the_selected_rows_ledger(two):
    a, b = two
    app = two_app(a, b, clock=time.time)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await select(pilot, "b", "report-001")
        assert info_line(app).startswith("b · report-001")
        await select(pilot, "a", "report-001")
        assert info_line(app).startswith("a · report-001")
        os.rename(b, b + ".away")  # b down: its rows say so where they are read
        await wait_for(pilot, lambda: app.sides[0].unavailable is not None, timeout=60, what="b's outage")
        await select(pilot, "b", "b-only")
        await wait_for(pilot, lambda: info_line(app).startswith("b ⚠ · b-only"), what="b marked down")

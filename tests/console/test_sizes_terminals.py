"""Every size and terminal: the columns that stay, no P80 on finished rows, ASCII
glyphs on plain terminals, database (not file) wording on PostgreSQL, the alert flags on the CLI."""

from __future__ import annotations

from typing import Any

import pytest
from rich.cells import cell_len

from tests.support.console_app import NOW, make_app, settle, wait_for
from console import glyphs
from console.cli import main as warden
from console.cli.entry import parse
from console.glyphs import MARKS, NODE_GLYPHS, TASK_GLYPHS, age_label, ascii_terminal, use_ascii
from console.event_log import EVENT_COLUMNS
from console.model import GRAPH_COLUMNS, TASK_COLUMNS, GraphModel
from console.tasklist import TaskListModel
from console.screens.error import LedgerErrorScreen, how_to_fix
from console.widgets.figures import gauge, sparkline
from console.widgets.rowlist import layout
from store.views import GraphView


def shown(columns: Any, width: int) -> dict[str, int]:
    return {columns[i].name: w for i, w in layout(columns, width)}


@pytest.mark.parametrize("width", [58, 60, 78, 80, 100, 198, 200])
def test_the_task_list_keeps_status_p80_signals_and_handoffs(width: int) -> None:
    cols = shown(TASK_COLUMNS, width)
    for name in ("TASK", "STATUS", "DONE", "P80", "SIG", "HAND"):
        assert name in cols, (width, cols)
    assert cols["STATUS"] >= cell_len("✔ completed") and cols["P80"] >= cell_len("3h05m (med)")
    assert cols["HAND"] >= cell_len("✋12") and cols["SIG"] >= cell_len("⚠ 12")
    assert sum(cols.values()) + len(cols) - 1 <= max(width, 58)


def test_age_has_its_room_on_a_wide_terminal() -> None:
    cols = shown(TASK_COLUMNS, 200)
    for label in ("3h01m ago", "2d04h ago", "in 3h05m"):
        assert cell_len(label) <= cols["AGE"], label
    assert age_label(3 * 3600 + 61) == "3h01m ago"


def test_the_event_log_shows_the_task_at_80_columns() -> None:
    cols = shown(EVENT_COLUMNS, 78)  # 80 less the scrollbar
    assert {"AT", "TASK", "NODE", "KIND", "SUMMARY"} <= set(cols)
    assert cols["SUMMARY"] >= 24 and cols["TASK"] >= 12
    wide = shown(EVENT_COLUMNS, 98)
    assert {"ID", "LAYER"} <= set(wide)
    wide = shown(EVENT_COLUMNS, 198)  # 200 columns: long kinds, ids and keys whole
    assert wide["KIND"] >= len("effect.compensated") and wide["TASK"] >= 24 and wide["SUMMARY"] >= 80
    narrow = shown(EVENT_COLUMNS, 58)
    assert sum(narrow.values()) + len(narrow) - 1 <= 58 and narrow["SUMMARY"] >= 12


def test_graph_columns_fit_at_60() -> None:
    cols = shown(GRAPH_COLUMNS, 60)
    assert {"NODE", "STATUS", "P80", "SIG"} <= set(cols)


def test_no_p80_on_finished_rows(fixed_dir: Any) -> None:
    from store import Ledger

    with Ledger.open("ledger.db", create=False) as ledger:
        tasks = ledger.tasks()
        graph = ledger.graph("report-001")
    m = TaskListModel(lambda: NOW)
    m.load(tasks)
    eta = {"p50_s": 60.0, "p80_s": 120.0, "samples": 3, "confidence": "low"}
    for t in tasks:
        m.set_analysis(t.task_id, eta, ())
    assert m.row_cells(m.index["report-001"])[3][0] == "2m (low)"
    # the task completes: the P80 it had a second ago is not shown, before any new analysis
    done = [t for t in tasks if t.task_id == "report-001"][0]
    from dataclasses import replace

    m.update([replace(done, status="completed")])
    assert m.row_cells(m.index["report-001"])[3][0] == MARKS["dash"]
    g = GraphModel.of(GraphView(task=graph.task, nodes=graph.nodes), lambda: NOW)
    g.update_analysis(node_etas={n.key: eta for n in graph.nodes})
    by_key = {g.row_cells(i)[0][0].strip(): g.row_cells(i)[5][0] for i in range(g.row_count())}
    assert by_key["collect"] == MARKS["dash"] and by_key["outline"] == MARKS["dash"]  # succeeded
    assert by_key["section-3"] == MARKS["dash"]  # failed
    assert by_key["figures"] == "2m (low)"  # pending


# ---------------------------------------------------------------------- plain terminals
@pytest.mark.parametrize("env,want", [
    ({"TERM": "linux"}, True), ({"TERM": "dumb"}, True), ({"TERM": "vt100"}, True),
    ({"TERM": "xterm-256color"}, False), ({"TERM": "tmux-256color"}, False), ({"TERM": "screen"}, False),
    ({"TERM": "xterm", "WARDEN_ASCII": "1"}, True), ({"TERM": "linux", "WARDEN_ASCII": "0"}, False),
])
def test_which_terminals_get_ascii(env: dict[str, str], want: bool) -> None:
    assert ascii_terminal(env) is want


@pytest.fixture
def ascii_glyphs():
    use_ascii()
    yield
    use_ascii(False)


def test_ascii_glyphs_everywhere_they_are_drawn(ascii_glyphs: None) -> None:
    for table in (NODE_GLYPHS, TASK_GLYPHS):
        assert all(v.isascii() for v in table.values())
    assert all(v.isascii() for v in MARKS.values())
    assert gauge(0.5, 6).isascii() and sparkline([0, 1, 2, 3]).isascii()
    assert glyphs.node_status_label("blocked") == "H blocked"
    assert glyphs.signals_label([{"kind": "x"}]) == "! 1"


def test_the_explanations_draw_the_ascii_signal_mark(ascii_glyphs: None) -> None:
    from rich.text import Text

    from console.explain import eta_figures, signals_section, task_estimate_text

    sig = {"kind": "repeating", "severity": "alarm", "node": "n1", "evidence": "same 3 times"}
    out = Text()
    signals_section(out, [sig], now=0.0)
    assert "! repeating" in out.plain and "⚠" not in out.plain
    assert task_estimate_text(None, [sig]).plain.isascii()
    assert eta_figures(None) == "-"


def test_use_ascii_off_restores_unicode() -> None:
    use_ascii()
    assert glyphs.ascii_on()
    use_ascii(False)
    assert NODE_GLYPHS["succeeded"] == "✔" and MARKS["signal"] == "⚠" and not glyphs.ascii_on()


async def test_the_console_draws_ascii_on_a_plain_terminal(fixed_dir: Any, ascii_glyphs: None) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await wait_for(pilot, lambda: app.tasks_model.rows[0].signals, what="the signals")
        lst = app.screen.row_list
        lines = [lst.render_line(y).text for y in range(1, 4)]
        assert all(line.isascii() for line in lines), lines
        assert "> active" in lines[0] and "H1" in lines[0]
        assert app.get_key_display(app.screen.BINDINGS[0]) == "enter"  # not ⏎


# ---------------------------------------------------------------------- PostgreSQL: a database, not a file
def test_how_to_fix_says_database_on_postgresql() -> None:
    msg = "postgresql://127.0.0.1:54330/x is empty: not a Warden ledger"
    assert "file" in how_to_fix(msg)
    pg = how_to_fix(msg, database=True)
    assert "database" in pg and "file" not in pg
    down = how_to_fix("cannot connect: connection refused", database=True)
    assert "server" in down and "file" not in down
    assert "warden migrate" in how_to_fix("run warden migrate", database=True)


@pytest.mark.postgres
async def test_an_empty_postgresql_database_is_called_a_database(pg_target: Any) -> None:
    url = pg_target()
    app = make_app(url)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LedgerErrorScreen), what="the error screen")
        await pilot.pause()
        text = str(app.screen.query_one("#error").render())
        assert "database" in text and "file" not in text.replace("profile", "")


# ---------------------------------------------------------------------- the flags
def test_alert_flags_on_console_and_demo(tmp_path: Any, capsys: Any) -> None:
    args = parse(["console", "--no-bell", "--on-alert", "cat -u"])
    assert args.no_bell is True and args.on_alert == "cat -u"
    args = parse(["--no-bell", "demo"])
    assert args.no_bell is True
    assert parse(["--on-alert", "true"]).on_alert == "true"  # no subcommand: the console
    for bad, why in ((["console", "--on-alert", "nope-no-such-cmd-xyz"], "no such command"),
                     (["console", "--on-alert", "'unclosed"], "--on-alert"),
                     (["console", "--on-alert", ""], "needs a command")):
        assert warden([*bad, "--ledger", str(tmp_path / "none.db")]) == 2
        assert why in capsys.readouterr().err
    assert warden(["status", "--no-bell"]) == 2
    assert "does not apply" in capsys.readouterr().err

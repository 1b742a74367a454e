"""A task's origin: which integration made it — recorded by ``create_task(origin=)``,
derived for a task made before schema 4 recorded it, shown by ``warden status`` and the console."""

from __future__ import annotations

import json

import pytest

from console.cli import main as warden
from console.tasklist import TaskListModel
from store import Ledger, NodeSpec
from store.errors import InvalidValue
from store.reading.cli_json import status_json


@pytest.mark.parametrize("origin", ["mcp", "run", "claude", "langgraph", "python", "codex-hooks", "a"])
def test_an_origin_given_is_kept(ledger, origin):
    t = ledger.create_task("t", origin=origin)
    assert t.origin == origin
    assert ledger.task("t").origin == origin
    created = [e for e in ledger.events(task_id="t") if e.kind == "task.created"]
    assert created[0].payload["origin"] == origin


def test_no_origin_is_python_and_an_existing_task_keeps_its_own(ledger):
    assert ledger.create_task("t").origin == "python"
    ledger.create_task("m", origin="mcp")
    assert ledger.create_task("m", origin="run", exist_ok=True).origin == "mcp"  # exist_ok changes nothing


@pytest.mark.parametrize("bad", ["", "MCP", "1run", "run\n", "a" * 33, "r u n", 7, b"mcp", "mcp\x1b[31m"])
def test_a_bad_origin_is_refused_and_nothing_is_made(ledger, bad):
    with pytest.raises(InvalidValue, match="origin"):
        ledger.create_task("t", origin=bad)
    assert ledger.tasks() == []


def test_a_task_made_before_the_origin_was_recorded_is_derived(ledger_path, clock):
    with Ledger.open(ledger_path, clock=clock) as led:
        led.create_task("lg", workflow="langgraph", origin="langgraph")
        led.create_task("py", workflow="report")
        led.db.execute_sql("UPDATE task SET origin = NULL")  # as schema 3 left them
        assert led.task("lg").origin == "langgraph"
        assert led.task("py").origin == "python"


def test_status_json_and_the_table_show_the_origin(ledger_path, clock, capsys):
    with Ledger.open(ledger_path, clock=clock) as led:
        led.create_task("by-mcp", origin="mcp")
        led.add_nodes("by-mcp", [NodeSpec("main")])
        led.create_task("by-python")
        data = status_json(led)
    assert {t["task_id"]: t["origin"] for t in data["tasks"]} == {"by-mcp": "mcp", "by-python": "python"}
    assert warden(["status", "--json", "--ledger", ledger_path]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [t["origin"] for t in out["tasks"]] == ["mcp", "python"]
    assert warden(["status", "--ledger", ledger_path]) == 0
    text = capsys.readouterr().out
    assert "by-mcp [mcp]" in text and "by-python [" not in text


def test_the_console_task_list_marks_the_origin_and_filters_by_it(ledger):
    ledger.create_task("a", origin="claude")
    ledger.create_task("b")
    ledger.create_task("c", origin="run")
    model = TaskListModel(clock=lambda: 0.0)
    model.load(ledger.tasks())
    assert [model.row_cells(i)[0][0] for i in range(3)] == ["a [claude]", "b", "c [run]"]
    model.set_filter("run")
    assert model.row_count() == 1 and model.row_at(0).view.task_id == "c"

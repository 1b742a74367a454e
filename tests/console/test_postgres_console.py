"""The console and the read-only CLI commands on ``--ledger postgresql://…`` (skipped without a
server): the same fixed ledger built on SQLite and on PostgreSQL reads back the same through every
read command, and the console shows it live, woken by LISTEN/NOTIFY rather than its poll."""

from __future__ import annotations

import json

import pytest

from console.cli import main as warden
from store import Ledger, ManualClock
from tests.support.console_app import NOW, T0, build_ledger, make_app, settle, wait_for

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def both(tmp_path, pg_target, monkeypatch):
    """(sqlite path, postgresql URL) holding the same fixed ledger; the CLI's clock is fixed."""
    import store.clock

    monkeypatch.setattr(store.clock, "system_clock", lambda: NOW)
    sqlite = str(build_ledger(tmp_path / "ledger.db"))
    url = pg_target()
    build_ledger(url)
    return sqlite, url


READS = [
    ["status", "--json"],
    ["graph", "report-001", "--json"],
    ["graph", "evil-task", "--json"],
    ["events", "--json"],
    ["events", "--task", "report-001", "--since", "5", "--json"],
    ["handoffs", "--json"],
]


@pytest.mark.parametrize("argv", READS, ids=[" ".join(a[:2]) for a in READS])
def test_every_read_command_says_the_same_on_both_backends(both, argv, capsys):
    out = {}
    for target in both:
        assert warden([*argv, "--ledger", target]) == 0, capsys.readouterr().err
        text = capsys.readouterr().out
        out[target] = [json.loads(line) for line in text.splitlines() if line.strip()]
    sqlite, url = both
    assert out[sqlite] and out[sqlite] == out[url]


def test_actions_and_migrate_through_the_cli_on_postgresql(both, capsys):
    _, url = both
    assert warden(["migrate", "--ledger", url]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert warden(["park", "report-001", "--reason", "wait", "--yes", "--json", "--ledger", url,
                   "--operator", "op"]) == 0
    assert json.loads(capsys.readouterr().out)["applied"] is True
    assert warden(["resume", "report-001", "--yes", "--ledger", url, "--operator", "op"]) == 0
    capsys.readouterr()
    with Ledger.open(url, create=False) as led:
        assert [a.action for a in led.actions("report-001")][:2] == ["resume", "park"]
        assert led.task("report-001").status == "active"


def test_a_missing_schema_is_refused_not_created(pg_target, capsys):
    url = pg_target()  # an empty schema
    assert warden(["status", "--ledger", url]) == 4  # ledger unavailable
    err = capsys.readouterr().err
    assert "not a Warden ledger" in err and len(err.strip().splitlines()) == 1
    assert "password" not in err


async def test_the_console_on_postgresql_follows_a_writer_by_notify(pg_target):
    url = pg_target()
    build_ledger(url)
    app = make_app(url, fallback_poll_s=300.0)  # only a NOTIFY can wake it within the test
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert [r.view.task_id for r in app.tasks_model.rows] == ["report-001", "evil-task", "idle-002"]
        writer = Ledger.open(url, clock=ManualClock(T0 + 700))
        try:
            writer.create_task("late-003", title="Arrives while the console watches")
            await wait_for(pilot, lambda: "late-003" in [r.view.task_id for r in app.tasks_model.rows],
                           what="the new task to appear")
        finally:
            writer.close()

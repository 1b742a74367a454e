"""The task list and the event log at every size an operator uses (60×20, 80×24, 200×50), on the
fixed ledger plus a completed task, three hours on (ages in hours), with an alert open. Review
the PNGs before `pytest --snapshot-update`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.console_app import T0, build_ledger, make_app, settle, wait_for
from store import Ledger, ManualClock
from tests.support.asks import ask

SIZES = [(60, 20), (80, 24), (200, 50)]
LATER = T0 + 3 * 3600 + 61  # 3h01m after the first task: AGE reads "3h01m ago"


def build_sizes_ledger(path: Path) -> Path:
    build_ledger(path)
    clock = ManualClock(T0 + 900)
    with Ledger.open(path, clock=clock) as ledger:
        ledger.create_task("done-003", title="Weekly digest (finished)")
        ledger.add_node("done-003", "digest", kind="llm_call", est_wall_s=600)
        c = ledger.claim("done-003", worker="erin", lease_s=600)
        clock.advance(120)
        ledger.commit(c, output={"ok": True}, tokens=500)
    return path


@pytest.fixture
def sizes_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    build_sizes_ledger(tmp_path / "ledger.db")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path


async def _tasks(pilot) -> None:
    await settle(pilot)
    # one alert raised while the console is open (the header counts it)
    with Ledger.open("ledger.db", clock=ManualClock(LATER)) as ledger:
        c = ledger.claim("report-001", worker="zed", key="figures", lease_s=600)
        ask(ledger, c, kind="confirm", question="Publish the figures?",
                             options=[{"id": "yes", "label": "Yes", "consequence": "published"}])
    app = pilot.app
    await wait_for(pilot, lambda: app.alerts.open_count == 1, what="the alert")

    def analysed() -> bool:  # the figures after the handoff: its handoff_waiting signal is on the row
        row = app.tasks_model.rows[app.tasks_model.index["report-001"]]
        return (row.view.handoffs_open == 2 and any(s.get("node") == "figures" for s in row.signals)
                and not app.follower.analysis_dirty and not app.analysis.busy)

    await wait_for(pilot, analysed, timeout=30, what="the analysis after the handoff")
    await settle(pilot)
    pilot.app.clear_notifications()
    await pilot.pause()


async def _events(pilot) -> None:
    await settle(pilot)
    await pilot.press("e")
    await settle(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", ["tasks", "events"])
def test_list_at_size(snap_compare, sizes_dir, screen, size):
    run = {"tasks": _tasks, "events": _events}[screen]
    app = make_app(clock=ManualClock(LATER))
    # the spend rate is a minute's average on the monotonic clock: a second of the test's own time
    # (a slow machine, the analysis worker starting) must not put a rate on the summary line
    app.hub.tasks.monotonic = lambda: 0.0
    assert snap_compare(app, terminal_size=size, run_before=run)

"""The runs screen (g) and the recovery wizard: the five checks one at a time, the decision and
only the choices it allows; recording writes a new record and leaves the run byte-for-byte as
it was; read-only writes nothing."""

from __future__ import annotations

from textual import events

import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button, Input, Static

from console.screens import NodeDetailScreen, RunsScreen
from console.screens.recovery import RecoveryWizardScreen
from store.recovery import verify_record

from tests.support.console_app import settle, workers_done
from tests.support.console_app import make_app as _make_app
from tests.support.console_app import wait_for as _wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
import runfactory as rf  # noqa: E402


def make_app(*a: Any, **kw: Any):
    kw.setdefault("analysis", False)
    return _make_app(*a, **kw)


async def wait_for(pilot, cond, timeout: float = 30.0, what: str = "") -> None:
    await _wait_for(pilot, cond, timeout=timeout, what=what)


@pytest.fixture
def project(ledger_path: Path) -> Path:
    """The ledger's directory is the project: runs/ under it, recovery-records/ beside."""
    root = ledger_path.parent
    rf.make_run(root / "runs", "resume-01", "exported")
    rf.make_run(root / "runs", "resume-02", "partial")
    return root


async def open_wizard(pilot, run: str) -> RecoveryWizardScreen:
    app = pilot.app
    await settle(pilot)
    await pilot.press("g")
    await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.loaded, what="runs")
    names = [r.name for r in app.screen.source.items]
    for _ in range(names.index(run)):
        await pilot.press("j")
    await pilot.press("enter")
    scr = app.screen
    assert isinstance(scr, RecoveryWizardScreen) and scr.run == run
    await wait_for(pilot, lambda: scr.mode != "loading", what="the checks")
    await pilot.pause()
    return scr


def body(scr: RecoveryWizardScreen) -> str:
    return str(scr.query_one("#body", Static).render())


async def test_record_the_verification_leaves_the_run_unchanged(project, ledger_path, apply_attempts):
    before = rf.snapshot(project / "runs")
    app = make_app(ledger_path, runs=str(project / "runs"), operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_wizard(pilot, "resume-01")
        seen = []
        for i, name in enumerate(["layout", "context", "state", "artifact", "stable"]):
            assert scr.mode == "check" and scr.step == i
            assert f"check {i + 1} of 5: {name}" in body(scr) and "✔ passed" in body(scr)
            seen.append(body(scr))
            await pilot.press("space" if i % 2 else "enter")
        assert "manifest" in seen[3]  # each check with its evidence
        assert scr.mode == "decision" and "decision: reuse_existing_artifact" in body(scr)
        assert scr.focused is scr.query_one("#cancel", Button)  # the default is to leave it
        await pilot.press("left")
        assert scr.mode == "check" and scr.step == 4
        await pilot.press("enter")
        assert scr.query_one("#record", Button).display
        assert scr.query_one("#open-node", Button).display  # linked to report-001 / export
        await pilot.click("#record")
        assert scr.mode == "record" and scr.focused is scr.query_one("#record-name", Input)
        assert scr.query_one("#apply", Button).disabled
        await pilot.press(*"review-01", "enter")  # enter in the name never writes
        await workers_done(pilot, scr)
        assert apply_attempts(scr) == 0 and not (project / "recovery-records" / "review-01").exists()
        assert "HANDOFF.md that will be written" in body(scr) and "# Recovery handoff review-01" in body(scr)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: scr.mode == "written", what="the record")
        assert apply_attempts(scr) == 1
        rec_dir = project / "recovery-records" / "review-01"
        assert sorted(p.name for p in rec_dir.iterdir()) == ["HANDOFF.md", "recovery.json"]
        assert verify_record(project / "recovery-records", "review-01", project / "runs")["result"] == "pass"
        assert "ana@console" in (rec_dir / "recovery.json").read_text()
        assert rf.snapshot(project / "runs") == before  # the original run is untouched
        # a second record under the same name is refused and creates nothing
        scr.mode = "record"
        scr._refresh()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "already exists" in str(scr.query_one("#dialog-error").render()))
        await pilot.press("escape")
        assert isinstance(app.screen, RunsScreen)


async def test_needs_human_offers_no_record(project, ledger_path, apply_attempts):
    app = make_app(ledger_path, runs=str(project / "runs"))
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_wizard(pilot, "resume-02")
        marks = []
        while scr.mode == "check":
            marks.append(body(scr).split("\n")[0])
            await pilot.press("enter")
        assert "✖ failed" in marks[3] and "· not run" in marks[4]
        assert "decision: needs_human" in body(scr)
        assert not scr.query_one("#record", Button).display
        await pilot.press("ctrl+s")  # nothing to confirm here
        await workers_done(pilot, scr)
        assert apply_attempts(scr) == 0 and not (project / "recovery-records").exists()
        await pilot.click("#open-node")
        assert isinstance(app.screen, NodeDetailScreen) and app.screen.key == "export"


async def test_read_only_shows_the_checks_and_writes_nothing(project, ledger_path, apply_attempts):
    before = rf.snapshot(project / "runs")
    app = make_app(ledger_path, runs=str(project / "runs"), read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_wizard(pilot, "resume-01")
        for _ in range(5):
            await pilot.press("enter")
        assert scr.mode == "decision" and "read-only" in body(scr)
        assert scr.query_one("#record", Button).disabled
        scr._start_record()
        await pilot.press("ctrl+s")
        await workers_done(pilot, scr)
        assert scr.mode == "decision" and apply_attempts(scr) == 0
        assert "read-only (opened with --read-only): actions are disabled" in [n.message for n in app._notifications]
    assert rf.snapshot(project / "runs") == before
    assert not (project / "recovery-records").exists()


async def test_needs_human_can_raise_a_handoff_on_the_linked_node(project, ledger_path):
    import json

    from console.dialogs import EscalateDialog
    from store import Ledger

    run = rf.make_run(project / "runs", "resume-03", "partial")
    state = json.loads((run / "state.json").read_text())
    state["node_key"] = "figures"  # a pending node of report-001 in the fixed ledger
    rf.write_json(run / "state.json", state)
    before = rf.snapshot(project / "runs")
    app = make_app(ledger_path, runs=str(project / "runs"), operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_wizard(pilot, "resume-03")
        while scr.mode == "check":
            await pilot.press("enter")
        assert "decision: needs_human" in body(scr)
        assert scr.query_one("#escalate", Button).display
        await pilot.click("#escalate")
        dlg = app.screen
        assert isinstance(dlg, EscalateDialog) and dlg.node == "figures"
        assert dlg.query_one("#reason", Input).value == "recovery of run resume-03: needs_human"
        await wait_for(pilot, lambda: dlg.plan is not None, what="the plan")
        assert dlg.plan.changes == {"figures": ("pending", "blocked")}
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: dlg.result is not None or app.screen is not dlg, what="the apply")
    led = Ledger.open(str(ledger_path), create=False)
    try:
        assert led.node("report-001", "figures").status == "blocked"
        (h,) = [h for h in led.handoffs() if h.node == "figures"]
        assert h.kind == "exception" and h.opened_by == "ana@console" and "resume-03" in h.question
        assert h.context["run"] == "resume-03" and h.context["failed_check"] == "artifact"
    finally:
        led.close()
    assert rf.snapshot(project / "runs") == before


async def test_invalid_run_shows_why(project, ledger_path):
    app = make_app(ledger_path, runs=str(project / "runs"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        scr = RecoveryWizardScreen("../etc")
        app.push_screen(scr)
        await wait_for(pilot, lambda: scr.mode == "error")
        assert "cannot check this run" in body(scr)


async def test_a_name_typed_right_after_enter_on_record_is_kept(project, ledger_path):
    """enter on "Record the verification…" and the name in the same burst: the name is kept whole."""
    app = make_app(ledger_path, runs=str(project / "runs"), operator="ana@console")
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await open_wizard(pilot, "resume-01")
        for _ in range(5):
            await pilot.press("enter")
        assert scr.mode == "decision"
        scr.query_one("#record", Button).focus()
        await pilot.pause()
        for key, char in [("enter", "\r"), *((c if c.isalnum() else "minus", c) for c in "review-02")]:
            app.post_message(events.Key(key, char))  # one burst, as a terminal sends it: no pause between keys
        await wait_for(pilot, lambda: scr.query_one("#record-name", Input).value == "review-02", what="the name")
        assert scr.mode == "record" and scr.focused is scr.query_one("#record-name", Input)

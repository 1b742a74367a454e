"""A fixed ledger for the node detail's explanations: a looping node (the same observation again and
again: ``repeating`` and ``no_new_info``), a node waiting on CI (a declared wait), a failure with
``retryable=False`` on a node that declares itself retryable, and a history of the kind ``fix`` so
the estimate has samples to speak of. Built with a ManualClock; the console is opened at ``NOW``."""

from __future__ import annotations

from pathlib import Path

from store import Budget, Ledger, ManualClock

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
LOOP = "pytest tests/test_export.py\nFAILED test_export.py::test_old_format - KeyError: 'legacy'\n1 failed, 41 passed"
LOOPS = 38
HOSTILE_OBS = "ok \x1b[2J [@click=app.quit]x[/] \u202egnp.exe"


def build_explain_ledger(path: Path) -> float:
    """Returns the time at which to look (the console's clock)."""
    clock = ManualClock(T0)
    ledger = Ledger.open(path, clock=clock)
    try:
        ledger.create_task("maint-7", title="Fix the export paths", budget=Budget(tokens=400_000, wall_s=6 * 3600))
        for i in range(3):
            ledger.add_node("maint-7", f"fix-done-{i}", kind="fix", est_wall_s=300)
        ledger.add_node("maint-7", "fix-old_exports", kind="fix", est_wall_s=300,
                        deps=[f"fix-done-{i}" for i in range(3)])
        ledger.add_node("maint-7", "ci-wait", kind="ci", est_wall_s=600, deps=[f"fix-done-{i}" for i in range(3)])
        ledger.add_node("maint-7", "lint", kind="tool", est_wall_s=60, deps=[f"fix-done-{i}" for i in range(3)])
        ledger.add_node("maint-7", "release", kind="tool", est_wall_s=120, deps=["fix-old_exports", "ci-wait", "lint"])
        for i, took in enumerate((240.0, 300.0, 420.0)):
            c = ledger.claim("maint-7", worker="ann", lease_s=900, key=f"fix-done-{i}")
            clock.advance(took)
            ledger.commit(c, output={"fixed": i})
        c_loop = ledger.claim("maint-7", worker="bot-1", lease_s=3600, key="fix-old_exports")
        c_ci = ledger.claim("maint-7", worker="bot-2", lease_s=3600, key="ci-wait")
        c_lint = ledger.claim("maint-7", worker="bot-3", lease_s=600, key="lint")
        clock.advance(20)
        ledger.heartbeat(c_loop, units_done=1, units_total=4, observation="reading the export module\nfound 3 call sites")
        clock.advance(20)
        ledger.heartbeat(c_ci, observation="pipeline 4411 queued", waiting_on="ci", wait_s=1800)
        ledger.fail(c_lint, error="ruff config rejects the new rule set: E999 unknown", failure_class="spec",
                    retryable=False)
        clock.advance(15)
        ledger.heartbeat(c_loop, units_done=1, units_total=4, observation=HOSTILE_OBS)
        for _ in range(LOOPS):
            clock.advance(15)
            ledger.heartbeat(c_loop, units_done=1, units_total=4, observation=LOOP)
        ledger.heartbeat(c_ci, observation="pipeline 4411 running", waiting_on="ci", wait_s=1800)
        return clock() + 5
    finally:
        ledger.close()

"""The demo alarms only where docs/demo.md says: its agents run in-process on a
ManualClock to the end (no real time, no race between processes), every live task's signals are
read each simulated second and fed to the console's own alert logic (``AlertWatch``), and the
alerts that come out are compared with docs/demo.md's table "The alarms you should see"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from console.alerts import AlertWatch
from console.demo import LIVE_TASKS, Simulation, create_demo, ledger_is_quiet, maint_simulation
from console.explain import suggestion
from store import Ledger, ManualClock
from store.estimation.estimates import DurationHistory
from store.reading.cli_json import signal_json
from store.reading.signals import signals_for_task

DOC = Path(__file__).resolve().parents[2] / "docs" / "demo.md"
T0 = 1_800_000_000.0
STALLS = {"no_new_info", "repeating", "heartbeat_stale", "orphaned", "no_progress"}


def expected_alarms(loop_module: str) -> dict[tuple[str, str], set[str]]:
    """(task, node) → alarm kinds, from the table under docs/demo.md's ``expected-alarms`` marker."""
    text = DOC.read_text()
    at = text.index("<!-- expected-alarms")
    out: dict[tuple[str, str], set[str]] = {}
    for line in text[at:].splitlines()[1:]:
        if not line.startswith("|"):
            if out:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("task", "---"):
            continue
        node = cells[1].strip("`").replace("<the looping module>", loop_module)
        out[(cells[0], node)] = {k.strip() for k in cells[2].split(",")}
    assert out, "docs/demo.md lost its expected-alarms table"
    return out


def run_demo_watching(root: Path, seed: int) -> tuple[list, dict[tuple[str, str], set[str]], list]:
    """The demo to its end; returns (alerts, every stall kind seen per node, rewinds suggested)."""
    create_demo(root, seed=seed, clock=ManualClock(T0))
    clock = ManualClock(T0)
    watch = AlertWatch()
    alerts = []
    stalls: dict[tuple[str, str], set[str]] = {}
    rewinds = []
    history = DurationHistory()
    with Ledger.open(root / "ledger.db", clock=clock) as ledger:
        watch.loaded(t.task_id for t in ledger.tasks())
        for tid in LIVE_TASKS:  # the console opened at the start: nothing alarms yet
            sigs = [signal_json(s) for s in signals_for_task(ledger, ledger.task(tid), history=history)]
            assert watch.signals(tid, sigs, clock.now) == []
        sim = Simulation(ledger, clock, seed=seed)
        last = 0
        while clock.now < T0 + 600 and not ledger_is_quiet(ledger, LIVE_TASKS):
            sim.run(until=clock.now + 1.0)
            events = ledger.events(last, limit=10_000)
            if events:
                last = events[-1].id
            alerts += watch.events(events, clock.now)
            for h in ledger.handoffs():  # the operator says yes (the demo's PRs then open)
                ledger.apply(ledger.plan_resolve(h.id, option="yes", answer="go"), operator="tester")
            for tid in LIVE_TASKS:
                # as the console's analysis hands them over (console/analysis.py): signal_json dicts
                sigs = [signal_json(s) for s in signals_for_task(ledger, ledger.task(tid), history=history)]
                alerts += watch.signals(tid, sigs, clock.now)
                for s in sigs:
                    if s["node"] and s["kind"] in STALLS:
                        stalls.setdefault((tid, s["node"]), set()).add(s["kind"])
                    sug = suggestion(s)
                    if s["node"] and sug is not None and sug.action == "rewind":
                        rewinds.append((tid, s["node"], s["kind"]))
        assert ledger_is_quiet(ledger, LIVE_TASKS)
    return alerts, stalls, rewinds


@pytest.mark.parametrize("seed", [7, 42])  # two worlds: old_exports loops in one, xml_feed in the other
def test_the_demo_alarms_exactly_where_its_doc_says(tmp_path, seed):
    loop = maint_simulation(seed, faults=True)["loop_module"]
    want = expected_alarms(loop)
    alerts, stalls, rewinds = run_demo_watching(tmp_path / "demo", seed)
    signal_alerts = {(a.task, a.node or "") for a in alerts if a.kind == "signal"}
    assert signal_alerts == set(want), sorted(signal_alerts)
    for key, kinds in want.items():  # each alarmed for the reasons the doc gives, and no other stall
        assert stalls[key] == kinds, (key, stalls[key])
    healthy = {k: v for k, v in stalls.items() if k not in want}
    assert healthy == {}, healthy  # no healthy fixer (nor any other node) shows a stall signal at all
    assert {(t, n) for t, n, _ in rewinds} <= set(want)  # a rewind is only ever suggested to those
    handoffs = [(a.task, a.node) for a in alerts if a.kind == "handoff"]
    assert handoffs == [("maint-billing", "approve-prs")]
    assert len(alerts) == len(want) + 1  # "⚑ 3 new alerts", not 16
    assert re.fullmatch(r"fix-\w+", f"fix-{loop}")

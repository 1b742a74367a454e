"""The demo's simulated agents, driven in-process on a ManualClock (no real time passes).

The demo ledger is built once per module (a few seconds of CPU); each test works on its own copy.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.demo import (
    LIVE_TASKS,
    LOOP_CAP,
    Simulation,
    create_demo,
    ledger_is_quiet,
    maint_simulation,
)
from store import Ledger, ManualClock
from store.errors import Refused

DEMO = Path(__file__).resolve().parents[2] / "console" / "demo"
AGENT_MODULES = ("agent", "layout", "simulation", "world", "worker")

T0 = 1_800_000_000.0
SEED = 7
SIM = maint_simulation(SEED, faults=True)
LOOP = SIM["loop_module"]
FLAKY = SIM["flaky_module"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, float]:
    """A demo created at T0 with its finished history; the live tasks untouched."""
    root = tmp_path_factory.mktemp("demo-base") / "demo"
    create_demo(root, seed=SEED, clock=ManualClock(T0))
    return root, T0


@pytest.fixture
def demo(built, tmp_path):
    """A private copy of the built demo: (ledger, clock, simulation, root)."""
    src, t0 = built
    root = tmp_path / "demo"
    shutil.copytree(src, root)
    clock = ManualClock(t0)
    ledger = Ledger.open(root / "ledger.db", clock=clock)
    sim = Simulation(ledger, clock, seed=SEED)
    yield ledger, clock, sim, root
    ledger.close()


def resolve_open(ledger: Ledger, option: str = "yes", answer: str = "go ahead") -> list[str]:
    done = []
    for h in ledger.handoffs():
        ledger.apply(ledger.plan_resolve(h.id, option=option, answer=answer), operator="tester")
        done.append(h.id)
    return done


def run_to_end(ledger: Ledger, sim: Simulation, clock: ManualClock, *, limit_s: float = 1200.0) -> None:
    """Run the agents; answer the confirm handoff 'yes' when it opens; stop when every live task ended."""
    end = clock.now + limit_s
    while clock.now < end and not ledger_is_quiet(ledger, LIVE_TASKS):
        sim.run(until=clock.now + 10.0, stop=lambda: ledger_is_quiet(ledger, LIVE_TASKS))
        resolve_open(ledger)
    assert ledger_is_quiet(ledger, LIVE_TASKS), {t.task_id: (t.status, dict(t.counts)) for t in ledger.tasks()}


def events(ledger: Ledger, task: str, node: str | None = None, kind: str | None = None):
    return [e for e in ledger.events(0, task_id=task, limit=100_000)
            if (node is None or e.node == node) and (kind is None or e.kind == kind)]


# ---------------------------------------------------------------------- the layout
def test_history_is_finished_and_gives_estimates_samples(demo):
    ledger, clock, sim, root = demo
    prev = ledger.graph("maint-prev")
    assert prev.task.status == "completed"
    fixes = [n for n in prev.nodes if n.kind == "fix"]
    assert len(fixes) == 20 and all(n.status == "succeeded" and n.wall_used_s > 0 for n in fixes)
    assert all(n.finished_at < T0 for n in prev.nodes)  # history is in the past
    for t in ("report-prev", "triage-prev"):
        assert ledger.task(t).status == "completed"
    for t in LIVE_TASKS:
        assert ledger.task(t).status == "active" and ledger.task(t).tokens_used == 0


def test_run_directories_decide_as_advertised(demo):
    from store.recovery import check

    ledger, clock, sim, root = demo
    decisions = {}
    for run in sorted((root / "runs").iterdir()):
        assert json.loads((run / "SIMULATION.json").read_text())["simulated"] is True
        decisions[run.name] = check(str(root / "runs"), run.name).decision
    assert decisions == {"review-export-07": "reuse_existing_artifact", "review-export-08": "needs_human",
                         "review-export-09": "needs_human"}


def test_a_directory_that_holds_a_demo_is_refused(built):
    src, t0 = built
    with pytest.raises(Refused, match="already holds a demo"):
        create_demo(src, seed=SEED, clock=ManualClock(t0))


# ---------------------------------------------------------------------- the scenarios, to the end
def test_every_live_task_runs_to_its_end(demo):
    ledger, clock, sim, root = demo
    sim.run(until=clock.now + 30.0)
    # early on: the human question is already open, the fixer loops, the verifier has crashed
    (h,) = ledger.handoffs()
    assert (h.task_id, h.node, h.kind, h.question) == ("maint-billing", "approve-prs", "confirm", "Open 20 pull requests?")
    assert [o["id"] for o in h.options] == ["yes", "no"] and h.recommendation == "yes"
    assert set(h.context) >= {"done", "stuck", "why"}
    assert [name for name, _ in sim.crashes] == ["w4"]

    run_to_end(ledger, sim, clock)
    for t in LIVE_TASKS:
        assert ledger.task(t).status == "completed", t

    # the looping fixer: the same observation again and again, no new information
    obs = ledger.observations("maint-billing", f"fix-{LOOP}", limit=500)
    assert len(obs) == LOOP_CAP
    assert all(o.new_units == 0 for o in obs[1:]) and len({o.digest for o in obs}) == 1
    assert ledger.node("maint-billing", f"fix-{LOOP}").output["patched"] is False

    # the flaky test failed once (transient, retryable) and passed after its back-off
    failed = events(ledger, "maint-billing", f"test-{FLAKY}", "node.failed")
    assert len(failed) == 1 and failed[0].payload["failure_class"] == "transient" and failed[0].payload["retry"]
    claims = events(ledger, "maint-billing", f"test-{FLAKY}", "node.claimed")
    assert len(claims) == 2 and claims[1].at >= failed[0].payload["next_retry_at"]
    assert ledger.node("maint-billing", f"test-{FLAKY}").status == "succeeded"

    # PRs: one confirmed effect per tested patch, none for the looping module; the report lists them
    effects = ledger.effects("maint-billing")
    assert len(effects) == 19 and {e.status for e in effects} == {"confirmed"}
    assert all(e.effect_key.endswith(":create") and LOOP not in e.effect_key for e in effects)
    view, data = ledger.latest_artifact("maint-billing")
    assert view.name == "maintenance-report.md" and f"{LOOP}: no PR" in data.decode()

    # the report: the crashed verifier's lease expired, another worker reclaimed it, one repair loop
    claims = events(ledger, "report-q3", "verify-1", "node.claimed")
    assert [c.actor for c in claims][0] == "w4" and claims[1].payload["reclaimed"] is True
    assert claims[1].payload["previous_owner"] == "w4" and claims[1].actor != "w4"
    assert ledger.task("report-q3").repair_count == 1
    keys = [n.key for n in ledger.graph("report-q3").nodes]
    assert keys == ["draft", "verify-1", "repair-1", "verify-2", "finalize"]
    view, data = ledger.latest_artifact("report-q3")
    fin = ledger.node("report-q3", "finalize")
    assert fin.always_admit and fin.output["sha256"] == view.sha256 and "## Risks" in data.decode()

    # the triage budget crossed its soft gate (70 %) and the agent economised; it stayed under the cap
    tri = ledger.task("triage-inbox")
    assert 0.7 * tri.token_cap <= tri.tokens_used < tri.token_cap
    notes = [e for e in events(ledger, "triage-inbox", kind="node.note") if "soft gate" in e.summary]
    assert notes


def test_the_same_seed_gives_the_same_run(built, tmp_path):
    src, t0 = built

    def journal(root: Path, advance_s: float) -> list[tuple]:
        clock = ManualClock(t0)
        with Ledger.open(root / "ledger.db", clock=clock) as ledger:
            if advance_s:
                Simulation(ledger, clock, seed=SEED).run(until=t0 + advance_s)
            return [(e.at, e.task_id, e.node, e.kind, e.actor, e.summary) for e in ledger.events(0, limit=100_000)]

    # the history: built again from scratch, event for event the same
    create_demo(tmp_path / "fresh", seed=SEED, clock=ManualClock(t0))
    assert journal(tmp_path / "fresh", 0) == journal(src, 0)
    # the live agents: two runs from the same start
    for name in ("a", "b"):
        shutil.copytree(src, tmp_path / name)
    a, b = journal(tmp_path / "a", 25.0), journal(tmp_path / "b", 25.0)
    assert a == b and len(a) > len(journal(src, 0)) + 100
    assert any(k == "handoff.opened" for _, _, _, k, _, _ in a)
    # another seed is another world
    assert maint_simulation(SEED + 1, faults=True) != SIM


# ---------------------------------------------------------------------- the operator acts, agents cope
def test_rewinding_the_looping_fixer_makes_it_do_better(demo):
    ledger, clock, sim, root = demo
    key = f"fix-{LOOP}"
    def looping() -> bool:
        nodes = {n.key for n in ledger.graph("maint-billing").nodes}
        return key in nodes and len(ledger.observations("maint-billing", key)) >= 6

    sim.run(stop=looping)
    assert ledger.node("maint-billing", key).status == "running"
    plan = ledger.plan_rewind("maint-billing", key, reason="stop re-running the same test; fix the encoder")
    ledger.apply(plan, operator="tester")
    run_to_end(ledger, sim, clock)
    node = ledger.node("maint-billing", key)
    assert node.output["patched"] is True and node.output["addresses"] == "stop re-running the same test; fix the encoder"
    assert node.output["approach"] == "v2"
    assert any(e.kind == "node.note" and "operator rejected" in e.summary for e in events(ledger, "maint-billing", key))
    assert len(ledger.effects("maint-billing")) == 20  # now every module gets its PR


def test_narrowing_to_core_abandons_the_rest_and_the_task_still_ends(demo):
    ledger, clock, sim, root = demo
    sim.run(stop=lambda: any(n.key.startswith("fix-") for n in ledger.graph("maint-billing").nodes))
    ledger.apply(ledger.plan_narrow("maint-billing", reason="core only this week", set={"scope": "core"}),
                 operator="tester")
    run_to_end(ledger, sim, clock)
    g = ledger.graph("maint-billing")
    core = {m["name"] for m in SIM["modules"] if m["core"]}
    for n in g.nodes:
        if n.kind in ("fix", "test"):
            mod = n.key.split("-", 1)[1]
            assert n.status == ("succeeded" if mod in core else "abandoned"), n.key
    assert g.task.status == "completed"
    assert {e.effect_key.split(":")[2][4:] for e in ledger.effects("maint-billing")} == core


def test_declining_the_handoff_opens_no_pull_request(demo):
    ledger, clock, sim, root = demo
    sim.run(stop=lambda: bool(ledger.handoffs()))
    assert resolve_open(ledger, option="no", answer="not this week")
    run_to_end(ledger, sim, clock)
    assert ledger.effects("maint-billing") == []
    assert ledger.node("maint-billing", "open-prs").output["declined"] is True


def test_park_holds_the_work_and_resume_lets_it_finish(demo):
    ledger, clock, sim, root = demo
    sim.run(until=clock.now + 12.0)
    ledger.apply(ledger.plan_park("triage-inbox", reason="waiting for the inbox owner", now=True), operator="tester")
    before = ledger.task("triage-inbox")
    sim.run(until=clock.now + 60.0)
    after = ledger.task("triage-inbox")
    assert after.status == "parked" and after.done == before.done  # nothing claimed while parked
    ledger.apply(ledger.plan_resume("triage-inbox"), operator="tester")
    run_to_end(ledger, sim, clock)
    assert ledger.task("triage-inbox").status == "completed"


def test_abort_ends_the_task_and_the_agents_carry_on_elsewhere(demo):
    ledger, clock, sim, root = demo
    sim.run(until=clock.now + 10.0)
    ledger.apply(ledger.plan_abort("report-q3", reason="the review was cancelled"), operator="tester")
    run_to_end(ledger, sim, clock)
    assert ledger.task("report-q3").status == "aborted"
    assert ledger.task("maint-billing").status == "completed"


def test_rewinding_the_pull_requests_does_not_repeat_a_confirmed_effect(demo):
    ledger, clock, sim, root = demo
    run_to_end(ledger, sim, clock)
    before = ledger.effects("maint-billing")
    ledger.apply(ledger.plan_rewind("maint-billing", "open-prs", reason="re-check the PR list"), operator="tester")
    run_to_end(ledger, sim, clock)
    after = ledger.effects("maint-billing")
    assert [(e.effect_key, e.external_id, e.confirmed_at) for e in after] == \
           [(e.effect_key, e.external_id, e.confirmed_at) for e in before]
    assert len(events(ledger, "maint-billing", "open-prs", "effect.confirmed")) == len(before)
    obs = [o.text for o in ledger.observations("maint-billing", "open-prs", limit=200)]
    assert any("already open" in t and "not repeated" in t for t in obs)


# ---------------------------------------------------------------------- agents, not console code
@pytest.mark.parametrize("module", AGENT_MODULES)
def test_the_agents_import_the_store_and_their_own_package_only(module):
    """An agent process uses the store's public API: no Textual, no Rich, no console module
    outside console/demo (imports inside functions included)."""
    tree = ast.parse((DEMO / f"{module}.py").read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append("." * node.level + (node.module or ""))
    assert found, module
    for name in found:
        top = name.split(".")[0]
        ok = (name.startswith(".") and not name.startswith("..")) or top == "store" or top in sys.stdlib_module_names
        assert ok and top not in ("textual", "rich", "console", "peewee"), (module, name)


def test_a_worker_process_loads_no_console_ui():
    code = ("import sys, console.demo.worker; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')"
            " or m in ('console.app', 'console.dialogs', 'console.screens')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(DEMO.parents[1]))
    assert out.stdout.strip() == "[]", out.stdout


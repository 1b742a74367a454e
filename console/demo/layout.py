"""The demo's layout on disk: the ledger (a finished history, so the estimates have samples, and
three live tasks with faults) and three interrupted export runs with their project inputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from store import Budget, Ledger, ManualClock, NodeSpec, Refused, system_clock
from store.clock import Clock, iso
from store.jsontypes import JsonObject
from store.runs import write_atomic, write_json

from .mind import create_mind_tasks
from .simulation import Simulation
from .world import HISTORY_AGO_S, HISTORY_TASKS, LIVE_TASKS, REPO, WORKFLOW_VERSIONS, maint_simulation, sha256_hex


def create_tasks(ledger: Ledger, seed: int, *, history: bool) -> list[str]:
    """Create the demo's three tasks (live, with faults) or their finished-history twins."""
    if history:
        ids = HISTORY_TASKS
        maint_title = f"Deprecation sweep: {REPO} (last week)"
        sim = maint_simulation(seed + 1000, faults=False)
        inputs: JsonObject = {"repo": REPO, "pr_policy": "preapproved", "simulation": sim}
    else:
        ids = LIVE_TASKS
        maint_title = f"Deprecation sweep: {REPO}, 20 modules"
        sim = maint_simulation(seed, faults=True)
        inputs = {"repo": REPO, "pr_policy": "ask", "simulation": sim}
    maint, report, triage = ids
    ledger.create_task(maint, title=maint_title, workflow="code-maintenance",
                       workflow_version=WORKFLOW_VERSIONS["code-maintenance"],
                       inputs=inputs, preconditions={"scope": "all_modules"},
                       constraints=["Do not change public function signatures", "One pull request per module",
                                    "Never push to main"],
                       budget=Budget(tokens=400_000, wall_s=2 * 3600), exist_ok=True)
    ledger.add_node(maint, "scan", kind="scan", title=f"scan {REPO}", est_wall_s=2.0)

    rsim: JsonObject = {"seed": seed}
    if not history:
        rsim.update(crash_node="verify-1", missing_section="Risks")
    ledger.create_task(report, title="Q3 reliability report" if not history else "Q2 reliability report",
                       workflow="report", workflow_version=WORKFLOW_VERSIONS["report"], inputs={"title": "Q3 reliability report" if not history else "Q2 reliability report",
                               "audience": "platform review", "simulation": rsim},
                       constraints=["Every figure cites its dashboard"], budget=Budget(tokens=120_000, wall_s=3600),
                       max_repairs=2, exist_ok=True)
    ledger.add_node(report, "draft", kind="draft", title="draft the report", est_wall_s=6.0)
    ledger.add_node(report, "verify-1", kind="verify", deps=["draft"], title="verify the draft", est_wall_s=4.0)

    items = 12
    per = 1500 if not history else 1000
    ledger.create_task(triage, title="Triage the bug inbox" + (" (yesterday)" if history else ""),
                       workflow="triage", workflow_version=WORKFLOW_VERSIONS["triage"],
                       inputs={"inbox": "billing-bugs", "simulation": {"seed": seed, "tokens_per_beat": per}},
                       budget=Budget(tokens=60_000, wall_s=1800), exist_ok=True)
    ledger.add_nodes(triage, [NodeSpec(f"triage-{4100 + i}", kind="triage", title=f"triage issue #{4100 + i}",
                                       est_wall_s=3.0) for i in range(items)])
    return list(ids)


PROJECT_INPUTS = {
    "notes/source.md": b"# Source\n\nThe facts the review is made from.\n",
    "agent/exporter.py": b"def export(): ...\n",
}
RUN_CASES = (("review-export-07", "exported"), ("review-export-08", "partial"), ("review-export-09", "empty"))


def make_runs(project: Path, at: float) -> list[Path]:
    """Three interrupted export runs under ``project/runs`` (the project holds their inputs).

    ``exported``: the artifact and its manifest were written, the receipt was not (recoverable);
    ``partial``: the artifact without its manifest; ``empty``: nothing exported (both need a human).
    """
    for rel, data in PROJECT_INPUTS.items():
        if not (project / rel).exists():
            write_atomic(project / rel, data)
    out = []
    for name, case in RUN_CASES:
        run = project / "runs" / name
        run.mkdir(parents=True)
        write_json(run / "context.json", {"inputs": {rel: sha256_hex(d) for rel, d in PROJECT_INPUTS.items()},
                                           "workflow": "review-export", "version": 3})
        write_json(run / "receipts" / "01-load.json", {"step": "load", "ok": True})
        if case in ("exported", "partial"):
            body = f"# Review ({name})\n\nQ: why did the export stop?\nA: the process was killed.\n".encode()
            write_atomic(run / "artifact" / "review.md", body)
            if case == "exported":
                write_json(run / "artifact" / "manifest.json",
                            {"files": {"review.md": {"sha256": sha256_hex(body), "bytes": len(body)}}})
        write_json(run / "state.json", {
            "run_id": name, "task_id": "report-prev", "node_key": "finalize", "status": "interrupted",
            "steps": [{"name": "load", "status": "done", "receipt": "receipts/01-load.json"},
                      {"name": "export", "status": "running"}, {"name": "verify", "status": "pending"}],
            "updated_at": iso(at),
        })
        write_json(run / "SIMULATION.json", {"simulated": True, "case": case, "by": "warden demo"})
        out.append(run)
    return out


@dataclass(frozen=True)
class DemoPaths:
    root: Path
    ledger: Path
    runs: Path

    @property
    def reopen(self) -> str:
        return f"warden console --ledger {self.ledger} --runs {self.runs}"


def ledger_is_quiet(ledger: Ledger, task_ids: Iterable[str]) -> bool:
    """Every one of these tasks has ended (completed, failed or aborted)."""
    return all(ledger.task(t).status in ("completed", "failed", "aborted") for t in task_ids)


def create_demo(directory: str | os.PathLike[str], *, seed: int = 7, clock: Clock | None = None,
                log: Callable[[str], None] | None = None) -> DemoPaths:
    """Lay out a fresh demo: ``ledger.db`` (finished history + the live tasks), ``runs/``, inputs.

    The history is simulated on a ManualClock ending before ``clock()`` (so estimates have samples);
    the live tasks are created at ``clock()`` and left for the agents.
    """
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)
    paths = DemoPaths(root, root / "ledger.db", root / "runs")
    if paths.ledger.exists() or paths.runs.exists():
        raise Refused(f"{root} already holds a demo; reopen it with `{paths.reopen}` or choose an empty --dir")
    clock = clock or system_clock
    now = float(clock())
    make_runs(root, now)
    hclock = ManualClock(now - HISTORY_AGO_S)
    with Ledger.open(paths.ledger, clock=hclock) as led:
        ids = create_tasks(led, seed, history=True)
        sim = Simulation(led, hclock, seed=seed, tick_s=10.0, log=log)
        sim.run(until=now - 60.0, stop=lambda: ledger_is_quiet(led, ids))
    with Ledger.open(paths.ledger, clock=clock) as led:
        create_tasks(led, seed, history=False)
        create_mind_tasks(led, seed)  # requirements, a replan, drift, a memory (console/demo/mind.py)
    return paths


def build_demo_ledger(directory: str | os.PathLike[str], *, seed: int = 7, clock: ManualClock | None = None,
                      advance_s: float = 40.0) -> tuple[DemoPaths, Simulation]:
    """A deterministic demo: created on a ManualClock, the live agents run ``advance_s`` simulated
    seconds in-process. Same seed and start → the same ledger (for tests and screenshots)."""
    clock = clock or ManualClock()
    paths = create_demo(directory, seed=seed, clock=clock)
    ledger = Ledger.open(paths.ledger, clock=clock)
    sim = Simulation(ledger, clock, seed=seed)
    sim.run(until=clock.now + advance_s)
    return paths, sim


__all__ = ["DemoPaths", "PROJECT_INPUTS", "RUN_CASES", "build_demo_ledger", "create_demo", "create_tasks",
           "ledger_is_quiet", "make_runs"]

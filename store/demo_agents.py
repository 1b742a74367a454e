"""Simulated agents for ``warden demo``: they use only the public agent API, as a real agent would.

The agents here claim nodes, heartbeat with observations, commit (with follow-up nodes, repairs and
artifacts), fail with a failure class, ask a human, log effects before making them and write
decision notes. Nothing else: no model rows, no operator actions.

Every agent is a *generator* that yields how many simulated seconds it wants to spend before its
next ledger call. The same agent code therefore runs in two ways:

- as a worker process (``python -m store.demo_agents --ledger X --worker w1 ...``): the driver
  sleeps ``seconds / speed`` of real time between steps (the simulated agent "working"), stops when
  the stop file appears or its parent dies, and ``os._exit``\\ s on a simulated crash;
- in-process on a :class:`~store.clock.ManualClock` (:class:`Simulation`): a discrete-event loop
  moves the clock to the next agent's wake-up. No real time passes, so a run is exactly repeatable
  for a given seed (tests, screenshots, the demo's finished history).

The simulated world (module names, which fixer loops, which test is flaky, which verifier crashes)
is written into each task's ``inputs["simulation"]`` at creation — the demo is honest that it is a
simulation, like the ``SIMULATION.json`` in its run directories.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generator, Iterable, Mapping, Sequence

from .runs import write_atomic, write_json
from .clock import Clock, ManualClock, system_clock
from .errors import LeaseLost, Refused, WardenError
from .ledger import Ledger
from .views import Budget, Claim, NodeSpec, Pulse

# ---------------------------------------------------------------------- the simulated world
TICK_S = 1.0
"""Simulated seconds between heartbeats of a working agent."""

LEASE_S = 10.0
"""Simulated lease length; a crashed agent's node is reclaimable this long after its last beat."""

IDLE_S = 1.0
"""How long an agent with nothing to claim waits before asking again."""

RESTART_AFTER_S = 3.0
"""How long the supervisor takes to restart a crashed worker."""

LOOP_CAP = 60
"""The looping fixer gives up on its own after this many identical iterations."""

CRASH_EXIT = 75
"""Exit status of a worker process that crashed on purpose (the supervisor restarts it)."""

HISTORY_AGO_S = 3 * 3600.0
"""The finished history starts this long before the demo."""

MAINT_KINDS = ("scan", "classify", "fix", "test", "approval", "open_pr", "summary")
WRITER_KINDS = ("draft", "verify", "finalize")
TRIAGE_KINDS = ("triage",)
ROLES: dict[str, tuple[str, ...] | None] = {
    "fixer": MAINT_KINDS, "writer": WRITER_KINDS, "triager": TRIAGE_KINDS, "any": None,
}
ROSTER: tuple[tuple[str, str], ...] = (
    ("w1", "fixer"), ("w2", "fixer"), ("w3", "fixer"), ("w4", "writer"), ("w5", "triager"), ("w6", "any"),
)

MODULES: tuple[tuple[str, str], ...] = (
    ("ledger", "core"), ("invoices", "core"), ("payments", "core"), ("accounts", "core"), ("tax", "core"),
    ("refunds", "core"), ("routes", "api"), ("auth", "api"), ("webhooks", "api"), ("serializers", "api"),
    ("pagination", "api"), ("dates", "util"), ("money", "util"), ("retry", "util"), ("logging", "util"),
    ("config", "util"), ("cache", "util"), ("compat", "legacy"), ("xml_feed", "legacy"),
    ("old_exports", "legacy"), ("proto_stubs", "generated"), ("orm_models", "generated"),
)
FIX_S = {"core": (6.0, 10.0), "api": (4.0, 7.0), "util": (2.0, 4.0), "legacy": (7.0, 11.0), "generated": (1.0, 2.0)}
TEST_S = (1.5, 3.0)
REPORT_SECTIONS = ("Summary", "Incidents", "Error budget", "Risks", "Next quarter")
REPO = "acme/billing"

LIVE_TASKS = ("maint-billing", "report-q3", "triage-inbox")
HISTORY_TASKS = ("maint-prev", "report-prev", "triage-prev")


def _rng(*parts: Any) -> random.Random:
    return random.Random("|".join(str(p) for p in parts))


def _uniform(seed: Any, key: str, lo: float, hi: float) -> float:
    return round(_rng(seed, key).uniform(lo, hi), 2)


def pick_modules(seed: int) -> list[dict[str, Any]]:
    """The 20 modules of the demo repository for ``seed``: every legacy and api module, and all but
    two of the rest."""
    rng = _rng("modules", seed)
    optional = [m for m in MODULES if m[1] not in ("legacy", "api")]
    dropped = set(rng.sample([m[0] for m in optional], len(MODULES) - 20))
    return [{"name": n, "kind": k, "core": k == "core"} for n, k in MODULES if n not in dropped]


def maint_simulation(seed: int, *, faults: bool) -> dict[str, Any]:
    mods = pick_modules(seed)
    rng = _rng("faults", seed)
    sim: dict[str, Any] = {"seed": seed, "modules": mods}
    if faults:
        sim["loop_module"] = rng.choice([m["name"] for m in mods if m["kind"] == "legacy"])
        sim["flaky_module"] = rng.choice([m["name"] for m in mods if m["kind"] == "api"])
    return sim


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------- the agent
class SimulatedCrash(BaseException):
    """Raised (in-process) where a worker process would die with ``os._exit``."""


Work = Generator[float, None, Any]


class DemoAgent:
    """One simulated agent. :meth:`loop` is a generator of simulated seconds to wait."""

    def __init__(
        self,
        ledger: Ledger,
        name: str,
        role: str = "any",
        *,
        tick_s: float = TICK_S,
        lease_s: float = LEASE_S,
        idle_s: float = IDLE_S,
        speed: float = 1.0,
        crash: Callable[[], None] | None = None,
        log: Callable[[str], None] | None = None,
        seed: int = 7,
    ) -> None:
        self.ledger = ledger
        self.name = name
        self.role = role
        self.kinds = ROLES[role]
        self.tick_s = tick_s
        self.lease_s = lease_s
        self.idle_s = idle_s
        self.speed = speed  # only scales what the ledger measures in real time (retry back-off)
        self._crash = crash
        self.log = log or (lambda line: None)
        self.rng = _rng(seed, name)
        self.steps = 0

    # -- the loop ----------------------------------------------------------------
    def loop(self) -> Work:
        while True:
            try:
                claim = self.ledger.claim(None, self.name, lease_s=self.lease_s, kinds=self.kinds)
            except WardenError as e:  # e.g. the database is busy: try again later
                self.log(f"claim failed: {e}")
                claim = None
            if claim is None:
                yield self.idle_s * (0.75 + 0.5 * self.rng.random())
                continue
            self.steps += 1
            self.log(f"claimed {claim.task_id}/{claim.node_key} (attempt {claim.attempt})")
            try:
                yield from self.run_step(claim)
            except LeaseLost as e:  # revoked, expired, parked --now, aborted: drop the step
                self.log(f"dropped {claim.node_key}: {e}")
            except WardenError as e:
                self.log(f"gave up on {claim.node_key}: {e}")

    def crash(self) -> None:
        self.log("crashing on purpose (simulated)")
        if self._crash is not None:
            self._crash()
        raise SimulatedCrash(self.name)

    def run_step(self, claim: Claim) -> Work:
        handler = getattr(self, f"do_{claim.kind}", None)
        if handler is None:
            yield from self.work(claim, 2.0, ["generic step"])
            self.ledger.commit(claim, output={"done": True})
            return
        yield from handler(claim)

    # -- helpers -------------------------------------------------------------------
    def work(
        self,
        claim: Claim,
        seconds: float,
        lines: Sequence[str] | Callable[[int], str],
        *,
        tokens: int | Callable[[int, Pulse | None], int] = 0,
        units_total: float | None = None,
    ) -> Work:
        """Spend ``seconds`` in heartbeats of about ``tick_s``; returns the last Pulse.

        A parked task's in-flight step finishes early (the agent wraps up what it has).
        """
        n = max(1, round(seconds / self.tick_s))
        total = units_total if units_total is not None else n
        pulse: Pulse | None = None
        for i in range(n):
            yield seconds / n
            obs = lines(i) if callable(lines) else lines[min(i, len(lines) - 1)] if lines else None
            t = tokens(i, pulse) if callable(tokens) else tokens
            pulse = self.ledger.heartbeat(claim, units_done=round(total * (i + 1) / n, 2), units_total=total,
                                          tokens=t, observation=obs)
            if pulse.parked:
                self.ledger.note(claim, "task parked: finishing this step with what I have, then stopping")
                break
        return pulse

    @staticmethod
    def sim(claim: Claim) -> Mapping[str, Any]:
        task = claim.inputs.get("task") or {}
        return task.get("simulation") or {} if isinstance(task, Mapping) else {}

    @staticmethod
    def dep_outputs(claim: Claim) -> dict[str, Any]:
        return {k: (v.get("output") if v.get("status") == "succeeded" else None)
                for k, v in claim.inputs.get("deps", {}).items()}

    def rejected(self, claim: Claim) -> str | None:
        rej = claim.inputs.get("rejections") or []
        return str(rej[-1]) if rej else None

    # -- maintenance workflow --------------------------------------------------------
    def do_scan(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        mods = sim.get("modules") or []
        lines = [f"walking src/{REPO.split('/')[1]}/ …", f"found {len(mods)} python packages",
                 "reading pyproject.toml: python 3.11, pytest 8"]
        yield from self.work(claim, 1.5, lines, tokens=400)
        self.ledger.commit(claim, output={"modules": [m["name"] for m in mods]}, tokens=200,
                           next_nodes=[NodeSpec("classify", kind="classify", deps=("scan",),
                                                title=f"classify {len(mods)} modules", units_total=len(mods))])

    def do_classify(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        mods = list(sim.get("modules") or [])
        seed = sim.get("seed", 0)
        n = len(mods)
        per = max(1, -(-n // 3))
        yield from self.work(
            claim, 3.0, lambda i: "\n".join(f"{m['name']}: {m['kind']}" for m in mods[i * per:(i + 1) * per]) or "done",
            tokens=600, units_total=n,
        )
        # Ask the human first (claims go in node order), so the answer arrives while fixes run.
        specs: list[NodeSpec] = [NodeSpec("approve-prs", kind="approval", deps=("classify",),
                                          title=f"ask before opening {n} pull requests", est_wall_s=1.0)]
        tests = []
        # Longest first (legacy, core, api, util, generated): the usual way to shorten the whole run.
        by_length = sorted(mods, key=lambda m: -sum(FIX_S[m["kind"]]))
        for m in by_length:
            scope: Any = ["all_modules", "core"] if m["core"] else "all_modules"
            lo, hi = FIX_S[m["kind"]]
            specs.append(NodeSpec(f"fix-{m['name']}", kind="fix", deps=("classify",),
                                  title=f"fix {m['name']} ({m['kind']})", preconditions={"scope": scope},
                                  est_wall_s=round((lo + hi) / 2, 1)))
            specs.append(NodeSpec(f"test-{m['name']}", kind="test", deps=(f"fix-{m['name']}",),
                                  title=f"test the {m['name']} fix", preconditions={"scope": scope},
                                  est_wall_s=2.0))
            tests.append(f"test-{m['name']}")
        specs.append(NodeSpec("open-prs", kind="open_pr", deps=("approve-prs", *tests),
                              title="open one pull request per fixed module", est_wall_s=float(n)))
        specs.append(NodeSpec("summary", kind="summary", deps=("open-prs",), title="write the maintenance report",
                              always_admit=True, est_wall_s=2.0))
        self.ledger.note(claim, f"{n} modules: " + ", ".join(
            f"{k} {sum(1 for m in mods if m['kind'] == k)}" for k in FIX_S if any(m['kind'] == k for m in mods)))
        self.ledger.commit(claim, output={"modules": mods, "seed": seed}, tokens=300, next_nodes=specs)

    def do_fix(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        mod = claim.node_key[len("fix-"):]
        kind = next((m["kind"] for m in sim.get("modules", []) if m["name"] == mod), "util")
        lo, hi = FIX_S.get(kind, (2.0, 4.0))
        seconds = _uniform(sim.get("seed"), claim.node_key, lo, hi)
        reason = self.rejected(claim)
        if sim.get("loop_module") == mod and reason is None:
            yield from self.loop_forever(claim, mod)
            return
        approach = "minimal" if reason is None else f"v{len(claim.inputs.get('rejections') or []) + 1}"
        if reason is not None:
            self.ledger.note(claim, f"operator rejected the last attempt ({reason!r}): trying approach {approach}")
        edits = [f"{mod}.py:{10 + 7 * i} replace datetime.utcnow() with datetime.now(UTC)" for i in range(12)]
        lines = lambda i: (f"[{approach}] " if reason else "") + edits[i % len(edits)]  # noqa: E731
        yield from self.work(claim, seconds, lines, tokens=lambda i, p: 900 if p is None or p.gate == "ok" else 400)
        patch = {"module": mod, "approach": approach, "edits": max(1, round(seconds / self.tick_s)), "patched": True}
        if reason is not None:
            patch["addresses"] = reason
        self.ledger.commit(claim, output=patch, tokens=300)

    def loop_forever(self, claim: Claim, mod: str) -> Work:
        """The looping fixer: the same three lines again and again (no new information)."""
        same = (f"$ pytest tests/test_{mod}.py -x\n"
                f"FAILED tests/test_{mod}.py::test_roundtrip - AssertionError: b'\\x00' != b''\n"
                f"patching {mod}.py:88 (encode -> encode_legacy)")
        for i in range(LOOP_CAP):
            yield self.tick_s
            pulse = self.ledger.heartbeat(claim, units_done=1, units_total=4, tokens=500, observation=same)
            if pulse.parked:
                break
        self.ledger.note(claim, f"no progress after {LOOP_CAP} identical iterations on {mod}: committing no patch")
        self.ledger.commit(claim, output={"module": mod, "patched": False, "why": "stuck in a fix/test loop"})

    def do_test(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        mod = claim.node_key[len("test-"):]
        fix = self.dep_outputs(claim).get(f"fix-{mod}") or {}
        seconds = _uniform(sim.get("seed"), claim.node_key, *TEST_S)
        if not fix.get("patched"):
            yield from self.work(claim, 1.0, [f"no patch for {mod}: nothing to test"])
            self.ledger.commit(claim, output={"module": mod, "skipped": "no patch"})
            return
        n = 8 + len(mod) * 3
        yield from self.work(claim, seconds, lambda i: f"tests/test_{mod}.py: {min(n, (i + 1) * 9)}/{n} passed",
                             tokens=50)
        if sim.get("flaky_module") == mod and claim.attempt == 1:
            back = 4.0 * (2 ** (claim.attempt - 1))
            self.ledger.fail(claim, error=f"tests/test_{mod}.py: ConnectionResetError talking to the sandbox db",
                             failure_class="transient", retryable=True, retry_after_s=back / self.speed)
            return
        self.ledger.commit(claim, output={"module": mod, "passed": n, "failed": 0, "patched": True})

    def do_approval(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        task = claim.inputs.get("task") or {}
        res = claim.inputs.get("resolution")
        mods = sim.get("modules") or []
        if res is not None:
            ok = res.get("option") == "yes"
            self.ledger.note(claim, f"{res.get('by')} answered {res.get('option')!r}"
                             + (f": {res.get('answer')}" if res.get("answer") else ""))
            self.ledger.commit(claim, output={"approved": ok, "by": res.get("by"), "answer": res.get("answer")})
            return
        if task.get("pr_policy") == "preapproved":
            yield from self.work(claim, 1.0, ["pull requests are pre-approved by the task's policy"])
            self.ledger.commit(claim, output={"approved": True, "by": "policy"})
            return
        yield from self.work(claim, 1.0, [f"planning {len(mods)} pull requests on {REPO}"])
        self.ledger.request_human(
            claim, kind="confirm", question=f"Open {len(mods)} pull requests?",
            options=[
                {"id": "yes", "label": "Open them",
                 "consequence": f"one PR per module on {REPO} once its fix passes its tests (irreversible: "
                                "reviewers are notified)"},
                {"id": "no", "label": "Do not open PRs",
                 "consequence": "the patches stay in the maintenance report; nothing is published"},
            ],
            recommendation="yes",
            context={"done": f"scanned and classified {len(mods)} modules; fixes are running",
                     "stuck_at": "opening pull requests is an irreversible, visible effect",
                     "why": "every fix is tested before its PR; PRs are one per module as the constraints say"},
        )
        yield self.tick_s * 0.1

    def do_open_pr(self, claim: Claim) -> Work:
        deps = self.dep_outputs(claim)
        approval = deps.get("approve-prs") or {}
        if not approval.get("approved"):
            yield from self.work(claim, 1.0, ["the operator declined: no pull requests"])
            self.ledger.commit(claim, output={"opened": [], "declined": True})
            return
        opened, skipped = [], []
        mods = [k[len("test-"):] for k in claim.inputs.get("deps", {}) if k.startswith("test-")]
        number = 100
        for mod in mods:
            number += 1
            test = deps.get(f"test-{mod}")
            if not test or not test.get("patched"):
                skipped.append(mod)
                continue
            key = f"pr:{REPO}:fix-{mod}:create"
            payload = {"module": mod, "branch": f"warden/fix-{mod}", "test": test}
            eff = self.ledger.intend_effect(claim, key, payload=payload, compensation=f"close PR #{number}")
            if eff.status == "confirmed":
                self.ledger.heartbeat(claim, observation=f"PR for {mod} already open ({eff.external_id}): not repeated")
                opened.append({"module": mod, "pr": eff.external_id, "repeat": False})
                continue
            yield self.tick_s * 0.5  # the external call
            self.ledger.confirm_effect(claim, key, external_id=f"#{number}", compensation=f"close PR #{number}")
            self.ledger.heartbeat(claim, units_done=len(opened) + 1, units_total=len(mods), tokens=100,
                                  observation=f"opened PR #{number} for {mod}")
            opened.append({"module": mod, "pr": f"#{number}"})
        self.ledger.commit(claim, output={"opened": opened, "skipped": skipped}, tokens=200)

    def do_summary(self, claim: Claim) -> Work:
        prs = self.dep_outputs(claim).get("open-prs") or {}
        yield from self.work(claim, 2.0, ["collecting the results", "writing maintenance-report.md"], tokens=300)
        lines = [f"# Maintenance report: {REPO}", ""]
        for item in prs.get("opened") or []:
            lines.append(f"- {item['module']}: PR {item['pr']}")
        for mod in prs.get("skipped") or []:
            lines.append(f"- {mod}: no PR (no tested patch)")
        if prs.get("declined"):
            lines.append("No pull requests were opened: the operator declined.")
        data = ("\n".join(lines) + "\n").encode()
        self.ledger.commit(claim, output={"sha256": sha256_hex(data), "bytes": len(data)},
                           artifact=("maintenance-report.md", data), tokens=200)

    # -- report workflow -----------------------------------------------------------------
    def do_draft(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        deps = self.dep_outputs(claim)
        prev = next((o for o in deps.values() if isinstance(o, Mapping) and "draft" in o), None)
        reason = self.rejected(claim)
        if prev is not None:  # a repair: add what the verifier found missing
            sections = list(prev["draft"]) + [s for s in prev.get("missing", []) if s not in prev["draft"]]
            lines = [f"adding section: {s}" for s in prev.get("missing", [])] or ["tidying"]
        else:
            missing = sim.get("missing_section")
            sections = [s for s in REPORT_SECTIONS if s != missing or reason is not None]
            lines = [f"drafting section {i + 1}: {s}" for i, s in enumerate(sections)]
        if reason is not None:
            self.ledger.note(claim, f"operator rejected the last draft ({reason!r}): rewriting with that in mind")
        yield from self.work(claim, 6.0, lines, tokens=2500)
        out = {"sections": sections}
        if reason is not None:
            out["addresses"] = reason
        self.ledger.commit(claim, output=out, tokens=1000)

    def do_verify(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        deps = self.dep_outputs(claim)
        draft = next((o for o in deps.values() if isinstance(o, Mapping) and "sections" in o), {"sections": []})
        if sim.get("crash_node") == claim.node_key and claim.attempt == 1:
            yield from self.work(claim, 2.0, ["loading the draft", "checking required sections"], tokens=300)
            self.crash()
        yield from self.work(claim, 4.0, [f"checking: {s}" for s in REPORT_SECTIONS], tokens=600)
        missing = [s for s in REPORT_SECTIONS if s not in draft["sections"]]
        n = int(claim.node_key.rsplit("-", 1)[1]) if claim.node_key.rsplit("-", 1)[-1].isdigit() else 1
        out = {"ok": not missing, "missing": missing, "draft": list(draft["sections"])}
        if missing:
            self.ledger.note(claim, f"missing section(s): {', '.join(missing)}: asking for a repair draft")
            try:
                self.ledger.commit(claim, output=out, tokens=200, repair=True, next_nodes=[
                    NodeSpec(f"repair-{n}", kind="draft", deps=(claim.node_key,), title=f"repair draft {n}",
                             est_wall_s=6.0),
                    NodeSpec(f"verify-{n + 1}", kind="verify", deps=(f"repair-{n}",), title=f"verify again ({n + 1})",
                             est_wall_s=4.0),
                ])
            except Refused as e:  # repair budget exhausted: a human decides
                self.ledger.request_human(claim, kind="exception", question=f"The draft still misses {missing}",
                                          options=[{"id": "accept", "label": "Accept as is"},
                                                   {"id": "abort", "label": "Stop here"}],
                                          context={"why": str(e)})
            return
        self.ledger.commit(claim, output=out, tokens=200, next_nodes=[
            NodeSpec("finalize", kind="finalize", deps=(claim.node_key,), title="finalize the report",
                     always_admit=True, est_wall_s=2.0)])

    def do_finalize(self, claim: Claim) -> Work:
        deps = self.dep_outputs(claim)
        ver = next((o for o in deps.values() if isinstance(o, Mapping) and "draft" in o), {"draft": []})
        title = (claim.inputs.get("task") or {}).get("title", "Report")
        yield from self.work(claim, 2.0, ["rendering report.md", "computing sha256"], tokens=400)
        body = [f"# {title}", ""]
        for s in ver["draft"]:
            body += [f"## {s}", "", f"(simulated content of {s.lower()})", ""]
        data = "\n".join(body).encode()
        digest = sha256_hex(data)
        self.ledger.commit(claim, output={"sha256": digest, "bytes": len(data), "sections": ver["draft"]},
                           artifact=("report.md", data), output_ref="artifact:report.md")

    # -- triage workflow ---------------------------------------------------------------
    def do_triage(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        degraded = claim.admission != "admit"
        if degraded:
            self.ledger.note(claim, "budget past its soft gate: using the short prompt (fewer tokens)")
        per = int(sim.get("tokens_per_beat", 1500))
        item = claim.node_key.split("-", 1)[-1]
        labels = ("bug", "duplicate", "feature request", "needs repro", "bug")
        label = labels[int(_uniform(sim.get("seed"), claim.node_key, 0, len(labels) - 0.01))]
        yield from self.work(
            claim, 3.0, [f"reading issue #{item}", f"searching for duplicates of #{item}", f"label: {label}"],
            tokens=lambda i, p: per // 2 if degraded or (p is not None and p.gate != "ok") else per,
        )
        self.ledger.commit(claim, output={"issue": item, "label": label, "short_prompt": degraded})


# ---------------------------------------------------------------------- tasks and run directories
def create_tasks(ledger: Ledger, seed: int, *, history: bool) -> list[str]:
    """Create the demo's three tasks (live, with faults) or their finished-history twins."""
    if history:
        ids = HISTORY_TASKS
        maint_title = f"Deprecation sweep: {REPO} (last week)"
        sim = maint_simulation(seed + 1000, faults=False)
        inputs: dict[str, Any] = {"repo": REPO, "pr_policy": "preapproved", "simulation": sim}
    else:
        ids = LIVE_TASKS
        maint_title = f"Deprecation sweep: {REPO}, 20 modules"
        sim = maint_simulation(seed, faults=True)
        inputs = {"repo": REPO, "pr_policy": "ask", "simulation": sim}
    maint, report, triage = ids
    ledger.create_task(maint, title=maint_title, workflow="code-maintenance", workflow_version="3",
                       inputs=inputs, preconditions={"scope": "all_modules"},
                       constraints=["Do not change public function signatures", "One pull request per module",
                                    "Never push to main"],
                       budget=Budget(tokens=400_000, wall_s=2 * 3600), exist_ok=True)
    ledger.add_node(maint, "scan", kind="scan", title=f"scan {REPO}", est_wall_s=2.0)

    rsim: dict[str, Any] = {"seed": seed}
    if not history:
        rsim.update(crash_node="verify-1", missing_section="Risks")
    ledger.create_task(report, title="Q3 reliability report" if not history else "Q2 reliability report",
                       workflow="report", workflow_version="2", inputs={"title": "Q3 reliability report" if not history else "Q2 reliability report",
                               "audience": "platform review", "simulation": rsim},
                       constraints=["Every figure cites its dashboard"], budget=Budget(tokens=120_000, wall_s=3600),
                       max_repairs=2, exist_ok=True)
    ledger.add_node(report, "draft", kind="draft", title="draft the report", est_wall_s=6.0)
    ledger.add_node(report, "verify-1", kind="verify", deps=["draft"], title="verify the draft", est_wall_s=4.0)

    items = 12
    per = 1500 if not history else 1000
    ledger.create_task(triage, title="Triage the bug inbox" + (" (yesterday)" if history else ""),
                       workflow="triage", workflow_version="1",
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
    from .clock import iso

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
    return paths


# ---------------------------------------------------------------------- in-process simulation
class Simulation:
    """Run the roster's agents in-process on a ManualClock (discrete events, no real time).

    A simulated crash takes the agent out; the supervisor restarts it ``RESTART_AFTER_S`` later
    under a new name (``w4`` → ``w4-2``), as ``warden demo`` does with a crashed process.
    """

    def __init__(self, ledger: Ledger, clock: ManualClock, *, seed: int = 7,
                 roster: Sequence[tuple[str, str]] = ROSTER, tick_s: float = TICK_S,
                 log: Callable[[str], None] | None = None) -> None:
        self.ledger = ledger
        self.clock = clock
        self.seed = seed
        self.tick_s = tick_s
        self.log = log
        self.crashes: list[tuple[str, float]] = []
        self.agents: dict[str, DemoAgent] = {}
        self._heap: list[tuple[float, int, str, Generator[float, None, Any]]] = []
        self._seq = 0
        self._restarts: dict[str, int] = {}
        for name, role in roster:
            self._start(name, role, clock.now)

    def _start(self, name: str, role: str, at: float) -> None:
        log = (lambda line, n=name: self.log(f"{n}: {line}")) if self.log else None
        agent = DemoAgent(self.ledger, name, role, tick_s=self.tick_s, lease_s=max(LEASE_S, 3 * self.tick_s),
                          idle_s=max(IDLE_S, self.tick_s), seed=self.seed, log=log)
        self.agents[name] = agent
        heapq.heappush(self._heap, (at, self._seq, name, agent.loop()))
        self._seq += 1

    def run(self, *, until: float | None = None, stop: Callable[[], bool] | None = None,
            check_every_s: float = 5.0) -> float:
        """Advance until the clock reaches ``until`` or ``stop()`` is true (checked every few
        simulated seconds). Returns the clock."""
        next_check = self.clock.now
        while self._heap:
            at, _, name, gen = self._heap[0]
            if until is not None and at > until:
                break
            heapq.heappop(self._heap)
            self.clock.set(max(self.clock.now, at))
            try:
                wait = next(gen)
            except SimulatedCrash:
                self.crashes.append((name, self.clock.now))
                base = name.split("-")[0]
                k = self._restarts.get(base, 1) + 1
                self._restarts[base] = k
                self._start(f"{base}-{k}", self.agents[name].role, self.clock.now + RESTART_AFTER_S)
                continue
            heapq.heappush(self._heap, (self.clock.now + max(0.01, float(wait)), self._seq, name, gen))
            self._seq += 1
            if stop is not None and self.clock.now >= next_check:
                next_check = self.clock.now + check_every_s
                if stop():
                    break
        if until is not None and self.clock.now < until and (stop is None or not stop()):
            self.clock.set(until)
        return self.clock.now


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


# ---------------------------------------------------------------------- worker process
def _set_parent_death_signal() -> None:
    """Linux: ask the kernel to SIGTERM us when the parent dies (belt and braces with getppid)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def worker_main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m store.demo_agents", description="one simulated demo agent")
    p.add_argument("--ledger", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--role", default="any", choices=sorted(ROLES))
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--stop-file", required=True, help="stop when this file exists")
    p.add_argument("--parent-pid", type=int, default=None, help="stop when this process is gone")
    args = p.parse_args(argv)
    speed = max(0.01, args.speed)
    parent = args.parent_pid or os.getppid()
    _set_parent_death_signal()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))

    def log(line: str) -> None:
        sys.stdout.write(f"{time.strftime('%H:%M:%S')} {args.worker}: {line}\n")
        sys.stdout.flush()

    def should_stop() -> bool:
        return os.path.exists(args.stop_file) or os.getppid() != parent

    if should_stop():
        return 0
    ledger = Ledger.open(args.ledger, create=False)
    # Leases and heartbeats are real time in a live ledger: scale them, keep a floor for slow disks.
    agent = DemoAgent(ledger, args.worker, args.role, tick_s=TICK_S, lease_s=max(LEASE_S / speed, 2.0),
                      speed=speed, seed=args.seed, log=log, crash=lambda: os._exit(CRASH_EXIT))
    log(f"started (role {args.role}, speed {speed:g})")
    gen = agent.loop()
    try:
        for wait in gen:
            end = time.monotonic() + max(0.0, float(wait)) / speed
            while True:  # the simulated agent "working"; not synchronisation
                if should_stop():
                    log("stopping")
                    return 0
                left = end - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(left, 0.1))
    finally:
        ledger.close()
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())

"""The demo's simulated agent: it uses only the store's public agent API, as a real agent would.

The agents claim nodes, heartbeat with observations, commit (with follow-up nodes, repairs and
artifacts), fail with a failure class, ask a human, log effects before making them and write
decision notes. Nothing else: no model rows, no operator actions.

Every agent is a *generator* that yields how many simulated seconds it wants to spend before its
next ledger call. The same agent code therefore runs in two ways:

- as a worker process (``python -m console.demo.worker --ledger X --worker w1 ...``): the driver
  sleeps ``seconds / speed`` of real time between steps (the simulated agent "working"), stops when
  the stop file appears or its parent dies, and ``os._exit``\\ s on a simulated crash;
- in-process on a ``ManualClock`` (``console.demo.simulation.Simulation``): a discrete-event
  loop moves the clock to the next agent's wake-up. No real time passes, so a run is exactly repeatable
  for a given seed (tests, screenshots, the demo's finished history).

The simulated world (module names, which fixer loops, which test is flaky, which verifier crashes)
is written into each task's ``inputs["simulation"]`` at creation — the demo is honest that it is a
simulation, like the ``SIMULATION.json`` in its run directories.
"""

from __future__ import annotations

from typing import Callable, Generator, Mapping, Sequence

from store import Claim, LeaseLost, Ledger, NodeSpec, Pulse, Refused, WardenError
from store.jsontypes import JsonMapping, JsonObject, JsonValue

from .mind import MindSteps
from .world import FIX_S, IDLE_S, LEASE_S, LOOP_CAP, REPO, REPORT_SECTIONS, ROLES, TEST_S, TICK_S, WORKFLOW_VERSIONS
from .world import rng_for
from .world import sha256_hex, uniform_for


class SimulatedCrash(BaseException):
    """Raised (in-process) where a worker process would die with ``os._exit``."""


Work = Generator[float, None, None]  # a step: the simulated seconds of each heartbeat


class DemoAgent(MindSteps):
    """One simulated agent. :meth:`loop` is a generator of simulated seconds to wait. (The steps of
    the mind scenarios, ``perf-audit`` and ``search-latency``, are in ``console/demo/mind.py``.)"""

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
        self.rng = rng_for(seed, name)

    # -- the loop ----------------------------------------------------------------
    def loop(self) -> Work:
        while True:
            try:
                claim = self.claim_known()
            except WardenError as e:  # e.g. the database is busy: try again later
                self.log(f"claim failed: {e}")
                claim = None
            if claim is None:
                yield self.idle_s * (0.75 + 0.5 * self.rng.random())
                continue
            self.log(f"claimed {claim.task_id}/{claim.node_key} (attempt {claim.attempt})")
            try:
                yield from self.run_step(claim)
            except LeaseLost as e:  # revoked, expired, parked --now, aborted: drop the step
                self.log(f"dropped {claim.node_key}: {e}")
            except WardenError as e:
                self.log(f"gave up on {claim.node_key}: {e}")

    def claim_known(self) -> Claim | None:
        """A ready node of a task whose workflow version this agent knows (one claim per version)."""
        for version in dict.fromkeys(WORKFLOW_VERSIONS.values()):
            claim = self.ledger.claim(None, self.name, lease_s=self.lease_s, kinds=self.kinds,
                                      workflow_version=version)
            if claim is not None:
                return claim
        return None

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
    ) -> Generator[float, None, Pulse | None]:
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
    def sim(claim: Claim) -> JsonMapping:
        task = claim.inputs.get("task") or {}
        return task.get("simulation") or {} if isinstance(task, Mapping) else {}

    @staticmethod
    def dep_outputs(claim: Claim) -> JsonObject:
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
            scope: JsonValue = ["all_modules", "core"] if m["core"] else "all_modules"
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
        seconds = uniform_for(sim.get("seed"), claim.node_key, lo, hi)
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
        seconds = uniform_for(sim.get("seed"), claim.node_key, *TEST_S)
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
                     "stuck": "opening pull requests is an irreversible, visible effect",
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
        out: JsonObject = {"sections": sections}
        if reason is not None:
            out["addresses"] = reason
        self.ledger.commit(claim, output=out, tokens=1000)

    def do_verify(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        deps = self.dep_outputs(claim)
        draft: JsonMapping = next((o for o in deps.values() if isinstance(o, Mapping) and "sections" in o),
                                        {"sections": []})
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
                                          options=[{"id": "accept", "label": "Accept as is",
                                                    "consequence": f"the report is finalised still missing {missing}"},
                                                   {"id": "abort", "label": "Stop here",
                                                    "consequence": "no report is finalised; the drafts stay"}],
                                          context={"done": f"drafted and verified {n} times; repaired each time",
                                                   "stuck": f"the draft still misses {missing}: {e}",
                                                   "no_recommendation": "whether the report is useful without "
                                                                        "it is the reader's call"})
            return
        self.ledger.commit(claim, output=out, tokens=200, next_nodes=[
            NodeSpec("finalize", kind="finalize", deps=(claim.node_key,), title="finalize the report",
                     always_admit=True, est_wall_s=2.0)])

    def do_finalize(self, claim: Claim) -> Work:
        deps = self.dep_outputs(claim)
        ver: JsonMapping = next((o for o in deps.values() if isinstance(o, Mapping) and "draft" in o), {"draft": []})
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
        label = labels[int(uniform_for(sim.get("seed"), claim.node_key, 0, len(labels) - 0.01))]
        yield from self.work(
            claim, 3.0, [f"reading issue #{item}", f"searching for duplicates of #{item}", f"label: {label}"],
            tokens=lambda i, p: per // 2 if degraded or (p is not None and p.gate != "ok") else per,
        )
        self.ledger.commit(claim, output={"issue": item, "label": label, "short_prompt": degraded})


__all__ = ["DemoAgent", "SimulatedCrash", "Work"]

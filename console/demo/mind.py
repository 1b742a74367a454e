"""The demo's two tasks about the task's mind, and the steps their agents take — on the
store's public agent API only, like every demo agent.

``perf-audit`` — *Performance audit: billing API*. Requirements r1 profile every public endpoint,
r2 rank the hot spots, r3 estimate the savings; a chain of ``profile-<endpoint>`` nodes (one load
test at a time), then ``rank`` and ``estimate``. The first profile writes a rejected path (the
sampling profiler hid the pattern) and proposes a memory for the workflow (warm the staging
database first) — waiting in the memory inbox for a person. Each profile concludes what it found,
with its source. After the third endpoint shows the same shape (N+1 lazy loads in the ORM), the
agent **replans with trigger ``pattern``**: the remaining endpoint profiles, ``rank`` and
``estimate`` leave the plan; ``profile-orm``, ``rank-2`` and ``estimate-2`` take their place.

``search-latency`` — *Why is search slow?* Requirements r1 find what makes search slow end to end,
r2 propose fixes with their saving. After tracing one request, the agent anchors on the regex
filter it saw and tunes it, one ``tune-regex-N`` node after another, each serving no requirement:
**``drift_suspected``** after 8 in a row. The task's alignment checks are answered by an agent
(``alignment_by="agent"``): at the 12th completed node ``alignment-1`` asks, the researcher
answers ``drifting``, and the tuning agent, reading that verdict in its claim inputs, replans
(trigger ``evidence_conflict``) onto the backend trace and the fixes.

Workers: ``w7`` (auditor) claims profile, rank, estimate; ``w8`` (researcher) claims trace, tune,
propose, alignment. ``w6`` (any) may help with either, but is never handed an alignment check.
"""

from __future__ import annotations

from typing import Callable, Generator, Sequence

from store import Budget, Claim, Ledger, NodeSpec, Pulse
from store.jsontypes import JsonMapping

from .world import AUDITOR_KINDS, REPO, RESEARCHER_KINDS, uniform_for

MIND_TASKS = ("perf-audit", "search-latency")
ENDPOINTS = ("invoices", "payments", "refunds", "accounts", "webhooks", "exports")
SAME_SHAPE_AFTER = 3  # profiles showing the N+1 pattern before the auditor replans
TUNE_CAP = 30  # the drifting agent gives up tuning on its own after this many nodes
PROFILE_S = (2.0, 3.0)
TUNE_S = (2.5, 3.5)
MEMORY_TEXT = ("Warm the staging database before profiling: the first load test after a deploy runs "
               "about 3x slower and hides the real hot spots.")

Work = Generator[float, None, None]  # a step: the simulated seconds of each heartbeat


def create_mind_tasks(ledger: Ledger, seed: int) -> list[str]:
    """The two live tasks of the mind scenarios (no history twins)."""
    ledger.create_task(
        "search-latency", title="Why is search slow? (p95 2.4 s)", workflow="perf-audit", workflow_version="1",
        inputs={"service": f"{REPO} search", "simulation": {"seed": seed, "tune_cap": TUNE_CAP}},
        constraints=["Measure on staging, never on production"],
        requirements=[{"id": "r1", "text": "Find what makes search slow end to end (p95 2.4 s, target 500 ms)"},
                      {"id": "r2", "text": "Propose fixes with their expected saving"}],
        budget=Budget(tokens=90_000, wall_s=3600), alignment_every=12, alignment_by="agent", exist_ok=True)
    ledger.add_node("search-latency", "trace-search", kind="trace", title="trace one slow search request",
                    serves=["r1"], est_wall_s=2.0)
    ledger.create_task(
        "perf-audit", title="Performance audit: billing API", workflow="perf-audit", workflow_version="1",
        inputs={"service": REPO, "simulation": {"seed": seed, "same_shape_after": SAME_SHAPE_AFTER}},
        constraints=["Profile on staging only, never on production", "One load test at a time"],
        requirements=[{"id": "r1", "text": "Profile every public endpoint of the billing API under load"},
                      {"id": "r2", "text": "Rank the hot spots by p95 latency"},
                      {"id": "r3", "text": "Estimate what fixing each hot spot would save"}],
        budget=Budget(tokens=120_000, wall_s=3600), exist_ok=True)
    specs = []
    prev: tuple[str, ...] = ()
    for ep in ENDPOINTS:  # one load test at a time: a chain
        specs.append(NodeSpec(f"profile-{ep}", kind="profile", deps=prev, title=f"profile /{ep} under load",
                              serves=("r1",), est_wall_s=2.5))
        prev = (f"profile-{ep}",)
    specs.append(NodeSpec("rank", kind="rank", deps=prev, title="rank the hot spots", serves=("r2",), est_wall_s=2.0))
    specs.append(NodeSpec("estimate", kind="estimate", deps=("rank",), title="estimate the savings", serves=("r3",),
                          est_wall_s=2.0, always_admit=True))
    ledger.add_nodes("perf-audit", specs)
    return list(MIND_TASKS)


class MindSteps:
    """The steps of the mind scenarios, mixed into ``DemoAgent`` (it provides ``ledger``, ``name``,
    ``work``, ``sim``, ``tick_s``, ``log``)."""

    ledger: Ledger
    name: str

    def work(self, claim: Claim, seconds: float, lines: Sequence[str] | Callable[[int], str], *,
             tokens: int | Callable[[int, Pulse | None], int] = 0,
             units_total: float | None = None) -> Generator[float, None, Pulse | None]:
        raise NotImplementedError  # DemoAgent's

    @staticmethod
    def sim(claim: Claim) -> JsonMapping:
        raise NotImplementedError  # DemoAgent's

    # -- perf-audit ------------------------------------------------------------------
    def do_profile(self, claim: Claim) -> Work:
        sim = self.sim(claim)
        ep = claim.node_key[len("profile-"):]
        seconds = uniform_for(sim.get("seed"), claim.node_key, *PROFILE_S)
        mem = claim.inputs.get("memory") or {}
        for m in mem.get("memories") or []:  # a confirmed memory of the workflow: use it
            self.ledger.note(claim, f"following a confirmed memory: {m['text']}")
        if ep == "orm":
            lines = ["instrumenting the ORM session: every endpoint's queries", "38 → 4 queries with selectinload",
                     "p95 /invoices 412 ms → 96 ms (staging)"]
            yield from self.work(claim, seconds, lines, tokens=1200)
            self.ledger.conclude(claim, "One eager-load change in the ORM layer (selectinload on the account and "
                                        "line relations) cuts every endpoint from ~38 queries to 4",
                                 source="ORM query log, load test on staging")
            self.ledger.commit(claim, output={"layer": "orm", "queries_before": 38, "queries_after": 4}, tokens=300)
            return
        queries = 30 + len(ep) * 2
        p95 = 300 + len(ep) * 20
        lines = [f"load test: 200 rps on /{ep} (staging)", f"p95 {p95} ms, p50 {p95 // 3} ms",
                 f"{queries} SQL queries per request: lazy-loaded relations (N+1)"]
        yield from self.work(claim, seconds, lines, tokens=900)
        if claim.node_key == f"profile-{ENDPOINTS[0]}":
            self.ledger.conclude(claim, "Sampling the profile at 1 kHz", kind="rejected",
                                 reason="the profiler's own overhead (+30 %) hid the query pattern: switched to "
                                        "tracing spans", source="py-spy record --rate 1000")
            self.ledger.propose_memory(claim, MEMORY_TEXT, scope="workflow",
                                       source="profiles of /search, /exports and /account (py-spy, tracing spans)")
        self.ledger.conclude(claim, f"/{ep}: p95 {p95} ms; {queries} SQL queries per request (N+1 lazy loads "
                                    "in the ORM)", source=f"load test /{ep}, staging, 200 rps")
        self.ledger.commit(claim, output={"endpoint": ep, "p95_ms": p95, "queries": queries, "shape": "n+1"},
                           tokens=300)
        done = ENDPOINTS.index(ep) + 1 if ep in ENDPOINTS else 0
        if done == int(sim.get("same_shape_after", SAME_SHAPE_AFTER)):
            rest = [f"profile-{e}" for e in ENDPOINTS[done:]]
            version = self.ledger.replan(
                claim.task_id, remove=[*rest, "rank", "estimate"],
                add=[NodeSpec("profile-orm", kind="profile", deps=(claim.node_key,), serves=("r1",),
                              title="profile the ORM layer once (every endpoint goes through it)", est_wall_s=2.5),
                     NodeSpec("rank-2", kind="rank", deps=("profile-orm",), serves=("r2",),
                              title="rank the hot spots", est_wall_s=2.0),
                     NodeSpec("estimate-2", kind="estimate", deps=("rank-2",), serves=("r3",),
                              title="estimate the savings", est_wall_s=2.0, always_admit=True)],
                trigger="pattern", in_flight="wait", actor=self.name,
                reason=f"{done} endpoints in a row show the same shape (N+1 lazy loads in the ORM layer); every "
                       "endpoint goes through that layer, so profile it once instead of each remaining endpoint")
            self.ledger_log(f"replanned {claim.task_id}: plan v{version.version}")

    def do_rank(self, claim: Claim) -> Work:
        yield from self.work(claim, 2.0, ["collecting the profiles", "sorting by p95"], tokens=400)
        self.ledger.conclude(claim, "Hot spot 1: N+1 lazy loads in the ORM (all endpoints); 2: /exports CSV "
                                    "rendering (p95 +140 ms); 3: webhook retries (p99 only)",
                             source="profiles of this task")
        self.ledger.commit(claim, output={"hot_spots": ["orm n+1", "exports csv", "webhook retries"]}, tokens=200)

    def do_estimate(self, claim: Claim) -> Work:
        yield from self.work(claim, 2.0, ["pricing each fix", "writing perf-audit.md"], tokens=500)
        body = (f"# Performance audit: {REPO}\n\n1. ORM eager loading: p95 -75 % on every endpoint\n"
                "2. streaming CSV exports: p95 -140 ms on /exports\n").encode()
        self.ledger.commit(claim, output={"saving": "p95 -75 % on every endpoint"},
                           artifact=("perf-audit.md", body), tokens=300)

    # -- search-latency --------------------------------------------------------------
    def do_trace(self, claim: Claim) -> Work:
        if claim.node_key == "trace-backend":
            yield from self.work(claim, 2.0, ["tracing the search service's SQL", "EXPLAIN: seq scan on titles"],
                                 tokens=900)
            self.ledger.conclude(claim, "The search service scans the titles table (no trigram index): 1.7 s "
                                        "of the 2.4 s", source="EXPLAIN ANALYZE, staging")
            self.ledger.commit(claim, output={"bottleneck": "seq scan on titles", "share": 0.7}, tokens=200)
            return
        yield from self.work(claim, 2.0, ["trace 7f3a: search 2.41 s", "1.9 s in search-svc, 0.3 s in the regex "
                                          "title filter"], tokens=800)
        self.ledger.conclude(claim, "One slow search: 1.9 s in the search service, 0.3 s in the title regex filter",
                             source="trace 7f3a (Jaeger)")
        self.ledger.commit(claim, output={"trace": "7f3a"}, tokens=200, next_nodes=[
            NodeSpec("tune-regex-1", kind="tune", deps=("trace-search",), title="tune the title regex (1)",
                     est_wall_s=3.0)])

    def do_tune(self, claim: Claim) -> Work:
        """The drifting agent: every step looks reasonable, none serves the requirement."""
        sim = self.sim(claim)
        n = int(claim.node_key.rsplit("-", 1)[1])
        alignment = (claim.inputs.get("memory") or {}).get("alignment") or {}
        if alignment.get("verdict") == "drifting":
            yield from self.work(claim, 1.0, ["the alignment check says: drifting"], tokens=200)
            self.ledger.conclude(claim, "Tuning the title regex one variant at a time", kind="rejected",
                                 reason="it is 0.3 s of 2.4 s; the alignment check found the plan no longer serves "
                                        "r1 (the whole path)", source=f"alignment verdict at {alignment.get('at')}")
            self.ledger.commit(claim, output={"stopped": "drifting"}, tokens=100)
            self.ledger.replan(
                claim.task_id, trigger="evidence_conflict", in_flight="wait", actor=self.name,
                reason="the alignment check answered drifting: back to the end-to-end path",
                add=[NodeSpec("trace-backend", kind="trace", deps=(claim.node_key,), serves=("r1",),
                              title="trace the search service's queries", est_wall_s=2.0),
                     NodeSpec("propose-fixes", kind="propose", deps=("trace-backend",), serves=("r2",),
                              title="propose fixes with their saving", est_wall_s=2.0)])
            return
        seconds = uniform_for(sim.get("seed"), claim.node_key, *TUNE_S)
        variants = ("anchored", "non-greedy", "precompiled", "atomic group", "possessive", "lookahead-free")
        v = variants[n % len(variants)]
        yield from self.work(claim, seconds, [f"trying the {v} title regex", f"title filter: {300 - n} ms → "
                                                                            f"{298 - n} ms"], tokens=700)
        last = n >= int(sim.get("tune_cap", TUNE_CAP))
        self.ledger.commit(claim, output={"variant": v, "saved_ms": 2}, tokens=200, next_nodes=[] if last else [
            NodeSpec(f"tune-regex-{n + 1}", kind="tune", deps=(claim.node_key,),
                     title=f"tune the title regex ({n + 1})", est_wall_s=3.0)])

    def do_propose(self, claim: Claim) -> Work:
        yield from self.work(claim, 2.0, ["writing the fixes"], tokens=600)
        self.ledger.conclude(claim, "Fix: a trigram index on titles (p95 2.4 s → ~0.6 s); the regex filter "
                                    "is not worth tuning (0.3 s)", source="this task's traces")
        self.ledger.commit(claim, output={"fixes": ["trigram index on titles"], "saving_s": 1.7}, tokens=200)

    def do_alignment(self, claim: Claim) -> Work:
        """Answer an alignment check from its material: the requirement, the plan, the work done."""
        material = claim.inputs.get("alignment") or {}
        run = (material.get("drift_run") or {}).get("nodes", 0)
        done = material.get("done") or []
        serving = sum(1 for d in done if d.get("serves"))
        yield from self.work(claim, 1.0, [f"{len(done)} nodes done since the last check, {serving} serve a "
                                          "requirement"], tokens=400)
        drifting = run >= 8 or (done and serving * 4 < len(done))
        notes = (f"{run} completed nodes in a row serve no requirement: the work tunes one regex while r1 asks "
                 "for the whole request path" if drifting else "the work maps to the requirements")
        self.ledger.commit(claim, output={"verdict": "drifting" if drifting else "aligned", "notes": notes},
                           tokens=100)

    def ledger_log(self, line: str) -> None:
        log = getattr(self, "log", None)
        if log is not None:
            log(line)


__all__ = ["AUDITOR_KINDS", "MEMORY_TEXT", "MIND_TASKS", "MindSteps", "RESEARCHER_KINDS", "create_mind_tasks"]

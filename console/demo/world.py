"""The demo's simulated world: timings, the roster of agents and their roles, the repository's
modules, and the seeded choices (which fixer loops, which test is flaky).

Written into each task's ``inputs["simulation"]`` at creation: the demo is honest that it is a
simulation, like the ``SIMULATION.json`` in its run directories.
"""

from __future__ import annotations

import hashlib
import random

from store.jsontypes import JsonObject

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

# The workflows the demo's agents know, and their versions: a claim names the version it knows,
# and a task of another version is not claimed (store/ledger/claims.py).
WORKFLOW_VERSIONS = {"code-maintenance": "3", "report": "2", "triage": "1"}
MAINT_KINDS = ("scan", "classify", "fix", "test", "approval", "open_pr", "summary")
WRITER_KINDS = ("draft", "verify", "finalize")
TRIAGE_KINDS = ("triage",)
AUDITOR_KINDS = ("profile", "rank", "estimate")  # the mind scenarios (console/demo/mind.py)
RESEARCHER_KINDS = ("trace", "tune", "propose", "alignment")
ROLES: dict[str, tuple[str, ...] | None] = {
    "fixer": MAINT_KINDS, "writer": WRITER_KINDS, "triager": TRIAGE_KINDS, "any": None,
    "auditor": AUDITOR_KINDS, "researcher": RESEARCHER_KINDS,
}
ROSTER: tuple[tuple[str, str], ...] = (
    ("w1", "fixer"), ("w2", "fixer"), ("w3", "fixer"), ("w4", "writer"), ("w5", "triager"), ("w6", "any"),
    ("w7", "auditor"), ("w8", "researcher"),
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


def rng_for(*parts: object) -> random.Random:
    return random.Random("|".join(str(p) for p in parts))


def uniform_for(seed: object, key: str, lo: float, hi: float) -> float:
    return round(rng_for(seed, key).uniform(lo, hi), 2)


def pick_modules(seed: int) -> list[JsonObject]:
    """The 20 modules of the demo repository for ``seed``: every legacy and api module, and all but
    two of the rest."""
    rng = rng_for("modules", seed)
    optional = [m for m in MODULES if m[1] not in ("legacy", "api")]
    dropped = set(rng.sample([m[0] for m in optional], len(MODULES) - 20))
    return [{"name": n, "kind": k, "core": k == "core"} for n, k in MODULES if n not in dropped]


def maint_simulation(seed: int, *, faults: bool) -> JsonObject:
    mods = pick_modules(seed)
    rng = rng_for("faults", seed)
    sim: JsonObject = {"seed": seed, "modules": mods}
    if faults:
        sim["loop_module"] = rng.choice([m["name"] for m in mods if m["kind"] == "legacy"])
        sim["flaky_module"] = rng.choice([m["name"] for m in mods if m["kind"] == "api"])
    return sim


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = [
    "CRASH_EXIT", "FIX_S", "HISTORY_AGO_S", "HISTORY_TASKS", "IDLE_S", "LEASE_S", "LIVE_TASKS", "LOOP_CAP",
    "MAINT_KINDS", "MODULES", "WORKFLOW_VERSIONS", "REPO", "REPORT_SECTIONS", "RESTART_AFTER_S", "ROLES", "ROSTER", "TEST_S", "TICK_S",
    "TRIAGE_KINDS", "WRITER_KINDS", "maint_simulation", "pick_modules", "rng_for", "sha256_hex", "uniform_for",
]

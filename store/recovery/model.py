"""What recovery decides and how it says so: the check names, decisions and reasons
(docs/contracts.md "Recovery checks and decisions") and the frozen ``Check`` / ``Recovery`` results."""

from __future__ import annotations

from dataclasses import dataclass, field

from store.jsontypes import JsonObject

CHECK_NAMES = ("layout", "context", "state", "artifact", "stable")

REUSE = "reuse_existing_artifact"
NEEDS_HUMAN = "needs_human"
CONTEXT_CHANGED = "context_changed"
UNSUPPORTED = "unsupported_state"
DECISIONS = (REUSE, NEEDS_HUMAN, CONTEXT_CHANGED, UNSUPPORTED)

SEMANTIC_REVIEW = "pending"  # what every check and record says of the content's meaning: nobody reviewed it
ARTIFACT_VERIFIED = "artifact_verified"
EVIDENCE_INVALID = "evidence_incomplete_or_invalid"
INPUTS_CHANGED = "inputs_changed"
STATE_NOT_RECOVERABLE = "state_not_recoverable"


@dataclass(frozen=True)
class Check:
    """One recovery check. ``ran`` is False for checks after the first failure (then ``ok``
    is False too and the evidence says why it did not run)."""

    name: str
    ok: bool
    evidence: str
    ran: bool = True

    def to_json(self) -> JsonObject:
        return {"name": self.name, "ok": self.ok, "evidence": self.evidence, "ran": self.ran}


@dataclass(frozen=True)
class Recovery:
    """The judgement on one run. ``fingerprints`` maps every run file read (path relative to
    the run) to its sha256; ``inputs`` does the same for the project files named in
    ``context.json``. Treat the dicts as read-only."""

    run: str
    decision: str
    reason: str
    checks: tuple[Check, ...]
    fingerprints: dict[str, str] = field(default_factory=dict)
    export_replayed: bool = False
    original_status: str | None = None
    inputs: dict[str, str] = field(default_factory=dict)
    task_id: str | None = None
    node_key: str | None = None
    step: str | None = None
    simulation: bool = False
    run_dir: str = ""
    project_dir: str = ""
    bytes_hashed: int = 0

    @property
    def reusable(self) -> bool:
        return self.decision == REUSE

    def to_json(self, record: str | None = None) -> JsonObject:
        """The ``recover`` JSON shape (docs/contracts.md), plus a few more keys."""
        return {
            "run": self.run,
            "decision": self.decision,
            "reason": self.reason,
            "checks": [c.to_json() for c in self.checks],
            "export_replayed": False,
            # A check verifies evidence, never the content's meaning: that review is still owed
            # whatever the decision — as in the record written for a reuse.
            "semantic_review": SEMANTIC_REVIEW,
            "record": record,
            "original_status": self.original_status,
            "task_id": self.task_id,
            "node_key": self.node_key,
            "step": self.step,
            "simulation": self.simulation,
            "fingerprints": dict(self.fingerprints),
            "inputs": dict(self.inputs),
        }


def short_digest(digest: str | None) -> str:
    """The first 12 hex digits of a digest and an ellipsis (``?…`` for none)."""
    return (digest or "?")[:12] + "…"

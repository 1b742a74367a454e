"""Recovery of interrupted runs: checks, decisions, records and independent verification; and
recovery advice for ledger nodes.

Contracts: docs/contracts.md "Recovery checks and decisions" and the ``recover`` / ``verify`` JSON
shapes. Recovery reads evidence; it never rewrites the run, never replays a step and never
trusts an earlier result: ``record`` and ``verify_record`` check afresh.

    rec = check("runs", "resume-01")                 # a frozen Recovery
    made = record("runs", "resume-01", "review-01", operator="ana@host")
    verify_record("recovery-records", "review-01", "runs")["result"]   # "pass"

The modules, each depending only on those above it (and on ``store.runs`` / ``store.text``):

- ``model``: check names, decisions, reasons; the frozen ``Check`` and ``Recovery``;
- ``checks``: the five checks over one run and the decision (``check``);
- ``handoff``: HANDOFF.md of a record (``render_handoff``, ``HANDOFF_SECTIONS``);
- ``records``: writing a record (``record``, ``record_digest``, ``Recorded``, ``RecordRefused``);
- ``verify``: re-checking a record and its run independently (``verify_record``);
- ``advice``: advice for a failed, orphaned or blocked ledger node (``advise``, ``Advice``).
"""

from __future__ import annotations

from store.recovery.advice import (
    ABANDON,
    ADVICE_TABLE,
    RECOMMENDATIONS,
    RETRY,
    REWIND,
    Advice,
    advise,
    current_input_digest,
)
from store.recovery.checks import check
from store.recovery.handoff import HANDOFF_SECTIONS, render_handoff
from store.recovery.model import (
    ARTIFACT_VERIFIED,
    CHECK_NAMES,
    CONTEXT_CHANGED,
    DECISIONS,
    EVIDENCE_INVALID,
    INPUTS_CHANGED,
    NEEDS_HUMAN,
    REUSE,
    STATE_NOT_RECOVERABLE,
    UNSUPPORTED,
    Check,
    Recovery,
)
from store.recovery.records import (
    RECORD_FILES,
    RECORD_FORMAT,
    RecordRefused,
    Recorded,
    default_records_dir,
    record,
    record_digest,
)
from store.recovery.verify import verify_record

__all__ = [
    "ABANDON",
    "ADVICE_TABLE",
    "ARTIFACT_VERIFIED",
    "CHECK_NAMES",
    "CONTEXT_CHANGED",
    "DECISIONS",
    "EVIDENCE_INVALID",
    "HANDOFF_SECTIONS",
    "INPUTS_CHANGED",
    "NEEDS_HUMAN",
    "RECOMMENDATIONS",
    "RECORD_FILES",
    "RECORD_FORMAT",
    "RETRY",
    "REUSE",
    "REWIND",
    "STATE_NOT_RECOVERABLE",
    "UNSUPPORTED",
    "Advice",
    "Check",
    "RecordRefused",
    "Recorded",
    "Recovery",
    "advise",
    "check",
    "current_input_digest",
    "default_records_dir",
    "record",
    "record_digest",
    "render_handoff",
    "verify_record",
]

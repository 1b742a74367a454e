"""HANDOFF.md of a recovery record: what the next person needs, each claim with its evidence."""

from __future__ import annotations

import json

from store.recovery.model import Recovery
from store.text import safe_line

HANDOFF_SECTIONS = (
    "## Goal and scope",
    "## Version and entry points",
    "## Confirmed facts and their evidence",
    "## Deliberately not done",
    "## Open questions",
    "## Next step and stop conditions",
    "## Budget spent",
)


def _lit(value: object) -> str:
    """An agent-chosen value written into HANDOFF.md: quoted, one line, no control chars."""
    if value is None:
        return "(none)"
    return safe_line(json.dumps(value, ensure_ascii=False))


def render_handoff(rec: Recovery, name: str, operator: str, at: str) -> str:
    """HANDOFF.md for a record: what the next person needs, each claim with its evidence."""
    lines = [
        f"# Recovery handoff {name}: run {rec.run}",
        "",
        f"Written by Warden for {_lit(operator)} at {at}. Decision `{rec.decision}` "
        f"(`{rec.reason}`); status `needs_review`; semantic review `pending`.",
        "",
        HANDOFF_SECTIONS[0],
        "",
        f"- Goal: reuse the artifact the interrupted step {_lit(rec.step)} already wrote, after "
        "verifying it; nothing else.",
        f"- Scope: run {rec.run} (task {_lit(rec.task_id)}, node {_lit(rec.node_key)}). "
        "This record adds a verification; it does not finish, publish or replay anything.",
        "- The original run is left exactly as it was: its state still says "
        f"{_lit(rec.original_status)} and no receipt was invented for the interrupted step.",
        "",
        HANDOFF_SECTIONS[1],
        "",
        f"- Run directory: {_lit(rec.run_dir)} (state.json, context.json, artifact/).",
        f"- Project directory: {_lit(rec.project_dir)}.",
        "- Version: the inputs and code the run was made from are fixed by the fingerprints in "
        "context.json; all of them matched at the time of this record:",
    ]
    lines += [f"  - {_lit(p)} sha256 `{d}`" for p, d in sorted(rec.inputs.items())]
    lines += [
        "- Entry points: `warden verify-record " + name + "` re-checks this record and the run; "
        "`warden recover " + rec.run + "` re-checks the run alone.",
        "",
        HANDOFF_SECTIONS[2],
        "",
    ]
    lines += [f"- `{c.name}`: {'passed' if c.ok else 'failed'}. {safe_line(c.evidence)}"
              for c in rec.checks]
    lines += ["- Fingerprints of every run file read (sha256):"]
    lines += [f"  - {_lit(p)} `{d}`" for p, d in sorted(rec.fingerprints.items())]
    if rec.simulation:
        lines += ["- The run carries SIMULATION.json: it was constructed for testing, not taken "
                  "from a real incident."]
    lines += [
        "",
        HANDOFF_SECTIONS[3],
        "",
        f"- The step {_lit(rec.step)} was not run again (`export_replayed: false`); no side "
        "effect was repeated.",
        "- The run's state.json, receipts and artifact were not modified; no missing receipt was "
        "written after the fact.",
        "- The artifact's content was not reviewed for meaning: only its completeness and "
        "integrity were verified.",
        "",
        HANDOFF_SECTIONS[4],
        "",
        "- Is the artifact's content right (semantic review is pending)?",
        "- Did the interrupted step have effects outside the run directory (messages sent, "
        "records written)? Nothing on disk can show that; check the outside system.",
        "",
        HANDOFF_SECTIONS[5],
        "",
        "- Next: a person reviews the artifact's content, then marks the work reviewed.",
        f"- Before relying on this record run `warden verify-record {name}`; stop if it fails.",
        "- Stop and compare versions if any input changed (`context_changed`); stop if the run "
        "changed after this record. A replay is a new attempt under a new run id linked to "
        f"{rec.run}, decided by a person.",
        "",
        HANDOFF_SECTIONS[6],
        "",
        f"- This recovery: no model or tool calls; {len(rec.fingerprints) + len(rec.inputs)} "
        f"file(s) hashed, {rec.bytes_hashed} bytes read.",
        "- The original run's spending is not recorded in the run directory; see the ledger"
        + (f" task {_lit(rec.task_id)}" if rec.task_id else "")
        + ". Starting a new session does not reset that budget.",
        "",
    ]
    return "\n".join(lines)

"""Constructed run directories for the recovery tests (a tiny agent that gets interrupted).

The "agent" here has three steps — ``load``, ``export``, ``verify`` — and ``export_review`` is
the step that produces the artifact. ``make_run`` plays the agent up to an interruption in the
``export`` step: the artifact may be complete, half written or absent, and the export receipt
was never written. Every run carries SIMULATION.json: these are constructed, not incidents.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from store.runs import write_atomic, write_json  # noqa: F401  (how an agent writes)

INPUTS = {
    "notes/source.md": b"# Source\n\nThe facts the review is made from.\n",
    "agent/exporter.py": b"def export(): ...\n",
}

EXPORT_CALLS: list[str] = []


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def export_review(artifact_dir: Path, text: str = "# Review\n\nQ: why?\nA: because.\n") -> None:
    """The step that produces the artifact: review.md, then its manifest (last)."""
    EXPORT_CALLS.append(str(artifact_dir))
    body = text.encode()
    write_atomic(artifact_dir / "review.md", body)
    write_json(artifact_dir / "manifest.json",
               {"files": {"review.md": {"sha256": sha256(body), "bytes": len(body)}}})


def make_project(project: Path) -> None:
    for rel, data in INPUTS.items():
        write_atomic(project / rel, data)


def make_run(
    runs: Path,
    name: str = "resume-01",
    case: str = "exported",
    *,
    status: str = "interrupted",
    project: Path | None = None,
) -> Path:
    """Build ``runs/name`` interrupted in its export step.

    case: ``exported`` (artifact complete, export receipt missing), ``partial`` (artifact
    written, manifest missing), ``empty`` (interrupted before anything was exported).
    The project (default: the parent of ``runs``) gets the input files when missing.
    """
    project = project or runs.parent
    if not (project / "notes/source.md").exists():
        make_project(project)
    run = runs / name
    run.mkdir(parents=True)
    write_json(run / "context.json",
               {"inputs": {rel: sha256(data) for rel, data in INPUTS.items()},
                "workflow": "review-export", "version": 3})
    write_json(run / "receipts" / "01-load.json", {"step": "load", "ok": True})
    if case in ("exported", "partial"):
        export_review(run / "artifact")
    if case == "partial":
        (run / "artifact" / "manifest.json").unlink()
    write_json(run / "state.json", {
        "run_id": name,
        "task_id": "report-001",
        "node_key": "export",
        "status": status,
        "steps": [
            {"name": "load", "status": "done", "receipt": "receipts/01-load.json"},
            {"name": "export", "status": "running"},
            {"name": "verify", "status": "pending"},
        ],
        "updated_at": "2027-01-15T08:00:00.000Z",
    })
    write_json(run / "SIMULATION.json", {"simulated": True, "case": case})
    return run


def set_state(run: Path, **changes: Any) -> None:
    state = json.loads((run / "state.json").read_text())
    state.update(changes)
    write_json(run / "state.json", state)


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry below ``root``: kind and (for files) sha256 of its bytes, links unresolved."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", "")
            elif p.is_file():
                out[rel] = ("file", sha256(p.read_bytes()))
            else:
                out[rel] = ("other", "")
    return out


def race_record(runs: str, run: str, name: str, records: str, who: str,
                barrier: Any, results: Any) -> None:
    """Target of the two racing processes: wait together, then try to write one record."""
    from store.errors import Refused
    from store.recovery import record

    barrier.wait()
    try:
        record(runs, run, name, records_dir=records, operator=who)
        results.put((who, "won"))
    except Refused as e:
        results.put((who, "refused: " + str(e)))
    except BaseException as e:  # pragma: no cover - reported to the parent test
        results.put((who, f"error: {type(e).__name__}: {e}"))

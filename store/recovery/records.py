"""Recovery records (``record``): a fresh check and, only for ``reuse_existing_artifact``,
``HANDOFF.md`` and ``recovery.json`` written into a directory created exclusively."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass

from store.clock import Clock, iso, system_clock
from store.errors import Refused
from store.jsontypes import JsonObject
from store.recovery.checks import check, resolve_dirs
from store.recovery.handoff import render_handoff
from store.recovery.model import REUSE, SEMANTIC_REVIEW, Recovery
from store.runs import require_name
from store.text import safe_line

RECORD_FORMAT = "warden.recovery/1"
RECORD_FILES = ("HANDOFF.md", "recovery.json")


class RecordRefused(Refused):
    """``record`` refused because the fresh decision is not ``reuse_existing_artifact``;
    ``recovery`` holds that decision so a caller can show why."""

    def __init__(self, message: str, recovery: Recovery) -> None:
        super().__init__(message)
        self.recovery = recovery


@dataclass(frozen=True)
class Recorded:
    """A record written by ``record``: its directory, the fresh Recovery it was made from and
    the ``recovery.json`` document."""

    name: str
    path: str
    recovery: Recovery
    document: JsonObject


def _canonical(doc: JsonObject) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def record_digest(doc: JsonObject) -> str:
    """sha256 of the canonical JSON of a record document without its ``record_digest``."""
    return hashlib.sha256(_canonical({k: v for k, v in doc.items() if k != "record_digest"})
                          ).hexdigest()


def _write_atomic(dir_fd: int, filename: str, data: bytes) -> None:
    """Write ``filename`` in the directory ``dir_fd``: temp file, fsync, rename, fsync dir."""
    tmp = f".{filename}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, filename, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    os.fsync(dir_fd)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _inside(path: str, parent: str) -> bool:
    path, parent = os.path.realpath(path), os.path.realpath(parent)
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


def default_records_dir(project_dir: str) -> str:
    return os.path.join(project_dir, "recovery-records")


def record(
    runs_dir: str | os.PathLike[str],
    run: str,
    name: str,
    records_dir: str | os.PathLike[str] | None = None,
    operator: str = "unknown",
    clock: Clock = system_clock,
    project_dir: str | os.PathLike[str] | None = None,
) -> Recorded:
    """Check ``run`` afresh and, only if the decision is ``reuse_existing_artifact``, write
    ``records_dir/name/{HANDOFF.md, recovery.json}`` into a directory created exclusively.

    Refusals (invalid or existing name, another decision, records inside the run) raise
    ``Refused`` (``RecordRefused`` for a decision) and create nothing; a failure after the
    directory was made removes what this call created. The run is never modified.
    """
    require_name(run)
    require_name(name, "record")
    runs, project = resolve_dirs(runs_dir, project_dir)
    records = os.path.abspath(os.fspath(records_dir)) if records_dir else \
        default_records_dir(project)
    target = os.path.join(records, name)
    if os.path.lexists(target):
        raise Refused(f"record {name} already exists in {safe_line(records)}; records are never "
                      "overwritten: choose another name")
    if _inside(records, os.path.join(runs, run)):
        raise Refused(f"records dir {safe_line(records)} is inside run {run}; the run is never "
                      "modified")
    rec = check(runs, run, project)
    if rec.decision != REUSE:
        raise RecordRefused(
            f"run {run}: {rec.decision} ({rec.reason}); a record is written only for "
            f"{REUSE}; nothing created", rec)
    os.makedirs(records, exist_ok=True)
    try:
        os.mkdir(target, 0o755)
    except FileExistsError:
        raise Refused(f"record {name} already exists in {safe_line(records)}; records are never "
                      "overwritten: choose another name") from None
    try:
        at = iso(clock()) or ""
        handoff = render_handoff(rec, name, operator, at).encode("utf-8")
        doc: JsonObject = {
            "format": RECORD_FORMAT,
            "record": name,
            "run": run,
            "run_dir": rec.run_dir,
            "project_dir": rec.project_dir,
            "task_id": rec.task_id,
            "node_key": rec.node_key,
            "step": rec.step,
            "decision": rec.decision,
            "reason": rec.reason,
            "checks": [c.to_json() for c in rec.checks],
            "action": "verification_only",
            "export_replayed": False,
            "fingerprints": dict(rec.fingerprints),
            "inputs": dict(rec.inputs),
            "original_status": rec.original_status,
            "status": "needs_review",
            "semantic_review": SEMANTIC_REVIEW,
            "simulation": rec.simulation,
            "operator": operator,
            "at": at,
            "handoff_sha256": hashlib.sha256(handoff).hexdigest(),
        }
        doc["record_digest"] = record_digest(doc)
        body = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        dfd = os.open(target, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                      | getattr(os, "O_NOFOLLOW", 0))
        try:
            _write_atomic(dfd, "HANDOFF.md", handoff)
            _write_atomic(dfd, "recovery.json", body)   # last, like a receipt
        finally:
            os.close(dfd)
        _fsync_dir(records)
    except BaseException:
        _remove_created(target)
        raise
    return Recorded(name, target, rec, doc)


def _remove_created(target: str) -> None:
    """Remove a record directory this call created (its known files and temp files only)."""
    try:
        for entry in os.listdir(target):
            if entry in RECORD_FILES or (entry.startswith(".") and entry.endswith(".tmp")):
                os.unlink(os.path.join(target, entry))
        os.rmdir(target)
    except OSError:
        pass

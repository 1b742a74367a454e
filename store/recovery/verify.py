"""Independent verification of a recovery record (``verify_record``): the record re-read, the
original run checked afresh and every fingerprint re-hashed. Nothing earlier is trusted."""

from __future__ import annotations

import json
import os
from typing import Callable

from store.errors import NotFound
from store.jsontypes import JsonObject, JsonValue
from store.recovery.checks import check
from store.recovery.handoff import HANDOFF_SECTIONS
from store.recovery.model import ARTIFACT_VERIFIED, CHECK_NAMES, REUSE, short_digest
from store.recovery.records import RECORD_FILES, record_digest
from store.runs import JSON_CAP, SafeTree, open_run, require_name, valid_name, valid_sha256
from store.text import safe_line

_REQUIRED: dict[str, Callable[[JsonValue], bool]] = {
    "decision": lambda v: v == REUSE,
    "reason": lambda v: v == ARTIFACT_VERIFIED,
    "action": lambda v: v == "verification_only",
    "export_replayed": lambda v: v is False,
    "status": lambda v: v == "needs_review",
    "semantic_review": lambda v: v == "pending",
    "original_status": lambda v: isinstance(v, str),
    "operator": lambda v: isinstance(v, str) and bool(v),
    "at": lambda v: isinstance(v, str) and bool(v),
    "run": valid_name,
    "fingerprints": lambda v: isinstance(v, dict) and bool(v) and all(
        isinstance(k, str) and valid_sha256(d) for k, d in v.items()),
    "checks": lambda v: isinstance(v, list),
}


def verify_record(
    records_dir: str | os.PathLike[str],
    name: str,
    runs_dir: str | os.PathLike[str] | None = None,
    project_dir: str | os.PathLike[str] | None = None,
) -> JsonObject:
    """Independently re-read a record and the original run; the ``verify`` JSON shape.

    Passes only when the record is well formed and unaltered, every fingerprint still matches
    the run, and a fresh check of the run reaches the recorded decision. ``runs_dir`` and
    ``project_dir`` default to the ones the record names. Raises ``Refused`` for an invalid
    name and ``NotFound`` when there is no such record; everything else is a problem.
    """
    require_name(name, "record")
    records = os.path.abspath(os.fspath(records_dir))
    tree, problem = SafeTree.open_child(records, name)
    if tree is None and problem == "missing":
        raise NotFound(f"no record named {name} in {safe_line(records)}")
    problems: list[str] = []
    doc: JsonObject | None = None
    if tree is None:
        problems.append(f"record {name}: {problem}")
    else:
        with tree:
            doc = _read_record(tree, problems)
    if doc is not None:
        _verify_against_run(doc, runs_dir, project_dir, problems)
    doc = doc or {}
    return {
        "result": "fail" if problems else "pass",
        "status": doc.get("status") if isinstance(doc.get("status"), str) else None,
        "original_status": doc.get("original_status")
        if isinstance(doc.get("original_status"), str) else None,
        "semantic_review": doc.get("semantic_review")
        if isinstance(doc.get("semantic_review"), str) else None,
        "problems": [safe_line(p) for p in problems],
        "record": os.path.join(records, name),
        "run": doc.get("run") if valid_name(doc.get("run")) else None,
    }


def _read_record(tree: SafeTree, problems: list[str]) -> JsonObject | None:
    entries, walk_problems = tree.walk()
    problems.extend(walk_problems)
    extra = [e.path for e in entries if e.path not in RECORD_FILES]
    problems.extend(f"{p}: not part of a record" for p in extra)
    r = tree.read_json("recovery.json")
    if not r.ok:
        problems.append(r.problem or "recovery.json: unreadable")
        return None
    if not isinstance(r.value, dict):
        problems.append("recovery.json: not a JSON object")
        return None
    doc: JsonObject = r.value
    for key, ok in _REQUIRED.items():
        if key not in doc:
            problems.append(f"recovery.json: {key} missing")
        elif not ok(doc[key]):
            problems.append(f"recovery.json: {key} is {json.dumps(doc[key])[:60]}")
    checks = doc.get("checks")
    if isinstance(checks, list):
        names = [c.get("name") if isinstance(c, dict) else None for c in checks]
        if tuple(names) != CHECK_NAMES:
            problems.append(f"recovery.json: checks are not {', '.join(CHECK_NAMES)} in order")
        elif not all(c.get("ok") is True and c.get("ran", True) is True for c in checks):
            problems.append("recovery.json: decision reuse, yet not every check passed")
    if doc.get("record_digest") != record_digest(doc):
        problems.append("recovery.json: altered after it was written (record_digest differs)")
    h = tree.read("HANDOFF.md", cap=JSON_CAP)
    if not h.ok:
        problems.append(h.problem or "HANDOFF.md: unreadable")
    else:
        if h.sha256 != doc.get("handoff_sha256"):
            problems.append("HANDOFF.md: altered after it was written (sha256 differs)")
        text = (h.data or b"").decode("utf-8", errors="replace")
        missing = [s[3:] for s in HANDOFF_SECTIONS if s not in text.splitlines()]
        if missing:
            problems.append(f"HANDOFF.md: sections missing: {', '.join(missing)}")
    return doc


def _verify_against_run(doc: JsonObject, runs_dir: str | os.PathLike[str] | None,
                        project_dir: str | os.PathLike[str] | None, problems: list[str]) -> None:
    run = doc.get("run")
    if not valid_name(run):
        return
    if runs_dir is None:
        run_dir = doc.get("run_dir")
        if not isinstance(run_dir, str) or not run_dir:
            problems.append("no runs dir given and the record names none")
            return
        runs_dir = os.path.dirname(run_dir)
    if project_dir is None and isinstance(doc.get("project_dir"), str) and doc["project_dir"]:
        project_dir = doc["project_dir"]
    try:
        fresh = check(runs_dir, run, project_dir)
    except NotFound as e:
        problems.append(f"original run: {e}")
        return
    if fresh.decision != doc.get("decision"):
        failed = next((c for c in fresh.checks if c.ran and not c.ok), None)
        why = f" — {failed.name}: {failed.evidence}" if failed else ""
        problems.append(f"the decision does not follow from the evidence: a fresh check says "
                        f"{fresh.decision} ({fresh.reason}){why}")
    fingerprints = doc.get("fingerprints")
    recorded: dict[str, JsonValue] = fingerprints if isinstance(fingerprints, dict) else {}
    tree, problem = open_run(runs_dir, run)
    if tree is None:
        problems.append(f"original run: {problem}")
    else:
        with tree:  # every fingerprint re-hashed here, whatever the fresh check reached
            for path, was in sorted(recorded.items()):
                r = tree.read(str(path))
                if not r.ok:
                    problems.append(r.problem or f"{path}: unreadable")
                elif r.sha256 != was:
                    problems.append(f"{path}: sha256 now {short_digest(r.sha256)}, the record says "
                                    f"{short_digest(str(was))}")
    for path in sorted(fresh.fingerprints.keys() - recorded.keys()):
        problems.append(f"{path}: read by a fresh check but not fingerprinted in the record")
    rec_inputs = doc.get("inputs")
    if isinstance(rec_inputs, dict):
        for path, was in sorted(rec_inputs.items()):
            now = fresh.inputs.get(path)
            if now is not None and now != was:
                problems.append(f"input {path}: sha256 now {short_digest(now)}, the record says "
                                f"{short_digest(was)}")
    if doc.get("original_status") != fresh.original_status:
        problems.append(f"original_status: the record says "
                        f"{json.dumps(doc.get('original_status'))[:40]}, the run now says "
                        f"{json.dumps(fresh.original_status)[:40]}")

"""Recovery of interrupted runs: checks, decisions, records and independent verification.

Contracts: DESIGN.md "Recovery checks and decisions" and the ``recover`` / ``verify`` JSON
shapes. Recovery reads evidence; it never rewrites the run, never replays a step and never
trusts an earlier result: ``record`` and ``verify_record`` check afresh.

    rec = check("runs", "resume-01")                 # a frozen Recovery
    made = record("runs", "resume-01", "review-01", operator="ana@host")
    verify_record("recovery-records", "review-01", "runs")["result"]   # "pass"
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable

from store.clock import Clock, iso, system_clock
from store.errors import NotFound, Refused
from store.runs import (
    JSON_CAP,
    RUN_STATUSES,
    STEP_STATUSES,
    Entry,
    SafeTree,
    context_inputs,
    manifest_files,
    open_run,
    printable,
    require_name,
    valid_name,
    valid_sha256,
)

CHECK_NAMES = ("layout", "context", "state", "artifact", "stable")

REUSE = "reuse_existing_artifact"
NEEDS_HUMAN = "needs_human"
CONTEXT_CHANGED = "context_changed"
UNSUPPORTED = "unsupported_state"
DECISIONS = (REUSE, NEEDS_HUMAN, CONTEXT_CHANGED, UNSUPPORTED)

ARTIFACT_VERIFIED = "artifact_verified"
EVIDENCE_INVALID = "evidence_incomplete_or_invalid"
INPUTS_CHANGED = "inputs_changed"
STATE_NOT_RECOVERABLE = "state_not_recoverable"

RECORD_FORMAT = "warden.recovery/1"
RECORD_FILES = ("HANDOFF.md", "recovery.json")
HANDOFF_SECTIONS = (
    "## Goal and scope",
    "## Version and entry points",
    "## Confirmed facts and their evidence",
    "## Deliberately not done",
    "## Open questions",
    "## Next step and stop conditions",
    "## Budget spent",
)

_MAX_LISTED = 5


@dataclass(frozen=True)
class Check:
    """One recovery check. ``ran`` is False for checks after the first failure (then ``ok``
    is False too and the evidence says why it did not run)."""

    name: str
    ok: bool
    evidence: str
    ran: bool = True

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self, record: str | None = None) -> dict[str, Any]:
        """The ``recover`` JSON shape (DESIGN.md), plus a few more keys."""
        return {
            "run": self.run,
            "decision": self.decision,
            "reason": self.reason,
            "checks": [c.to_json() for c in self.checks],
            "export_replayed": False,
            "record": record,
            "original_status": self.original_status,
            "task_id": self.task_id,
            "node_key": self.node_key,
            "step": self.step,
            "simulation": self.simulation,
            "fingerprints": dict(self.fingerprints),
            "inputs": dict(self.inputs),
        }


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
    document: dict[str, Any]


# --------------------------------------------------------------------------- check


def _listed(items: list[str]) -> str:
    shown = "; ".join(items[:_MAX_LISTED])
    if len(items) > _MAX_LISTED:
        shown += f"; and {len(items) - _MAX_LISTED} more"
    return shown


def _short(digest: str | None) -> str:
    return (digest or "?")[:12] + "…"


_Outcome = tuple[bool, str, str, str]  # ok, evidence, decision if failed, reason if failed


class _Session:
    """One pass of the five checks over one run. Holds what was read so ``stable`` can
    re-read it and the Recovery can list it."""

    def __init__(self, tree: SafeTree | None, tree_problem: str | None, run: str,
                 run_dir: str, project_dir: str) -> None:
        self.tree = tree
        self.tree_problem = tree_problem
        self.run = run
        self.run_dir = run_dir
        self.project_dir = project_dir
        self.entries: tuple[Entry, ...] = ()
        self.by_path: dict[str, Entry] = {}
        self.reads: dict[str, str] = {}
        self.input_reads: dict[str, str] = {}
        self.unstable: list[str] = []
        self.inputs: dict[str, str] = {}
        self.original_status: str | None = None
        self.task_id: str | None = None
        self.node_key: str | None = None
        self.step: str | None = None
        self.simulation = False
        self.bytes_hashed = 0

    # -- reading with bookkeeping --------------------------------------------------------

    def _saw(self, reads: dict[str, str], path: str, digest: str | None, size: int | None) -> None:
        if digest is None:
            return
        self.bytes_hashed += size or 0
        before = reads.setdefault(path, digest)
        if before != digest:
            self.unstable.append(f"{path} changed between two reads")

    def read_json(self, path: str) -> Any:
        assert self.tree is not None
        r = self.tree.read_json(path)
        self._saw(self.reads, path, r.sha256, r.size)
        return r

    def hash(self, path: str):  # -> FileRead
        assert self.tree is not None
        r = self.tree.read(path)
        self._saw(self.reads, path, r.sha256, r.size)
        return r

    # -- the checks ----------------------------------------------------------------------

    def layout(self) -> _Outcome:
        fail = (NEEDS_HUMAN, EVIDENCE_INVALID)
        if self.tree is None:
            return (False, f"run directory {self.run}: {self.tree_problem}", *fail)
        self.entries, walk_problems = self.tree.walk()
        self.by_path = {e.path: e for e in self.entries}
        problems = list(walk_problems)
        for required in ("state.json", "context.json"):
            e = self.by_path.get(required)
            if e is None:
                problems.append(f"{required}: missing")
            elif e.kind != "file" and not any(p.startswith(required + ":") for p in problems):
                problems.append(f"{required}: a {e.kind}, not a regular file")
        if problems:
            return (False, _listed(problems), *fail)
        ctx = self.read_json("context.json")
        if not ctx.ok:
            return (False, ctx.problem, *fail)
        inputs, problem = context_inputs(ctx.value)
        if problem:
            return (False, f"context.json: {problem}", *fail)
        self.inputs = inputs
        n_files = sum(1 for e in self.entries if e.kind == "file")
        return (
            True,
            f"run name valid; {len(self.entries)} entries ({n_files} files), no symlink or "
            f"special file; state.json and context.json regular; context.json names "
            f"{len(inputs)} input(s)",
            *fail,
        )

    def context(self) -> _Outcome:
        fail = (CONTEXT_CHANGED, INPUTS_CHANGED)
        project, problem = SafeTree.open_root(self.project_dir)
        changed: list[str] = []
        if project is None:
            changed = [f"project dir {self.project_dir}: {problem}"]
        else:
            with project:
                for path, want in sorted(self.inputs.items()):
                    r = project.read(path)
                    self._saw(self.input_reads, path, r.sha256, r.size)
                    if not r.ok:
                        changed.append(r.problem or f"{path}: unreadable")
                    elif r.sha256 != want:
                        changed.append(
                            f"{path}: sha256 now {_short(r.sha256)}, context.json says {_short(want)}"
                        )
        if changed:
            return (False, "inputs changed since the run: " + _listed(changed), *fail)
        return (True, f"{len(self.inputs)} input(s) match context.json under {self.project_dir}",
                *fail)

    def state(self) -> _Outcome:
        malformed = (NEEDS_HUMAN, EVIDENCE_INVALID)
        unsupported = (UNSUPPORTED, STATE_NOT_RECOVERABLE)
        r = self.read_json("state.json")
        if not r.ok:
            return (False, r.problem, *malformed)
        state = r.value
        if not isinstance(state, dict):
            return (False, "state.json: not a JSON object", *malformed)
        for key in ("task_id", "node_key"):
            if isinstance(state.get(key), str):
                setattr(self, key, state[key])
        self._read_simulation()
        if state.get("run_id") != self.run:
            return (False, f"state.json: run_id {json.dumps(state.get('run_id'))[:70]} is not "
                    f"this run ({self.run})", *malformed)
        status = state.get("status")
        if not isinstance(status, str):
            return (False, "state.json: status missing or not a string", *malformed)
        self.original_status = status
        steps = state.get("steps")
        if not isinstance(steps, list) or not all(
            isinstance(s, dict) and isinstance(s.get("name"), str)
            and isinstance(s.get("status"), str) for s in steps
        ):
            return (False, "state.json: steps is not a list of {name, status} objects",
                    *malformed)
        if status != "interrupted":
            known = "" if status in RUN_STATUSES else "unknown "
            return (False, f"{known}status {json.dumps(status)[:60]}: recovery handles only "
                    f"\"interrupted\"", *unsupported)
        unknown = [s["name"] for s in steps if s["status"] not in STEP_STATUSES]
        if unknown:
            return (False, f"step(s) with unknown status: {_listed(unknown)}", *unsupported)
        running = [(i, s) for i, s in enumerate(steps) if s["status"] == "running"]
        if len(running) != 1:
            return (False, f"{len(running)} steps running; recovery handles exactly one",
                    *unsupported)
        index, step = running[0]
        self.step = step["name"]
        if step.get("receipt") not in (None, "", False):
            return (False, f"step {json.dumps(self.step)[:60]} names a receipt in state.json: "
                    "its success was recorded", *unsupported)
        receipts = self._receipts_for(self.step)
        if receipts:
            return (False, f"step {json.dumps(self.step)[:60]} has a receipt: "
                    f"{_listed(receipts)}", *unsupported)
        return (
            True,
            f"status interrupted; step {json.dumps(self.step)[:60]} ({index + 1} of "
            f"{len(steps)}) running with no receipt"
            + ("; marked SIMULATION" if self.simulation else ""),
            *malformed,
        )

    def _receipts_for(self, step: str) -> list[str]:
        pattern = re.compile(r"receipts/\d+-" + re.escape(step) + r"\.json")
        return [e.path for e in self.entries if pattern.fullmatch(e.path)]

    def _read_simulation(self) -> None:
        if "SIMULATION.json" in self.by_path:
            self.simulation = True
            self.read_json("SIMULATION.json")  # fingerprinted; its content decides nothing

    def artifact(self) -> _Outcome:
        fail = (NEEDS_HUMAN, EVIDENCE_INVALID)
        top = self.by_path.get("artifact")
        if top is None:
            return (False, "no artifact/ directory: nothing shows the step's output", *fail)
        if top.kind != "dir":
            return (False, f"artifact: a {top.kind}, not a directory", *fail)
        if "artifact/manifest.json" not in self.by_path:
            return (False, "artifact/manifest.json missing: the artifact cannot be shown "
                    "complete", *fail)
        m = self.read_json("artifact/manifest.json")
        if not m.ok:
            return (False, m.problem, *fail)
        files, problem = manifest_files(m.value)
        if problem:
            return (False, f"artifact/manifest.json: {problem}", *fail)
        problems: list[str] = []
        total = 0
        for name, meta in sorted(files.items()):
            path = "artifact/" + name
            e = self.by_path.get(path)
            if e is None:
                problems.append(f"{path}: listed in the manifest, missing")
                continue
            if e.kind != "file":
                problems.append(f"{path}: a {e.kind}, not a regular file")
                continue
            r = self.hash(path)
            if not r.ok:
                problems.append(r.problem or f"{path}: unreadable")
            elif r.size != meta["bytes"]:
                problems.append(f"{path}: {r.size} bytes, manifest says {meta['bytes']}")
            elif r.sha256 != meta["sha256"]:
                problems.append(f"{path}: sha256 {_short(r.sha256)}, manifest says "
                                f"{_short(meta['sha256'])}")
            else:
                total += r.size or 0
        listed = {"artifact/" + n for n in files} | {"artifact/manifest.json"}
        extra = [e.path for e in self.entries
                 if e.path.startswith("artifact/") and e.kind == "file" and e.path not in listed]
        problems.extend(f"{p}: not listed in the manifest" for p in extra)
        if problems:
            return (False, _listed(problems), *fail)
        return (True, f"manifest lists {len(files)} file(s), {total} bytes; each present, "
                "regular, size and sha256 match; no unlisted file", *fail)

    def stable(self) -> _Outcome:
        fail = (NEEDS_HUMAN, EVIDENCE_INVALID)
        assert self.tree is not None
        problems = list(self.unstable)
        entries, walk_problems = self.tree.walk()
        problems.extend(walk_problems)
        before = {e.path: e.signature for e in self.entries}
        after = {e.path: e.signature for e in entries}
        for path in sorted(before.keys() | after.keys()):
            if path not in after:
                problems.append(f"{path}: disappeared while checking")
            elif path not in before:
                problems.append(f"{path}: appeared while checking")
            elif before[path] != after[path] and before[path][1] != "dir":
                problems.append(f"{path}: changed while checking (size, time or inode)")
        for path, digest in sorted(self.reads.items()):
            r = self.tree.read(path)
            if r.sha256 != digest:
                problems.append(f"{path}: content changed while checking")
        project, _ = SafeTree.open_root(self.project_dir)
        if project is not None:
            with project:
                for path, digest in sorted(self.input_reads.items()):
                    if project.read(path).sha256 != digest:
                        problems.append(f"input {path}: changed while checking")
        elif self.input_reads:
            problems.append("project dir: disappeared while checking")
        if problems:
            return (False, _listed(problems), *fail)
        n = len(self.reads) + len(self.input_reads)
        return (True, f"{n} file(s) read twice, unchanged; listing of {len(entries)} entries "
                "unchanged", *fail)


def _resolve(runs_dir: str | os.PathLike[str], project_dir: str | os.PathLike[str] | None
             ) -> tuple[str, str]:
    runs = os.path.abspath(os.fspath(runs_dir))
    project = os.path.abspath(os.fspath(project_dir)) if project_dir else os.path.dirname(runs)
    return runs, project


def check(runs_dir: str | os.PathLike[str], run: str,
          project_dir: str | os.PathLike[str] | None = None) -> Recovery:
    """Check one run and decide. Raises ``Refused`` for an invalid run name (nothing read)
    and ``NotFound`` when there is no such run; every other problem is evidence."""
    require_name(run)
    runs, project = _resolve(runs_dir, project_dir)
    tree, problem = open_run(runs, run)
    s = _Session(tree, problem, run, os.path.join(runs, run), project)
    checks: list[Check] = []
    decision, reason = REUSE, ARTIFACT_VERIFIED
    failed: str | None = None
    try:
        for name in CHECK_NAMES:
            if failed is not None:
                checks.append(Check(name, False, f"not run: {failed} failed first", ran=False))
                continue
            ok, evidence, fail_decision, fail_reason = getattr(s, name)()
            checks.append(Check(name, ok, printable(evidence)))
            if not ok:
                failed, decision, reason = name, fail_decision, fail_reason
    finally:
        if tree is not None:
            tree.close()
    return Recovery(
        run=run,
        decision=decision,
        reason=reason,
        checks=tuple(checks),
        fingerprints=dict(sorted(s.reads.items())),
        original_status=s.original_status,
        inputs=dict(sorted(s.input_reads.items())),
        task_id=s.task_id,
        node_key=s.node_key,
        step=s.step,
        simulation=s.simulation,
        run_dir=s.run_dir,
        project_dir=project,
        bytes_hashed=s.bytes_hashed,
    )


# --------------------------------------------------------------------------- record


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def record_digest(doc: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a record document without its ``record_digest``."""
    return hashlib.sha256(_canonical({k: v for k, v in doc.items() if k != "record_digest"})
                          ).hexdigest()


def _lit(value: Any) -> str:
    """An agent-chosen value written into HANDOFF.md: quoted, one line, no control chars."""
    if value is None:
        return "(none)"
    return printable(json.dumps(value, ensure_ascii=False))


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
    lines += [f"- `{c.name}`: {'passed' if c.ok else 'failed'}. {printable(c.evidence)}"
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
    runs, project = _resolve(runs_dir, project_dir)
    records = os.path.abspath(os.fspath(records_dir)) if records_dir else \
        default_records_dir(project)
    target = os.path.join(records, name)
    if os.path.lexists(target):
        raise Refused(f"record {name} already exists in {records}; records are never "
                      "overwritten: choose another name")
    if _inside(records, os.path.join(runs, run)):
        raise Refused(f"records dir {records} is inside run {run}; the run is never modified")
    rec = check(runs, run, project)
    if rec.decision != REUSE:
        raise RecordRefused(
            f"run {run}: {rec.decision} ({rec.reason}); a record is written only for "
            f"{REUSE}; nothing created", rec)
    os.makedirs(records, exist_ok=True)
    try:
        os.mkdir(target, 0o755)
    except FileExistsError:
        raise Refused(f"record {name} already exists in {records}; records are never "
                      "overwritten: choose another name") from None
    try:
        at = iso(clock()) or ""
        handoff = render_handoff(rec, name, operator, at).encode("utf-8")
        doc: dict[str, Any] = {
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
            "semantic_review": "pending",
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


# --------------------------------------------------------------------------- verify

_REQUIRED: dict[str, Callable[[Any], bool]] = {
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
) -> dict[str, Any]:
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
        raise NotFound(f"no record named {name} in {records}")
    problems: list[str] = []
    doc: dict[str, Any] | None = None
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
        "problems": [printable(p) for p in problems],
        "record": os.path.join(records, name),
        "run": doc.get("run") if valid_name(doc.get("run")) else None,
    }


def _read_record(tree: SafeTree, problems: list[str]) -> dict[str, Any] | None:
    entries, walk_problems = tree.walk()
    problems.extend(walk_problems)
    extra = [e.path for e in entries if e.path not in RECORD_FILES]
    problems.extend(f"{p}: not part of a record" for p in extra)
    r = tree.read_json("recovery.json")
    if not r.ok:
        problems.append(r.problem or "recovery.json: unreadable")
        return None
    doc = r.value
    if not isinstance(doc, dict):
        problems.append("recovery.json: not a JSON object")
        return None
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


def _verify_against_run(doc: dict[str, Any], runs_dir: Any, project_dir: Any,
                        problems: list[str]) -> None:
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
    recorded = doc.get("fingerprints") if isinstance(doc.get("fingerprints"), dict) else {}
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
                    problems.append(f"{path}: sha256 now {_short(r.sha256)}, the record says "
                                    f"{_short(str(was))}")
    for path in sorted(fresh.fingerprints.keys() - recorded.keys()):
        problems.append(f"{path}: read by a fresh check but not fingerprinted in the record")
    rec_inputs = doc.get("inputs")
    if isinstance(rec_inputs, dict):
        for path, was in sorted(rec_inputs.items()):
            now = fresh.inputs.get(path)
            if now is not None and now != was:
                problems.append(f"input {path}: sha256 now {_short(now)}, the record says "
                                f"{_short(was)}")
    if doc.get("original_status") != fresh.original_status:
        problems.append(f"original_status: the record says "
                        f"{json.dumps(doc.get('original_status'))[:40]}, the run now says "
                        f"{json.dumps(fresh.original_status)[:40]}")


# --------------------------------------------------------------------------- ledger-node advice

RETRY = "retry"
REWIND = "rewind"
ABANDON = "abandon"
RECOMMENDATIONS = (RETRY, REWIND, NEEDS_HUMAN, ABANDON)

ADVICE_TABLE: tuple[tuple[str, str, str], ...] = (
    # (when, recommendation, reason) — the first row that applies decides (docs/recovery.md)
    ("an effect was intended but never confirmed", NEEDS_HUMAN, "effect_unconfirmed"),
    ("the node is blocked on a handoff", NEEDS_HUMAN, "awaiting_human"),
    ("the node is outside the task's current preconditions", ABANDON, "out_of_scope"),
    ("failed with failure_class irreversible_write", NEEDS_HUMAN, "irreversible_write"),
    ("failed with failure_class spec", NEEDS_HUMAN, "spec_problem"),
    ("its inputs changed since it ran", REWIND, "inputs_changed"),
    ("failed with failure_class conclusion", REWIND, "conclusion_rejected"),
    ("failed with failure_class transient or idempotent_write", RETRY, "safe_to_retry"),
    ("orphaned: running, lease expired, nothing above applies", RETRY, "orphaned"),
    ("failed with no known failure_class", NEEDS_HUMAN, "failure_unclassified"),
)


@dataclass(frozen=True)
class Advice:
    """Recovery advice for one ledger node: a recommendation with the evidence behind it.
    ``target`` is the node an operator action would start from (for rewind: the divergence
    point, here the node itself)."""

    task_id: str
    node_key: str
    status: str
    situation: str
    recommendation: str
    reason: str
    evidence: tuple[str, ...]
    target: str

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "node": self.node_key,
            "status": self.status,
            "situation": self.situation,
            "recommendation": self.recommendation,
            "reason": self.reason,
            "evidence": list(self.evidence),
            "target": self.target,
        }


def current_input_digest(task_inputs: Any, dep_digests: dict[str, str | None]) -> str:
    """The digest a claim of the node would record now (the ledger's formula at claim time:
    the task's inputs and each dependency's current output digest)."""
    from store.ledger import digest_json

    return digest_json({"task": task_inputs, "deps": dep_digests})


def _out_of_scope(task_pre: Any, node_pre: Any) -> list[str]:
    """Keys on which the node's preconditions exclude the task's current value (DESIGN.md
    narrow: a different value, or a list without it)."""
    if not isinstance(task_pre, dict) or not isinstance(node_pre, dict):
        return []
    out = []
    for key, want in task_pre.items():
        if key not in node_pre:
            continue
        have = node_pre[key]
        if (want not in have) if isinstance(have, list) else (have != want):
            out.append(f"{key}: node needs {json.dumps(have)[:60]}, task now {json.dumps(want)[:60]}")
    return out


def advise(ledger: Any, task_id: str, node_key: str) -> Advice:
    """Advice for a failed, orphaned (running, lease expired) or blocked node.

    Reads only; changes nothing. Raises ``NotFound`` for an unknown task or node and
    ``Refused`` for a node in any other state (nothing to recover).
    """
    detail = ledger.node_detail(task_id, node_key, events_limit=20, observations_limit=1)
    node = detail.node
    task = ledger.task(task_id)
    now = ledger.now()
    status = node.status
    orphaned = status == "running" and node.lease_until is not None and node.lease_until <= now
    if status == "running" and not orphaned:
        left = (node.lease_until - now) if node.lease_until is not None else None
        raise Refused(f"{task_id}/{node_key} is running under a live lease held by "
                      f"{node.lease_owner}" + (f" for {left:.0f}s more" if left is not None else "")
                      + "; nothing to recover yet")
    if status not in ("failed", "blocked") and not orphaned:
        raise Refused(f"{task_id}/{node_key} is {status}; advice is for failed, orphaned or "
                      "blocked nodes")
    situation = "orphaned" if orphaned else status

    evidence: list[str] = [f"status {situation}; attempt {node.attempt}, claims {node.claim_count}"
                           + (f" of {node.max_claims}" if node.max_claims is not None else "")]
    if orphaned:
        evidence.append(f"lease held by {node.lease_owner} expired at {iso(node.lease_until)} "
                        f"({now - node.lease_until:.0f}s ago); nobody reclaimed it")
    else:
        evidence.append("no live lease")
    if node.failure_class or node.error:
        evidence.append(f"failure_class {node.failure_class or '(none)'}"
                        + (f"; error: {node.error[:200]}" if node.error else "")
                        + ("" if node.retryable else "; marked not retryable"))
    unconfirmed = [e for e in detail.effects if e.status == "intended"]
    for e in detail.effects:
        evidence.append(f"effect {e.effect_key}: {e.status}"
                        + (f" ({e.external_id})" if e.external_id else "")
                        + (f"; compensation: {e.compensation}" if e.compensation else ""))
    open_handoffs = [h for h in detail.handoffs if h.status == "open"]
    for h in open_handoffs:
        evidence.append(f"handoff {h.id} open ({h.kind}): {h.question[:200]}")

    deps = ledger.nodes(task_id, list(node.deps)) if node.deps else []
    dep_digests = {d.key: d.output_digest for d in deps}
    now_digest = current_input_digest(task.inputs, dep_digests)
    inputs_changed = node.input_digest is not None and node.input_digest != now_digest
    if node.input_digest is None:
        evidence.append("input digest: never recorded (the node was never claimed)")
    elif inputs_changed:
        moved = [f"{d.key} ({d.status})" for d in deps if d.status not in ("succeeded", "abandoned")]
        evidence.append(f"inputs changed since it ran: input digest {_short(node.input_digest)} "
                        f"at claim, {_short(now_digest)} now"
                        + (f"; dependencies not finished: {', '.join(moved)}" if moved else ""))
    else:
        evidence.append(f"inputs unchanged since it ran (input digest {_short(now_digest)})")
    for a in detail.artifacts[-3:]:
        evidence.append(f"artifact {a.name}: sha256 {_short(a.sha256)}, {a.size} bytes "
                        f"(attempt {a.attempt})")
    if node.output_digest:
        evidence.append(f"output digest {_short(node.output_digest)}")
    scope = _out_of_scope(task.preconditions, node.preconditions)
    if scope:
        evidence.append("outside the task's preconditions: " + "; ".join(scope))

    fc = node.failure_class if status == "failed" else None
    rows = (
        bool(unconfirmed),
        status == "blocked",
        bool(scope),
        fc == "irreversible_write",
        fc == "spec",
        inputs_changed,
        fc == "conclusion",
        fc in ("transient", "idempotent_write"),
        orphaned,
        status == "failed",
    )
    index = rows.index(True)  # the last row always applies to a failed node
    _, recommendation, reason = ADVICE_TABLE[index]
    lead = {
        "effect_unconfirmed": "may have happened: check the outside system for "
        + ", ".join(e.effect_key for e in unconfirmed) + " before anything runs again",
        "awaiting_human": "a person must answer the open handoff",
        "out_of_scope": "the task no longer wants this node",
        "irreversible_write": "an irreversible write failed: a person decides what happened",
        "spec_problem": "the task's specification is at fault: a person fixes it first",
        "inputs_changed": "its inputs changed since it ran: rerun it and what depends on it",
        "conclusion_rejected": "its conclusion was rejected: rewind to where it diverged",
        "safe_to_retry": f"a {fc} failure is safe to try again",
        "orphaned": "its worker vanished with nothing left unconfirmed: reclaiming is safe",
        "failure_unclassified": "the failure was not classified: a person decides",
    }[reason]
    return Advice(task_id, node_key, status, situation, recommendation, reason,
                  tuple(printable(e) for e in (lead, *evidence)), node_key)

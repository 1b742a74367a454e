"""The five checks over one run and the decision they reach (``check``): a pure read."""

from __future__ import annotations

import json
import os
import re

from store.jsontypes import JsonObject
from store.recovery.model import (
    ARTIFACT_VERIFIED,
    CHECK_NAMES,
    CONTEXT_CHANGED,
    EVIDENCE_INVALID,
    INPUTS_CHANGED,
    NEEDS_HUMAN,
    REUSE,
    STATE_NOT_RECOVERABLE,
    UNSUPPORTED,
    Check,
    Recovery,
    short_digest,
)
from store.runs import (
    RUN_STATUSES,
    STEP_STATUSES,
    Entry,
    FileRead,
    JsonRead,
    SafeTree,
    context_inputs,
    manifest_files,
    open_run,
    require_name,
)
from store.text import safe_line

_MAX_LISTED = 5


def _listed(items: list[str]) -> str:
    shown = "; ".join(items[:_MAX_LISTED])
    if len(items) > _MAX_LISTED:
        shown += f"; and {len(items) - _MAX_LISTED} more"
    return shown


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

    def read_json(self, path: str) -> JsonRead:
        assert self.tree is not None
        r = self.tree.read_json(path)
        self._saw(self.reads, path, r.sha256, r.size)
        return r

    def hash(self, path: str) -> FileRead:
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
            return (False, ctx.problem or "context.json: unreadable", *fail)
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
                            f"{path}: sha256 now {short_digest(r.sha256)}, context.json says {short_digest(want)}"
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
            return (False, r.problem or "state.json: unreadable", *malformed)
        if not isinstance(r.value, dict):
            return (False, "state.json: not a JSON object", *malformed)
        state: JsonObject = r.value
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
            return (False, m.problem or "artifact/manifest.json: unreadable", *fail)
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
                problems.append(f"{path}: sha256 {short_digest(r.sha256)}, manifest says "
                                f"{short_digest(meta['sha256'])}")
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


def resolve_dirs(runs_dir: str | os.PathLike[str], project_dir: str | os.PathLike[str] | None
                 ) -> tuple[str, str]:
    """The absolute runs and project directories; the project defaults to the runs' parent."""
    runs = os.path.abspath(os.fspath(runs_dir))
    project = os.path.abspath(os.fspath(project_dir)) if project_dir else os.path.dirname(runs)
    return runs, project


def check(runs_dir: str | os.PathLike[str], run: str,
          project_dir: str | os.PathLike[str] | None = None) -> Recovery:
    """Check one run and decide. Raises ``Refused`` for an invalid run name (nothing read)
    and ``NotFound`` when there is no such run; every other problem is evidence."""
    require_name(run)
    runs, project = resolve_dirs(runs_dir, project_dir)
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
            checks.append(Check(name, ok, safe_line(evidence)))
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

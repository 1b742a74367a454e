"""Runs as Warden sees them: the list of runs, one run read completely, previews of its files,
and the validation of ``state.json``, ``context.json`` and ``artifact/manifest.json``
(docs/contracts.md "Run directories"). Everything is read through ``SafeTree``; problems are data."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from store.errors import NotFound
from store.jsontypes import JsonObject, JsonValue
from store.runs.names import require_name, safe_relpath, valid_name, valid_sha256
from store.runs.tree import Entry, JsonRead, SafeTree, kind_problem
from store.text import safe_line

PREVIEW_CAP = 64 * 1024
"""Default preview length (bytes)."""

RUN_STATUSES = ("running", "interrupted", "completed", "failed")
STEP_STATUSES = ("pending", "running", "done", "failed")


@dataclass(frozen=True)
class Step:
    name: str
    status: str
    receipt: JsonValue = None


@dataclass(frozen=True)
class RunSummary:
    """One row of the runs list. ``status`` is None when ``state.json`` could not be read."""

    name: str
    status: str | None
    task_id: str | None = None
    node_key: str | None = None
    updated_at: str | None = None
    problems: tuple[str, ...] = ()
    simulation: bool = False


@dataclass(frozen=True)
class RunView:
    """Everything readable about one run, read safely. Treat the dicts as read-only."""

    name: str
    path: str
    status: str | None
    task_id: str | None
    node_key: str | None
    updated_at: str | None
    steps: tuple[Step, ...]
    inputs: dict[str, str]
    manifest: dict[str, JsonObject]
    receipts: tuple[str, ...]
    entries: tuple[Entry, ...]
    simulation: bool
    problems: tuple[str, ...]
    state: JsonObject | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Preview:
    path: str
    text: str
    truncated: bool
    size: int | None
    problem: str | None = None


def _clean(problems: list[str]) -> tuple[str, ...]:
    return tuple(safe_line(p) for p in problems)


def _opt_str(state: JsonObject, key: str, problems: list[str]) -> str | None:
    value = state.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.append(f"state.json: {key} is not a string")
    return None


def _summary_fields(
    state_read: JsonRead, problems: list[str]
) -> tuple[JsonObject | None, str | None, str | None, str | None, str | None]:
    if not state_read.ok:
        problems.append(state_read.problem or "state.json: unreadable")
        return None, None, None, None, None
    state = state_read.value
    if not isinstance(state, dict):
        problems.append("state.json: not a JSON object")
        return None, None, None, None, None
    status = state.get("status")
    if not isinstance(status, str):
        problems.append("state.json: status missing or not a string")
        status = None
    elif status not in RUN_STATUSES:
        problems.append(f"state.json: unknown status {json.dumps(status)[:40]}")
    return (
        state,
        status,
        _opt_str(state, "task_id", problems),
        _opt_str(state, "node_key", problems),
        _opt_str(state, "updated_at", problems),
    )


def _simulation(tree: SafeTree, problems: list[str]) -> bool:
    entry, problem = tree.lstat("SIMULATION.json")
    if entry is None:
        if problem != "missing":
            problems.append(problem or "SIMULATION.json: unreadable")
        return False
    sim = tree.read_json("SIMULATION.json")
    if not sim.ok:
        problems.append(sim.problem or "SIMULATION.json: unreadable")
    return True


def list_runs(runs_dir: str | os.PathLike[str]) -> list[RunSummary]:
    """One summary per run directory, sorted by name. A missing runs dir is an empty list.

    Regular files directly in the runs directory are not runs and are skipped. An entry with an
    invalid name, a symlink or a special file is listed with a problem and nothing read.
    """
    root = os.fspath(runs_dir)
    tree, problem = SafeTree.open_root(root)
    if tree is None:
        return []
    out: list[RunSummary] = []
    with tree:
        entries = tree.top_level()
        for entry in entries:
            name = entry.path
            if entry.kind == "file":
                continue
            if not valid_name(name):
                out.append(RunSummary(name, None, problems=("invalid run name; not read",)))
                continue
            if entry.kind != "dir":
                out.append(RunSummary(name, None, problems=_clean([kind_problem(name, entry.kind)])))
                continue
            out.append(_summarise(root, name))
    return out


def _summarise(root: str, name: str) -> RunSummary:
    problems: list[str] = []
    run, problem = SafeTree.open_child(root, name)
    if run is None:
        return RunSummary(name, None, problems=_clean([problem or "cannot open"]))
    with run:
        _, status, task_id, node_key, updated_at = _summary_fields(
            run.read_json("state.json"), problems
        )
        simulation = _simulation(run, problems)
    return RunSummary(name, status, task_id, node_key, updated_at, _clean(problems), simulation)


def open_run(runs_dir: str | os.PathLike[str], name: str) -> tuple[SafeTree | None, str | None]:
    """Open a run directory by (validated) name without following a link.

    Raises ``Refused`` for an invalid name and ``NotFound`` when it does not exist; returns
    ``(None, problem)`` when it exists but is a symlink or not a directory.
    """
    require_name(name)
    root = os.fspath(runs_dir)
    run, problem = SafeTree.open_child(root, name)
    if run is None and problem == "missing":
        raise NotFound(f"no run named {name} in {safe_line(root)}")
    return run, problem


def read_run(runs_dir: str | os.PathLike[str], name: str) -> RunView:
    """Read one run completely and safely. Problems are in ``RunView.problems``."""
    root = os.fspath(runs_dir)
    path = os.path.join(root, name) if valid_name(name) else root
    run, problem = open_run(runs_dir, name)
    if run is None:
        return RunView(name, path, None, None, None, None, (), {}, {}, (), (), False,
                       _clean([problem or "cannot open"]))
    problems: list[str] = []
    with run:
        entries, walk_problems = run.walk()
        problems.extend(walk_problems)
        state, status, task_id, node_key, updated_at = _summary_fields(
            run.read_json("state.json"), problems
        )
        steps = _steps(state, problems)
        inputs = _context_inputs(run, problems)
        manifest = _manifest(run, entries, problems)
        simulation = _simulation(run, problems)
    receipts = tuple(e.path[len("receipts/"):] for e in entries
                     if e.path.startswith("receipts/") and e.kind == "file")
    return RunView(name, path, status, task_id, node_key, updated_at, steps, inputs, manifest,
                   receipts, entries, simulation, _clean(problems), state)


def _steps(state: JsonObject | None, problems: list[str]) -> tuple[Step, ...]:
    if state is None:
        return ()
    raw = state.get("steps")
    if not isinstance(raw, list):
        problems.append("state.json: steps is not a list")
        return ()
    steps = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not isinstance(
            s.get("status"), str
        ):
            problems.append(f"state.json: step {i} has no name or status")
            continue
        steps.append(Step(s["name"], s["status"], s.get("receipt")))
    return tuple(steps)


def _context_inputs(run: SafeTree, problems: list[str]) -> dict[str, str]:
    ctx = run.read_json("context.json")
    if not ctx.ok:
        problems.append(ctx.problem or "context.json: unreadable")
        return {}
    inputs, problem = context_inputs(ctx.value)
    if problem:
        problems.append(f"context.json: {problem}")
    return inputs


def context_inputs(value: object) -> tuple[dict[str, str], str | None]:
    """Validate a parsed ``context.json``: ``{"inputs": {relative path: sha256}}``."""
    if not isinstance(value, dict):
        return {}, "not a JSON object"
    inputs = value.get("inputs")
    if not isinstance(inputs, dict):
        return {}, "no inputs object"
    if not inputs:
        return {}, "inputs is empty: nothing shows what the run was made from"
    out: dict[str, str] = {}
    for path, digest in inputs.items():
        if safe_relpath(path) is None:
            return {}, f"input path {json.dumps(path)[:80]} is not a safe relative path"
        if not valid_sha256(digest):
            return {}, f"input {json.dumps(path)[:80]}: not a lowercase hex sha256"
        out[path] = digest
    return out, None


def manifest_files(value: object) -> tuple[dict[str, JsonObject], str | None]:
    """Validate a parsed ``manifest.json``: ``{"files": {name: {"sha256", "bytes"}}}``."""
    if not isinstance(value, dict):
        return {}, "not a JSON object"
    files = value.get("files")
    if not isinstance(files, dict):
        return {}, "no files object"
    if not files:
        return {}, "lists no files"
    out: dict[str, JsonObject] = {}
    for name, meta in files.items():
        if safe_relpath(name) is None or name == "manifest.json":
            return {}, f"file name {json.dumps(name)[:80]} is not allowed"
        if not isinstance(meta, dict) or not valid_sha256(meta.get("sha256")):
            return {}, f"{json.dumps(name)[:80]}: no lowercase hex sha256"
        size = meta.get("bytes")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return {}, f"{json.dumps(name)[:80]}: bytes is not a non-negative integer"
        out[name] = {"sha256": meta["sha256"], "bytes": size}
    return out, None


def _manifest(run: SafeTree, entries: tuple[Entry, ...], problems: list[str]) -> dict[str, JsonObject]:
    if not any(e.path == "artifact/manifest.json" for e in entries):
        return {}
    m = run.read_json("artifact/manifest.json")
    if not m.ok:
        problems.append(m.problem or "artifact/manifest.json: unreadable")
        return {}
    files, problem = manifest_files(m.value)
    if problem:
        problems.append(f"artifact/manifest.json: {problem}")
    return files


def preview(
    runs_dir: str | os.PathLike[str], name: str, relpath: str, limit: int = PREVIEW_CAP
) -> Preview:
    """The first ``limit`` bytes of a file in a run, decoded (invalid UTF-8 replaced).

    The text is untrusted: show it through ``store/text.py`` (``safe``).
    """
    run, problem = open_run(runs_dir, name)
    if run is None:
        return Preview(relpath, "", False, None, problem)
    with run:
        r = run.read(relpath, cap=limit)
    if not r.ok:
        return Preview(relpath, "", False, None, r.problem)
    text = (r.data or b"").decode("utf-8", errors="replace")
    return Preview(relpath, text, r.truncated, r.size)

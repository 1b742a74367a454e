"""The run directory ``warden run`` keeps for one attempt of its command (docs/agents.md, "warden run").

``<runs>/<run_id>/`` in the format of docs/contracts.md "Run directories", so the runs screen and
``warden recover`` read it like any other run:

* ``state.json`` — ``run_id``, ``task_id``, ``node_key``, ``status`` (``running`` →
  ``completed`` | ``failed`` | ``interrupted``), one step (the node) and, beside them, the
  command, its working directory, the attempt, the exit code and why it stopped;
* ``context.json`` — the fingerprint of ``command.json`` (what the run was made from: argv, cwd);
* ``output.log`` — what the command printed, up to ``LOG_CAP`` bytes;
* on success: ``artifact/`` with the files of ``--artifacts DIR`` copied in, ``manifest.json``
  (their sha256 and sizes) and ``receipts/01-<node>.json``.

The artifacts directory is the command's and is read without trusting it (``SafeTree``): no link
is followed, only regular files are taken, each up to ``ARTIFACT_FILE_CAP`` bytes and all of them
up to ``ARTIFACTS_CAP``; what is left out is listed with why.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Sequence

from store.clock import iso
from store.jsontypes import JsonObject
from store.runs.names import valid_name
from store.runs.tree import SafeTree
from store.runs.write import write_atomic, write_json

__all__ = ["ARTIFACTS_CAP", "ARTIFACT_FILE_CAP", "Artifacts", "LOG_CAP", "RunDir", "collect_artifacts", "run_name"]

LOG_CAP = 4 * 1024 * 1024  # bytes of output.log
ARTIFACT_FILE_CAP = 64 * 1024 * 1024  # one artifact file (the ledger's inline artifact limit)
ARTIFACTS_CAP = 256 * 1024 * 1024  # every artifact of one run together
ARTIFACT_COUNT_CAP = 1000


def run_name(task_id: str, node_key: str, attempt: int) -> str:
    """``<task>.<node>.a<attempt>`` in the characters a run name may use (cut, with a digest of
    what was cut, to 64)."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", f"{task_id}.{node_key}")
    tail = f".a{attempt}"
    if len(base) + len(tail) > 64:
        digest = hashlib.sha256(base.encode()).hexdigest()[:8]
        base = base[: 64 - len(tail) - 9] + "-" + digest
    return base + tail


@dataclass
class Artifacts:
    """The files taken from an artifacts directory: ``files`` (relative path → bytes), and what
    was left out (``problems``: one line each)."""

    files: dict[str, bytes] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def listing(self) -> list[JsonObject]:
        return [{"name": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
                for name, data in sorted(self.files.items())]


def collect_artifacts(directory: str) -> Artifacts:
    """Read the artifacts directory safely (see the module's docstring)."""
    out = Artifacts()
    tree, problem = SafeTree.open_root(directory)
    if tree is None:
        out.problems.append(f"{directory}: {'does not exist' if problem == 'missing' else problem}")
        return out
    total = 0
    with tree:
        entries, problems = tree.walk()
        out.problems.extend(problems)
        for entry in entries:
            if entry.kind != "file":
                continue
            if len(out.files) >= ARTIFACT_COUNT_CAP:
                out.problems.append(f"more than {ARTIFACT_COUNT_CAP} files; the rest were left out")
                break
            read = tree.read(entry.path, cap=ARTIFACT_FILE_CAP)
            if not read.ok:
                out.problems.append(read.problem or f"{entry.path}: not read")
            elif read.truncated:
                out.problems.append(f"{entry.path}: {read.size} bytes, over {ARTIFACT_FILE_CAP}; left out")
            elif total + (read.size or 0) > ARTIFACTS_CAP:
                out.problems.append(f"{entry.path}: the artifacts are over {ARTIFACTS_CAP} bytes; left out")
            else:
                out.files[entry.path] = read.data or b""
                total += read.size or 0
    return out


class RunDir:
    """One attempt's run directory, written by ``warden run`` (nothing here reads it back)."""

    def __init__(self, runs: str, name: str, *, task_id: str, node_key: str, attempt: int,
                 argv: Sequence[str], cwd: str) -> None:
        if not valid_name(name):
            raise ValueError(f"invalid run name {name!r}")
        self.runs = runs
        self.name = name
        self.path = os.path.join(runs, name)
        n = 1
        while os.path.lexists(self.path):  # a run of that name exists: never write into another's
            n += 1
            self.name = f"{name[:60]}-{n}"
            self.path = os.path.join(runs, self.name)
        os.makedirs(self.path, mode=0o755)
        self.state: JsonObject = {
            "run_id": self.name, "task_id": task_id, "node_key": node_key, "status": "running",
            "steps": [{"name": node_key, "status": "running"}], "updated_at": iso(time.time()),
            "attempt": attempt, "command": list(argv), "cwd": cwd, "exit_code": None, "why": None,
        }
        command = (json.dumps({"argv": list(argv), "cwd": cwd}, indent=2) + "\n").encode()
        write_atomic(os.path.join(self.path, "command.json"), command)
        rel = f"{os.path.basename(os.path.normpath(runs))}/{self.name}/command.json"
        write_json(os.path.join(self.path, "context.json"),
                   {"inputs": {rel: hashlib.sha256(command).hexdigest()}, "made_by": "warden run"})
        self._write_state()
        self._log = open(os.path.join(self.path, "output.log"), "ab")
        self._logged = 0

    def _write_state(self) -> None:
        self.state["updated_at"] = iso(time.time())
        write_json(os.path.join(self.path, "state.json"), self.state)

    def log(self, data: bytes) -> None:
        """Append what the command printed (up to ``LOG_CAP``; a line says where it was cut)."""
        if self._log.closed or self._logged >= LOG_CAP:
            return
        room = LOG_CAP - self._logged
        chunk = data[:room]
        self._log.write(chunk)
        self._logged += len(chunk)
        if len(data) > room:
            self._log.write(f"\n[output.log stops here: over {LOG_CAP} bytes]\n".encode())
        self._log.flush()

    def finish(self, status: str, *, exit_code: int | None, why: str | None,
               artifacts: Artifacts | None = None) -> str | None:
        """Record how the attempt ended; on ``completed`` with artifacts, copy them in with their
        manifest and the step's receipt. Returns the output_ref of the first artifact (or None)."""
        self._log.close()
        ref = None
        node = self.state["node_key"]
        if status == "completed":
            listing = artifacts.listing() if artifacts is not None else []
            for name, data in (artifacts.files.items() if artifacts is not None else ()):
                write_atomic(os.path.join(self.path, "artifact", *name.split("/")), data)
            if listing:
                write_json(os.path.join(self.path, "artifact", "manifest.json"),
                           {"files": {a["name"]: {"sha256": a["sha256"], "bytes": a["bytes"]} for a in listing}})
                ref = f"run:{self.name}/artifact/{listing[0]['name']}"
            receipt = re.sub(r"[^A-Za-z0-9._-]", "_", node)[:40]
            write_json(os.path.join(self.path, "receipts", f"01-{receipt}.json"),
                       {"step": node, "exit_code": exit_code, "at": iso(time.time()), "artifacts": listing})
        self.state.update(status=status, exit_code=exit_code, why=why)
        self.state["steps"] = [{"name": node, "status": {"completed": "done", "failed": "failed"}.get(status, "running")}]
        self._write_state()
        return ref

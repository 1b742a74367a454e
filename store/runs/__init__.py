"""Safe reading of run directories (``runs/<run_id>/``; format in docs/contracts.md "Run directories").

Everything here is written for a directory an agent controls and Warden does not trust: no
symlink is followed inside a run, only regular files are read, sizes are capped, JSON is strict
(UTF-8 only, no duplicate keys, no NaN/Infinity, bounded nesting). Problems are returned as data
(strings naming the file, made one safe line by ``store/text.py``), never raised to the caller.
The only exceptions raised on purpose are ``Refused`` for an invalid run name and ``NotFound``
for a run that does not exist, both before anything is read. The runs directory itself may be a
symlink (the operator chose it); a run inside it may not.

The modules, each depending only on those above it:

- ``names``: run/record names, sha256 digests and relative paths, validated before any read;
- ``strict_json``: ``parse_json`` and its caps;
- ``tree``: ``SafeTree`` (``openat``, ``O_NOFOLLOW``, capped reads, bounded walks) and the
  ``Entry`` / ``FileRead`` / ``JsonRead`` it returns;
- ``model``: the runs list, one run read completely (``RunView``), previews, and the validation
  of ``state.json``, ``context.json`` and ``manifest.json``;
- ``write``: how an agent writes a run file atomically (``write_atomic``, ``write_json``).
"""

from __future__ import annotations

from store.runs.model import (
    PREVIEW_CAP,
    RUN_STATUSES,
    STEP_STATUSES,
    Preview,
    RunSummary,
    RunView,
    Step,
    context_inputs,
    list_runs,
    manifest_files,
    open_run,
    preview,
    read_run,
)
from store.runs.names import require_name, safe_relpath, valid_name, valid_sha256
from store.runs.strict_json import JSON_CAP, MAX_JSON_DEPTH, parse_json
from store.runs.tree import (
    CHUNK,
    MAX_ENTRIES,
    MAX_TREE_DEPTH,
    Entry,
    FileRead,
    JsonRead,
    SafeTree,
    kind_problem,
)
from store.runs.write import write_atomic, write_json
from store.text import safe_line as printable  # the name recovery evidence used before store.text

__all__ = [
    "CHUNK",
    "JSON_CAP",
    "MAX_ENTRIES",
    "MAX_JSON_DEPTH",
    "MAX_TREE_DEPTH",
    "PREVIEW_CAP",
    "RUN_STATUSES",
    "STEP_STATUSES",
    "Entry",
    "FileRead",
    "JsonRead",
    "Preview",
    "RunSummary",
    "RunView",
    "SafeTree",
    "Step",
    "context_inputs",
    "kind_problem",
    "list_runs",
    "manifest_files",
    "open_run",
    "parse_json",
    "preview",
    "printable",
    "read_run",
    "require_name",
    "safe_relpath",
    "valid_name",
    "valid_sha256",
    "write_atomic",
    "write_json",
]

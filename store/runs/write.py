"""How an agent writes a run file (docs/recovery.md): atomically, so a crash never leaves half."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_atomic(path: os.PathLike[str] | str, data: bytes) -> None:
    """How an agent writes a run file so a crash never leaves half of it: a temp file in the same
    directory, fsync, rename over the name (docs/recovery.md). Parent directories are created."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def write_json(path: os.PathLike[str] | str, value: object) -> None:
    """``write_atomic`` of indented JSON (state.json, manifest.json, receipts)."""
    write_atomic(path, (json.dumps(value, indent=2) + "\n").encode())


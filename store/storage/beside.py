"""Where a process keeps a file of its own for a ledger (the notifier's state, ``warden otel``'s
cursor and receiver state): beside a SQLite ledger, under the user's state directory
(``$XDG_STATE_HOME/warden``, else ``~/.local/state/warden``) for a PostgreSQL one, named by a
digest of the ledger's display form (its password masked)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from store.storage.db import parse_target


def kept_beside(target: str, name: str, env: dict[str, str] | None = None) -> Path:
    """``ledger.db.<name>``, or ``<state>/warden/<stem>-<digest><suffix>`` (``name`` = stem + suffix)."""
    t = parse_target(target)
    if t.backend == "sqlite" and t.path:
        return Path(f"{t.path}.{name}")
    e = dict(os.environ) if env is None else env
    base = Path(e.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    stem, dot, suffix = name.rpartition(".")
    return base / "warden" / f"{stem}-{hashlib.sha256(t.display.encode()).hexdigest()[:12]}{dot}{suffix}"


__all__ = ["kept_beside"]

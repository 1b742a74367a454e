"""Where a process keeps a file of its own for a ledger (the notifier's state, ``warden otel``'s
cursor and receiver state): beside a SQLite ledger, under the user's state directory
(``$XDG_STATE_HOME/warden``, else ``~/.local/state/warden``) for a PostgreSQL one, named by a
digest of the ledger's display form (its password masked)."""

from __future__ import annotations

import fcntl
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



def hold_lock(path: Path) -> int | None:
    """The one-holder lock of a state file: ``flock`` on ``<path>.lock`` (made ``0600``, never
    through a link). Its descriptor, held until closed; None when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


__all__ = ["hold_lock", "kept_beside"]

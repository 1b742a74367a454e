"""Agent sessions kept between processes: what ``warden mcp`` and ``warden hook claude`` remember of
a claim so that a restarted server or the next hook process goes on with it.

A Claude Code hook is a new short process for every event, and an MCP client that reconnects over
stdio starts a new server: the claim they hold (its lease token above all) must outlive the
process. It is kept here, one small JSON file per session, beside nothing else:

* the directory is ``--sessions DIR``, else ``$WARDEN_SESSIONS``, else
  ``$XDG_STATE_HOME/warden/sessions`` (``~/.local/state/warden/sessions``); made ``0700``, each file
  ``0600`` — a lease token is not a password (the ledger's own access is the boundary) but it is
  nobody else's business;
* a session's file is named by a digest of its key (the ledger, the integration, its id), so an
  agent-chosen id never becomes a path;
* :meth:`SessionStore.hold` takes the session's lock (``flock`` on a ``.lock`` file beside it)
  for one read-modify-write, or for a whole server's life; the data is written atomically.

The ledger stays the truth: a file that is lost or stale only costs a re-claim (the lease expires
and the node is claimed again); it never makes a write happen twice, because every write is
fenced by the ledger and :mod:`store.adapters.agent_session` checks the ledger before repeating one.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import time
from contextlib import contextmanager
from typing import Iterator

from store.errors import Refused
from store.jsontypes import JsonObject
from store.runs.write import write_atomic
from store.views import Claim

__all__ = ["SessionBusy", "SessionStore", "claim_from_json", "claim_to_json", "default_directory"]

FILE_CAP = 1024 * 1024  # bytes of one session file read back


class SessionBusy(Refused):
    """Another live process holds the session."""


def default_directory() -> str:
    explicit = os.environ.get("WARDEN_SESSIONS")
    if explicit:
        return explicit
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "warden", "sessions")


def claim_to_json(c: Claim) -> JsonObject:
    return {"task_id": c.task_id, "node_key": c.node_key, "kind": c.kind, "worker": c.worker, "token": c.token,
            "attempt": c.attempt, "lease_until": c.lease_until, "inputs": dict(c.inputs), "admission": c.admission,
            "lease_s": c.lease_s}


def claim_from_json(d: object) -> Claim | None:
    """A claim as :func:`claim_to_json` wrote it; None when the record is not one."""
    if not isinstance(d, dict):
        return None
    try:
        return Claim(task_id=str(d["task_id"]), node_key=str(d["node_key"]), kind=str(d["kind"]),
                     worker=str(d["worker"]), token=str(d["token"]), attempt=int(d["attempt"]),
                     lease_until=float(d["lease_until"]), inputs=dict(d.get("inputs") or {}),
                     admission=str(d.get("admission", "admit")), lease_s=float(d.get("lease_s", 30.0)))
    except (KeyError, TypeError, ValueError):
        return None


class SessionStore:
    """The sessions of one directory (see the module's docstring)."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory or default_directory()

    def _paths(self, key: str) -> tuple[str, str]:
        name = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return os.path.join(self.directory, name + ".json"), os.path.join(self.directory, name + ".lock")

    def _ensure_dir(self) -> None:
        os.makedirs(self.directory, mode=0o700, exist_ok=True)

    def load(self, key: str) -> JsonObject:
        """The session's data ({} when there is none, or it cannot be read as one)."""
        path, _ = self._paths(key)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return {}
        try:
            data = os.read(fd, FILE_CAP + 1)
        finally:
            os.close(fd)
        if len(data) > FILE_CAP:
            return {}
        try:
            value = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            return {}
        return value if isinstance(value, dict) and value.get("key") == key else {}

    def save(self, key: str, data: JsonObject) -> None:
        self._ensure_dir()
        path, _ = self._paths(key)
        blob = (json.dumps({**data, "key": key, "saved_at": time.time()}, sort_keys=True) + "\n").encode()
        write_atomic(path, blob, mode=0o600)

    def drop(self, key: str) -> None:
        path, _ = self._paths(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    @contextmanager
    def hold(self, key: str, *, wait_s: float = 30.0) -> Iterator[int]:
        """Hold the session's lock (waiting up to ``wait_s`` for another process to let go; then
        :class:`SessionBusy`). Yields the lock's descriptor."""
        self._ensure_dir()
        _, lock_path = self._paths(key)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                     0o600)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        raise SessionBusy(f"another process holds this session (waited {wait_s:.0f}s)") from None
                    time.sleep(0.05)  # a lock held by another process has no wake-up to wait on
            yield fd
        finally:
            os.close(fd)  # closing releases the lock

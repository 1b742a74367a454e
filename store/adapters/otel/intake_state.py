"""What ``warden otel receive`` must not forget when it is restarted: its claims, which agent each
span belongs to, and the spans already written.

The receiver holds the lease of every agent node it watches (a 6 h lease: spans come when work
ends) and writes through it. Kept only in memory, a restart (``kill -9`` included) lost the lease
tokens: the agent's next spans found their node running under a lease nobody knew, were dropped,
and the node waited for its lease to lapse. So the receiver keeps a state file beside the ledger
(``ledger.db.otel-receive.log``; for a PostgreSQL ledger under ``$XDG_STATE_HOME/warden``),
``0600``, one JSON line per change, appended as each change is made in the ledger:

* ``{"claim": [task, node], "c": {…}}`` — a claim taken (its lease token: a lease token is not a
  password, the ledger's own access is the boundary, but it is nobody else's business);
* ``{"end": [task, node]}`` — the node committed or failed, its claim given up;
* ``{"owner": span_id, "node": [task, node]}`` — a span belongs to that agent's node;
* ``{"seen": [trace_id, span_id, pending]}`` — a span's writes are done: a batch the exporter
  sends again (our answer was lost) is not written twice.

One ``write`` of one line per change: a ``kill -9`` loses nothing written before it (the kernel
has the line); a torn last line is ignored when read. Each request's lines are ``fsync``-ed
before it is answered (a machine that loses power keeps what was answered). At start the file is
read, checked against the ledger (a claim whose node is no longer running under the receiver is
dropped) and rewritten compact (``SEEN`` spans and owners kept, the open claims); it is compacted
again whenever it has grown past ``COMPACT_LINES``. One receiver per ledger: the file's ``.lock``
is held (``flock``) for the receiver's life.

The one gap left: a ``kill -9`` in the moment between the ledger's commit of a span's write and
the append of its line (microseconds, in the same thread). A claim taken then is not known to the
next receiver (its node waits for its lease to lapse); a span written then is written again if the
exporter re-sends its batch.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from pathlib import Path

from store.adapters.sessions import claim_from_json, claim_to_json
from store.errors import WardenError
from store.facade import Ledger
from store.jsontypes import JsonObject
from store.runs.write import write_atomic
from store.storage.beside import hold_lock, kept_beside
from store.views import Claim

SEEN = 100_000  # spans (and span owners) remembered against a batch sent twice
COMPACT_LINES = 4 * SEEN
FILE_CAP = 256 * 1024 * 1024

NodeKey = tuple[str, str]
SeenKey = tuple[str, str, bool]


class StateBusy(WardenError):
    """Another receiver keeps this ledger's claims."""


def state_path(target: str, env: dict[str, str] | None = None) -> Path:
    """Beside a SQLite ledger; under the user's state directory for a PostgreSQL one."""
    return kept_beside(target, "otel-receive.log", env)


class IntakeState:
    """The receiver's claims, span owners and spans written, kept in memory and in the state file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.claims: dict[NodeKey, Claim] = {}
        self.owners: OrderedDict[str, NodeKey] = OrderedDict()
        self.seen: OrderedDict[SeenKey, None] = OrderedDict()
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._lines = 0
        self._dirty = False

    # ------------------------------------------------------------------ the file's life
    def open(self, ledger: Ledger) -> None:
        """Take the one-receiver lock, read what an earlier receiver kept, check its claims against
        the ledger, and start a compact file."""
        if self.path is None:
            return
        self._lock_fd = hold_lock(self.path)
        if self._lock_fd is None:
            raise StateBusy(f"another warden otel receive keeps this ledger's claims ({self.path}.lock)")
        self._read()
        for (task, key), c in list(self.claims.items()):
            if not _still_ours(ledger, c):
                del self.claims[(task, key)]
        self._compact()

    def close(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._lock_fd = None

    def _read(self) -> None:
        assert self.path is not None
        try:
            fd = os.open(str(self.path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as e:
            raise WardenError(f"cannot read the receiver's state {self.path}: {e.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            data = f.read(FILE_CAP + 1)
        if len(data) > FILE_CAP:
            raise WardenError(f"the receiver's state {self.path} is over {FILE_CAP} bytes: not ours; move it away")
        lines = data.split(b"\n")
        for n, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                self._apply(json.loads(raw))
            except (ValueError, KeyError, TypeError, IndexError) as e:
                if n == len(lines) - 1:  # the last line, torn by a kill mid-write: never answered
                    break
                raise WardenError(f"the receiver's state {self.path} is damaged at line {n + 1} ({e!r}): "
                                  "move it away (its claims are then taken again when their leases lapse)") from None

    def _apply(self, rec: JsonObject) -> None:
        if "claim" in rec:
            task, key = rec["claim"]
            c = claim_from_json(rec["c"])
            if c is None:
                raise ValueError("not a claim")
            self.claims[(str(task), str(key))] = c
        elif "end" in rec:
            task, key = rec["end"]
            self.claims.pop((str(task), str(key)), None)
        elif "owner" in rec:
            task, key = rec["node"]
            self._remember(self.owners, str(rec["owner"]), (str(task), str(key)))
        elif "seen" in rec:
            trace, span, pending = rec["seen"]
            self._remember(self.seen, (str(trace), str(span), bool(pending)), None)
        else:
            raise KeyError("no known record")

    def _compact(self) -> None:
        """The state as it stands, written to a new file that replaces the old one atomically."""
        assert self.path is not None
        write_atomic(self.path, "".join(self._lines_now()).encode("utf-8"), mode=0o600)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(str(self.path), os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._lines = len(self.claims) + len(self.owners) + len(self.seen)

    def _lines_now(self) -> list[str]:
        out = [_line({"claim": list(k), "c": _kept(c)}) for k, c in self.claims.items()]
        out += [_line({"owner": s, "node": list(k)}) for s, k in self.owners.items()]
        out += [_line({"seen": list(k)}) for k in self.seen]
        return out

    def _append(self, rec: JsonObject) -> None:
        if self._fd is None:
            return
        os.write(self._fd, _line(rec).encode("utf-8"))  # one write: whole, or torn at a kill
        self._lines += 1
        self._dirty = True

    def sync(self) -> None:
        """Before a request is answered: what it wrote survives a power loss too."""
        if self._fd is not None and self._dirty:
            os.fsync(self._fd)
            self._dirty = False
            if self._lines > COMPACT_LINES:
                self._compact()

    # ------------------------------------------------------------------ changes
    def claimed(self, node: NodeKey, c: Claim) -> None:
        self.claims[node] = c
        self._append({"claim": list(node), "c": _kept(c)})

    def ended(self, node: NodeKey) -> None:
        if self.claims.pop(node, None) is not None:
            self._append({"end": list(node)})

    def own(self, span_id: str, node: NodeKey) -> None:
        if self.owners.get(span_id) != node:
            self._remember(self.owners, span_id, node)
            self._append({"owner": span_id, "node": list(node)})

    def taken(self, key: SeenKey) -> None:
        self._remember(self.seen, key, None)
        self._append({"seen": list(key)})

    @staticmethod
    def _remember(d: OrderedDict, key: object, value: object) -> None:
        d[key] = value
        d.move_to_end(key)
        while len(d) > SEEN:
            d.popitem(last=False)


def _kept(c: Claim) -> JsonObject:
    """A claim as kept: without its inputs (the task's memory, up to 48 KB: the receiver reads none)."""
    return {**claim_to_json(c), "inputs": {}}


def _line(rec: JsonObject) -> str:
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=True) + "\n"


def _still_ours(ledger: Ledger, c: Claim) -> bool:
    """Is the node still running under this claim (as far as a read can tell: the token is the
    ledger's; a wrong one only makes the next write raise LeaseLost, which the receiver takes as
    the end of its claim)."""
    try:
        n = ledger.node(c.task_id, c.node_key)
    except WardenError:
        return False
    return n.status == "running" and n.lease_owner == c.worker and n.attempt == c.attempt

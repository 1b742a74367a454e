"""One command, one copy: before ``warden run`` starts a node's command it checks that the
processes of the node's previous attempt are gone (docs/agents.md, "warden run").

Each attempt journals who its command is — a note whose payload carries ``process``: the boot
id, the command's and its keeper's pid with their start times, its cgroup, and the marker in its
environment (``WARDEN_RUN_MARK``). Normally nothing of an earlier attempt is left: its supervisor
ended it, or its keeper did when the supervisor died. When both died at once (``kill -9`` of
both, a crash of the machine's OOM killer) the next run on the same host finds what they left by
those marks, ends it (``SIGTERM``, then ``SIGKILL`` after the grace) and journals what it did
before anything new starts. An attempt that ran on another host (another boot id) cannot be
checked from here: the note says so.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import Callable

from store.errors import WardenError
from store.facade import Ledger
from store.jsontypes import JsonMapping
from store.storage.events import NodeNote, payload_of
from store.text import safe_line
from store.views import Claim
from store.adapters.proctree import Cgroup, boot_id, descendants, is_alive, marked

__all__ = ["PROCESS_KEY", "find", "last_identity", "settle", "settle_previous"]

PROCESS_KEY = "process"


def last_identity(ledger: Ledger, task_id: str, node_key: str) -> JsonMapping | None:
    """The newest attempt's recorded identity, from the node's journal."""
    detail = ledger.node_detail(task_id, node_key, events_limit=200, observations_limit=1)
    best: tuple[int, JsonMapping] | None = None
    for e in detail.events:
        said = payload_of(e)
        proc = said.data.get(PROCESS_KEY) if isinstance(said, NodeNote) else None
        if isinstance(proc, dict) and (best is None or e.id > best[0]):
            best = (e.id, proc)
    return best[1] if best else None


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def find(ident: JsonMapping) -> list[int] | None:
    """The live processes of an attempt (None: it ran on another host or boot, not checkable)."""
    if ident.get("boot_id") != boot_id() or not ident.get("boot_id"):
        return None
    found: dict[int, None] = {}
    pid, start = _int(ident.get("pid")), _int(ident.get("start"))
    if pid and is_alive(pid, start):
        found[pid] = None
    kpid, kstart = _int(ident.get("keeper")), _int(ident.get("keeper_start"))
    if kpid and is_alive(kpid, kstart):
        found.update(dict.fromkeys(descendants(kpid)))
    cg = ident.get("cgroup")
    if isinstance(cg, str) and os.path.basename(cg).startswith("warden-run."):
        found.update(dict.fromkeys(Cgroup(cg, _int(ident.get("cgroup_version")) or 2).pids()))
    marker = ident.get("marker")
    if isinstance(marker, str) and marker:
        found.update(dict.fromkeys(marked(marker)))
    found.pop(os.getpid(), None)
    return [p for p in found if is_alive(p)]


def settle(ident: JsonMapping, grace_s: float, *, clock: Callable[[], float] = time.monotonic) -> tuple[int, int]:
    """End what is left of an attempt: (processes found, processes still alive after)."""
    pids = find(ident) or []
    if not pids:
        return 0, 0
    cg = ident.get("cgroup")
    cgroup = Cgroup(cg, _int(ident.get("cgroup_version")) or 2) if isinstance(cg, str) and os.path.isdir(cg) else None
    if cgroup is not None:
        cgroup.freeze(False)
    for sig in (signal.SIGTERM, signal.SIGCONT):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    deadline = clock() + grace_s
    while clock() < deadline and any(is_alive(p) for p in find(ident) or []):
        time.sleep(0.05)  # waiting for them to exit (not our children: they cannot be waited on)
    deadline = clock() + 10.0
    while (left := find(ident) or []) and clock() < deadline:
        if cgroup is not None:
            cgroup.kill()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)  # a killed process is gone once the kernel has torn it down
    if cgroup is not None and not cgroup.pids():
        cgroup.remove()
    return len(pids), len(find(ident) or [])


def settle_previous(ledger: Ledger, claim: Claim, grace_s: float, *, note: Callable[[str], None],
                    say: Callable[[str], None]) -> str | None:
    """Before an attempt starts: what the node's previous attempt left running on this host is
    ended and journalled (``note``); returns why nothing may start when some of it cannot be."""
    try:
        ident = last_identity(ledger, claim.task_id, claim.node_key)
    except WardenError:
        return None
    if ident is None:
        return None
    found = find(ident)
    if found is None:
        if ident.get("host") not in (None, socket.gethostname()):
            note(f"warden run: the previous attempt ran on {safe_line(str(ident.get('host')), limit=100)}: "
                 "whether its command is gone cannot be checked from here")
        return None
    if not found:
        return None
    n, left = settle(ident, grace_s)
    what = (f"warden run: {n} process{'es' if n != 1 else ''} of the previous attempt (pid {ident.get('pid')}) "
            "were still running, left by a supervisor that is gone")
    if left:
        note(f"{what}; {left} cannot be ended: nothing started")
        return f"{left} process{'es' if left != 1 else ''} of the previous attempt cannot be ended: nothing started"
    note(f"{what}; ended before this attempt started")
    say(f"{what}; ended them before starting")
    return None

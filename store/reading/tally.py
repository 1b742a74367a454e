"""Every task's row (``TaskView``) kept current from the journal, without recounting.

``Ledger.task`` counts a task's nodes by status and sums their attempts: a scan of every node of
the task (50 ms at 100,000 nodes), which the console used to repeat, throttled, after changes — so
a commit reached the task list a quarter of a second or more after it reached the graph.

:class:`TaskTally` keeps what a task row needs and changes only what the journal says changed.
Every event names every node it changed (``EventView.node`` and the ``nodes`` of operator
actions and graph growth: ``store.reading.feed.changed_nodes``), so for a batch of events it
reads, in one snapshot:

* the rows of the tasks the events name (by key: one row each);
* the status and attempt of exactly the nodes the events name (by key, within the task);
* the open handoffs of those tasks (a count over their handoffs, by index);

and moves each named node from the status it knew to the status it reads — the counts and the
attempts' sum follow. What it knows per node is one byte of status and the attempt count, kept in
arrays indexed by node id (a million nodes: 5 MB), not dictionaries.

Exact, not approximate: the update is idempotent (a node read twice moves from what was known to
what is read, so reading it again changes nothing), every change is named by an event read later,
and each read is at least as new as the events it answers — so once the reader has read to the end
of the journal, every row equals what ``Ledger.tasks()`` says (tests/store/test_tally.py checks
that after random sequences of every operation). A task's node statuses are read whole once, the
first time an event names it (until then its row is the one read at start), and again only when an
event of a kind this module does not know comes (future kinds stay correct), or a named node cannot
be found.
"""

from __future__ import annotations

from array import array
from dataclasses import replace
from typing import Iterable, Sequence

import peewee as pw

from store.judges import budget
from store.storage import sql
from store.storage.db import read_tx, run_read
from store.reading.feed import changed_nodes
from store.storage.tables import TaskRecord
from store.storage import rows
from store.storage.core import LedgerCore
from store.views import EventView, TaskView
from store.storage.events import names_nodes, status_neutral

# Which events name every node change they make (their declaration's ``names_nodes``: the rest
# read the task's nodes whole) and which name a node without changing its status or attempts
# (``status_neutral``: its task's row is read again — tokens, the last heartbeat —, the node is
# not; a fleet's heartbeats are most of its writes) is said by each kind in store/storage/events.py.


class TaskTally:
    """Task rows kept from the journal (see the module's docstring). Not thread-safe: one reader
    (the console's feed worker) owns it."""

    def __init__(self) -> None:
        self._views: dict[str, TaskView] = {}
        self._counts: dict[str, dict[str, int]] = {}
        self._claims: dict[str, int] = {}
        self._loaded: set[str] = set()  # tasks whose node statuses are held
        self._status = array("B")  # node id → status code (0: not known)
        self._attempt = array("I")  # node id → attempt
        self._codes: dict[str, int] = {}
        self._names: list[str] = [""]

    # ------------------------------------------------------------------ the state
    def start(self, tasks: Iterable[TaskView]) -> None:
        """The task rows read with the cursor the events will follow (``store.reading.feed.tail_at``)."""
        self._views = {t.task_id: t for t in tasks}
        self._counts = {}
        self._claims = {}
        self._loaded = set()
        self._status = array("B")
        self._attempt = array("I")

    def view(self, task_id: str) -> TaskView | None:
        return self._views.get(task_id)

    def views(self) -> list[TaskView]:
        return list(self._views.values())

    # ------------------------------------------------------------------ following the journal
    def apply(self, ledger: LedgerCore, events: Sequence[EventView]) -> list[TaskView]:
        """Read what ``events`` changed and return the fresh rows of the tasks they name (in the
        order first named). Runs in the reader's thread; ``ledger``: a ``store.Ledger``."""
        named: dict[str, set[str]] = {}
        whole: set[str] = set()
        for e in events:
            if e.task_id is None:
                continue
            named.setdefault(e.task_id, set())
            if not names_nodes(e.kind):
                whole.add(e.task_id)
        moving = [e for e in events if not status_neutral(e.kind)]
        for tid in named:
            named[tid] = changed_nodes(moving, tid)
        if not named:
            return []
        return run_read(ledger.db, lambda: self._apply(ledger, named, whole))

    def _apply(self, ledger: LedgerCore, named: dict[str, set[str]], whole: set[str]) -> list[TaskView]:
        """Re-runnable after a lost connection: a node is moved to what it is now, never by a delta."""
        db = ledger.db
        out: list[TaskView] = []
        with read_tx(db):
            task_rows = self._task_rows(db, list(named))
            handoffs = self._open_handoffs(db, list(named))
            for tid, keys in named.items():
                r = task_rows.get(tid)
                if r is None:  # not (or no longer) in the ledger
                    self._forget(tid)
                    continue
                if tid not in self._loaded or tid in whole or not self._read_keys(db, tid, keys):
                    self._read_whole(db, tid)
                view = rows.task_view(replace(r, claim_count=self._claims[tid]), ledger.now(), self._counts[tid],
                                      handoffs.get(tid, 0))
                self._views[tid] = view
                out.append(view)
        return out

    def _task_rows(self, db: pw.Database, ids: list[str]) -> dict[str, TaskRecord]:
        got: dict[str, TaskRecord] = {}
        for chunk in sql.chunks(ids):
            got.update((r.task_id, r) for r in sql.fetch_rows(
                db, TaskRecord, f"SELECT {sql.columns(TaskRecord)} FROM task WHERE task_id IN ({sql.marks(len(chunk))})",
                list(chunk)))
        return got

    def _open_handoffs(self, db: pw.Database, ids: list[str]) -> dict[str, int]:
        got: dict[str, int] = {}
        for chunk in sql.chunks(ids):
            got.update((t, int(n)) for t, n in sql.fetch_all(
                db, f"SELECT task_id, COUNT(*) FROM handoff WHERE status = 'open' AND task_id IN "
                    f"({sql.marks(len(chunk))}) GROUP BY task_id", list(chunk)))
        return got

    def _read_whole(self, db: pw.Database, tid: str) -> None:
        """Every node of the task: the counts and the attempts' sum from scratch."""
        counts: dict[str, int] = {}
        claims = 0
        for node_id, status, attempt in sql.fetch_all(db, "SELECT id, status, attempt FROM node WHERE task_id = ?",
                                                      [tid]):
            self._set(node_id, status, attempt)
            counts[status] = counts.get(status, 0) + 1
            claims += int(attempt)
        self._counts[tid] = counts
        self._claims[tid] = claims
        self._loaded.add(tid)

    def _read_keys(self, db: pw.Database, tid: str, keys: set[str]) -> bool:
        """Move the named nodes to what they are now; False when one could not be found."""
        if not keys:
            return True
        found = 0
        counts = self._counts[tid]
        for chunk in sql.chunks(sorted(keys)):
            for node_id, status, attempt in sql.fetch_all(
                    db, f"SELECT id, status, attempt FROM node WHERE task_id = ? AND key IN ({sql.marks(len(chunk))})",
                    [tid, *chunk]):
                found += 1
                old, old_attempt = self._get(node_id)
                if old:
                    counts[old] -= 1
                    if not counts[old]:
                        del counts[old]
                counts[status] = counts.get(status, 0) + 1
                self._claims[tid] += int(attempt) - old_attempt
                self._set(node_id, status, attempt)
        return found == len(keys)

    def _forget(self, tid: str) -> None:
        self._views.pop(tid, None)
        self._counts.pop(tid, None)
        self._claims.pop(tid, None)
        self._loaded.discard(tid)

    # ------------------------------------------------------------------ per node, by id
    def _get(self, node_id: int) -> tuple[str, int]:
        if node_id < len(self._status):
            return self._names[self._status[node_id]], self._attempt[node_id]
        return "", 0

    def _set(self, node_id: int, status: str, attempt: int) -> None:
        code = self._codes.get(status)
        if code is None:
            if len(self._names) > 255:
                raise ValueError(f"more than 255 node statuses ({status!r})")
            code = self._codes[status] = len(self._names)
            self._names.append(status)
        if node_id >= len(self._status):
            grow = node_id + 1 - len(self._status) + 1024
            self._status.extend(bytes(grow))
            self._attempt.extend(array("I", [0]) * grow)
        self._status[node_id] = code
        self._attempt[node_id] = int(attempt)


def live_leases(ledger: LedgerCore, task_ids: Sequence[str]) -> list[tuple[str, float]]:
    """(worker, when its latest lease ends) for every worker holding a live lease on a node of these
    tasks — where the console's count of agents alive starts (then it follows the journal). Reads
    the running nodes of each task by the (task, status) index, not the whole node table."""
    now = ledger.now()
    until: dict[str, float] = {}
    for chunk in sql.chunks(list(task_ids)):
        for worker, end in sql.fetch_all(
                ledger.db, f"SELECT lease_owner, MAX(lease_until) FROM node WHERE task_id IN ({sql.marks(len(chunk))}) "
                           "AND status = 'running' AND lease_token IS NOT NULL AND lease_until > ? GROUP BY lease_owner",
                [*chunk, now]):
            if worker:
                until[worker] = max(until.get(worker, 0.0), float(end))
    return sorted(until.items())


def current(view: TaskView, now: float) -> TaskView:
    """``view`` with its clock figures (wall time used, time waited) as of ``now``: what a read at
    ``now`` would say of a task nothing has changed since (a running task's wall time grows)."""
    used = budget.wall_used(view.started_at, view.finished_at, view.paused_s, view.paused_since, now)
    span = 0.0 if view.started_at is None else (view.finished_at if view.finished_at is not None else now) - view.started_at
    if used == view.wall_used_s and max(0.0, span - used) == view.waited_s:
        return view
    return replace(view, wall_used_s=used, waited_s=max(0.0, span - used))


__all__ = ["TaskTally", "current", "live_leases"]

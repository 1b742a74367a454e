"""The budget wall clock stands still while a task waits (docs/ledger.md "Waiting is not work").

A started task's clock stops while it is parked or finished, and while it is active with nothing
running and a node waiting (blocked on a human, or parked on its own) — see
``budget.clock_stopped``. The task row keeps ``paused_s`` (seconds stood still so far) and
``paused_since`` (the start of the current stop, None while the clock runs); ``budget.wall_used``
derives ``wall_used_s`` from them with the injected clock, so the figure is exact at any instant.

Both fields change only inside the write transactions that change what the clock depends on,
and never bump the task's revision (a preview is not made stale by the clock):

* :func:`settle` — after an agent write that took a node out of ``running`` (commit, fail,
  request_human, a failed over-claimed node), after every operator action, and when a task
  finishes or reopens. It may stop or restart the clock.
* :func:`end_on_claim` — a claim makes a node running, so a clock stopped for waiting restarts.

PostgreSQL: claims of one task run concurrently and take only KEY SHARE on the task row, so a
claim and an agent write that would stop the clock ("nothing runs any more") could each miss
the other's uncommitted node change. They meet on a per-task advisory lock instead: a claim holds
it shared (claims never wait for one another) from before it marks its node running until it
commits; an agent write that may stop the clock takes it exclusive before it looks for running
nodes, so it sees every claim that got there first, and a claim that comes later sees the stop
and ends it. Lock order: task row, node rows, this lock, the journal's lock. SQLite's BEGIN
IMMEDIATE already serialises all of this.
"""

from __future__ import annotations

from typing import NamedTuple

import peewee as pw

from store.storage import sql
from store.judges.budget import clock_stopped
from store.storage.db import is_sqlite
from store.storage.tables import TaskRecord

PG_PAUSE_LOCK_CLASS = 0x57A5  # advisory lock space (int4, with hashtext(task_id)) of the clock
# A failed node (alias n) that asks a human (an open handoff: store/ledger/unsafe.py): it waits on a
# person like a blocked node — the task does not fail over it, its budget clock stands still.
FAILED_ASKING_SQL = ("(n.status = 'failed' AND EXISTS (SELECT 1 FROM handoff h WHERE h.node_id = n.id "
                     "AND h.status = 'open'))")


def _has(db: pw.Database, task_id: str, statuses: str) -> bool:
    return sql.scalar(db, f"SELECT 1 FROM node WHERE task_id = ? AND status IN {statuses} LIMIT 1",
                      [task_id]) is not None


def _waiting(db: pw.Database, task_id: str) -> bool:
    """A node waits on the outside world: blocked on a human, parked on its own, or failed and
    asking a human (an unsafe re-run, store/ledger/unsafe.py)."""
    return _has(db, task_id, "('blocked', 'parked')") or sql.scalar(
        db, f"SELECT 1 FROM node n WHERE n.task_id = ? AND {FAILED_ASKING_SQL} LIMIT 1", [task_id]) is not None


class TaskClock(NamedTuple):
    """What :func:`settle` reads of the task row when the caller has not read it."""

    status: str
    started_at: float | None
    finished_at: float | None
    paused_since: float | None


def settle(db: pw.Database, task_id: str, now: float, *, agent_write: bool = False,
           task: TaskRecord | None = None) -> None:
    """Inside a write transaction holding the task row's lock: stop or restart the task's clock
    to match what it waits on now. ``agent_write``: the caller holds only NO KEY UPDATE on the
    task row (claims may run concurrently on PostgreSQL), so looking for running nodes first
    takes the clock's advisory lock exclusively. ``task``: the task row as the caller read it
    under that lock, when nothing of it has changed since (saves a read on the commit path)."""
    t = task if task is not None else sql.fetch_row(
        db, TaskClock, f"SELECT {sql.columns(TaskClock)} FROM task WHERE task_id = ?", [task_id])
    if t is None or t.started_at is None:
        return  # the clock starts at the first claim
    status = t.status
    if status == "active":
        stop = False
        if _waiting(db, task_id):
            if agent_write and t.paused_since is None and not is_sqlite(db):
                sql.execute(db, "SELECT pg_advisory_xact_lock(CAST(? AS integer), hashtext(?))", [PG_PAUSE_LOCK_CLASS, task_id])
            stop = clock_stopped(status, _has(db, task_id, "('running')"), True)
    else:
        stop = clock_stopped(status, False, False)
    since = t.paused_since
    if stop and since is None:
        at = t.finished_at if status != "parked" and t.finished_at is not None else now
        sql.execute(db, "UPDATE task SET paused_since = ? WHERE task_id = ?", [at, task_id])
    elif not stop and since is not None:
        sql.execute(db, "UPDATE task SET paused_s = paused_s + ?, paused_since = NULL WHERE task_id = ?",
                    [max(0.0, now - since), task_id])


def claim_lock(db: pw.Database, task_id: str) -> None:
    """PostgreSQL: a claim holds the clock's advisory lock shared before it marks a node running."""
    if not is_sqlite(db):
        sql.execute(db, "SELECT pg_advisory_xact_lock_shared(CAST(? AS integer), hashtext(?))", [PG_PAUSE_LOCK_CLASS, task_id])


def end_on_claim(db: pw.Database, task: TaskRecord, now: float) -> None:
    """A claim made a node of an active task running: a clock stopped for waiting restarts.

    On SQLite the task row read at the start of the claim is current (the write lock is held),
    so nothing is written unless it shows a stop; on PostgreSQL the conditional update always
    runs, after :func:`claim_lock`, so it sees a stop committed by a write that held the lock."""
    if is_sqlite(db) and task.paused_since is None:
        return
    sql.execute(db, "UPDATE task SET paused_s = paused_s + CASE WHEN paused_since < ? THEN ? - paused_since "
                    "ELSE 0 END, paused_since = NULL WHERE task_id = ? AND paused_since IS NOT NULL "
                    "AND status = 'active'", [now, now, task.task_id])

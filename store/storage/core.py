"""The ledger's core: an open database, its clock, the journal writer and the row reads and writes
every other part of the ledger (and the operator actions) build on.

Everything here is public on purpose: the agent writes, the graph building, the queries and
``store.actions`` share this small layer instead of reaching into one another's internals.

Every write is one transaction that begins IMMEDIATE at depth 0 (``db.write_tx``) and appends its
journal events (:meth:`LedgerCore.journal`) in that same transaction.
"""

from __future__ import annotations

import hashlib
import os
import traceback
from types import TracebackType
from typing import Iterable, Literal, Mapping, Self, Sequence, TypeVar

import peewee as pw

from store.judges import budget as budget_mod
from store.storage import sql
from store import validate
from store.clock import Clock, system_clock
from store.storage.db import (
    BUSY_TIMEOUT_S,
    CONNECT_TIMEOUT_S,
    RECONNECT_BUDGET_S,
    Backoff,
    close_database,
    connect_checked,
    is_sqlite,
    open_database,
    register_result,
)
from store.errors import NotFound
from store.storage.models import dumps
from store.storage.schema import check_version
from store.storage.tables import NodeRecord, TaskRecord
from store.views import Pulse
from store.storage import budget_clock
from store.storage.rows import wall_used
from store.storage.events import TaskCompleted, TaskFailed
from store.storage.payloads import Layer, Payload

TASK_ID_RE = validate.TASK_ID_RE  # matched whole (fullmatch): a trailing newline never passes
NODE_KEY_RE = validate.NODE_KEY_RE
RETRY_BASE_S = 5.0
RETRY_CAP_S = 600.0
PG_JOURNAL_LOCK = 0x57A4DE  # transaction-scoped advisory lock serialising journal inserts
# PostgreSQL row locks on the task row, weakest first. Lock order everywhere: the task row, then node
# rows, then the journal's advisory lock (last, in `journal`). Claims take KEY SHARE (claims do not
# wait for one another, nor for agent writes); agent writes and graph growth take NO KEY UPDATE;
# operator actions take UPDATE, which excludes both while an action checks its revision and applies.
TaskLock = Literal["share", "update", "exclusive"]
TASK_LOCKS: dict[str, str] = {"share": " FOR KEY SHARE", "update": " FOR NO KEY UPDATE", "exclusive": " FOR UPDATE"}
# Unfinished node statuses, as an IN list (a range on the (task, status) index, unlike NOT IN).
UNFINISHED_SQL = "('pending', 'running', 'blocked', 'parked', 'failed')"
TASK_COLUMNS = sql.columns(TaskRecord)
NODE_COLUMNS = sql.columns(NodeRecord)

_Query = TypeVar("_Query", bound=pw.BaseQuery)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_json(value: object) -> str:
    return sha256_hex(dumps(value).encode("utf-8"))


def retry_delay(attempt: int, base: float = RETRY_BASE_S, cap: float = RETRY_CAP_S) -> float:
    """Deterministic exponential back-off: base · 2^(attempt-1), capped."""
    return min(cap, base * (2 ** max(0, attempt - 1)))


def validate_task_id(task_id: str) -> None:
    """A new task's id (``store.validate.task_id``): ``InvalidValue`` when malformed."""
    validate.task_id("task_id", task_id)


def validate_key(key: str) -> None:
    """A new node's key (``store.validate.node_key``): ``InvalidValue`` when malformed."""
    validate.node_key("key", key)


register_result("pulse", Pulse, lambda p: {"lease_until": p.lease_until, "parked": p.parked,
                                            "new_units": p.new_units, "gate": p.gate, "density": p.density,
                                            "stall": p.stall, "stall_evidence": p.stall_evidence},
                lambda data, _args, _kwargs: Pulse(**data))


def drifting(mind: object) -> bool:
    """Whether a task's mind counters (``task.mind``, store/mind/views.py MindState) hold an
    alignment verdict of ``drifting`` that no replan or narrow has answered yet."""
    return isinstance(mind, Mapping) and mind.get("verdict") == "drifting"


class LedgerCore:
    """An open ledger database and its clock; the shared layer under :class:`store.Ledger`."""

    def __init__(self, db: pw.Database, clock: Clock = system_clock, target: str = "") -> None:
        self.db = db
        self.clock = clock
        self.target = target  # what it was opened from (a path or URL; Feed and waits reopen it)
        # (task, worker, workflow version) refusals already journalled by this open ledger: a
        # worker polling with the wrong version is journalled once, not on every poll.
        self.version_refusals: set[tuple[str, str, str]] = set()

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(
        cls,
        target: str | os.PathLike[str] = "ledger.db",
        *,
        clock: Clock | None = None,
        read_only: bool = False,
        create: bool = True,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
        reconnect_s: float = RECONNECT_BUDGET_S,
        application_name: str = "warden-agent",
        backoff: Backoff | None = None,
        one_connection: bool = False,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> Self:
        """Open (and, for the agent side, create) a ledger: a path, ``sqlite:///…`` or
        ``postgresql://…``.

        ``create=False`` refuses a ledger that does not exist yet (the console and the CLI), so a
        typo never leaves a stray empty database behind.

        ``busy_timeout_s``: how long a write waits for a lock (SQLite's busy timeout, PostgreSQL's
        ``lock_timeout``) before ``LedgerBusy`` (a ``LedgerUnavailable``); nothing is written.
        ``reconnect_s``: PostgreSQL — for how long a lost connection is re-tried (bounded,
        jittered back-off) before ``LedgerUnavailable``; ``backoff`` sets the whole policy
        (tests inject its ``sleep`` and ``clock``). ``application_name``: what
        ``pg_stat_activity`` shows (``warden-agent``; the console ``warden-console``, the CLI
        ``warden-cli``). ``one_connection``: PostgreSQL — every thread of this process uses the
        same connection, one transaction (or statement) at a time (``store/storage/pgshared.py``): for a
        process that reads from many threads, like the console; SQLite: no effect.
        ``connect_timeout_s``: PostgreSQL — how long opening waits for a server it cannot reach
        (refused, unknown host, no answer, starting up; tried again with back-off) before
        ``LedgerUnavailable`` "cannot reach the server …" (default 10 s; CLI ``--connect-timeout``);
        also libpq's ``connect_timeout`` of every later (re)connection. SQLite: no effect.
        """
        if backoff is None:
            backoff = Backoff(budget_s=float(reconnect_s))
        db = open_database(target, read_only=read_only, create=create and not read_only,
                           busy_timeout_s=busy_timeout_s, application_name=application_name, backoff=backoff,
                           one_connection=one_connection, connect_timeout_s=connect_timeout_s)
        connect_checked(db)
        try:
            check_version(db, create=create and not read_only)
        except Exception:
            close_database(db)
            raise
        return cls(db, clock or system_clock, os.fspath(target))

    @property
    def display(self) -> str:
        return str(getattr(self.db, "display", "ledger"))

    @property
    def read_only(self) -> bool:
        return bool(getattr(self.db, "read_only", False))

    def close(self) -> None:
        close_database(self.db)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: TracebackType | None) -> None:
        if tb is not None and getattr(self.db, "tidy_on_close", False):
            # A read that failed inside SQLite: the finished frames still hold its cursor, and with
            # it SQLite's read lock, which would keep the -wal/-shm a read made from being tidied.
            # (The driver's own error may hang on as the context of the one raised.)
            seen: BaseException | None = exc if isinstance(exc, BaseException) else None
            traceback.clear_frames(tb)
            for _ in range(8):
                if seen is None:
                    break
                if seen.__traceback__ is not None:
                    traceback.clear_frames(seen.__traceback__)
                seen = seen.__cause__ or seen.__context__
        self.close()

    def now(self) -> float:
        return float(self.clock())

    def bind(self, query: _Query) -> _Query:
        """A Peewee query bound to this ledger's database (the models are declared without one)."""
        return query.bind(self.db)

    # ------------------------------------------------------------------ the journal
    def journal(self, task_id: str | None, node: str | None, actor: str, summary: str, payload: Payload, *,
                at: float | None = None, layer: Layer | None = None, observation: int | None = None) -> int:
        """Append one journal event inside the caller's write transaction; returns its id. Its kind
        and layer come with its payload (``store/storage/events.py``); ``layer``: another of the
        layers its kind is declared in; ``observation``: the observation row a heartbeat made (the
        event names it: what the report brought is stored there only)."""
        layer = payload.LAYERS[0] if layer is None else layer
        assert layer in payload.LAYERS, (payload.KIND, layer)
        if not is_sqlite(self.db):
            # Ids from a sequence can become visible out of commit order; holding this lock until
            # commit makes journal inserts commit in id order, so `id > cursor` never skips one.
            sql.execute(self.db, "SELECT pg_advisory_xact_lock(?)", (PG_JOURNAL_LOCK,))
        cur = sql.execute(
            self.db,
            "INSERT INTO event (at, task_id, node, layer, kind, actor, summary, payload, observation_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            [self.now() if at is None else at, task_id, node, layer, payload.event_kind(), actor or "", summary,
             dumps(payload.to_json()), observation],
        )
        return int(cur.fetchone()[0])

    # ------------------------------------------------------------------ rejections
    def rejection_reasons(self, lists: Iterable[Sequence[object]]) -> dict[int, str]:
        """The reasons the rewinds named in these nodes' ``rejections`` gave, by rejected path: a
        rewind's reason is stored once, as its rejected path (a ``conclusion`` row), and a node
        lists the ids of those that reset it. One read, only when a list names one."""
        ids = sorted({x for values in lists for x in values if isinstance(x, int) and not isinstance(x, bool)})
        out: dict[int, str] = {}
        for chunk in sql.chunks(ids):
            out.update((int(i), str(r or "")) for i, r in sql.fetch_all(
                self.db, f"SELECT id, reason FROM conclusion WHERE id IN ({sql.marks(len(chunk))})", chunk))
        return out

    # ------------------------------------------------------------------ rows
    def task_record(self, task_id: str, *, lock: TaskLock | None = None) -> TaskRecord:
        """The task row, typed; on PostgreSQL ``lock`` takes a row lock: "exclusive" (operator
        actions), "update" (agent writes, graph growth) or "share" (claims)."""
        clause = sql.lock(self.db, TASK_LOCKS[lock]) if lock else ""
        row = sql.fetch_row(self.db, TaskRecord, f"SELECT {TASK_COLUMNS} FROM task WHERE task_id = ?{clause}", [task_id])
        if row is None:
            raise NotFound(f"unknown task {task_id!r}")
        return row

    def node_record(self, task_id: str, key: str, *, for_update: bool = False) -> NodeRecord:
        """The node row, typed (``NotFound`` for an unknown key)."""
        row = self.node_record_or_none(task_id, key, for_update=for_update)
        if row is None:
            raise NotFound(f"unknown node {key!r} in task {task_id!r}")
        return row

    def node_record_or_none(self, task_id: str, key: str, *, for_update: bool = False) -> NodeRecord | None:
        clause = sql.lock(self.db, " FOR UPDATE") if for_update else ""
        return sql.fetch_row(self.db, NodeRecord, f"SELECT {NODE_COLUMNS} FROM node WHERE task_id = ? AND key = ?{clause}",
                             [task_id, key])

    def node_record_by_id(self, node_id: int, *, lock: str = "") -> NodeRecord | None:
        """The node row by id (``lock``: a row-lock clause taken on PostgreSQL only)."""
        return sql.fetch_row(self.db, NodeRecord, f"SELECT {NODE_COLUMNS} FROM node WHERE id = ?{sql.lock(self.db, lock)}",
                             [node_id])

    def update_node(self, node_id: int, fields: Mapping[str, object], where: str = "",
                    params: Sequence[object] = ()) -> int:
        """``UPDATE node SET fields WHERE id = node_id`` + ``where``; returns the rows changed."""
        sets, values = sql.set_clause(fields)
        return sql.execute_count(self.db, f"UPDATE node SET {sets} WHERE id = ?{where}", [*values, node_id, *params])

    def bump_task(self, task_id: str, fields: Mapping[str, object]) -> None:
        """Update the task row with ``fields`` and bump its revision (``updated_at`` defaults to now)."""
        sets, values = sql.set_clause({"updated_at": self.now(), **fields, "revision": sql.Inc(1)})
        sql.execute(self.db, f"UPDATE task SET {sets} WHERE task_id = ?", [*values, task_id])

    def ids_for_keys(self, task_id: str, keys: Sequence[str]) -> dict[str, int]:
        """Node ids by key (unknown keys are left out)."""
        uniq = list(dict.fromkeys(keys))
        if len(uniq) > 2000:  # many keys: one scan of the task beats thousands of IN lists
            wanted = set(uniq)
            return {k: i for k, i in sql.fetch_all(self.db, "SELECT key, id FROM node WHERE task_id = ?", [task_id])
                    if k in wanted}
        out: dict[str, int] = {}
        for chunk in sql.chunks(uniq):
            out.update(sql.fetch_all(self.db, f"SELECT key, id FROM node WHERE task_id = ? AND key IN "
                                              f"({sql.marks(len(chunk))})", [task_id, *chunk]))
        return out

    # ------------------------------------------------------------------ the task's course
    def task_gate(self, task: TaskRecord, now: float) -> str:
        """The task row's budget gate (``ok | soft | hard | stop``) at ``now``."""
        ratio = budget_mod.usage_ratio(task.tokens_used, task.token_cap, wall_used(task, now), task.wall_cap_s)
        return budget_mod.gate(ratio, task.soft_ratio)

    def maybe_complete_task(self, task_id: str, now: float) -> None:
        """Inside a write: the task completes when every node is succeeded or abandoned — and no
        alignment check's ``drifting`` verdict waits for its answer (a replan or a narrow): drift is
        judged before a task can complete, so its alarm shows on an active task."""
        left = sql.scalar(self.db, f"SELECT 1 FROM node WHERE task_id = ? AND status IN {UNFINISHED_SQL} LIMIT 1",
                          [task_id])
        if left is not None:
            return
        task = self.task_record(task_id)
        if task.status in ("active", "failed") and not drifting(task.mind):
            self.bump_task(task_id, {"status": "completed", "finished_at": now})
            budget_clock.settle(self.db, task_id, now)  # a finished task's clock stands still
            self.journal(task_id, None, "warden", f"task {task_id} completed", TaskCompleted())

    def maybe_fail_task(self, task_id: str, now: float) -> None:
        """Inside a write: a task with a terminally failed node and nothing left that can move fails
        (a failed node asking a human waits on the answer: it can still move)."""
        movable = sql.execute(
            self.db,
            "SELECT 1 FROM node n WHERE n.task_id = ? AND (n.status IN ('running', 'blocked', 'parked') "
            "OR (n.status = 'pending' AND NOT EXISTS (SELECT 1 FROM edge e JOIN node d ON d.id = e.src_id "
            f"WHERE e.dst_id = n.id AND d.status NOT IN ('succeeded', 'abandoned'))) OR {budget_clock.FAILED_ASKING_SQL}) LIMIT 1",
            [task_id],
        ).fetchone()
        if movable:
            return
        # nothing moves and no node failed: every node finished, held open by a drifting verdict
        if sql.scalar(self.db, "SELECT 1 FROM node WHERE task_id = ? AND status = 'failed' LIMIT 1", [task_id]) is None:
            return
        if self.task_record(task_id).status == "active":
            self.bump_task(task_id, {"status": "failed", "finished_at": now})
            budget_clock.settle(self.db, task_id, now)
            self.journal(task_id, None, "warden", f"task {task_id} failed: a node failed and nothing else can run",
                         TaskFailed())

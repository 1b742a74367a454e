"""The Ledger facade: the agent-side API (claim / heartbeat / commit / ...) and read queries.

Every write is one transaction that begins IMMEDIATE at depth 0 (``db.write_tx``) and appends its
journal events in that same transaction. Every agent write is a compare-and-set on
(node, lease token, status running, ``lease_until > now``) judged with the injected clock at write
time; when it does not match, ``LeaseLost`` is raised and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from typing import Any, Iterable, Mapping, Sequence

import peewee as pw

from . import budget as budget_mod
from . import graph as graph_mod
from .clock import Clock, system_clock
from .db import connect_checked, is_sqlite, open_database, read_tx, retry_write, write_tx
from .errors import LeaseLost, LedgerUnavailable, NotFound, Refused, WardenError
from .models import (
    FAILURE_CLASSES,
    HANDOFF_KINDS,
    LAYERS,
    Action,
    Artifact,
    Edge,
    Effect,
    Event,
    Handoff,
    Node,
    Observation,
    SeenLine,
    Task,
    dumps,
)
from .schema import check_version
from .views import (
    ActionView,
    ArtifactView,
    Budget,
    Claim,
    EffectView,
    EventView,
    GraphView,
    HandoffView,
    NodeDetail,
    NodeSpec,
    NodeView,
    ObservationView,
    Pulse,
    TaskView,
)

TASK_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
NODE_KEY_RE = re.compile(r"^[A-Za-z0-9._:/@+-]{1,200}$")
OBSERVATION_TEXT_CAP = 4096
OUTPUT_CAP = 64 * 1024
ARTIFACT_INLINE_CAP = 64 * 1024 * 1024
RETRY_BASE_S = 5.0
RETRY_CAP_S = 600.0
PG_JOURNAL_LOCK = 0x57A4DE  # transaction-scoped advisory lock serialising journal inserts
# PostgreSQL row locks on the task row, weakest first. Lock order everywhere: the task row, then node
# rows, then the journal's advisory lock (last, in `_journal`). Claims take KEY SHARE (claims do not
# wait for one another, nor for agent writes); agent writes and graph growth take NO KEY UPDATE;
# operator actions take UPDATE, which excludes both while an action checks its revision and applies.
TASK_LOCKS = {"share": " FOR KEY SHARE", "update": " FOR NO KEY UPDATE", "exclusive": " FOR UPDATE"}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_json(value: Any) -> str:
    return sha256_hex(dumps(value).encode("utf-8"))


def normalise_lines(text: str) -> list[str]:
    """Observation → normalised lines: stripped, white space collapsed, case folded, no empties."""
    out = []
    for line in text.splitlines():
        norm = " ".join(line.split()).casefold()
        if norm:
            out.append(norm)
    return out


def retry_delay(attempt: int, base: float = RETRY_BASE_S, cap: float = RETRY_CAP_S) -> float:
    """Deterministic exponential back-off: base · 2^(attempt-1), capped."""
    return min(cap, base * (2 ** max(0, attempt - 1)))


def _validate_task_id(task_id: str) -> None:
    if not isinstance(task_id, str) or not TASK_ID_RE.match(task_id):
        raise Refused(f"invalid task id {task_id!r}: use 1-64 of A-Z a-z 0-9 . _ -")


def _validate_key(key: str) -> None:
    if not isinstance(key, str) or not NODE_KEY_RE.match(key):
        raise Refused(f"invalid node key {key!r}: use 1-200 of A-Z a-z 0-9 . _ - : / @ +")


class Inc:
    """``column = column + n`` in a raw update."""

    __slots__ = ("n",)

    def __init__(self, n: float) -> None:
        self.n = n


JSON_COLUMNS = frozenset({"inputs", "constraints", "preconditions", "output", "rejections", "payload", "context",
                          "options"})
BOOL_COLUMNS = frozenset({"retryable", "always_admit"})


def _decode_row(cols: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    d = dict(zip(cols, values))
    for c in JSON_COLUMNS.intersection(d):
        v = d[c]
        if isinstance(v, str):
            d[c] = json.loads(v)
    for c in BOOL_COLUMNS.intersection(d):
        if d[c] is not None:
            d[c] = bool(d[c])
    return d


class Ledger:
    """A ledger on SQLite or PostgreSQL. Open with :meth:`open`."""

    def __init__(self, db: pw.Database, clock: Clock = system_clock) -> None:
        self.db = db
        self.clock = clock
        # Test hooks: name → callable, run at a named point inside a transaction (tests hold a
        # transaction open there to prove what it does and does not block). Empty in production.
        self.hooks: dict[str, Any] = {}

    def _hook(self, name: str, *args: Any) -> None:
        fn = self.hooks.get(name)
        if fn is not None:
            fn(*args)

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(
        cls,
        target: str | os.PathLike[str] = "ledger.db",
        *,
        clock: Clock | None = None,
        read_only: bool = False,
        create: bool = True,
    ) -> "Ledger":
        """Open (and, for the agent side, create) a ledger.

        ``create=False`` refuses a ledger that does not exist yet (the console and the CLI), so a
        typo never leaves a stray empty database behind.
        """
        db = open_database(target, read_only=read_only, create=create and not read_only)
        connect_checked(db)
        try:
            check_version(db, create=create and not read_only)
        except Exception:
            db.close()
            raise
        return cls(db, clock or system_clock)

    @property
    def display(self) -> str:
        return getattr(self.db, "display", "ledger")

    @property
    def read_only(self) -> bool:
        return bool(getattr(self.db, "read_only", False))

    def close(self) -> None:
        if not self.db.is_closed():
            self.db.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> float:
        return float(self.clock())

    # ------------------------------------------------------------------ internals
    def _q(self, query: Any) -> Any:
        return query.bind(self.db)

    def _journal(
        self,
        task_id: str | None,
        node: str | None,
        layer: str,
        kind: str,
        actor: str,
        summary: str,
        payload: Mapping[str, Any] | None = None,
        at: float | None = None,
    ) -> int:
        """Append one journal event inside the caller's write transaction; returns its id."""
        assert layer in LAYERS, layer
        if not is_sqlite(self.db):
            # Ids from a sequence can become visible out of commit order; holding this lock until
            # commit makes journal inserts commit in id order, so `id > cursor` never skips one.
            self.db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (PG_JOURNAL_LOCK,))
        cur = self.db.execute_sql(
            self._sql("INSERT INTO event (at, task_id, node, layer, kind, actor, summary, payload) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"),
            [self.now() if at is None else at, task_id, node, layer, kind, actor or "", summary,
             dumps(dict(payload or {}))],
        )
        return int(cur.fetchone()[0])

    def _sql(self, sql: str) -> str:
        """Our raw SQL is written with ``?``; PostgreSQL's driver wants ``%s``."""
        return sql if is_sqlite(self.db) else sql.replace("?", "%s")

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        cur = self.db.execute_sql(self._sql(sql), list(params))
        row = cur.fetchone()
        if row is None:
            return None
        return _decode_row([d[0] for d in cur.description], row)

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self.db.execute_sql(self._sql(sql), list(params)).rowcount

    def _task_row(self, task_id: str, *, for_update: bool | str = False) -> dict[str, Any]:
        """The task row; on PostgreSQL ``for_update`` locks it: True/"exclusive" (operator
        actions), "update" (agent writes, graph growth) or "share" (claims) — see TASK_LOCKS."""
        mode = "exclusive" if for_update is True else (for_update or None)
        lock = TASK_LOCKS[mode] if mode and not is_sqlite(self.db) else ""
        row = self._fetch(f"SELECT * FROM task WHERE task_id = ?{lock}", [task_id])
        if row is None:
            raise NotFound(f"unknown task {task_id!r}")
        return row

    def _node_row(self, task_id: str, key: str, *, for_update: bool = False) -> dict[str, Any]:
        row = self._node_row_or_none(task_id, key, for_update=for_update)
        if row is None:
            raise NotFound(f"unknown node {key!r} in task {task_id!r}")
        return row

    def _node_row_or_none(self, task_id: str, key: str, *, for_update: bool = False) -> dict[str, Any] | None:
        lock = " FOR UPDATE" if for_update and not is_sqlite(self.db) else ""
        row = self._fetch(f"SELECT * FROM node WHERE task_id = ? AND key = ?{lock}", [task_id, key])
        if row is not None:
            row["task"] = row["task_id"]
        return row

    def _node_row_by_id(self, node_id: int) -> dict[str, Any]:
        row = self._fetch("SELECT * FROM node WHERE id = ?", [node_id])
        assert row is not None
        row["task"] = row["task_id"]
        return row

    def _update_node(self, node_id: int, fields: Mapping[str, Any], where: str = "", params: Sequence[Any] = ()) -> int:
        sets, values = [], []
        for col, v in fields.items():
            if isinstance(v, Inc):
                sets.append(f"{col} = {col} + ?")
                values.append(v.n)
            else:
                sets.append(f"{col} = ?")
                values.append(dumps(v) if col in JSON_COLUMNS else v)
        return self._exec(f"UPDATE node SET {', '.join(sets)} WHERE id = ?{where}", [*values, node_id, *params])

    def _bump_task(self, task_id: str, **fields: Any) -> None:
        fields.setdefault("updated_at", self.now())
        self._q(
            Task.update(revision=Task.revision + 1, **fields).where(Task.task_id == task_id)
        ).execute()

    # ------------------------------------------------------------------ tasks and nodes
    def create_task(
        self,
        task_id: str,
        *,
        title: str = "",
        workflow: str = "",
        workflow_version: str = "",
        inputs: Any = None,
        constraints: Sequence[str] | None = None,
        preconditions: Mapping[str, Any] | None = None,
        budget: Budget | None = None,
        max_claims: int = 5,
        max_repairs: int = 3,
        exist_ok: bool = False,
        actor: str = "",
    ) -> TaskView:
        """Create a task. With ``exist_ok`` an existing task is returned unchanged (idempotent)."""
        _validate_task_id(task_id)
        budget = budget or Budget()
        constraints = [str(c) for c in (constraints or [])]
        preconditions = dict(preconditions or {})
        dumps(inputs)  # refuse what cannot be stored before writing anything
        dumps(preconditions)
        try:
            return self._create_task(task_id, title, workflow, workflow_version, inputs, constraints, preconditions,
                                     budget, max_claims, max_repairs, exist_ok, actor)
        except pw.IntegrityError:
            if is_sqlite(self.db):
                raise
            # PostgreSQL: another process created the same task between our check and our insert
            # (SQLite's BEGIN IMMEDIATE rules that out); look again.
            return self._create_task(task_id, title, workflow, workflow_version, inputs, constraints, preconditions,
                                     budget, max_claims, max_repairs, exist_ok, actor)

    @retry_write
    def _create_task(self, task_id: str, title: str, workflow: str, workflow_version: str, inputs: Any,
                     constraints: list[str], preconditions: dict[str, Any], budget: Budget, max_claims: int,
                     max_repairs: int, exist_ok: bool, actor: str) -> TaskView:
        now = self.now()
        with write_tx(self.db):
            existing = self._q(Task.select(Task.task_id).where(Task.task_id == task_id)).first()
            if existing is not None:
                if exist_ok:
                    return self.task(task_id)
                raise Refused(f"task {task_id!r} already exists")
            self._q(
                Task.insert(
                    task_id=task_id,
                    title=title,
                    workflow=workflow,
                    workflow_version=workflow_version,
                    status="active",
                    inputs=inputs if inputs is not None else {},
                    constraints=constraints,
                    preconditions=preconditions,
                    token_cap=budget.tokens,
                    wall_cap_s=budget.wall_s,
                    soft_ratio=budget.soft_ratio,
                    max_claims=max_claims,
                    max_repairs=max_repairs,
                    revision=1,
                    created_at=now,
                    updated_at=now,
                )
            ).execute()
            self._journal(task_id, None, "system", "task.created", actor, f"task created: {title or task_id}",
                          {"workflow": workflow, "workflow_version": workflow_version})
        return self.task(task_id)

    def add_node(
        self,
        task_id: str,
        key: str,
        *,
        kind: str = "tool",
        deps: Sequence[str] = (),
        title: str = "",
        preconditions: Mapping[str, Any] | None = None,
        est_wall_s: float | None = None,
        est_tokens: int | None = None,
        always_admit: bool = False,
        retryable: bool = True,
        units_total: float | None = None,
        max_claims: int | None = None,
        actor: str = "",
    ) -> NodeView:
        """Add one node. Unknown dependencies and cycles are refused; re-adding the same node
        with the same dependencies is a no-op (an agent may die between deciding and adding)."""
        spec = NodeSpec(key, kind, tuple(deps), title, preconditions, est_wall_s, est_tokens,
                        always_admit, retryable, units_total, max_claims)
        self.add_nodes(task_id, [spec], actor=actor)
        return self.node(task_id, key)

    def add_nodes(self, task_id: str, specs: Iterable[NodeSpec], *, actor: str = "") -> int:
        """Add many nodes in one transaction (any order among themselves). Returns how many were new."""
        specs = list(specs)
        return self._add_nodes(task_id, specs, actor)

    @retry_write
    def _add_nodes(self, task_id: str, specs: list[NodeSpec], actor: str) -> int:
        with write_tx(self.db):
            added = self._add_nodes_tx(task_id, specs, actor=actor)
        return added

    def _add_nodes_tx(self, task_id: str, specs: list[NodeSpec], *, actor: str) -> int:
        task = self._task_row(task_id, for_update="update")
        if task["status"] == "aborted":
            raise Refused(f"task {task_id!r} is aborted; nothing can be added")
        seen: set[str] = set()
        for s in specs:
            _validate_key(s.key)
            if s.key in seen:
                raise Refused(f"node {s.key!r} is listed twice")
            seen.add(s.key)
            if s.key in s.deps:
                raise Refused(f"node {s.key!r} cannot depend on itself (a cycle)")
            dumps(dict(s.preconditions or {}))
        keys = [s.key for s in specs] + [d for s in specs for d in s.deps]
        existing = self._ids_for_keys(task_id, keys)
        existing_deps: dict[str, set[str]] = {}
        old = [s for s in specs if s.key in existing]
        if old:
            for dst, src in self._edges_for_ids(task_id, [existing[s.key] for s in old]):
                existing_deps.setdefault(dst, set()).add(src)
        new_specs = []
        for s in specs:
            if s.key in existing:
                if set(s.deps) != existing_deps.get(s.key, set()):
                    raise Refused(f"node {s.key!r} already exists with other dependencies")
                continue
            new_specs.append(s)
        if not new_specs:
            return 0
        new_keys = {s.key for s in new_specs}
        for s in new_specs:
            for d in s.deps:
                if d not in existing and d not in new_keys:
                    raise Refused(f"node {s.key!r} depends on unknown node {d!r}")
        order = graph_mod.topological_order(
            [s.key for s in new_specs], {s.key: [d for d in s.deps if d in new_keys] for s in new_specs}
        )
        if order is None:
            raise Refused("the new nodes' dependencies form a cycle")
        by_key = {s.key: s for s in new_specs}
        pos_row = self._q(Node.select(pw.fn.MAX(Node.position)).where(Node.task == task_id)).scalar()
        pos = int(pos_row or 0)
        rows = []
        for k in order:
            s = by_key[k]
            pos += 1
            rows.append((task_id, s.key, pos, s.kind, s.title, "pending", dumps(dict(s.preconditions or {})),
                         s.est_wall_s, s.est_tokens, bool(s.always_admit), bool(s.retryable), s.units_total,
                         s.max_claims, "[]", 1))
        cur = self.db.cursor()
        cur.executemany(self._sql(
            "INSERT INTO node (task_id, key, position, kind, title, status, preconditions, est_wall_s, est_tokens, "
            "always_admit, retryable, units_total, max_claims, rejections, version, attempt, tokens_used, "
            "wall_used_s, claim_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, 0)"), rows)
        ids = self._ids_for_keys(task_id, list(new_keys) + [d for s in new_specs for d in s.deps])
        edges = [(task_id, ids[d], ids[s.key]) for s in new_specs for d in dict.fromkeys(s.deps)]
        if edges:
            cur.executemany(self._sql("INSERT INTO edge (task_id, src_id, dst_id) VALUES (?, ?, ?)"), edges)
        fields: dict[str, Any] = {}
        if task["status"] == "completed":
            fields.update(status="active", finished_at=None)
        self._bump_task(task_id, **fields)
        summary = (f"node added: {new_specs[0].key}" if len(new_specs) == 1
                   else f"{len(new_specs)} nodes added")
        self._journal(task_id, new_specs[0].key if len(new_specs) == 1 else None, "system", "graph.nodes_added",
                      actor, summary, {"nodes": [s.key for s in new_specs]})
        return len(new_specs)

    def _ids_for_keys(self, task_id: str, keys: Sequence[str]) -> dict[str, int]:
        uniq = list(dict.fromkeys(keys))
        if len(uniq) > 2000:  # many keys: one scan of the task beats thousands of IN lists
            wanted = set(uniq)
            cur = self.db.execute_sql(self._sql("SELECT key, id FROM node WHERE task_id = ?"), [task_id])
            return {k: i for k, i in cur.fetchall() if k in wanted}
        out: dict[str, int] = {}
        for chunk in _chunks(uniq, 500):
            marks = ", ".join("?" * len(chunk))
            cur = self.db.execute_sql(self._sql(f"SELECT key, id FROM node WHERE task_id = ? AND key IN ({marks})"),
                                      [task_id, *chunk])
            out.update(cur.fetchall())
        return out

    def _edges_for_ids(self, task_id: str, dst_ids: Sequence[int]) -> list[tuple[str, str]]:
        D = Node.alias()
        S = Node.alias()
        out = []
        for chunk in _chunks(list(dst_ids), 500):
            q = (Edge.select(D.key, S.key)
                 .join(D, on=(Edge.dst == D.id))
                 .switch(Edge).join(S, on=(Edge.src == S.id))
                 .where(Edge.dst.in_(chunk)))
            out.extend(self._q(q).tuples())
        return out

    # ------------------------------------------------------------------ budget
    def _task_gate(self, task: Mapping[str, Any], now: float) -> str:
        ratio = budget_mod.usage_ratio(task["tokens_used"], task["token_cap"], _wall_used(task, now), task["wall_cap_s"])
        return budget_mod.gate(ratio, task["soft_ratio"])

    def admit(self, task_id: str, node_key: str) -> str:
        """The budget governor for one node: ``admit | admit_degraded | deny_hard``."""
        with read_tx(self.db):
            task = self._task_row(task_id)
            node = self._node_row(task_id, node_key)
        return budget_mod.admit(self._task_gate(task, self.now()), bool(node["always_admit"]))

    # ------------------------------------------------------------------ claim
    def claim(
        self,
        task_id: str | None,
        worker: str,
        lease_s: float = 30.0,
        *,
        kinds: Sequence[str] | None = None,
    ) -> Claim | None:
        """Claim a ready node of ``task_id`` (or of any active task when None), or None.

        Ready: pending, every dependency succeeded or abandoned, ``next_retry_at`` passed, task
        active. A running node whose lease has expired (``lease_until <= now``) is reclaimed.
        """
        if not worker:
            raise Refused("a claim needs a worker name")
        if lease_s <= 0:
            raise Refused("lease_s must be positive")
        for _ in range(1000):  # each round either claims, fails an over-claimed node, or ends
            result = self._claim_round(task_id, worker, float(lease_s), kinds)
            if isinstance(result, tuple):  # over-claimed: fail it in its own transaction, go again
                self._fail_over_claimed(*result, worker)
                continue
            return result
        return None

    @retry_write
    def _claim_round(self, task_id: str | None, worker: str, lease_s: float, kinds: Sequence[str] | None):
        with write_tx(self.db):
            return self._claim_tx(task_id, worker, lease_s, kinds)

    def _claim_tx(self, task_id: str | None, worker: str, lease_s: float, kinds: Sequence[str] | None):
        now = self.now()
        if task_id is not None:
            task_ids = [task_id]
            self._task_row(task_id)  # NotFound for an unknown task
        else:
            task_ids = [r[0] for r in self._q(
                Task.select(Task.task_id).where(Task.status == "active").order_by(Task.created_at)).tuples()]
        for tid in task_ids:
            # KEY SHARE: claims of one task never wait for each other; an operator action (FOR
            # UPDATE) waits for this claim to commit, and a claim behind it sees its result.
            task = self._task_row(tid, for_update="share")
            if task["status"] != "active":
                continue
            gate = self._task_gate(task, now)
            if gate == "stop":
                continue
            only_admit = gate == "hard"
            row = self._find_claimable(tid, now, only_admit, kinds)
            if row is None:
                continue
            limit = row["max_claims"] if row["max_claims"] is not None else task["max_claims"]
            if limit is not None and row["claim_count"] >= limit:
                return (tid, row["id"])
            return self._take(task, row, worker, lease_s, now, gate)
        return None

    def _find_claimable(self, task_id: str, now: float, only_admit: bool, kinds: Sequence[str] | None):
        extra = ""
        params: list[Any] = []
        if only_admit:
            extra += " AND n.always_admit = %s" % ("1" if is_sqlite(self.db) else "TRUE")
        if kinds:
            extra += " AND n.kind IN (%s)" % ",".join(["?" if is_sqlite(self.db) else "%s"] * len(kinds))
            params.extend(kinds)
        ph = "?" if is_sqlite(self.db) else "%s"
        # NO KEY UPDATE, not UPDATE: foreign-key checks (KEY SHARE) of concurrent inserts that
        # reference this node must not wait for a claim.
        lock = "" if is_sqlite(self.db) else " FOR NO KEY UPDATE OF n SKIP LOCKED"
        # Reclaim first: a running node whose lease expired has been waited on longest.
        sql_expired = (
            f"SELECT n.id FROM node n WHERE n.task_id = {ph} AND n.status = 'running' "
            f"AND n.lease_until <= {ph}{extra} ORDER BY n.position LIMIT 1{lock}"
        )
        cur = self.db.execute_sql(sql_expired, [task_id, now, *params])
        r = cur.fetchone()
        if r is None:
            sql_ready = (
                f"SELECT n.id FROM node n WHERE n.task_id = {ph} AND n.status = 'pending' "
                f"AND (n.next_retry_at IS NULL OR n.next_retry_at <= {ph}){extra} "
                "AND NOT EXISTS (SELECT 1 FROM edge e JOIN node d ON d.id = e.src_id "
                "WHERE e.dst_id = n.id AND d.status NOT IN ('succeeded', 'abandoned')) "
                f"ORDER BY n.position LIMIT 1{lock}"
            )
            cur = self.db.execute_sql(sql_ready, [task_id, now, *params])
            r = cur.fetchone()
        if r is None:
            return None
        return self._node_row_by_id(r[0])

    @retry_write
    def _fail_over_claimed(self, task_id: str, node_id: int, worker: str) -> None:
        """Fail a node claimed ``max_claims`` times, in its own transaction taking the task row
        before the node (a claim holds only KEY SHARE on the task; failing may fail the task)."""
        with write_tx(self.db):
            now = self.now()
            task = self._task_row(task_id, for_update="update")
            lock = "" if is_sqlite(self.db) else " FOR NO KEY UPDATE"
            row = self._fetch(f"SELECT * FROM node WHERE id = ?{lock}", [node_id])
            if row is None or row["status"] not in ("pending", "running"):
                return
            if row["status"] == "running" and (row["lease_until"] is None or row["lease_until"] > now):
                return  # somebody holds it
            limit = row["max_claims"] if row["max_claims"] is not None else task["max_claims"]
            if limit is None or row["claim_count"] < limit:
                return
            self._fail_over_claimed_tx(task, row, limit, worker, now)

    def _fail_over_claimed_tx(self, task: Mapping[str, Any], row: Mapping[str, Any], limit: int, worker: str,
                              now: float) -> None:
        err = f"claimed {row['claim_count']} times, the limit is {limit}: not claimed again"
        self._update_node(row["id"], dict(
            status="failed", failure_class=row["failure_class"] or "transient", retryable=False, error=err,
            lease_owner=None, lease_token=None, lease_until=None, finished_at=now, version=Inc(1),
        ))
        self._journal(task["task_id"], row["key"], "system", "node.failed", worker,
                      f"{row['key']} failed: max claims reached", {"error": err, "max_claims": limit})
        self._maybe_fail_task(task["task_id"], now)

    def _take(self, task: Mapping[str, Any], row: Mapping[str, Any], worker: str, lease_s: float, now: float, gate: str) -> Claim:
        token = secrets.token_hex(16)
        reclaim = row["status"] == "running"
        attempt = int(row["attempt"]) + 1
        inputs = self._claim_inputs(task, row)
        input_digest = digest_json({"task": task["inputs"], "deps": {k: v.get("digest") for k, v in inputs["deps"].items()}})
        n = self._update_node(row["id"], dict(
            status="running", lease_owner=worker, lease_token=token, lease_until=now + lease_s,
            heartbeat_at=now, claimed_at=now, claim_count=Inc(1), attempt=attempt,
            input_digest=input_digest, started_at=row["started_at"] if row["started_at"] is not None else now,
            next_retry_at=None, version=Inc(1),
        ), " AND version = ?", [row["version"]])
        if n != 1:  # cannot happen under the write lock; refuse rather than double-claim
            raise RuntimeError("claim lost its row under the write lock")
        self._hook("claim.locked", task["task_id"], row["key"])
        # No write to the task row on a claim (it would serialise every claim of the task): the
        # task's claim count is the sum of its nodes' attempts; only the first claim stamps
        # started_at (later claims match no row and take no lock).
        if task["started_at"] is None:
            self._exec("UPDATE task SET started_at = ? WHERE task_id = ? AND started_at IS NULL", [now, task["task_id"]])
        payload = {"worker": worker, "attempt": attempt, "lease_until": now + lease_s, "reclaimed": reclaim}
        if reclaim:
            payload["previous_owner"] = row["lease_owner"]
        self._journal(task["task_id"], row["key"], "execution", "node.claimed", worker,
                      f"{row['key']} claimed by {worker} (attempt {attempt}){' after lease expiry' if reclaim else ''}",
                      payload)
        return Claim(
            task_id=task["task_id"], node_key=row["key"], kind=row["kind"], worker=worker, token=token,
            attempt=attempt, lease_until=now + lease_s, inputs=inputs,
            admission=budget_mod.admit(gate, bool(row["always_admit"])), lease_s=lease_s,
        )

    def _claim_inputs(self, task: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
        deps = {}
        cur = self.db.execute_sql(self._sql(
            "SELECT s.key, s.output, s.output_ref, s.output_digest, s.status FROM edge e "
            "JOIN node s ON s.id = e.src_id WHERE e.dst_id = ? ORDER BY s.position"), [row["id"]])
        for key, output, ref, dig, status in cur.fetchall():
            deps[key] = {
                "output": json.loads(output) if output is not None else None,
                "output_ref": ref, "digest": dig, "status": status,
            }
        h = self._fetch("SELECT * FROM handoff WHERE node_id = ? AND status = 'resolved' ORDER BY id DESC LIMIT 1",
                        [row["id"]])
        resolution = None
        if h is not None:
            resolution = {
                "handoff": str(h["id"]), "kind": h["kind"], "question": h["question"],
                "option": h["resolution_option"], "answer": h["resolution_answer"],
                "by": h["resolved_by"], "at": h["resolved_at"],
            }
        return {
            "task": task["inputs"],
            "constraints": list(task["constraints"] or []),
            "preconditions": dict(task["preconditions"] or {}),
            "node_preconditions": dict(row["preconditions"] or {}),
            "deps": deps,
            "rejections": list(row["rejections"] or []),
            "resolution": resolution,
            "attempt": int(row["attempt"]) + 1,
        }

    # ------------------------------------------------------------------ fenced writes
    def _fence(self, claim: Claim, now: float, *, lock: bool = False) -> dict[str, Any]:
        """Inside a write transaction: the node row if the claim still holds, else LeaseLost.

        Writes that end in a compare-and-set on the node (heartbeat, commit, fail, request_human)
        need no lock here. Writes that do not update the node (intend/confirm effect, note) pass
        ``lock=True``: on PostgreSQL the node row is then held (NO KEY UPDATE) until commit, so an
        operator's revocation cannot slip in between this check and the commit (SQLite's
        BEGIN IMMEDIATE already excludes it)."""
        if lock and not is_sqlite(self.db):
            row = self._fetch("SELECT * FROM node WHERE task_id = ? AND key = ? FOR NO KEY UPDATE",
                              [claim.task_id, claim.node_key])
            if row is not None:
                row["task"] = row["task_id"]
        else:
            row = self._node_row_or_none(claim.task_id, claim.node_key)
        if row is None:
            raise LeaseLost(f"lease lost on {claim.task_id}/{claim.node_key}: the node no longer exists")
        if row["lease_token"] != claim.token or row["status"] != "running":
            task = self._fetch("SELECT status FROM task WHERE task_id = ?", [claim.task_id])
            why = self._lost_why(row, claim, task["status"] if task else None)
            raise LeaseLost(f"lease lost on {claim.task_id}/{claim.node_key}: {why}")
        if row["lease_until"] is None or row["lease_until"] <= now:
            raise LeaseLost(
                f"lease lost on {claim.task_id}/{claim.node_key}: expired "
                f"{now - (row['lease_until'] or now):.1f}s ago; the node may be reclaimed"
            )
        return row

    def _lost_why(self, row: Mapping[str, Any], claim: Claim, task_status: str | None) -> str:
        if task_status == "aborted":
            return "the task was aborted"
        if row["status"] == "parked":
            return "the node was parked by an operator"
        if row["status"] == "abandoned":
            return "the node was abandoned by an operator (out of scope)"
        if row["status"] == "running" and row["lease_token"] is not None:
            return f"reclaimed after expiry (now attempt {row['attempt']} by {row['lease_owner']})"
        if row["status"] == "pending" and row["attempt"] >= claim.attempt:
            return "revoked (rewound or reset by an operator)"
        if row["status"] in ("succeeded", "failed", "abandoned", "blocked"):
            return f"the node is {row['status']}"
        return "the lease token is no longer current"

    def _cas_update(self, row: Mapping[str, Any], claim: Claim, now: float, **fields: Any) -> None:
        n = self._update_node(row["id"], fields, " AND lease_token = ? AND status = 'running' AND lease_until > ?",
                              [claim.token, now])
        if n != 1:
            # PostgreSQL (Read Committed): an operator action committed between our fence read and
            # this update; say what it did, as the fence would have.
            self._fence(claim, now)
            raise LeaseLost(f"lease lost on {claim.task_id}/{claim.node_key}: changed under the write")

    def _add_tokens(self, claim: Claim, tokens: float | None) -> int:
        t = int(tokens or 0)
        if t < 0:
            raise Refused("tokens must not be negative")
        if t:
            self._exec("UPDATE task SET tokens_used = tokens_used + ? WHERE task_id = ?", [t, claim.task_id])
        return t

    @retry_write
    def heartbeat(
        self,
        claim: Claim,
        *,
        units_done: float | None = None,
        units_total: float | None = None,
        tokens: float | None = 0,
        observation: str | None = None,
        lease_s: float | None = None,
    ) -> Pulse:
        """Extend the lease and record progress. Raises LeaseLost when the claim no longer holds.

        Returns a :class:`Pulse`; ``parked`` tells the agent its task or node was parked: finish
        the current step, then stop claiming.
        """
        now = self.now()
        lease = float(lease_s or claim.lease_s)
        with write_tx(self.db):
            row = self._fence(claim, now)
            t = self._add_tokens(claim, tokens)
            fields: dict[str, Any] = {"lease_until": now + lease, "heartbeat_at": now}
            if t:
                fields["tokens_used"] = Inc(t)
            if units_done is not None:
                fields["units_done"] = float(units_done)
            if units_total is not None:
                fields["units_total"] = float(units_total)
            self._cas_update(row, claim, now, **fields)
            new_units = None
            payload: dict[str, Any] = {"lease_until": now + lease}
            if units_done is not None:
                payload["units_done"] = units_done
            if units_total is not None:
                payload["units_total"] = units_total
            if t:
                payload["tokens"] = t
            if observation is not None:
                new_units, digest, nlines = self._observe(row["id"], claim.attempt, observation, now)
                payload.update(new_units=new_units, digest=digest, lines=nlines)
            self._journal(claim.task_id, claim.node_key, "execution", "node.heartbeat", claim.worker,
                          f"{claim.node_key} heartbeat" + (f" (+{new_units} new)" if new_units is not None else ""),
                          payload, at=now)
            task = self._task_row(claim.task_id)
        return Pulse(lease_until=now + lease, parked=task["status"] == "parked", new_units=new_units,
                     gate=self._task_gate(task, now))

    def _observe(self, node_id: int, attempt: int, text: str, now: float) -> tuple[int, str, int]:
        text = str(text)
        lines = normalise_lines(text)
        digest = sha256_hex("\n".join(lines).encode("utf-8"))
        hashes = list(dict.fromkeys(hashlib.blake2b(l.encode("utf-8"), digest_size=16).hexdigest() for l in lines))
        seen: set[str] = set()
        for chunk in _chunks(hashes, 500):
            marks = ", ".join("?" * len(chunk))
            cur = self.db.execute_sql(self._sql(f"SELECT digest FROM seen_line WHERE node_id = ? AND digest IN ({marks})"),
                                      [node_id, *chunk])
            seen.update(r[0] for r in cur.fetchall())
        fresh = [h for h in hashes if h not in seen]
        for chunk in _chunks(fresh, 400):
            marks = ", ".join(["(?, ?)"] * len(chunk))
            self._exec(f"INSERT INTO seen_line (node_id, digest) VALUES {marks}", [x for h in chunk for x in (node_id, h)])
        capped = text if len(text) <= OBSERVATION_TEXT_CAP else text[:OBSERVATION_TEXT_CAP] + "…[truncated]"
        self._exec("INSERT INTO observation (node_id, at, attempt, text, digest, new_units, lines) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)", [node_id, now, attempt, capped, digest, len(fresh), len(lines)])
        return len(fresh), digest, len(lines)

    @retry_write
    def commit(
        self,
        claim: Claim,
        *,
        output: Any = None,
        output_ref: str | None = None,
        tokens: float | None = 0,
        artifact: tuple[str, bytes] | None = None,
        units_done: float | None = None,
        next_nodes: Sequence[NodeSpec] = (),
        repair: bool = False,
        summary: str | None = None,
    ) -> int:
        """Record the step's result atomically: output, artifact, tokens, timings, status
        succeeded, follow-up nodes (``next_nodes``) and the journal event. Returns the event id.

        ``repair=True`` counts one repair loop against the task's ``max_repairs``: past it the
        commit is refused (ask a human instead).
        """
        now = self.now()
        art = _prepare_commit(output, artifact)
        with write_tx(self.db):
            return self._commit_tx(claim, now, output, output_ref, tokens, art, units_done, next_nodes, repair,
                                   summary)

    @retry_write
    def commit_many(self, commits: Sequence[tuple[Claim, Mapping[str, Any]]]) -> list[int | WardenError]:
        """Group commit: several steps' commits in ONE write transaction (one fsync).

        For an agent process that runs many steps at once. Each step stays all-or-nothing (it runs
        in its own savepoint and is fenced exactly like :meth:`commit`); a step whose lease is lost
        or whose commit is refused is skipped and its error returned in its place, the others
        commit. Returns, per step, the journal event id or the error.
        """
        now = self.now()
        prepared = []
        for claim, kw in commits:
            bad = set(kw) - {"output", "output_ref", "tokens", "artifact", "units_done", "next_nodes", "repair",
                             "summary"}
            if bad:
                raise TypeError(f"commit_many: unknown commit arguments {sorted(bad)}")
            prepared.append((claim, kw, _prepare_commit(kw.get("output"), kw.get("artifact"))))
        results: list[int | WardenError] = []
        with write_tx(self.db):
            for claim, kw, art in prepared:
                try:
                    with self.db.atomic():  # a savepoint per step, inside the one IMMEDIATE transaction
                        results.append(self._commit_tx(
                            claim, now, kw.get("output"), kw.get("output_ref"), kw.get("tokens", 0), art,
                            kw.get("units_done"), kw.get("next_nodes", ()), kw.get("repair", False),
                            kw.get("summary")))
                except (LeaseLost, Refused) as e:
                    results.append(e)
        return results

    def _commit_tx(self, claim: Claim, now: float, output: Any, output_ref: str | None, tokens: float | None,
                   art: tuple[str, bytes, str] | None, units_done: float | None, next_nodes: Sequence[NodeSpec],
                   repair: bool, summary: str | None) -> int:
        task = self._task_row(claim.task_id, for_update="update")  # the task row first (lock order)
        row = self._fence(claim, now)
        if repair and task["repair_count"] >= task["max_repairs"]:
            raise Refused(
                f"repair budget exhausted ({task['repair_count']}/{task['max_repairs']}): ask a human instead"
            )
        t = self._add_tokens(claim, tokens)
        wall = now - (row["claimed_at"] or now)
        fields: dict[str, Any] = dict(
            status="succeeded", output=output, output_ref=output_ref, output_digest=digest_json(output),
            lease_owner=row["lease_owner"], lease_token=None, lease_until=None, finished_at=now,
            wall_used_s=Inc(wall), version=Inc(1), error=None, failure_class=None,
        )
        if t:
            fields["tokens_used"] = Inc(t)
        if units_done is not None:
            fields["units_done"] = float(units_done)
        self._cas_update(row, claim, now, **fields)
        payload: dict[str, Any] = {"attempt": claim.attempt, "output_digest": digest_json(output),
                                   "wall_s": round(wall, 3)}
        if output_ref:
            payload["output_ref"] = output_ref
        if t:
            payload["tokens"] = t
        if art is not None:
            self._q(Artifact.insert(task=claim.task_id, node=row["id"], attempt=claim.attempt, name=art[0],
                                    sha256=art[2], size=len(art[1]), content=art[1], ref=output_ref,
                                    at=now)).execute()
            payload["artifact"] = {"name": art[0], "sha256": art[2], "bytes": len(art[1])}
        if repair:
            self._q(Task.update(repair_count=Task.repair_count + 1).where(Task.task_id == claim.task_id)).execute()
            payload["repair"] = task["repair_count"] + 1
        event_id = self._journal(claim.task_id, claim.node_key, "execution", "node.committed", claim.worker,
                                 summary or f"{claim.node_key} succeeded (attempt {claim.attempt})", payload, at=now)
        if next_nodes:
            self._add_nodes_tx(claim.task_id, list(next_nodes), actor=claim.worker)
        self._maybe_complete_task(claim.task_id, now)
        return event_id

    def _maybe_complete_task(self, task_id: str, now: float) -> None:
        left = self._fetch("SELECT 1 AS x FROM node WHERE task_id = ? AND status IN "
                           "('pending', 'running', 'blocked', 'parked', 'failed') LIMIT 1", [task_id])
        if left:
            return
        task = self._task_row(task_id)
        if task["status"] in ("active", "failed"):
            self._bump_task(task_id, status="completed", finished_at=now)
            self._journal(task_id, None, "system", "task.completed", "warden", f"task {task_id} completed", {})

    def _maybe_fail_task(self, task_id: str, now: float) -> None:
        """A task with a terminally failed node and nothing left that can move is failed."""
        ph = "?" if is_sqlite(self.db) else "%s"
        movable = self.db.execute_sql(
            f"SELECT 1 FROM node n WHERE n.task_id = {ph} AND (n.status IN ('running', 'blocked', 'parked') "
            "OR (n.status = 'pending' AND NOT EXISTS (SELECT 1 FROM edge e JOIN node d ON d.id = e.src_id "
            "WHERE e.dst_id = n.id AND d.status NOT IN ('succeeded', 'abandoned')))) LIMIT 1",
            [task_id],
        ).fetchone()
        if movable:
            return
        task = self._task_row(task_id)
        if task["status"] == "active":
            self._bump_task(task_id, status="failed", finished_at=now)
            self._journal(task_id, None, "system", "task.failed", "warden",
                          f"task {task_id} failed: a node failed and nothing else can run", {})

    @retry_write
    def fail(
        self,
        claim: Claim,
        *,
        error: str,
        failure_class: str = "transient",
        retryable: bool | None = None,
        retry_after_s: float | None = None,
        tokens: float | None = 0,
    ) -> int:
        """Record a failed step. Retryable → pending with a persisted ``next_retry_at``
        (deterministic back-off unless ``retry_after_s``); otherwise failed."""
        if failure_class not in FAILURE_CLASSES:
            raise Refused(f"unknown failure class {failure_class!r}: one of {', '.join(FAILURE_CLASSES)}")
        now = self.now()
        with write_tx(self.db):
            task = self._task_row(claim.task_id, for_update="update")  # the task row first (lock order)
            row = self._fence(claim, now)
            t = self._add_tokens(claim, tokens)
            wall = now - (row["claimed_at"] or now)
            can_retry = row["retryable"] if retryable is None else bool(retryable)
            limit = row["max_claims"] if row["max_claims"] is not None else task["max_claims"]
            exhausted = limit is not None and row["claim_count"] >= limit
            common = dict(lease_token=None, lease_until=None, error=str(error), failure_class=failure_class,
                          wall_used_s=Inc(wall), version=Inc(1))
            if t:
                common["tokens_used"] = Inc(t)
            if can_retry and not exhausted:
                delay = float(retry_after_s) if retry_after_s is not None else retry_delay(claim.attempt)
                self._cas_update(row, claim, now, status="pending", next_retry_at=now + delay, **common)
                eid = self._journal(claim.task_id, claim.node_key, "execution", "node.failed", claim.worker,
                                    f"{claim.node_key} failed ({failure_class}); retry in {delay:.0f}s",
                                    {"error": str(error)[:2000], "failure_class": failure_class, "retry": True,
                                     "next_retry_at": now + delay, "attempt": claim.attempt}, at=now)
            else:
                self._cas_update(row, claim, now, status="failed", finished_at=now, **common)
                why = "retries exhausted" if (can_retry and exhausted) else "not retryable"
                eid = self._journal(claim.task_id, claim.node_key, "execution", "node.failed", claim.worker,
                                    f"{claim.node_key} failed ({failure_class}, {why})",
                                    {"error": str(error)[:2000], "failure_class": failure_class, "retry": False,
                                     "attempt": claim.attempt}, at=now)
                self._maybe_fail_task(claim.task_id, now)
        return eid

    @retry_write
    def request_human(
        self,
        claim: Claim,
        *,
        kind: str,
        question: str,
        options: Sequence[Mapping[str, Any]] = (),
        recommendation: str | None = None,
        context: Mapping[str, Any] | None = None,
        tokens: float | None = 0,
    ) -> str:
        """Open a needs_human handoff; the node becomes blocked until it is resolved. Returns the
        handoff id."""
        if kind not in HANDOFF_KINDS:
            raise Refused(f"unknown handoff kind {kind!r}: one of {', '.join(HANDOFF_KINDS)}")
        if not str(question).strip():
            raise Refused("a handoff needs a question")
        opts = []
        for o in options:
            if "id" not in o:
                raise Refused("every handoff option needs an id")
            opts.append({"id": str(o["id"]), "label": str(o.get("label", o["id"])),
                         "consequence": str(o.get("consequence", ""))})
        ids = [o["id"] for o in opts]
        if len(set(ids)) != len(ids):
            raise Refused("handoff option ids must be distinct")
        if recommendation is not None and recommendation not in ids:
            raise Refused(f"recommendation {recommendation!r} is not one of the options")
        ctx = dict(context or {})
        dumps(ctx)
        now = self.now()
        with write_tx(self.db):
            row = self._fence(claim, now)
            t = self._add_tokens(claim, tokens)
            wall = now - (row["claimed_at"] or now)
            fields: dict[str, Any] = dict(status="blocked", lease_token=None, lease_until=None,
                                          wall_used_s=Inc(wall), version=Inc(1))
            if t:
                fields["tokens_used"] = Inc(t)
            self._cas_update(row, claim, now, **fields)
            hid = self._q(Handoff.insert(task=claim.task_id, node=row["id"], kind=kind, question=str(question),
                                         context=ctx, options=opts, recommendation=recommendation, status="open",
                                         opened_at=now, opened_by=claim.worker, attempt=claim.attempt)).execute()
            self._journal(claim.task_id, claim.node_key, "decision", "handoff.opened", claim.worker,
                          f"{claim.node_key} asks a human ({kind}): {str(question)[:120]}",
                          {"handoff": str(hid), "kind": kind, "options": ids, "recommendation": recommendation},
                          at=now)
        return str(hid)

    @retry_write
    def intend_effect(
        self,
        claim: Claim,
        effect_key: str,
        *,
        payload: Any = None,
        compensation: str | None = None,
    ) -> EffectView:
        """Log an intended side effect *before* making the external call.

        Idempotent on ``effect_key`` within the task: when the key is already logged, the
        existing record is returned unchanged — if it is ``confirmed`` the effect already
        happened and must not be made again.
        """
        if not effect_key:
            raise Refused("an effect needs a key")
        now = self.now()
        with write_tx(self.db):
            row = self._fence(claim, now, lock=True)
            self._hook("effect.fenced", claim.task_id, claim.node_key)
            existing = self._q(Effect.select().where((Effect.task == claim.task_id) & (Effect.effect_key == effect_key))).dicts().first()
            if existing is None:
                pd = digest_json(payload) if payload is not None else None
                self._q(Effect.insert(task=claim.task_id, node=row["id"], effect_key=effect_key, status="intended",
                                      payload_digest=pd, compensation=compensation, attempt=claim.attempt,
                                      intended_at=now)).execute()
                self._journal(claim.task_id, claim.node_key, "execution", "effect.intended", claim.worker,
                              f"{claim.node_key} intends {effect_key}", {"effect_key": effect_key}, at=now)
        return self._effect(claim.task_id, effect_key)

    @retry_write
    def confirm_effect(
        self,
        claim: Claim,
        effect_key: str,
        *,
        external_id: str | None = None,
        compensation: str | None = None,
    ) -> EffectView:
        """Record that an intended effect happened (with its external id and how to undo it)."""
        now = self.now()
        with write_tx(self.db):
            self._fence(claim, now, lock=True)
            existing = self._q(Effect.select().where((Effect.task == claim.task_id) & (Effect.effect_key == effect_key))).dicts().first()
            if existing is None:
                raise Refused(f"effect {effect_key!r} was never intended: call intend_effect first")
            if existing["status"] != "confirmed":
                fields: dict[str, Any] = dict(status="confirmed", external_id=external_id, confirmed_at=now)
                if compensation is not None:
                    fields["compensation"] = compensation
                self._q(Effect.update(**fields).where(Effect.id == existing["id"])).execute()
                self._journal(claim.task_id, claim.node_key, "execution", "effect.confirmed", claim.worker,
                              f"{claim.node_key} confirmed {effect_key}" + (f" ({external_id})" if external_id else ""),
                              {"effect_key": effect_key, "external_id": external_id,
                               "compensation": compensation or existing["compensation"]}, at=now)
        return self._effect(claim.task_id, effect_key)

    @retry_write
    def note(self, claim: Claim, text: str, *, layer: str = "decision") -> int:
        """Journal a note from the agent (a decision, an observation worth keeping)."""
        if layer not in ("decision", "execution"):
            raise Refused("an agent note's layer is decision or execution")
        now = self.now()
        with write_tx(self.db):
            self._fence(claim, now, lock=True)
            return self._journal(claim.task_id, claim.node_key, layer, "node.note", claim.worker, str(text)[:2000],
                                 {"text": str(text)[:8000]}, at=now)

    # ------------------------------------------------------------------ operator actions (store/actions.py)
    def plan_park(self, *args: Any, **kwargs: Any):
        from . import actions
        return actions.plan_park(self, *args, **kwargs)

    def plan_resume(self, *args: Any, **kwargs: Any):
        from . import actions
        return actions.plan_resume(self, *args, **kwargs)

    def plan_narrow(self, *args: Any, **kwargs: Any):
        from . import actions
        return actions.plan_narrow(self, *args, **kwargs)

    def plan_rewind(self, *args: Any, **kwargs: Any):
        from . import actions
        return actions.plan_rewind(self, *args, **kwargs)

    def plan_abort(self, *args: Any, **kwargs: Any):
        from . import actions
        return actions.plan_abort(self, *args, **kwargs)

    def plan_resolve(self, *args: Any, **kwargs: Any):
        from . import actions
        return actions.plan_resolve(self, *args, **kwargs)

    def plan_escalate(self, *args: Any, **kwargs: Any):
        from . import actions
        return actions.plan_escalate(self, *args, **kwargs)

    def apply(self, plan: Any, *, operator: str):
        from . import actions
        return actions.apply(self, plan, operator=operator)

    # ------------------------------------------------------------------ queries
    def tasks(self) -> list[TaskView]:
        with read_tx(self.db):
            rows = list(self._q(Task.select().order_by(Task.created_at, Task.task_id)).dicts())
            claims = dict(self._q(Node.select(Node.task, pw.fn.COALESCE(pw.fn.SUM(Node.attempt), 0))
                                  .group_by(Node.task)).tuples())
            for r in rows:
                r["claim_count"] = int(claims.get(r["task_id"], 0))
            counts = self._counts()
            hopen = dict(self._q(Handoff.select(Handoff.task, pw.fn.COUNT(Handoff.id))
                                 .where(Handoff.status == "open").group_by(Handoff.task)).tuples())
        now = self.now()
        return [_task_view(r, now, counts.get(r["task_id"], {}), hopen.get(r["task_id"], 0)) for r in rows]

    def task(self, task_id: str) -> TaskView:
        with read_tx(self.db):
            r = self._with_claims(self._task_row(task_id))
            counts = self._counts(task_id)
            hopen = self._q(Handoff.select(pw.fn.COUNT(Handoff.id)).where(
                (Handoff.task == task_id) & (Handoff.status == "open"))).scalar()
        return _task_view(r, self.now(), counts.get(task_id, {}), int(hopen or 0))

    def _with_claims(self, r: dict[str, Any]) -> dict[str, Any]:
        """A task's claim count is the sum of its nodes' attempts (every claim adds exactly one;
        a rewind does not reset it), so a claim never writes the task row."""
        n = self._fetch("SELECT COALESCE(SUM(attempt), 0) AS n FROM node WHERE task_id = ?", [r["task_id"]])
        r["claim_count"] = int(n["n"]) if n else 0
        return r

    def _counts(self, task_id: str | None = None) -> dict[str, dict[str, int]]:
        q = Node.select(Node.task, Node.status, pw.fn.COUNT(Node.id)).group_by(Node.task, Node.status)
        if task_id is not None:
            q = q.where(Node.task == task_id)
        out: dict[str, dict[str, int]] = {}
        for t, s, n in self._q(q).tuples():
            out.setdefault(t, {})[s] = int(n)
        return out

    def graph(self, task_id: str) -> GraphView:
        """The task and all its nodes in topological order, each with its dependency keys."""
        with read_tx(self.db):
            task = self.task(task_id)
            rows = self.db.execute_sql(self._sql(f"SELECT {_NODE_VIEW_COLUMNS} FROM node WHERE task_id = ? "
                                                 "ORDER BY position"), [task_id]).fetchall()
            deps = self._deps_by_id(task_id)
        key_of = {r[0]: r[2] for r in rows}
        cache: dict[str, Any] = {}
        return GraphView(task=task, nodes=tuple(
            _node_view_row(r, tuple(key_of[x] for x in deps[r[0]]) if r[0] in deps else (), cache) for r in rows))

    def _deps_by_id(self, task_id: str, dst_ids: Sequence[int] | None = None) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        if dst_ids is None:
            cur = self.db.execute_sql(self._sql("SELECT dst_id, src_id FROM edge WHERE task_id = ?"), [task_id])
            for d, src in cur.fetchall():
                out.setdefault(d, []).append(src)
            return out
        for chunk in _chunks(list(dst_ids), 500):
            marks = ", ".join("?" * len(chunk))
            cur = self.db.execute_sql(self._sql(f"SELECT dst_id, src_id FROM edge WHERE dst_id IN ({marks})"), chunk)
            for d, src in cur.fetchall():
                out.setdefault(d, []).append(src)
        return out

    def nodes(self, task_id: str, keys: Sequence[str]) -> list[NodeView]:
        """Just these nodes (for applying a feed delta), in topological order; unknown keys skipped."""
        rows: list[tuple] = []
        with read_tx(self.db):
            for chunk in _chunks(list(dict.fromkeys(keys)), 500):
                marks = ", ".join("?" * len(chunk))
                rows.extend(self.db.execute_sql(self._sql(
                    f"SELECT {_NODE_VIEW_COLUMNS} FROM node WHERE task_id = ? AND key IN ({marks})"),
                    [task_id, *chunk]).fetchall())
            deps = self._deps_by_id(task_id, [r[0] for r in rows])
            src_ids = list({x for v in deps.values() for x in v})
            keys_of: dict[int, str] = {}
            for chunk in _chunks(src_ids, 500):
                marks = ", ".join("?" * len(chunk))
                keys_of.update(self.db.execute_sql(self._sql(f"SELECT id, key FROM node WHERE id IN ({marks})"),
                                                   chunk).fetchall())
        rows.sort(key=lambda r: r[7])
        return [_node_view_row(r, tuple(keys_of[x] for x in deps.get(r[0], ()))) for r in rows]

    def node(self, task_id: str, key: str) -> NodeView:
        got = self.nodes(task_id, [key])
        if not got:
            self._task_row(task_id)
            raise NotFound(f"unknown node {key!r} in task {task_id!r}")
        return got[0]

    def dependents(self, task_id: str, key: str) -> tuple[str, ...]:
        D = Node.alias()
        S = Node.alias()
        q = (Edge.select(D.key).join(D, on=(Edge.dst == D.id)).switch(Edge).join(S, on=(Edge.src == S.id))
             .where((Edge.task == task_id) & (S.key == key)).order_by(D.position))
        return tuple(r[0] for r in self._q(q).tuples())

    def node_detail(self, task_id: str, key: str, *, events_limit: int = 200, observations_limit: int = 200) -> NodeDetail:
        with read_tx(self.db):
            node = self.node(task_id, key)
            obs = list(self._q(Observation.select().where(Observation.node == node.id)
                               .order_by(Observation.id.desc()).limit(observations_limit)).dicts())
            obs.reverse()
            effects = [self._effect_view(r, key) for r in self._q(
                Effect.select().where(Effect.node == node.id).order_by(Effect.id)).dicts()]
            arts = [ArtifactView(r["id"], task_id, key, r["attempt"], r["name"], r["sha256"], r["size"], r["ref"], r["at"])
                    for r in self._q(Artifact.select(Artifact.id, Artifact.attempt, Artifact.name, Artifact.sha256,
                                                     Artifact.size, Artifact.ref, Artifact.at)
                                     .where(Artifact.node == node.id).order_by(Artifact.id)).dicts()]
            hand = [self._handoff_view(r, key) for r in self._q(
                Handoff.select().where(Handoff.node == node.id).order_by(Handoff.id)).dicts()]
            evs = [_event_view(r) for r in self._q(
                Event.select().where((Event.task_id == task_id) & (Event.node == key))
                .order_by(Event.id.desc()).limit(events_limit)).dicts()]
            dependents = self.dependents(task_id, key)
        evs.sort(key=lambda e: (e.layer != "decision", -e.id))
        return NodeDetail(
            node=node, dependents=dependents,
            observations=tuple(ObservationView(o["id"], o["at"], o["attempt"], o["text"], o["digest"], o["new_units"], o["lines"]) for o in obs),
            effects=tuple(effects), artifacts=tuple(arts), handoffs=tuple(hand), events=tuple(evs),
        )

    def observations(self, task_id: str, key: str, limit: int = 50) -> list[ObservationView]:
        node = self._node_row(task_id, key)
        rows = list(self._q(Observation.select().where(Observation.node == node["id"])
                            .order_by(Observation.id.desc()).limit(limit)).dicts())
        rows.reverse()
        return [ObservationView(o["id"], o["at"], o["attempt"], o["text"], o["digest"], o["new_units"], o["lines"]) for o in rows]

    def events(self, since: int = 0, *, task_id: str | None = None, limit: int = 1000) -> list[EventView]:
        """Journal events with ``id > since`` in id order (the tail cursor)."""
        q = Event.select().where(Event.id > since)
        if task_id is not None:
            q = q.where(Event.task_id == task_id)
        return [_event_view(r) for r in self._q(q.order_by(Event.id).limit(limit)).dicts()]

    def last_event_id(self) -> int:
        return int(self._q(Event.select(pw.fn.MAX(Event.id))).scalar() or 0)

    def _effect(self, task_id: str, effect_key: str) -> EffectView:
        r = self._q(Effect.select(Effect, Node.key.alias("node_key")).join(Node, on=(Effect.node == Node.id))
                    .where((Effect.task == task_id) & (Effect.effect_key == effect_key))).dicts().first()
        if r is None:
            raise NotFound(f"unknown effect {effect_key!r}")
        return self._effect_view(r, r["node_key"])

    @staticmethod
    def _effect_view(r: Mapping[str, Any], node_key: str) -> EffectView:
        return EffectView(r["id"], r["task"], node_key, r["effect_key"], r["status"], r["payload_digest"], r["external_id"],
                          r["compensation"], r["attempt"], r["intended_at"], r["confirmed_at"])

    def effects(self, task_id: str) -> list[EffectView]:
        q = (Effect.select(Effect, Node.key.alias("node_key")).join(Node, on=(Effect.node == Node.id))
             .where(Effect.task == task_id).order_by(Effect.id))
        return [self._effect_view(r, r["node_key"]) for r in self._q(q).dicts()]

    @staticmethod
    def _handoff_view(r: Mapping[str, Any], node_key: str) -> HandoffView:
        return HandoffView(
            id=str(r["id"]), task_id=r["task"], node=node_key, kind=r["kind"], question=r["question"],
            context=r["context"] or {}, options=tuple(r["options"] or ()), recommendation=r["recommendation"],
            status=r["status"], opened_at=r["opened_at"], opened_by=r["opened_by"], attempt=r["attempt"],
            resolution_option=r["resolution_option"], resolution_answer=r["resolution_answer"],
            resolved_by=r["resolved_by"], resolved_at=r["resolved_at"],
        )

    def handoffs(self, *, status: str | None = "open", task_id: str | None = None) -> list[HandoffView]:
        """Handoffs, oldest first (by default the open ones across all tasks)."""
        q = Handoff.select(Handoff, Node.key.alias("node_key")).join(Node, on=(Handoff.node == Node.id))
        if status is not None:
            q = q.where(Handoff.status == status)
        if task_id is not None:
            q = q.where(Handoff.task == task_id)
        return [self._handoff_view(r, r["node_key"]) for r in self._q(q.order_by(Handoff.opened_at, Handoff.id)).dicts()]

    def handoff(self, handoff_id: str) -> HandoffView:
        try:
            hid = int(str(handoff_id))
        except ValueError:
            raise NotFound(f"unknown handoff {handoff_id!r}") from None
        r = self._q(Handoff.select(Handoff, Node.key.alias("node_key")).join(Node, on=(Handoff.node == Node.id))
                    .where(Handoff.id == hid)).dicts().first()
        if r is None:
            raise NotFound(f"unknown handoff {handoff_id!r}")
        return self._handoff_view(r, r["node_key"])

    def actions(self, task_id: str | None = None, limit: int = 100) -> list[ActionView]:
        q = Action.select()
        if task_id is not None:
            q = q.where(Action.task_id == task_id)
        return [ActionView(r["id"], r["at"], r["operator"], r["action"], r["task_id"], r["target"], r["reason"],
                           r["plan"] or {}, r["result"], r["refused_why"], r["revision_before"], r["revision_after"])
                for r in self._q(q.order_by(Action.id.desc()).limit(limit)).dicts()]

    def artifacts(self, task_id: str) -> list[ArtifactView]:
        q = (Artifact.select(Artifact.id, Artifact.attempt, Artifact.name, Artifact.sha256, Artifact.size, Artifact.ref,
                             Artifact.at, Node.key.alias("node_key"))
             .join(Node, on=(Artifact.node == Node.id)).where(Artifact.task == task_id).order_by(Artifact.id))
        return [ArtifactView(r["id"], task_id, r["node_key"], r["attempt"], r["name"], r["sha256"], r["size"], r["ref"], r["at"])
                for r in self._q(q).dicts()]

    def latest_artifact(self, task_id: str) -> tuple[ArtifactView, bytes]:
        """The task's latest committed artifact and its bytes, after checking its sha256."""
        self._task_row(task_id)
        r = self._q(Artifact.select(Artifact, Node.key.alias("node_key")).join(Node, on=(Artifact.node == Node.id))
                    .where(Artifact.task == task_id).order_by(Artifact.id.desc())).dicts().first()
        if r is None:
            raise NotFound(f"task {task_id!r} has no committed artifact")
        data = bytes(r["content"] or b"")
        if sha256_hex(data) != r["sha256"] or len(data) != r["size"]:
            raise Refused(f"artifact {r['name']!r} of {task_id} does not match its recorded sha256; not exported")
        view = ArtifactView(r["id"], task_id, r["node_key"], r["attempt"], r["name"], r["sha256"], r["size"], r["ref"], r["at"])
        return view, data


def _prepare_commit(output: Any, artifact: tuple[str, bytes] | None) -> tuple[str, bytes, str] | None:
    """Check a commit's payload before any transaction; returns (name, bytes, sha256) or None."""
    out_text = dumps(output)
    if len(out_text.encode("utf-8")) > OUTPUT_CAP:
        raise Refused(f"output is {len(out_text)} bytes, over {OUTPUT_CAP}: store it as an artifact")
    if artifact is None:
        return None
    name, data = artifact
    if not isinstance(data, (bytes, bytearray)):
        raise Refused("an artifact is (name, bytes)")
    if len(data) > ARTIFACT_INLINE_CAP:
        raise Refused("artifact over 64 MiB: keep it in the run directory and pass output_ref")
    return (str(name), bytes(data), sha256_hex(bytes(data)))


# ---------------------------------------------------------------------- row → view
def _wall_used(task: Mapping[str, Any], now: float) -> float:
    if task["started_at"] is None:
        return 0.0
    end = task["finished_at"] if task["finished_at"] is not None else now
    return max(0.0, end - task["started_at"])


def _task_view(r: Mapping[str, Any], now: float, counts: Mapping[str, int], handoffs_open: int) -> TaskView:
    return TaskView(
        task_id=r["task_id"], title=r["title"], workflow=r["workflow"], workflow_version=r["workflow_version"],
        status=r["status"], revision=int(r["revision"]), inputs=r["inputs"], constraints=tuple(r["constraints"] or ()),
        preconditions=dict(r["preconditions"] or {}), token_cap=r["token_cap"], wall_cap_s=r["wall_cap_s"],
        soft_ratio=r["soft_ratio"], tokens_used=int(r["tokens_used"]), started_at=r["started_at"],
        wall_used_s=_wall_used(r, now), max_claims=r["max_claims"], max_repairs=r["max_repairs"],
        repair_count=r["repair_count"], claim_count=r["claim_count"], parked_at=r["parked_at"],
        park_reason=r["park_reason"], park_until=r["park_until"], wake_on=r["wake_on"], created_at=r["created_at"],
        updated_at=r["updated_at"], finished_at=r["finished_at"], counts=dict(counts), handoffs_open=int(handoffs_open),
    )


def _node_view(r: Mapping[str, Any], deps: tuple[str, ...]) -> NodeView:
    return NodeView(
        id=r["id"], task_id=r["task"], key=r["key"], kind=r["kind"], title=r["title"], status=r["status"], deps=deps,
        position=r["position"], preconditions=dict(r["preconditions"] or {}), input_digest=r["input_digest"],
        output=r["output"], output_ref=r["output_ref"], output_digest=r["output_digest"], attempt=r["attempt"],
        retryable=bool(r["retryable"]), failure_class=r["failure_class"], error=r["error"], est_tokens=r["est_tokens"],
        est_wall_s=r["est_wall_s"], always_admit=bool(r["always_admit"]), max_claims=r["max_claims"],
        tokens_used=int(r["tokens_used"]), wall_used_s=float(r["wall_used_s"]), units_done=r["units_done"],
        units_total=r["units_total"], lease_owner=r["lease_owner"] if r["lease_token"] else None,
        lease_until=r["lease_until"] if r["lease_token"] else None, heartbeat_at=r["heartbeat_at"],
        claimed_at=r["claimed_at"], claim_count=r["claim_count"], next_retry_at=r["next_retry_at"],
        rejections=tuple(r["rejections"] or ()), parked_at=r["parked_at"], park_reason=r["park_reason"],
        park_until=r["park_until"], wake_on=r["wake_on"], started_at=r["started_at"], finished_at=r["finished_at"],
        version=int(r["version"]),
    )


# Column order of the raw node reads; _node_view_row turns one such row into a NodeView.
_NODE_VIEW_COLUMNS = (
    "id, task_id, key, kind, title, status, lease_token, position, preconditions, input_digest, output, "
    "output_ref, output_digest, attempt, retryable, failure_class, error, est_tokens, est_wall_s, always_admit, "
    "max_claims, tokens_used, wall_used_s, units_done, units_total, lease_owner, lease_until, heartbeat_at, "
    "claimed_at, claim_count, next_retry_at, rejections, parked_at, park_reason, park_until, wake_on, started_at, "
    "finished_at, version"
)
_EMPTY_JSON = {"{}": None, "[]": None, "null": None}


def _json_col(v: Any, cache: dict[str, Any] | None = None) -> Any:
    if v is None or not isinstance(v, str):
        return v
    if v in _EMPTY_JSON:  # the common case, without the parser
        return {} if v == "{}" else ([] if v == "[]" else None)
    if cache is None:
        return json.loads(v)
    got = cache.get(v)
    if got is None:
        got = cache[v] = json.loads(v)
    # Many nodes share one preconditions text: parse it once, hand each node its own copy.
    return dict(got) if isinstance(got, dict) else (list(got) if isinstance(got, list) else got)


def _node_view_row(r: Sequence[Any], deps: tuple[str, ...], cache: dict[str, Any] | None = None) -> NodeView:
    (id_, task_id, key, kind, title, status, token, position, pre, input_digest, output, output_ref, output_digest,
     attempt, retryable, failure_class, error, est_tokens, est_wall_s, always_admit, max_claims, tokens_used,
     wall_used_s, units_done, units_total, lease_owner, lease_until, heartbeat_at, claimed_at, claim_count,
     next_retry_at, rejections, parked_at, park_reason, park_until, wake_on, started_at, finished_at, version) = r
    return _fast_node_view((
        id_, task_id, key, kind, title, status, deps, position, _json_col(pre, cache) or {}, input_digest,
        _json_col(output),
        output_ref, output_digest, attempt, bool(retryable), failure_class, error, est_tokens, est_wall_s,
        bool(always_admit), max_claims, int(tokens_used), float(wall_used_s), units_done, units_total,
        lease_owner if token else None, lease_until if token else None, heartbeat_at, claimed_at, claim_count,
        next_retry_at, tuple(_json_col(rejections) or ()), parked_at, park_reason, park_until, wake_on, started_at,
        finished_at, int(version),
    ))


_NODE_VIEW_FIELDS = tuple(f.name for f in dataclass_fields(NodeView))


def _fast_node_view(values: tuple) -> NodeView:
    """Build a NodeView without its generated ``__init__``: a frozen dataclass sets each of its 39
    fields through ``object.__setattr__``, which made reading a 100k-node graph take seconds. The
    result is an ordinary, equal, frozen NodeView (it has no ``__post_init__`` or defaults to run)."""
    view = object.__new__(NodeView)
    view.__dict__.update(zip(_NODE_VIEW_FIELDS, values))
    return view


def _event_view(r: Mapping[str, Any]) -> EventView:
    return EventView(int(r["id"]), r["at"], r["task_id"], r["node"], r["layer"], r["kind"], r["actor"], r["summary"],
                     r["payload"] or {})


def _chunks(seq: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i:i + n]

"""Building the graph: create a task, add nodes and their edges (checked: keys, cycles, unknown
dependencies), idempotent for an agent that died between deciding and adding."""

from __future__ import annotations

from typing import Mapping, Sequence

import peewee as pw

from store.ledger import graph as graph_mod
from store.ledger import confirm, quotas
from store.storage import sql
from store.storage.db import is_sqlite, retry_write, write_tx
from store.errors import Refused
from store.jsontypes import JsonMapping, JsonObject
from store.mind import record as mind_record
from store.storage.models import Task, dumps
from store.views import Budget, NodeSpec
from store.storage import budget_clock
from store.storage.core import LedgerCore, validate_key, validate_task_id
from store.storage.events import NodesAdded, TaskCreated


def create_task(core: LedgerCore, task_id: str, *, title: str, workflow: str, workflow_version: str, inputs: object,
                constraints: Sequence[str] | None, preconditions: JsonMapping | None, budget: Budget | None,
                max_claims: int, max_repairs: int, exist_ok: bool, actor: str, origin: str | None = None,
                requirements: Sequence[Mapping[str, str]] = (), mind: JsonMapping | None = None,
                confirm_kinds: Sequence[str] = ()) -> None:
    """Create a task. With ``exist_ok`` an existing task is left unchanged (idempotent).
    ``requirements`` (checked by ``store.mind.rules.requirements``) become its requirement rows;
    ``mind`` is its initial ``task.mind`` (``store.mind.record.initial_mind``)."""
    validate_task_id(task_id)
    budget = budget or Budget()
    constraint_list = [str(c) for c in (constraints or [])]
    precondition_map = dict(preconditions or {})
    dumps(inputs)  # refuse what cannot be stored before writing anything
    dumps(precondition_map)
    args = (task_id, title, workflow, workflow_version, inputs, constraint_list, precondition_map, budget, max_claims,
            max_repairs, exist_ok, actor, origin, list(requirements), dict(mind) if mind is not None else None,
            tuple(confirm_kinds))
    try:
        return _create_task(core, *args)
    except pw.IntegrityError:
        if is_sqlite(core.db):
            raise
        # PostgreSQL: another process created the same task between our check and our insert
        # (SQLite's BEGIN IMMEDIATE rules that out); look again.
        return _create_task(core, *args)


@retry_write
def _create_task(core: LedgerCore, task_id: str, title: str, workflow: str, workflow_version: str, inputs: object,
                 constraints: list[str], preconditions: JsonObject, budget: Budget, max_claims: int,
                 max_repairs: int, exist_ok: bool, actor: str, origin: str | None,
                 requirements: list[Mapping[str, str]], mind: JsonObject | None, confirm_kinds: Sequence[str]) -> None:
    now = core.now()
    with write_tx(core.db):
        existing = sql.scalar(core.db, "SELECT task_id FROM task WHERE task_id = ?", [task_id])
        if existing is not None:
            if exist_ok:
                return
            raise Refused(f"task {task_id!r} already exists")
        core.bind(
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
                density_limit=budget.density_limit,
                max_claims=max_claims,
                max_repairs=max_repairs,
                origin=origin,
                revision=1,
                created_at=now,
                updated_at=now,
                mind=mind,
            )
        ).execute()
        mind_record.write_requirements(core, task_id, requirements, now)
        confirm.set_kinds(core, task_id, confirm_kinds)
        core.journal(task_id, None, actor, f"task created: {title or task_id}",
                     TaskCreated(workflow=workflow, workflow_version=workflow_version, origin=origin or "python",
                                 requirements=[r["id"] for r in requirements],
                                 confirm_kinds=sorted(set(confirm_kinds)) if confirm_kinds else None))


@retry_write
def add_nodes(core: LedgerCore, task_id: str, specs: list[NodeSpec], actor: str) -> int:
    """Add many nodes in one transaction (any order among themselves). Returns how many were new."""
    with write_tx(core.db):
        added = add_nodes_tx(core, task_id, specs, actor=actor)
    return added


def add_nodes_tx(core: LedgerCore, task_id: str, specs: list[NodeSpec], *, actor: str) -> int:
    """:func:`add_nodes` inside the caller's write transaction (a commit's ``next_nodes``)."""
    task = core.task_record(task_id, lock="update")
    if task.status == "aborted":
        raise Refused(f"task {task_id!r} is aborted; nothing can be added")
    seen: set[str] = set()
    for s in specs:
        validate_key(s.key)
        if s.key in seen:
            raise Refused(f"node {s.key!r} is listed twice")
        seen.add(s.key)
        if s.key in s.deps:
            raise Refused(f"node {s.key!r} cannot depend on itself (a cycle)")
        dumps(dict(s.preconditions or {}))
    keys = [s.key for s in specs] + [d for s in specs for d in s.deps]
    existing = core.ids_for_keys(task_id, keys)
    existing_deps: dict[str, set[str]] = {}
    old = [s for s in specs if s.key in existing]
    if old:
        for dst, src in _edges_for_ids(core, [existing[s.key] for s in old]):
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
    mind_record.check_serves(core, task_id, new_specs)
    drawing = {s.key: tuple(getattr(s, "quotas", None) or ()) for s in new_specs if getattr(s, "quotas", None)}
    quotas.check_declared(core, task_id, sorted({q for names in drawing.values() for q in names}))
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
    pos = int(sql.scalar(core.db, "SELECT MAX(position) FROM node WHERE task_id = ?", [task_id]) or 0)
    rows = []
    for k in order:
        s = by_key[k]
        pos += 1
        serves = tuple(getattr(s, "serves", None) or ())
        rows.append((task_id, s.key, pos, s.kind, s.title, "pending", dumps(dict(s.preconditions or {})),
                     s.est_wall_s, s.est_tokens, bool(s.always_admit),
                     bool(s.retryable) and getattr(s, "failure_class", None) is None, s.units_total,
                     s.max_claims, "[]", 1, dumps(list(serves)) if serves else None,
                     getattr(s, "failure_class", None)))
    sql.execute_many(
        core.db,
        "INSERT INTO node (task_id, key, position, kind, title, status, preconditions, est_wall_s, est_tokens, "
        "always_admit, retryable, units_total, max_claims, rejections, version, serves, failure_class, attempt, "
        "tokens_used, wall_used_s, claim_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, 0)",
        rows)
    ids = core.ids_for_keys(task_id, list(new_keys) + [d for s in new_specs for d in s.deps])
    quotas.add_node_quotas(core, ids, drawing)
    edges = [(task_id, ids[d], ids[s.key]) for s in new_specs for d in dict.fromkeys(s.deps)]
    if edges:
        sql.execute_many(core.db, "INSERT INTO edge (task_id, src_id, dst_id) VALUES (?, ?, ?)", edges)
    fields: dict[str, object] = {}
    if task.status == "completed":
        fields.update(status="active", finished_at=None)
    core.bump_task(task_id, fields)
    if fields:
        budget_clock.settle(core.db, task_id, core.now())  # reopened: the clock runs again from now
    summary = (f"node added: {new_specs[0].key}" if len(new_specs) == 1
               else f"{len(new_specs)} nodes added")
    core.journal(task_id, new_specs[0].key if len(new_specs) == 1 else None, actor, summary,
                 NodesAdded(nodes=[s.key for s in new_specs]))
    return len(new_specs)


def _edges_for_ids(core: LedgerCore, dst_ids: Sequence[int]) -> list[tuple[str, str]]:
    """(dependent key, dependency key) of every edge into these nodes."""
    out: list[tuple[str, str]] = []
    for chunk in sql.chunks(list(dst_ids)):
        out.extend(sql.fetch_all(core.db, "SELECT d.key, s.key FROM edge e JOIN node d ON d.id = e.dst_id "
                                          f"JOIN node s ON s.id = e.src_id WHERE e.dst_id IN ({sql.marks(len(chunk))})",
                                 list(chunk)))
    return out

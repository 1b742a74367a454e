"""Wake-ups: a park's wake conditions noticed, journalled, and (with ``auto_resume``) acted on.

Who looks (docs/operations.md "Wake conditions"):

* the ledger write that can satisfy a condition, in its own transaction: a commit of a node of a
  parked task (``node:``), a confirmed effect (``effect:``); after an operator resolves a handoff,
  the tasks waiting on it (``handoff:``) are checked at once (:func:`after_resolve`);
* everything else — ``at:`` (time passes without a write) and ``file:`` (the file system is not the
  ledger) — is noticed when a writer looks: :func:`check` runs from the console's periodic tick
  (not read-only), ``warden check-wakes`` (cron) and ``Ledger.check_wakes()`` (an agent loop).
  Reads never write: ``warden status``, ``graph`` and a read-only console only
  *show* a met condition (``store/reading/task_level.py`` computes the ``wake`` signal as it reads).

When a condition of a still-parked task (or node) is first met, a ``park.wake`` event (system
layer) names it and the entry remembers it (the ``wake`` signal shows it until the park ends).
With ``auto_resume`` the park is resumed in the same transaction by the system: the resume's
plan is computed and applied there, with an Action row whose operator is ``system`` and whose
reason names the condition. A resume that cannot be applied is recorded on the entry
(``auto_resume_failed``) and the wake signal says so; the operator resumes by hand.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping, Sequence

from store.storage import sql
from store.parks import conditions as wc
from store.actions.apply import apply_within
from store.actions.plan import Plan
from store.actions.resolve import ResolveParams
from store.actions.resume import plan_resume
from store.storage.db import retry_write, write_tx
from store.errors import WardenError
from store.jsontypes import JsonMapping, JsonObject, JsonValue
from store.storage.core import LedgerCore
from store.storage.models import loads
from store.storage.tables import TaskRecord
from store.storage.events import ParkWake

SYSTEM = "system"  # the operator name of actions the system takes on its own


def _parked(core: LedgerCore, task: TaskRecord, node: str | None) -> bool:
    if node is None:
        return task.status == "parked"
    return sql.scalar(core.db, "SELECT status FROM node WHERE task_id = ? AND key = ?", [task.task_id, node]) == "parked"


def check_tx(core: LedgerCore, task_id: str, now: float, files: Mapping[str, str | None] | None = None) -> list[JsonObject]:
    """Inside a write transaction holding the task row's lock: evaluate the task's wake
    conditions (``file:`` ones only from ``files``), journal the newly met ones, resume the parks
    that auto-resume. Returns one dict per wake noticed now."""
    task = core.task_record(task_id)
    state = task.wake_state
    if not state:
        return []
    woken: list[JsonObject] = []
    resumes: list[tuple[str | None, str]] = []
    new_state: JsonObject | None = dict(state)
    changed = False
    for node, entry in wc.targets(state):
        if not _parked(core, task, node):  # the park ended some other way: stop watching it
            new_state = wc.with_target(new_state, node, None)
            changed = True
            continue
        if entry.get("woken_at") is None:
            for cond in entry["conditions"]:
                hit = wc.met(core, task_id, cond, now, files)
                if hit is None:
                    continue
                since, evidence = hit
                cond["met_at"] = since if since is not None else now
                cond["evidence"] = evidence
                entry.update(woken_at=now, woken_by=cond["text"], evidence=evidence)
                what = f"node {node}" if node else f"task {task_id}"
                core.journal(task_id, node, "warden", f"wake: {evidence} ({cond['text']}): {what} can resume",
                             ParkWake(condition=cond["text"], evidence=evidence, node=node,
                                      auto_resume=bool(entry.get("auto_resume"))), at=now)
                woken.append({"task_id": task_id, "node": node, "condition": cond["text"], "evidence": evidence,
                              "auto_resume": bool(entry.get("auto_resume"))})
                new_state = wc.with_target(new_state, node, entry)
                changed = True
                break
        if entry.get("woken_at") is not None and entry.get("auto_resume") and not entry.get("auto_resume_failed"):
            resumes.append((node, str(entry.get("woken_by"))))
    if changed:
        sql.execute(core.db, "UPDATE task SET wake_state = ? WHERE task_id = ?",
                    [None if new_state is None else sql.dumps(new_state), task_id])
    for node, why in resumes:
        _auto_resume(core, task_id, node, why)
    return woken


def _auto_resume(core: LedgerCore, task_id: str, node: str | None, why: str) -> None:
    """Resume a woken park as the system, in a savepoint: a failure is recorded, never raised
    into the write that noticed the wake."""
    try:
        with core.db.atomic():
            plan = plan_resume(core, task_id, node=node, reason=f"wake: {why}")
            apply_within(core, plan, operator=SYSTEM)
    except WardenError as e:
        state = core.task_record(task_id).wake_state
        for key, entry in wc.targets(state):
            if key == node:
                entry["auto_resume_failed"] = str(e)
                state = wc.with_target(state, node, entry)
        sql.execute(core.db, "UPDATE task SET wake_state = ? WHERE task_id = ?",
                    [None if state is None else sql.dumps(state), task_id])


def watching(core: LedgerCore) -> list[tuple[str, JsonObject]]:
    """(task id, wake_state) of every task with a park to watch."""
    return [(tid, sql.json_value(st)) for tid, st in
            sql.fetch_all(core.db, "SELECT task_id, wake_state FROM task WHERE wake_state IS NOT NULL "
                                   "ORDER BY task_id")]


def file_results(state: JsonMapping | None) -> dict[str, str | None]:
    """The ``file:`` conditions of a wake_state evaluated now (outside any transaction)."""
    out: dict[str, str | None] = {}
    for _node, entry in wc.targets(state):
        if entry.get("woken_at") is not None:
            continue
        for cond in entry["conditions"]:
            if cond.get("kind") == "file" and cond["target"] not in out:
                out[cond["target"]] = wc.file_changed(cond)
    return out


def check(core: LedgerCore, task_ids: Iterable[str] | None = None) -> list[JsonObject]:
    """Look at every watched park (or those of ``task_ids``): files first, outside any
    transaction, then one write transaction per task. Returns the wakes noticed. A read-only
    ledger is left alone (nothing is returned)."""
    if core.read_only:
        return []
    wanted = None if task_ids is None else set(task_ids)
    woken: list[JsonObject] = []
    for tid, state in watching(core):
        if wanted is not None and tid not in wanted:
            continue
        woken += _wakes(loads(_check_one(core, tid, file_results(state))))
    return woken


def _wakes(found: JsonValue) -> list[JsonObject]:
    """The wakes :func:`_check_one` wrote as JSON (a list of objects), read back."""
    return [w for w in found if isinstance(w, dict)] if isinstance(found, list) else []


@retry_write
def _check_one(core: LedgerCore, task_id: str, files: Mapping[str, str | None]) -> str:
    """One task's wakes, as JSON text (a retried write records its result: a string it can)."""
    with write_tx(core.db):
        core.task_record(task_id, lock="exclusive")  # it may resume the task, as an operator action would
        return json.dumps(check_tx(core, task_id, core.now(), files))


def after_apply(core: LedgerCore, done: Plan) -> list[JsonObject]:
    """After an operator action is applied: what it can satisfy at once. A resolved handoff meets
    the ``handoff:<id>`` conditions of the parks waiting on it."""
    if isinstance(done.params, ResolveParams):
        return after_resolve(core, done.target)
    return []


def after_resolve(core: LedgerCore, handoff_id: str) -> list[JsonObject]:
    """After a handoff is resolved: check the parks waiting on it (``handoff:<id>``)."""
    tids = [tid for tid, state in watching(core) if _waits_on(state, "handoff", str(handoff_id))]
    return check(core, tids) if tids else []


def _waits_on(state: JsonMapping | None, kind: str, target: str) -> bool:
    return any(c.get("kind") == kind and str(c.get("target")) == target
               for _n, e in wc.targets(state) for c in e.get("conditions", ()))


def pending(state: JsonMapping | None) -> Sequence[tuple[str | None, JsonObject]]:
    """The watched parks of a wake_state (for display)."""
    return wc.targets(state)

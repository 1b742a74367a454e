"""narrow: change the task's scope — ``set={K: V}`` and/or ``exclude=[node keys]``.

A node is out of scope when its preconditions name K with a different value (or a list without
V); nodes that do not name K stay in scope. Out of scope → abandoned (running ones revoked, their
open handoffs withdrawn); succeeded nodes downstream of a newly abandoned node → pending; the
task's preconditions take the new values.

The promise (store/actions/promise.py): the scope the preview showed — these nodes out, their
succeeded dependents reset. Agents' work meanwhile keeps it: an out-of-scope node that was
claimed, finished or failed since is abandoned all the same (its lease revoked); a dependent that
finished meanwhile on the old inputs is reset too. Refused: the task's preconditions changed since
the preview (another narrow); another action since changed the task's status or a node the narrow
changes; the narrow would now change a node the preview did not show (the graph changed under it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from store.storage import sql
from store.storage.db import read_tx
from store.errors import NotFound, Refused
from store.jsontypes import JsonMapping, JsonObject, JsonValue
from store.storage.core import LedgerCore
from store.storage.models import dumps
from store.ledger.rules import ID, IDS_OPT, JSON_OBJ_OPT, TEXT_OPT
from store.actions import planning as pl
from store.actions.action import TASK_FLAG, Action, Command, Flag, Key
from store.actions.changes import BUMP, FRESH, REVOKE, ApplyTx, Outcome, set_nodes
from store.actions.plan import Plan
from store.mind import state as mind_state
from store.mind.views import MindState
from store.actions.promise import Since, refused


def parse_assignments(texts: Sequence[str] | None) -> JsonObject:
    """``--set K=V`` (repeatable) → ``{K: V}``: V parsed as JSON, else the text itself. A
    ValueError says what is wrong (the CLI's usage error)."""
    out: JsonObject = {}
    for text in texts or ():
        if "=" not in text:
            raise ValueError(f"--set needs K=V, got {text!r}")
        k, v = text.split("=", 1)
        k = k.strip()
        if not k:
            raise ValueError(f"--set needs a name before '=', got {text!r}")
        try:
            out[k] = json.loads(v)
        except RecursionError:
            raise ValueError(f"--set {k}: the JSON value is nested too deeply") from None
        except ValueError:
            out[k] = v  # not JSON: the text itself
    return out


@dataclass(frozen=True)
class NarrowParams(Action):
    action = "narrow"
    title = "Narrow"
    key = Key("n", "Narrow", "narrow the selected task")
    arguments = {"task_id": ID, "reason": TEXT_OPT, "set": JSON_OBJ_OPT, "exclude": IDS_OPT}
    cli = Command("change a task's preconditions or exclude nodes", (
        TASK_FLAG,
        Flag("--set", "set", repeat=True, metavar="K=V", one_of="scope", parse=parse_assignments,
             help="precondition K takes value V (V parsed as JSON, else a string); repeatable"),
        Flag("--exclude", "exclude", several=True, metavar="KEY", one_of="scope", default=(),
             help="abandon these nodes"),
        Flag("--reason", "reason", required=True, metavar="R", help="why (required)"),
    ), examples=("warden narrow nightly --set region=eu --reason 'EU only this week'",
                 "warden narrow nightly --exclude translate-fr translate-de --reason 'not needed'"))

    assignments: JsonMapping  # --set K=V
    exclude: Sequence[str]
    preconditions_before: JsonMapping
    preconditions_after: JsonMapping
    out_of_scope: Mapping[str, str]  # node key → why
    unaffected: int

    def to_json(self) -> JsonObject:
        return {"set": self.assignments, "exclude": self.exclude, "preconditions_before": self.preconditions_before,
                "preconditions_after": self.preconditions_after, "out_of_scope": self.out_of_scope,
                "unaffected": self.unaffected}

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        return _plan(core, pl.open_task(core, plan.task_id), plan.reason, dict(self.assignments), list(self.exclude))

    def keeps(self, approved: Plan, current: Plan, since: Sequence[Since]) -> str | None:
        """The task's preconditions the preview narrowed from, then the shared rule."""
        now = current.params
        if isinstance(now, NarrowParams) and dict(now.preconditions_before) != dict(self.preconditions_before):
            by = next((s for s in since if s.action == "narrow"), None)
            return refused(f"the task's preconditions were {by.done()}" if by else
                           f"the task's preconditions changed (now {dumps(now.preconditions_before)})")
        return super().keeps(approved, current, since)

    def apply(self, tx: ApplyTx) -> Outcome:
        set_nodes(tx, tx.changed_to("abandoned"), {"status": "abandoned", "finished_at": tx.now,
                                                   "next_retry_at": None, **REVOKE, **BUMP})
        set_nodes(tx, tx.changed_to("pending"), FRESH)
        preconditions = dict(self.preconditions_after or tx.task.preconditions or {})
        mind = MindState.of(tx.task.mind)
        if mind.verdict == "drifting":  # the operator's change of scope answers it, as a replan does
            mind_state.save(tx.core, tx.plan.task_id, replace(mind, verdict=None))
        return Outcome(task_fields={"preconditions": preconditions, **tx.reopens()},
                       payload={"preconditions": self.preconditions_after}, settle=True)


def _in_scope(node_value: JsonValue, value: JsonValue) -> bool:
    if node_value == value:
        return True
    if isinstance(node_value, list) and value in node_value:
        return True
    if isinstance(value, list) and not isinstance(node_value, list) and node_value in value:
        return True
    return False


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _candidates(core: LedgerCore, task_id: str, assignments: JsonMapping,
                excluded: Sequence[str]) -> dict[str, pl.LeanNode]:
    """Only the nodes whose preconditions mention one of the names (the stored JSON is canonical,
    so a name K appears as ``"K":``), with their preconditions text, plus the excluded keys."""
    conds, like = [], []
    for k in assignments:
        conds.append("n.preconditions LIKE ? ESCAPE '\\'")
        like.append(f"%{_like_escape(dumps(k))}:%")
    candidates: dict[str, pl.LeanNode] = {}
    if conds:
        for r in pl.lean(core, f"SELECT {pl.LEAN}, n.preconditions FROM node n WHERE n.task_id = ? "
                               f"AND ({' OR '.join(conds)})", [task_id, *like]):
            candidates[r.key] = r
    for chunk in sql.chunks(list(excluded)):
        for r in pl.lean(core, f"SELECT {pl.LEAN}, NULL FROM node n WHERE n.task_id = ? "
                               f"AND n.key IN ({sql.marks(len(chunk))})", [task_id, *chunk]):
            candidates.setdefault(r.key, r)
    for k in excluded:
        if k not in candidates:
            raise NotFound(f"unknown node {k!r} in task {task_id!r}")
    return candidates


def plan_narrow(core: LedgerCore, task_id: str, *, reason: str, set: JsonMapping | None = None,  # noqa: A002
                exclude: Sequence[str] = ()) -> Plan:
    """Narrow the task's scope: ``set={K: V}`` and/or ``exclude=[node keys]``."""
    assignments = dict(set or {})
    excluded = list(dict.fromkeys(exclude or ()))
    with read_tx(core.db):
        task = pl.open_task(core, task_id)
        return _plan(core, task, pl.require_reason(reason, "narrow"), assignments, excluded)


def _plan(core: LedgerCore, task: pl.TaskState, reason: str, assignments: JsonObject, excluded: list[str]) -> Plan:
    """The narrow's plan on the task as it is."""
    task_id = task.task_id
    if not assignments and not excluded:
        raise Refused("narrow needs --set K=V or --exclude KEY")
    for k in assignments:
        if not isinstance(k, str) or not k:
            raise Refused(f"invalid precondition name {k!r}")
    dumps(assignments)
    candidates = _candidates(core, task_id, assignments, excluded)
    why: dict[str, str] = {}
    excl = {*excluded}
    for n in sorted(candidates.values(), key=lambda n: n.position):
        if n.key in excl:
            why[n.key] = "excluded"
            continue
        if n.extra is None:
            continue
        pre = sql.json_value(n.extra)  # a damaged value: one line, not a traceback
        for k, v in assignments.items():
            if k in pre and not _in_scope(pre[k], v):
                why[n.key] = f"{k}={dumps(pre[k])}"
                break
    newly = [candidates[k] for k in why if candidates[k].status != "abandoned"]
    changes: dict[str, tuple[str, str]] = {n.key: (n.status, "abandoned") for n in newly}
    closure = pl.closure_nodes(core, [n.id for n in newly])
    still_running, kept = [], []
    for n in closure:
        if n.key in changes:
            continue
        if n.status == "succeeded":
            changes[n.key] = ("succeeded", "pending")
        else:
            kept.append(n.key)
            if n.status == "running":
                still_running.append(n.key)
    old_pre = dict(task.preconditions or {})
    new_pre = {**old_pre, **assignments}
    if not changes and new_pre == old_pre:
        raise Refused("this narrow changes nothing: every node is already in that scope")
    all_by_key = {n.key: n for n in closure}
    for n in newly:
        all_by_key.setdefault(n.key, n)
    ab_ids = {all_by_key[k].id for k, (_, b) in changes.items() if b == "abandoned"}
    reset_ids = {all_by_key[k].id for k, (_, b) in changes.items() if b == "pending"}
    effects, ewarn = pl.effects(core, task_id, ab_ids | reset_ids)
    warnings = [f"{len(still_running)} running node(s) downstream of abandoned work keep running on their old "
                f"inputs: {pl.names(still_running)}"] if still_running else []
    warnings += ewarn
    warnings += pl.asked_again(core, task_id, reset_ids, {n.id: n.key for n in all_by_key.values()})
    after = pl.reopened_status(core, task, changes, drifting=False)  # a narrow answers a drifting verdict
    if after == "completed" and task.status != "completed":
        warnings.append("every node is then succeeded or abandoned: the task completes")
    params = NarrowParams(assignments=assignments, exclude=excluded, preconditions_before=old_pre,
                          preconditions_after=new_pre, out_of_scope={n.key: why[n.key] for n in newly},
                          unaffected=pl.count(core, task_id) - len(changes) - len(kept))
    return pl.make_plan(core, params, task, task_id, reason, list(all_by_key.values()), changes, kept=kept,
                        status_after=after, versions_of=list(all_by_key.values()),
                        handoffs=pl.open_handoffs(core, task_id, ab_ids),
                        reapplied=pl.resolved_latest(core, task_id, reset_ids), effects=effects,
                        warnings=warnings)


"""The API boundary: every argument of every public ``Ledger`` method is checked here, once, before
the method runs (so a refused call writes nothing).

:data:`API` maps each public method to a rule per argument (``store/ledger/rules.py``, over
``store/validate.py``; an operator action's plan arguments are the action's own, store/actions/);
:func:`checked` wraps the class's methods with them. A bad value raises
:class:`~store.errors.InvalidValue` — one line naming the method and the argument. A test checks
that every parameter of every public method has a rule here, so a new argument cannot slip past.

Ids are checked strictly where they are created (``create_task``, ``add_node``, ``NodeSpec``);
lookups take any non-empty string and answer ``NotFound`` for an unknown one.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Callable, Concatenate, ParamSpec, TypeVar

from store import validate as v
from store.actions import ACTIONS, REGISTRY, Plan
from store.storage.db import is_sqlite
from store.ledger.rules import (  # one a line: a new rule is one line here
    ACTOR,
    APP_NAME,
    BACKOFF_OPT,
    BUDGET_OPT,
    CLAIM,
    CLOCK_OPT,
    COMMIT_RULES,
    COMMITS,
    CAPACITY,
    COUNT0,
    Ctx,
    DECLARED_CLASS,
    DELAY_OPT,
    ERROR,
    EST_TOKENS,
    EST_WALL,
    FAILURE_CLASS,
    FLAG,
    QUOTA_NAME,
    WINDOW_OPT,
    FLAG_OPT,
    HANDOFF,
    HANDOFF_KIND,
    HANDOFF_STATUS_OPT,
    ID,
    ID_OPT,
    IDS,
    IDS_OPT,
    JSON,
    JSON_OBJ_OPT,
    KIND,
    KINDS_OPT,
    LEASE,
    LEASE_OPT,
    LIMIT,
    MAX_CLAIMS,
    MAX_CLAIMS_OPT,
    NAME,
    NAME_OPT,
    NEW_KEY,
    NEW_TASK_ID,
    NOTE_LAYER,
    OPTIONS,
    ORIGIN_OPT,
    Rule,
    SINCE,
    SPECS,
    TARGET,
    TEXT,
    TEXT_OPT,
    TEXTS_OPT,
    TIMEOUT,
    TOKENS,
    UNITS,
    WAIT_S_OPT,
    WAITING_ON_OPT,
    REQUIREMENTS,
    SERVES,
    MIND_COUNT,
    ALIGNMENT_BY,
    ENTRY_TEXT,
    SOURCE_OPT,
    REASON_OPT,
    REASON,
    ENTRY_KIND,
    MEMORY_TEXT,
    MEMORY_SCOPE,
    MEMORY_STATUS_OPT,
    MEMORY_ID,
    DECISION,
    NODE_KEYS,
    NARROW,
    TRIGGER,
    IN_FLIGHT,
    REPLAN_SPECS,
)


_C = TypeVar("_C", bound=type)
_S = TypeVar("_S")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def PLAN(c: Ctx, a: str, x: object) -> Plan:
    if not isinstance(x, Plan):
        raise v.refuse(a, "must be a Plan from one of the plan_* methods", x, where=c.where)
    return x


def ACTION(c: Ctx, a: str, x: object) -> str | None:
    return v.one_of(a, x, ACTIONS, c.where)


def ARGUMENTS(c: Ctx, a: str, x: object) -> Mapping[str, object]:
    """An action's plan arguments by name (each is checked by the action's own rule when planned)."""
    if not isinstance(x, Mapping) or not all(isinstance(k, str) for k in x):
        raise v.refuse(a, "must be a dict of the action's arguments by name", x, where=c.where)
    return x



# ---------------------------------------------------------------------- the table
_QUERY_NODE: dict[str, Rule] = {"task_id": ID, "key": ID}
API: dict[str, dict[str, Rule]] = {
    "open": {"target": TARGET, "clock": CLOCK_OPT, "read_only": FLAG, "create": FLAG, "busy_timeout_s": TIMEOUT,
             "reconnect_s": DELAY_OPT, "application_name": APP_NAME, "backoff": BACKOFF_OPT,
             "one_connection": FLAG, "connect_timeout_s": TIMEOUT},
    # graph building
    "create_task": {"task_id": NEW_TASK_ID, "title": TEXT, "workflow": TEXT, "workflow_version": TEXT,
                    "inputs": JSON, "constraints": TEXTS_OPT, "preconditions": JSON_OBJ_OPT,
                    "budget": BUDGET_OPT, "max_claims": MAX_CLAIMS, "max_repairs": COUNT0, "exist_ok": FLAG,
                    "actor": ACTOR, "origin": ORIGIN_OPT, "requirements": REQUIREMENTS, "drift_after": MIND_COUNT,
                    "alignment_every": MIND_COUNT, "alignment_by": ALIGNMENT_BY, "confirm_kinds": KINDS_OPT},
    "add_node": {"task_id": ID, "key": NEW_KEY, "kind": KIND, "deps": IDS, "title": TEXT,
                 "preconditions": JSON_OBJ_OPT, "est_wall_s": EST_WALL, "est_tokens": EST_TOKENS,
                 "always_admit": FLAG, "retryable": FLAG, "units_total": UNITS, "max_claims": MAX_CLAIMS_OPT,
                 "actor": ACTOR, "serves": SERVES, "quotas": KINDS_OPT, "failure_class": DECLARED_CLASS},
    "add_nodes": {"task_id": ID, "specs": SPECS, "actor": ACTOR},
    # claims
    "admit": {"task_id": ID, "node_key": ID},
    "declare_quota": {"name": QUOTA_NAME, "capacity": CAPACITY, "window_s": WINDOW_OPT, "task_id": ID_OPT,
                      "actor": ACTOR},
    "quotas": {"task_id": ID_OPT},
    "claim": {"task_id": ID_OPT, "worker": NAME, "lease_s": LEASE, "kinds": KINDS_OPT, "key": ID_OPT,
              "workflow_version": TEXT_OPT, "max_step_s": LEASE_OPT, "renew": ID_OPT},
    "check_expired": {"task_ids": IDS_OPT, "actor": ACTOR},
    # fenced writes
    "heartbeat": {"claim": CLAIM, "units_done": UNITS, "units_total": UNITS, "tokens": TOKENS,
                  "observation": TEXT_OPT, "lease_s": LEASE_OPT, "waiting_on": WAITING_ON_OPT, "wait_s": WAIT_S_OPT,
                  "action": TEXT_OPT, "result": TEXT_OPT,
                  "max_step_s": LEASE_OPT},
    "commit": {"claim": CLAIM, **COMMIT_RULES},
    "commit_many": {"commits": COMMITS},
    "fail": {"claim": CLAIM, "error": ERROR, "failure_class": FAILURE_CLASS, "retryable": FLAG_OPT,
             "retry_after_s": DELAY_OPT, "tokens": TOKENS},
    "request_human": {"claim": CLAIM, "kind": HANDOFF_KIND, "question": TEXT, "options": OPTIONS,
                      "recommendation": NAME_OPT, "context": JSON_OBJ_OPT, "tokens": TOKENS},
    "intend_effect": {"claim": CLAIM, "effect_key": NAME, "payload": JSON, "compensation": TEXT_OPT},
    "request_effect_confirmation": {"claim": CLAIM, "effect_key": NAME, "details": JSON_OBJ_OPT, "done": TEXT,
                                    "why": TEXT, "question": TEXT_OPT, "stuck": TEXT_OPT, "tokens": TOKENS},
    "confirm_effect": {"claim": CLAIM, "effect_key": NAME, "external_id": TEXT_OPT, "compensation": TEXT_OPT},
    "note": {"claim": CLAIM, "text": TEXT, "layer": NOTE_LAYER, "data": JSON_OBJ_OPT},
    "wait_for_resolution": {"handoff_id": HANDOFF, "timeout": DELAY_OPT},
    # the task's mind
    "conclude": {"claim": CLAIM, "text": ENTRY_TEXT, "source": SOURCE_OPT, "kind": ENTRY_KIND, "reason": REASON_OPT},
    "propose_memory": {"claim": CLAIM, "text": MEMORY_TEXT, "scope": MEMORY_SCOPE, "source": SOURCE_OPT},
    "replan": {"task_id": ID, "add": REPLAN_SPECS, "remove": NODE_KEYS, "reorder": NODE_KEYS, "narrow": NARROW,
               "trigger": TRIGGER, "in_flight": IN_FLIGHT, "reason": REASON, "actor": NAME},
    "mind": {"task_id": ID},
    "plans": {"task_id": ID},
    "requirements": {"task_id": ID},
    "conclusions": {"task_id": ID, "kind": ENTRY_KIND, "node": ID_OPT, "limit": LIMIT},
    "node_mind": _QUERY_NODE,
    "memories": {"status": MEMORY_STATUS_OPT, "limit": LIMIT},
    "memory": {"memory_id": MEMORY_ID},
    "plan_memory": {"memory_id": MEMORY_ID, "decision": DECISION, "reason": TEXT_OPT},
    # operator actions: each plan_<action>'s rules are the action's own (``arguments``, store/actions/)
    **{f"plan_{r.name}": dict(r.params.arguments) for r in REGISTRY},
    "plan": {"action": ACTION, "arguments": ARGUMENTS},
    "apply": {"plan": PLAN, "operator": NAME},
    "check_wakes": {"task_ids": IDS_OPT},
    # queries
    "tasks": {},
    "task": {"task_id": ID},
    "graph": {"task_id": ID},
    "graph_pages": {"task_id": ID, "first": LIMIT, "page": LIMIT},
    "nodes": {"task_id": ID, "keys": IDS},
    "node": _QUERY_NODE,
    "dependents": _QUERY_NODE,
    "node_detail": {**_QUERY_NODE, "events_limit": LIMIT, "observations_limit": LIMIT},
    "observations": {**_QUERY_NODE, "limit": LIMIT},
    "events": {"since": SINCE, "task_id": ID_OPT, "limit": LIMIT},
    "last_event_id": {},
    "effects": {"task_id": ID},
    "handoffs": {"status": HANDOFF_STATUS_OPT, "task_id": ID_OPT},
    "handoff": {"handoff_id": HANDOFF},
    "actions": {"task_id": ID_OPT, "limit": LIMIT},
    "artifacts": {"task_id": ID},
    "latest_artifact": {"task_id": ID},
}


def checked(cls: _C) -> _C:
    """Wrap every method of ``cls`` named in :data:`API` with its argument rules."""
    for meth, rules in API.items():
        raw = inspect.getattr_static(cls, meth, None)
        if isinstance(raw, classmethod):
            setattr(cls, meth, classmethod(_wrap(raw.__func__, meth, rules)))
        elif inspect.isfunction(raw):
            setattr(cls, meth, _wrap(raw, meth, rules))
    return cls


def _wrap(fn: Callable[Concatenate[_S, _P], _R], meth: str,
          rules: Mapping[str, Rule]) -> Callable[Concatenate[_S, _P], _R]:
    names = list(inspect.signature(fn).parameters)[1:]  # after self / cls

    @functools.wraps(fn)
    def wrapper(obj: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:  # obj: positional only ("first" is an argument)
        db = getattr(obj, "db", None)
        ctx = Ctx(meth, db is not None and not is_sqlite(db))
        for arg, value in zip(names, args):
            rule = rules.get(arg)
            if rule is not None:
                rule(ctx, arg, value)
        for arg, value in kwargs.items():
            rule = rules.get(arg)
            if rule is not None:
                rule(ctx, arg, value)
        return fn(obj, *args, **kwargs)

    wrapper.__checked__ = rules  # type: ignore[attr-defined]
    return wrapper

"""The registered operator actions: one line each in :data:`REGISTRY` — its params class (which
carries everything about it, store/actions/action.py) and its plan function.

Everything that offers the actions reads this tuple: the facade's argument checks
(``store/checked.py``) and ``Ledger.plan(action, arguments)``; in the console, the key
bindings, the command palette, the help screen and the ``warden`` subcommands. Its order is the
order they are listed in.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

from store import validate as v
from store.storage.db import is_sqlite
from store.errors import InvalidValue
from store.jsontypes import JsonMapping
from store.storage.core import LedgerCore
from store.ledger.rules import Ctx
from store.actions.abort import AbortParams, plan_abort
from store.actions.action import Action, Command, Key
from store.actions.compensated import CompensatedParams, plan_compensated
from store.actions.escalate import EscalateParams, plan_escalate
from store.actions.healthy import HealthyParams, plan_healthy
from store.actions.memory import ConfirmMemoryParams, RejectMemoryParams, plan_memory_confirm, plan_memory_reject
from store.actions.narrow import NarrowParams, plan_narrow
from store.actions.park import ParkParams, plan_park
from store.actions.plan import Plan
from store.actions.resolve import ResolveParams, plan_resolve
from store.actions.resume import ResumeParams, plan_resume
from store.actions.rewind import RewindParams, plan_rewind


@dataclass(frozen=True)
class Registered:
    """A registered action: its params class and its plan function (``plan(core, …) -> Plan``)."""

    params: type[Action]
    plan: Callable[..., Plan]
    required: tuple[str, ...] = field(init=False)  # the plan arguments without a default

    def __post_init__(self) -> None:
        args = list(inspect.signature(self.plan).parameters.values())[1:]  # after core
        object.__setattr__(self, "required", tuple(a.name for a in args if a.default is inspect.Parameter.empty))

    @property
    def name(self) -> str:
        return self.params.action

    @property
    def key(self) -> Key | None:
        return self.params.key if isinstance(self.params.key, Key) else None

    @property
    def command(self) -> Command | None:
        return self.params.cli if isinstance(self.params.cli, Command) else None


REGISTRY: tuple[Registered, ...] = (
    Registered(ParkParams, plan_park),
    Registered(ResumeParams, plan_resume),
    Registered(NarrowParams, plan_narrow),
    Registered(RewindParams, plan_rewind),
    Registered(AbortParams, plan_abort),
    Registered(ResolveParams, plan_resolve),
    Registered(EscalateParams, plan_escalate),
    Registered(CompensatedParams, plan_compensated),
    Registered(HealthyParams, plan_healthy),  # a loop alarm is normal work: its kind learns it
    Registered(ConfirmMemoryParams, plan_memory_confirm),  # the task's mind: the memory inbox
    Registered(RejectMemoryParams, plan_memory_reject),
)
ACTIONS: tuple[str, ...] = tuple(r.name for r in REGISTRY)
_BY_NAME = {r.name: r for r in REGISTRY}


def registered(name: str) -> Registered:
    """The registered action called ``name`` (``InvalidValue`` naming the known ones otherwise)."""
    found = _BY_NAME.get(name)
    if found is None:
        raise InvalidValue(f"unknown action {v.show(name)}: one of {', '.join(ACTIONS)}", "action")
    return found


def is_registered(params: object) -> bool:
    """Whether ``params`` are the params of the registered action of their name."""
    found = _BY_NAME.get(getattr(params, "action", ""))
    return found is not None and type(params) is found.params


def plan(core: LedgerCore, name: str, arguments: JsonMapping) -> Plan:
    """Plan the action ``name`` with ``arguments`` (as its ``plan_<name>`` method takes them),
    each checked by the action's own rule first, exactly as ``Ledger.plan_<name>`` checks it."""
    action = registered(name)
    where = f"plan_{name}"
    ctx = Ctx(where, not is_sqlite(core.db))
    rules = action.params.arguments
    for arg, value in arguments.items():
        rule = rules.get(arg)
        if rule is None:
            raise v.refuse(v.show(arg), f"is not an argument of {name}: one of {', '.join(rules)}", where=where)
        rule(ctx, arg, value)
    for arg in action.required:
        if arg not in arguments:
            raise v.refuse(arg, "is required", where=where)
    return action.plan(core, **arguments)


__all__ = ["ACTIONS", "REGISTRY", "Registered", "is_registered", "plan", "registered"]

"""Operator actions: plan (a pure read) → preview → apply (one revision-checked transaction).

Every action is computed first as a :class:`Plan`: the exact node status changes, the leases it
revokes, the handoffs it withdraws, the effects it does *not* undo, warnings, and the task
``revision`` and node ``versions`` it was computed at. :func:`apply` applies exactly that plan in
one write transaction, or — when the task revision or any of those node versions moved — writes
only a refused Action row and raises :class:`StaleRevision`. A heartbeat never bumps a version,
so it never makes a preview stale.

One module per action: ``park``, ``resume``, ``narrow``, ``rewind``, ``abort``, ``resolve``,
``escalate``, ``compensated``, ``healthy``, ``memory`` (confirm, reject), each a params class deriving from :class:`Action` (its apply, its
stale check, its argument rules, its title, key and ``warden`` subcommand) and its plan function,
registered in one line of ``registry.py``. ``plan`` holds the Plan, ``action`` the base of a
registered action, ``planning`` what plans read, ``changes`` what apply functions write with,
``apply`` the shared apply. Semantics with before/after examples: docs/operations.md; adding an
action: docs/architecture.md.
"""

from store.actions.abort import AbortParams, plan_abort
from store.actions.action import Action, Command, Flag, Key, NoCommand, NoKey
from store.actions.apply import apply
from store.actions.compensated import CompensatedParams, plan_compensated
from store.actions.escalate import ESCALATE_OPTIONS, EscalateParams, plan_escalate
from store.actions.healthy import HealthyParams, plan_healthy
from store.actions.memory import ConfirmMemoryParams, RejectMemoryParams, plan_memory_confirm, plan_memory_reject
from store.actions.narrow import NarrowParams, plan_narrow
from store.actions.park import ParkParams, plan_park
from store.actions.plan import ActionParams, Plan
from store.actions.planning import FINISHED
from store.actions.registry import ACTIONS, REGISTRY, Registered, registered
from store.actions.resolve import ResolveParams, plan_resolve
from store.actions.resume import ResumeParams, plan_resume
from store.actions.rewind import RewindParams, plan_rewind

__all__ = [
    "ACTIONS", "ESCALATE_OPTIONS", "FINISHED", "REGISTRY", "AbortParams", "Action", "ActionParams", "Command",
    "CompensatedParams", "ConfirmMemoryParams", "EscalateParams", "Flag", "HealthyParams", "Key", "NarrowParams", "NoCommand", "NoKey", "ParkParams", "Plan",
    "Registered", "RejectMemoryParams", "ResolveParams", "ResumeParams", "RewindParams", "apply", "plan_abort", "plan_compensated",
    "plan_escalate", "plan_healthy", "plan_memory_confirm", "plan_memory_reject", "plan_narrow", "plan_park", "plan_resolve", "plan_resume", "plan_rewind", "registered",
]

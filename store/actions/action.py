"""An operator action as one registered unit: :class:`Action`, the base of every action's params.

An action is its module in this package — a frozen params dataclass deriving from :class:`Action`,
and its plan function — plus one line in ``registry.py`` (docs/architecture.md, "Adding an
action"). The params class carries everything about the action beside its plan:

* ``apply(tx)``: its own changes, inside the shared revision-checked write (``apply.py``);
* ``stale(core, plan, task)``: what makes its preview stale whatever else happened (a handoff
  answered meanwhile, an effect confirmed meanwhile);
* ``replan(core, plan)`` and ``keeps(approved, current, since)``: when anything the plan was
  computed at moved, the action planned again on the current state with the approved params, and
  its rule for whether that current plan keeps the approved one's promise (store/actions/promise.py);
* ``arguments``: the rule (``store/ledger/rules.py``) of each argument of its plan function: the facade
  checks them, in ``Ledger.plan_<action>`` and in ``Ledger.plan(action, arguments)``;
* ``title``, ``key`` (:class:`Key` or :class:`NoKey`) and ``cli`` (:class:`Command` or
  :class:`NoCommand`): how the console and the ``warden`` command offer it — plain data, from
  which the console builds its key bindings, command palette, help lines and ``warden``
  subcommands (the store never imports the console). The console registers the action's dialog
  on its side (``console/dialogs/registry.py``); a test fails when one of these is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Mapping, Sequence

from store.errors import Refused
from store.storage.core import LedgerCore
from store.ledger.rules import Rule
from store.actions.changes import ApplyTx, Outcome
from store.actions.plan import ActionParams, Plan
from store.actions.planning import TaskState
from store.actions.promise import Since, shared_rule


@dataclass(frozen=True)
class Key:
    """The console key that opens the action's dialog on the selection."""

    key: str  # a Textual key name: "p", "R"
    label: str  # the binding's label: "Park"
    help: str  # its line in the help screen: "park the selected task or node"
    palette: str = ""  # its command palette entry (default: the action's title)
    palette_help: str = ""  # (default: the help line and the key: "park the selected task or node (p)")


@dataclass(frozen=True)
class NoKey:
    """The action has no key of its own: ``why`` says where it is opened instead."""

    why: str


@dataclass(frozen=True)
class Flag:
    """One argument of the action's ``warden`` subcommand (in argparse's terms) and the argument
    of the plan function it fills."""

    name: str  # "task" (a positional) or "--node"
    to: str  # the plan function's argument: "task_id"
    metavar: str | None = None
    help: str | None = None
    required: bool = False
    default: str | tuple[str, ...] | None = None
    switch: bool = False  # a flag without a value (store_true)
    repeat: bool = False  # may be given several times (append)
    several: bool = False  # takes one or more values (nargs="+")
    one_of: str = ""  # flags with the same one_of form a group: exactly one of them is required
    # What argparse read → the plan argument; a ValueError is a usage error (its message, exit 2).
    parse: Callable[[Sequence[str] | None], object] | None = None  # (a repeat or several flag's values)


# The task an action is taken on: the first argument of most actions' subcommands.
TASK_FLAG = Flag("task", "task_id", metavar="TASK", help="the task's id (warden status lists them)")


@dataclass(frozen=True)
class Command:
    """The action's ``warden`` subcommand: ``warden NAME …`` (``NAME`` is the action's name unless
    ``name`` says otherwise). The CLI plans it with the flags' values, previews, confirms, applies."""

    help: str  # the one line of ``warden --help``
    flags: tuple[Flag, ...]
    name: str = ""
    listed_after: str = ""  # in ``warden --help``, listed after that subcommand (default: with the actions)
    parent: str = ""  # a subcommand of ``warden PARENT``: that command's registrar adds it
    # Command lines shown under "examples:" in its --help (tests/console/test_cli_help.py wants one).
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class NoCommand:
    """The action has no ``warden`` subcommand: ``why`` says where it is taken instead."""

    why: str


class Action(ActionParams):
    """The params of a registered operator action, and everything about the action but its plan."""

    title: ClassVar[str]  # "Rewind": the dialog's title, its default Apply label, the notice's title
    key: ClassVar[Key | NoKey]
    cli: ClassVar[Command | NoCommand]
    arguments: ClassVar[Mapping[str, Rule]]  # the rule of each argument of its plan function
    needs_node: ClassVar[bool] = False  # the console opens it only on a selected node
    # How a sentence names it ("cannot mark healthy: …"); "" means its registered name ("cannot park: …").
    verb: ClassVar[str] = ""
    # Whether the reason reaches the agent (a park's does, through its next call); always recorded.
    reason_to_agent: ClassVar[bool] = True
    confirm_task_id: ClassVar[bool] = False  # applied only once the task id is typed (abort)
    # Checked at apply against the task's revision and the planned nodes' versions (the default);
    # False for an action that changes no part of the task's graph and whose ``stale`` checks what
    # its preview did depend on (a memory decision: the memory's own status, store/actions/memory.py).
    revision_checked: ClassVar[bool] = True

    def stale(self, core: LedgerCore, plan: Plan, task: TaskState) -> str | None:
        """At apply, under the task row's lock, before the shared checks: why the preview no
        longer holds for this action's own reasons, or None."""
        return None

    def refuse_operator(self, core: LedgerCore, plan: Plan, operator: str) -> str | None:
        """At apply, under the task row's lock: why ``operator`` may not take this decision (an
        agent of the task deciding what only a person may), or None. Refused, it is audited."""
        return None

    def replan(self, core: LedgerCore, plan: Plan) -> Plan:
        """At apply, under the task row's lock, when the ledger moved since ``plan`` (the approved
        one, with these params) was computed: the same action planned again on the current state,
        with the approved reason. ``Refused`` when it cannot be applied now (said as stale)."""
        raise Refused(f"a {plan.action} cannot be planned again")

    def keeps(self, approved: Plan, current: Plan, since: Sequence[Since]) -> str | None:
        """Whether ``current`` (:meth:`replan`'s) keeps the promise ``approved`` made: None, or
        why not (one line, the change that broke it). ``since``: the actions applied to the task
        since the preview. Default: :func:`~store.actions.promise.shared_rule`."""
        return shared_rule(approved, current, since)

    def apply(self, tx: ApplyTx) -> Outcome:
        """The action's own changes (its node updates; the task fields and event keys it adds)."""
        raise Refused(f"cannot apply a {tx.plan.action!r} plan")


__all__ = ["TASK_FLAG", "Action", "Command", "Flag", "Key", "NoCommand", "NoKey"]

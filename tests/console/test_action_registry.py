"""The action registry: every registered operator action is complete — its params class
carries its apply, its argument rules, a title, a key (or an explicit NoKey), a ``warden``
subcommand (or an explicit NoCommand); the console has a dialog for it, a key binding, a help line
and a palette command for its key; the facade checks and plans it. A new action that forgets one
of these fails here (the last tests show that the check catches each omission).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from typing import Any

import pytest

from console.action_keys import ACTION_KEYS
from console.app import WardenApp
from console.cli.entry import build_parser
from console.commands import COMMANDS
from console.dialogs import DIALOGS, ActionDialog
from console.screens.help import help_keys, help_text
from store import Ledger
from store.actions import REGISTRY, Action, Command, Flag, Key, NoCommand, NoKey, Plan, Registered
from store.checked import API


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in parser._actions:  # noqa: SLF001 - argparse keeps its subparsers here
        if isinstance(a, argparse._SubParsersAction):  # noqa: SLF001
            return dict(a.choices)
    return {}


def problems(r: Registered) -> list[str]:
    """What a registered action lacks (empty: it is complete)."""
    out: list[str] = []
    p, name = r.params, r.name
    if not (isinstance(p, type) and issubclass(p, Action)):
        return [f"{name}: its params class does not derive from store.actions.Action"]
    if not dataclasses.is_dataclass(p) or not p.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        out.append(f"{name}: its params are not a frozen dataclass")
    if not isinstance(getattr(p, "title", None), str) or not p.title:
        out.append(f"{name}: no title")
    if p.apply is Action.apply:
        out.append(f"{name}: no apply of its own")
    if p.revision_checked and p.replan is Action.replan:  # how a preview the ledger moved under is kept
        out.append(f"{name}: no replan of its own (or revision_checked = False)")
    # the plan function's arguments each have a rule, and nothing else has one
    plan_args = list(inspect.signature(r.plan).parameters)[1:]
    rules = dict(getattr(p, "arguments", {}) or {})
    if sorted(rules) != sorted(plan_args):
        out.append(f"{name}: argument rules {sorted(rules)} are not its plan's arguments {sorted(plan_args)}")
    typed = getattr(Ledger, f"plan_{name}", None)
    if typed is not None:
        if list(inspect.signature(typed).parameters)[1:] != plan_args:
            out.append(f"{name}: Ledger.plan_{name} does not take its plan function's arguments")
        if API.get(f"plan_{name}") != rules:
            out.append(f"{name}: Ledger.plan_{name} is not checked with its rules")
    # the dialog (or screen) the console opens it with
    dialog = DIALOGS.get(name)
    if dialog is None:
        out.append(f"{name}: no dialog registered (@dialog_for({p.__name__}))")
    elif issubclass(dialog, ActionDialog) and (dialog.params is not p or dialog.action != name):
        out.append(f"{name}: its dialog {dialog.__name__} is not registered with its params")
    # the key, the help line, the palette command
    key = getattr(p, "key", None)
    if isinstance(key, Key):
        bindings = [b for b in WardenApp.BINDINGS if getattr(b, "action", None) == f"operator({name!r})"]
        if [b.key for b in bindings] != [key.key]:
            out.append(f"{name}: no key binding {key.key!r} in the app")
        if key.key not in help_keys("WardenApp") or key.help not in help_text(False).plain:
            out.append(f"{name}: no help line for its key")
        if not [c for c in COMMANDS if c[1] == f"action_operator:{name}"]:
            out.append(f"{name}: no command palette entry")
    elif not (isinstance(key, NoKey) and key.why.strip()):
        out.append(f"{name}: neither a Key nor NoKey(why)")
    # the warden subcommand
    cli = getattr(p, "cli", None)
    if isinstance(cli, Command):
        subs = _subcommands(build_parser())
        if cli.parent:
            subs = _subcommands(subs[cli.parent]) if cli.parent in subs else {}
        sub = subs.get(cli.name or name)
        if sub is None:
            out.append(f"{name}: no warden subcommand {cli.name or name!r}")
        elif sub.get_default("func") is None:
            out.append(f"{name}: its warden subcommand runs nothing")
        filled = {f.to for f in cli.flags}
        if not set(r.required) <= filled or not filled <= set(plan_args):
            out.append(f"{name}: its subcommand's flags {sorted(filled)} do not fill its plan's arguments")
    elif not (isinstance(cli, NoCommand) and cli.why.strip()):
        out.append(f"{name}: neither a Command nor NoCommand(why)")
    return out


@pytest.mark.parametrize("action", REGISTRY, ids=lambda r: r.name)
def test_every_registered_action_is_complete(action: Registered) -> None:
    assert problems(action) == []


def test_the_registry_is_the_one_list_of_actions() -> None:
    names = [r.name for r in REGISTRY]
    assert names == ["park", "resume", "narrow", "rewind", "abort", "resolve", "escalate", "compensated", "healthy",
                     "memory-confirm", "memory-reject"]
    assert len(set(names)) == len(names)
    assert set(DIALOGS) == set(names)  # no dialog registered for an action the store does not know
    keyed = [k.action for k in ACTION_KEYS if k.action != "recover"]
    assert keyed == [r.name for r in REGISTRY if r.key is not None]
    assert len({k.key for k in ACTION_KEYS}) == len(ACTION_KEYS)  # no key taken twice


# ---------------------------------------------------------------------- the check catches omissions
def _plan_demo(core: Any, task_id: str, *, reason: str) -> Plan:
    raise AssertionError("never planned here")


@dataclasses.dataclass(frozen=True)
class _Bare(Action):
    action = "demo-bare"  # registered nowhere: no dialog, no key binding, no subcommand

    def to_json(self) -> dict[str, Any]:
        return {}


@dataclasses.dataclass(frozen=True)
class _Declared(Action):
    action = "demo-declared"
    title = "Demo"
    key = Key("ctrl+shift+d", "Demo", "demo the selected task")
    cli = Command("a demo", (Flag("task", "task_id", metavar="TASK"),))
    arguments = {"task_id": API["task"]["task_id"]}  # "reason" has no rule

    def to_json(self) -> dict[str, Any]:
        return {}

    def apply(self, tx: Any) -> Any:
        raise AssertionError


def test_the_check_names_everything_a_bare_action_lacks() -> None:
    found = "\n".join(problems(Registered(_Bare, _plan_demo)))
    for part in ("no title", "no apply of its own", "no replan of its own", "argument rules", "no dialog registered",
                 "neither a Key nor NoKey", "neither a Command nor NoCommand"):
        assert part in found, (part, found)


def test_the_check_names_what_a_declared_but_unregistered_action_lacks() -> None:
    found = "\n".join(problems(Registered(_Declared, _plan_demo)))
    for part in ("argument rules", "no dialog registered", "no key binding", "no help line",
                 "no command palette entry", "no warden subcommand", "do not fill its plan's arguments"):
        assert part in found, (part, found)
    assert "no title" not in found and "no apply" not in found


def test_an_explicit_no_key_and_no_command_must_say_why() -> None:
    @dataclasses.dataclass(frozen=True)
    class Silent(_Declared):
        action = "demo-silent"
        key = NoKey("")
        cli = NoCommand(" ")

    found = "\n".join(problems(Registered(Silent, _plan_demo)))
    assert "neither a Key nor NoKey(why)" in found and "neither a Command nor NoCommand(why)" in found

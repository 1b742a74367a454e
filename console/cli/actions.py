"""Operator action subcommands — one per registered action with a ``Command`` (park, resume,
narrow, rewind, abort, resolve, compensated: store/actions/registry.py), built from its flags —
and check-wakes, the system's own action (the wake conditions nothing else looks at: ``at:``,
``file:``).

Every action is planned first (``ledger.plan_*``), shown, and applied (``ledger.apply``) only when
confirmed: ``--dry-run`` prints the plan and stops; ``--yes`` applies without asking; on a terminal
the preview is shown and ``Apply? [y/N]`` asked (abort asks for the task id instead), default No;
without a terminal and without ``--yes`` the preview goes to stderr and the command exits 1 having
changed nothing. ``--json`` prints the plan (or, once applied, the result) as one JSON object.

A missing ``--reason`` where one is required is a usage error (exit 2); an empty one (``--reason
""``) is refused by the store with one line (exit 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Iterable, TypedDict

from rich.console import Console
from rich.text import Text

from store import Ledger
from store.actions import REGISTRY, Plan, Registered
from store.jsontypes import JsonMapping

from ..glyphs import node_status_label, task_status_label
from ..text import safe_line
from .errors import CliFailure
from .common import Subcommands, UsageError, command, flags, honours, open_ledger, operator_of, out_console, print_json

ACT = ("ledger", "operator", "json", "yes", "dry_run")  # the shared flags every action honours
WAKES = ("ledger", "json")  # check-wakes: nothing to preview or confirm; what it does is audited as "system"

LIST_LIMIT = 20  # node keys shown per line of a text preview before "and N more"


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    """Every registered action's subcommand listed with the actions (store/actions/registry.py, in
    its order), then check-wakes."""
    for r in REGISTRY:
        if r.command is not None and not r.command.listed_after and not r.command.parent:
            add_action(sub, r)

    p = command(sub, "check-wakes", parents=flags(*WAKES),
                help="look at parked tasks' wake conditions now: journal the met ones, auto-resume; "
                     "fail expired work that cannot safely run twice and ask a human (for cron)",
                examples=("warden check-wakes", "*/5 * * * * warden check-wakes --ledger /srv/warden/ledger.db  # crontab"))
    p.add_argument("--task", metavar="T", action="append", help="only this task (repeatable)")
    honours(p, *WAKES)
    p.set_defaults(func=cmd_check_wakes)


def registrar_after(command: str) -> Callable[[Subcommands, list[argparse.ArgumentParser]], None]:
    """A registrar for the actions listed after ``command`` in ``warden --help`` (resolve, after
    handoffs): console/cli/entry.py puts it right after that command's registrar."""

    def register_after(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
        for r in REGISTRY:
            if r.command is not None and r.command.listed_after == command and not r.command.parent:
                add_action(sub, r)

    return register_after


class _ArgumentOptions(TypedDict, total=False):
    """An action flag's ``add_argument`` keywords."""

    help: str | None
    action: str
    metavar: str | None
    nargs: str
    default: object
    required: bool


def add_action(sub: Subcommands, action: Registered) -> argparse.ArgumentParser:
    """The subcommand of a registered action, from its :class:`~store.actions.Command`: its flags,
    the shared flags every action honours, and the plan → preview → confirm → apply flow. (A
    command whose ``parent`` is set is added by that command's registrar, with this.)"""
    spec = action.command
    assert spec is not None, action.name
    name = spec.name or action.name
    p = command(sub, name, parents=flags(*ACT), help=spec.help, examples=spec.examples)
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for f in spec.flags:
        target: argparse._ActionsContainer = p
        if f.one_of:
            target = groups.get(f.one_of) or groups.setdefault(f.one_of, p.add_mutually_exclusive_group(required=True))
        kw: _ArgumentOptions = {"help": f.help}
        if f.switch:
            kw["action"] = "store_true"
        else:
            kw["metavar"] = f.metavar
            if f.repeat:
                kw["action"] = "append"
            if f.several:
                kw["nargs"] = "+"
            if f.default is not None:
                kw["default"] = f.default
        if f.required:
            kw["required"] = True
        if f.help is None:
            del kw["help"]
        target.add_argument(f.name, **kw)
    honours(p, *ACT)
    p.set_defaults(func=lambda args: cmd_action(args, action, name))
    return p


def plan_arguments(args: argparse.Namespace, action: Registered, command: str) -> dict[str, object]:
    """The plan arguments from the parsed flags (each flag fills the argument it names)."""
    spec = action.command
    assert spec is not None
    out: dict[str, object] = {}
    for f in spec.flags:
        value = getattr(args, f.name.lstrip("-").replace("-", "_"))
        if f.parse is not None:
            try:
                value = f.parse(value)
            except ValueError as e:
                raise UsageError(f"warden {command}: {e}") from None
        out[f.to] = value
    return out


def cmd_action(args: argparse.Namespace, action: Registered, command: str) -> int:
    """``warden <action> …``: plan it with the flags, preview, confirm (the task id typed for an
    action that asks for it), apply."""
    arguments = plan_arguments(args, action, command)
    return run_action(args, lambda led: led.plan(action.name, arguments),
                      confirm_task_id=action.params.confirm_task_id)


# ---------------------------------------------------------------------- the common flow
def _interactive() -> bool:
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _ask(prompt: str) -> str:
    try:
        return input(prompt)
    except EOFError:
        return ""


def run_action(args: argparse.Namespace, make_plan: Callable[[Ledger], Plan], *, confirm_task_id: bool = False) -> int:
    with open_ledger(args, read_only=False) as ledger:
        plan = make_plan(ledger)
        if args.dry_run:
            if args.json:
                print_json(plan.to_json())
            else:
                render_plan(plan, out_console(), dry_run=True)
            return 0
        if not args.yes:
            if not _interactive():
                if args.json:
                    print_json(plan.to_json(), err=True)
                else:
                    render_plan(plan, out_console(err=True))
                raise CliFailure("warden: not applied: no terminal to confirm on; add --yes to apply "
                                 "(nothing changed)", "not_confirmed")
            render_plan(plan, out_console())
            if confirm_task_id:
                typed = _ask(f"Type the task id ({plan.task_id}) to {plan.action} it, or press enter to cancel: ")
                ok = typed.strip() == plan.task_id
            else:
                ok = _ask("Apply? [y/N] ").strip().lower() in ("y", "yes")
            if not ok:
                raise CliFailure("warden: not applied (not confirmed); nothing changed", "not_confirmed")
        done = ledger.apply(plan, operator=operator_of(args))
        if args.json:
            print_json(done.to_json())
        else:
            c = out_console()
            c.print(Text(f"applied (action {done.action_id}, revision {done.revision} → {done.revision_after}): ")
                    + Text(safe_line(done.summary())))
            render_differed(done, c)
        return 0


def render_differed(done: Plan, c: Console) -> None:
    """What the applied plan found changed since the preview, one line each (nothing when it was
    applied exactly as previewed)."""
    if not done.differed:
        return
    c.print("  differed from the preview (within what it promised):")
    for note in done.differed.notes:
        c.print(Text("    ") + Text(safe_line(note)), soft_wrap=True)


def _keys(keys: Iterable[str]) -> str:
    listed = list(keys)
    shown = ", ".join(listed[:LIST_LIMIT])
    if len(listed) > LIST_LIMIT:
        shown += f" and {len(listed) - LIST_LIMIT} more"
    return shown


def render_plan(plan: Plan, c: Console, *, dry_run: bool = False) -> None:
    """The text preview. Every agent-written string goes through safe_line into a Text."""
    head = Text.assemble(("DRY RUN — " if dry_run else "", "bold"), (plan.action, "bold"), " ",
                         Text(safe_line(plan.target)))
    if plan.target != plan.task_id:
        head.append(" in task ")
        head.append(Text(safe_line(plan.task_id)))
    head.append(f"  (revision {plan.revision})", style="dim")
    c.print(head)
    if plan.reason:
        c.print(Text("  reason: ") + Text(safe_line(plan.reason)))
    for k, v in plan.params.to_json().items():
        if k in ("until_ts", "preconditions_before", "out_of_scope", "node", "handoff", "wake_conditions") \
                or v in (None, [], {}, False):
            continue
        c.print(Text(f"  {k}: ") + Text(safe_line(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))))
    a, b = plan.task_status
    c.print(Text("  task: ") + Text(task_status_label(a)) + (Text(" → ") + Text(task_status_label(b)) if a != b else ""))
    groups: dict[tuple[str, str], list[str]] = {}
    for key, (x, y) in plan.changes.items():
        groups.setdefault((x, y), []).append(key)
    if not groups:
        c.print("  no node changes")
    for (x, y), ks in groups.items():
        c.print(Text(f"  {node_status_label(x)} → {node_status_label(y)} ({len(ks)}): ") + Text(safe_line(_keys(ks))))
    if plan.kept:
        c.print(Text(f"  kept as they are ({len(plan.kept)}): ") + Text(safe_line(_keys(plan.kept))), style="dim")
    if plan.revoked_leases:
        c.print(Text(f"  leases revoked ({len(plan.revoked_leases)}): ")
                + Text(safe_line(_keys(f"{r['node']} ({r['owner']})" for r in plan.revoked_leases))))
    if plan.handoffs_withdrawn:
        c.print(Text("  handoffs withdrawn: ") + Text(safe_line(", ".join(plan.handoffs_withdrawn))))
    if plan.resolutions_reapplied:
        c.print(Text("  resolutions re-applied on the next claim: ") + Text(safe_line(", ".join(plan.resolutions_reapplied))))
    if plan.compensations:
        c.print(f"  compensation nodes added ({len(plan.compensations)}), run in this order (newest effect first):")
        for i, comp in enumerate(plan.compensations[:LIST_LIMIT], 1):
            c.print(Text(f"    {i}. ") + Text(safe_line(comp["node"])) + Text(" — undo: ")
                    + Text(safe_line(comp.get("compensation") or "")))
        if len(plan.compensations) > LIST_LIMIT:
            c.print(f"    … and {len(plan.compensations) - LIST_LIMIT} more")
    if plan.effects_not_undone:
        c.print("  effects already done that this does NOT undo (newest first):")
        for e in plan.effects_not_undone[:LIST_LIMIT]:
            c.print(Text("    ") + Text(safe_line(f"{e['node']}: {e['effect_key']}"))
                    + Text(" — compensate: ") + Text(safe_line(e.get("compensation") or "(no hint)")))
        if len(plan.effects_not_undone) > LIST_LIMIT:
            c.print(f"    … and {len(plan.effects_not_undone) - LIST_LIMIT} more")
    for w in plan.warnings:
        c.print(Text("  ⚠ ") + Text(safe_line(w)))


# ---------------------------------------------------------------------- check-wakes
def cmd_check_wakes(args: argparse.Namespace) -> int:
    """``warden check-wakes [--task T ...]``: what the console does every 15 s, once, for cron or a
    script (``warden status`` only reads). Every met condition is journalled once (``park.wake``);
    a park with auto-resume is resumed by ``system``. Exit 0 whether or not anything woke."""
    with open_ledger(args, read_only=False) as ledger:
        wanted = list(dict.fromkeys(args.task)) if args.task else None
        for tid in wanted or ():
            ledger.task(tid)  # an unknown task is exit 3, not "nothing woke"
        woken = ledger.check_wakes(wanted)
        for w in woken:
            w["resumed"] = _resumed(ledger, w)
        # expired leases on work that cannot safely run twice: failed, a human asked (store/ledger/unsafe.py)
        expired = ledger.check_expired(wanted, actor="check-wakes")
    if args.json:
        print_json({"woken": woken, "expired": expired})
        return 0
    c = out_console()
    if not woken:
        c.print("no wake condition met")
    for x in expired:
        c.print(Text("failed: task ") + Text(safe_line(x["task_id"])) + Text(" node ") + Text(safe_line(x["node"]))
                + Text(": its worker was lost and it cannot safely run twice (") + Text(safe_line(x["why"] or ""))
                + Text(f"); asking a human: handoff {x['handoff']}"), soft_wrap=True)
    for w in woken:
        what = Text("task ") + Text(safe_line(w["task_id"]))
        if w.get("node"):
            what += Text(" node ") + Text(safe_line(w["node"]))
        after = "resumed" if w["resumed"] else ("auto-resume failed: resume by hand" if w["auto_resume"]
                                                else "resume by hand")
        c.print(Text("woken: ") + what + Text(": ") + Text(safe_line(w["evidence"])) + Text(" (")
                + Text(safe_line(w["condition"])) + Text(f") — {after}"), soft_wrap=True)  # one line per wake
    return 0


def _resumed(ledger: Ledger, wake: JsonMapping) -> bool:
    """Whether the woken park ended (an auto-resume that applied)."""
    if not wake.get("auto_resume"):
        return False
    if wake.get("node"):
        return str(ledger.node(wake["task_id"], wake["node"]).status) != "parked"
    return str(ledger.task(wake["task_id"]).status) != "parked"


__all__ = ["add_action", "cmd_action", "cmd_check_wakes", "plan_arguments", "register", "registrar_after",
           "render_differed", "render_plan", "run_action"]

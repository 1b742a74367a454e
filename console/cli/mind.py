"""The task's mind from a shell:

    warden mind TASK [--json]                         requirements and what serves them, constraints,
                                                      conclusions, rejected paths, plan versions, memories
    warden plans TASK [--json]                        the plan versions: diff, trigger, in-flight handling, who
    warden memory [--pending] [--json]                memories proposed by agents, newest first
    warden memory confirm|reject ID --reason R        a person's decision: an audited operator action
                 [--dry-run] [--yes] [--json] [--operator NAME]

``mind``, ``plans`` and ``memory`` (listing) only read. ``memory confirm|reject`` are the registered
operator actions ``memory-confirm`` / ``memory-reject`` (store/actions/memory.py), added here as
subcommands of ``memory`` (``console.cli.actions.add_action``): planned, previewed, applied only
when confirmed (``--yes``, or ``y`` on a terminal), checked against the memory, audited. Exit codes as everywhere (3: no such task or memory).
Registered by ``console.cli.entry`` through ``register(sub, parents)``.
"""

from __future__ import annotations

import argparse

from store.actions import REGISTRY
from store.mind.shapes import memories_json, mind_json, plans_json

from ..mind_view import memories_text, mind_text, plans_text
from .actions import add_action
from .common import CliParser, Subcommands, command, flags, honours, open_ledger, out_console, print_json

READ = ("ledger", "json")
TASK_HELP = "the task's id (warden status lists them)"


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = command(sub, "mind", parents=flags(*READ),
                help="a task's requirements, conclusions, rejected paths, plan versions, memories",
                examples=("warden mind nightly", "warden mind nightly --json"))
    p.add_argument("task", metavar="TASK", help=TASK_HELP)
    honours(p, *READ)
    p.set_defaults(func=cmd_mind)

    p = command(sub, "plans", parents=flags(*READ), help="a task's plan versions (diff, trigger, in flight, who)",
                examples=("warden plans nightly",))
    p.add_argument("task", metavar="TASK", help=TASK_HELP)
    honours(p, *READ)
    p.set_defaults(func=cmd_plans)

    p = command(sub, "memory", parents=flags(*READ),
                help="memories agents proposed; `memory confirm|reject ID --reason R` decides one",
                examples=("warden memory --pending", "warden memory confirm 3 --reason 'checked against the runbook'"))
    p.add_argument("--pending", action="store_true", help="only the memories waiting for a person")
    honours(p, *READ)
    p.set_defaults(func=cmd_memory)
    decide = p.add_subparsers(dest="decision", metavar="confirm|reject", parser_class=CliParser)
    for r in REGISTRY:  # memory-confirm, memory-reject: registered actions (store/actions/memory.py)
        if r.command is not None and r.command.parent == "memory":
            add_action(decide, r)


def cmd_mind(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
        m = ledger.mind(args.task)
        task = ledger.task(args.task)
        now = ledger.now()
    if args.json:
        print_json(mind_json(m, task, now))
        return 0
    out_console().print(mind_text(m, now), end="", soft_wrap=True)
    return 0


def cmd_plans(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
        plans = ledger.plans(args.task)
        now = ledger.now()
    if args.json:
        print_json(plans_json(args.task, plans))
        return 0
    out_console().print(plans_text(args.task, plans, now), end="", soft_wrap=True)
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    """``warden memory [--pending]``: the memories, newest first (a decision is its own subcommand)."""
    with open_ledger(args, read_only=True) as ledger:
        found = ledger.memories(status="pending" if args.pending else None)
        now = ledger.now()
    if args.json:
        print_json(memories_json(found))
    else:
        out_console().print(memories_text(found, now), end="", soft_wrap=True)
    return 0


__all__ = ["cmd_memory", "cmd_mind", "cmd_plans", "register"]

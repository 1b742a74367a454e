"""The task's mind from a shell (issue 27):

    warden mind TASK [--json]                         requirements and what serves them, constraints,
                                                      conclusions, rejected paths, plan versions, memories
    warden plans TASK [--json]                        the plan versions: diff, trigger, in-flight handling, who
    warden memory [--pending] [--json]                memories proposed by agents, newest first
    warden memory confirm|reject ID --reason R        a person's decision: an audited operator action
                 [--dry-run] [--yes] [--json] [--operator NAME]

``mind``, ``plans`` and ``memory`` (listing) only read. ``memory confirm|reject`` is an operator
action like ``rewind``: planned, previewed, applied only when confirmed (``--yes``, or ``y`` on a
terminal), revision-checked, audited. Exit codes as everywhere (3: no such task or memory).
Registered by ``console.cli.entry`` through ``register(sub, parents)``.
"""

from __future__ import annotations

import argparse
from typing import Any

from store.mind.shapes import memories_json, mind_json, plans_json

from ..mind_view import memories_text, mind_text, plans_text
from .actions import ACT, run_action
from .common import UsageError, flags, honours, open_ledger, out_console, print_json

READ = ("ledger", "json")
DECISIONS = ("confirm", "reject")


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("mind", parents=flags(*READ),
                       help="a task's requirements, conclusions, rejected paths, plan versions, memories")
    p.add_argument("task", metavar="TASK")
    honours(p, *READ)
    p.set_defaults(func=cmd_mind)

    p = sub.add_parser("plans", parents=flags(*READ), help="a task's plan versions (diff, trigger, in flight, who)")
    p.add_argument("task", metavar="TASK")
    honours(p, *READ)
    p.set_defaults(func=cmd_plans)

    p = sub.add_parser("memory", parents=flags(*ACT),
                       help="memories agents proposed; `memory confirm|reject ID --reason R` decides one")
    p.add_argument("decision", nargs="?", choices=DECISIONS, metavar="confirm|reject",
                   help="decide a memory (an audited operator action)")
    p.add_argument("memory", nargs="?", metavar="ID", help="the memory to decide")
    p.add_argument("--pending", action="store_true", help="only the memories waiting for a person")
    p.add_argument("--reason", metavar="R", help="why (required to decide; recorded and shown)")
    honours(p, *ACT)
    p.set_defaults(func=cmd_memory)


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
    if args.decision is None:
        wrong = [flag for flag, given in (("--reason", args.reason is not None), ("--yes", args.yes),
                                          ("--dry-run", args.dry_run)) if given]
        if args.memory is not None:
            raise UsageError("warden memory: give confirm or reject before the memory id")
        if wrong:
            raise UsageError(f"warden memory: {', '.join(wrong)} applies only to `warden memory confirm|reject ID`")
        with open_ledger(args, read_only=True) as ledger:
            found = ledger.memories(status="pending" if args.pending else None)
            now = ledger.now()
        if args.json:
            print_json(memories_json(found))
        else:
            out_console().print(memories_text(found, now), end="", soft_wrap=True)
        return 0
    if args.pending:
        raise UsageError("warden memory: --pending applies only to the list")
    if args.memory is None:
        raise UsageError(f"warden memory {args.decision}: give the memory id (warden memory --pending lists them)")
    if args.reason is None:
        raise UsageError(f"warden memory {args.decision}: --reason is required (say why; it is recorded)")
    return run_action(args, lambda led: led.plan_memory(args.memory, decision=args.decision, reason=args.reason))


__all__ = ["cmd_memory", "cmd_mind", "cmd_plans", "register"]

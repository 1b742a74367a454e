"""Operator action subcommands: park, resume, narrow, rewind, abort, handoffs, resolve.

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
from typing import Any, Callable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from store.clock import iso

from .glyphs import node_status_label, task_status_label
from .text import safe_line

LIST_LIMIT = 20  # node keys shown per line of a text preview before "and N more"


class Declined(Exception):
    """The operator did not confirm (or could not be asked)."""


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("park", parents=parents, help="park a task (or one node) until an outside signal")
    p.add_argument("task", metavar="TASK")
    p.add_argument("--node", metavar="KEY", help="park only this node")
    p.add_argument("--reason", required=True, metavar="R", help="why (required; recorded and shown)")
    p.add_argument("--until", metavar="T", help="when to look again: 15m, 2h, 1d or an ISO time")
    p.add_argument("--wake-on", metavar="C", help="the outside signal being waited for")
    p.add_argument("--now", action="store_true", help="revoke running leases now (running nodes → parked)")
    p.set_defaults(func=cmd_park)

    p = sub.add_parser("resume", parents=parents, help="undo a park")
    p.add_argument("task", metavar="TASK")
    p.add_argument("--node", metavar="KEY", help="resume only this node")
    p.add_argument("--reason", metavar="R", default="", help="why (optional)")
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("narrow", parents=parents, help="change a task's preconditions or exclude nodes")
    p.add_argument("task", metavar="TASK")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--set", action="append", metavar="K=V", dest="assign",
                   help="precondition K takes value V (V parsed as JSON, else a string); repeatable")
    g.add_argument("--exclude", nargs="+", metavar="KEY", help="abandon these nodes")
    p.add_argument("--reason", required=True, metavar="R", help="why (required)")
    p.set_defaults(func=cmd_narrow)

    p = sub.add_parser("rewind", parents=parents, help="a node and everything downstream → pending")
    p.add_argument("task", metavar="TASK")
    p.add_argument("key", metavar="KEY")
    p.add_argument("--reason", required=True, metavar="R", help="why (required; fed back to the agent)")
    p.set_defaults(func=cmd_rewind)

    p = sub.add_parser("abort", parents=parents, help="abort a task (asks for the task id)")
    p.add_argument("task", metavar="TASK")
    p.add_argument("--reason", required=True, metavar="R", help="why (required)")
    p.set_defaults(func=cmd_abort)

    p = sub.add_parser("handoffs", parents=parents, help="open needs_human handoffs")
    p.add_argument("--task", metavar="T", help="only this task")
    p.add_argument("--all", action="store_true", help="every handoff, not only the open ones")
    p.set_defaults(func=cmd_handoffs)

    p = sub.add_parser("resolve", parents=parents, help="answer a handoff with one of its options")
    p.add_argument("handoff", metavar="HANDOFF")
    p.add_argument("--option", metavar="ID", help="one of the handoff's option ids")
    p.add_argument("--answer", metavar="TEXT", help="free text for the agent")
    p.set_defaults(func=cmd_resolve)


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


def _operator(args: argparse.Namespace) -> str:
    from .cli import default_operator

    return (args.operator or "").strip() or default_operator()


def run_action(args: argparse.Namespace, make_plan: Callable[[Any], Any], *, confirm_task_id: bool = False) -> int:
    from .cli import open_ledger, print_json

    with open_ledger(args) as ledger:
        plan = make_plan(ledger)
        if args.dry_run:
            if args.json:
                print_json(plan.to_json())
            else:
                render_plan(plan, Console(highlight=False, soft_wrap=False), dry_run=True)
            return 0
        if not args.yes:
            if not _interactive():
                err = Console(stderr=True, highlight=False, soft_wrap=False)
                if args.json:
                    sys.stderr.write(json.dumps(plan.to_json(), ensure_ascii=False) + "\n")
                else:
                    render_plan(plan, err)
                print("warden: not applied: no terminal to confirm on; add --yes to apply (nothing changed)",
                      file=sys.stderr)
                return 1
            out = Console(highlight=False, soft_wrap=False)
            render_plan(plan, out)
            if confirm_task_id:
                typed = _ask(f"Type the task id ({plan.task_id}) to {plan.action} it, or press enter to cancel: ")
                ok = typed.strip() == plan.task_id
            else:
                ok = _ask("Apply? [y/N] ").strip().lower() in ("y", "yes")
            if not ok:
                print("warden: not applied (not confirmed); nothing changed", file=sys.stderr)
                return 1
        done = ledger.apply(plan, operator=_operator(args))
        if args.json:
            print_json(done.to_json())
        else:
            Console(highlight=False, soft_wrap=False).print(
                Text(f"applied (action {done.action_id}, revision {done.revision} → {done.revision_after}): ")
                + Text(safe_line(done.summary())))
        return 0


def _keys(keys: Any) -> str:
    keys = list(keys)
    shown = ", ".join(keys[:LIST_LIMIT])
    if len(keys) > LIST_LIMIT:
        shown += f" and {len(keys) - LIST_LIMIT} more"
    return shown


def render_plan(plan: Any, c: Console, *, dry_run: bool = False) -> None:
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
    for k, v in plan.params.items():
        if k in ("until_ts", "preconditions_before", "out_of_scope", "node", "handoff") or v in (None, [], {}, False):
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
    if plan.effects_not_undone:
        c.print("  effects already done that this does NOT undo (newest first):")
        for e in plan.effects_not_undone[:LIST_LIMIT]:
            c.print(Text("    ") + Text(safe_line(f"{e['node']}: {e['effect_key']}"))
                    + Text(" — compensate: ") + Text(safe_line(e.get("compensation") or "(no hint)")))
        if len(plan.effects_not_undone) > LIST_LIMIT:
            c.print(f"    … and {len(plan.effects_not_undone) - LIST_LIMIT} more")
    for w in plan.warnings:
        c.print(Text("  ⚠ ") + Text(safe_line(w)))


# ---------------------------------------------------------------------- subcommands
def cmd_park(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_park(args.task, node=args.node, reason=args.reason, until=args.until,
                                                      wake_on=args.wake_on, now=args.now))


def cmd_resume(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_resume(args.task, node=args.node, reason=args.reason))


def parse_assignment(text: str) -> tuple[str, Any]:
    from .cli import UsageError

    if "=" not in text:
        raise UsageError(f"warden narrow: --set needs K=V, got {text!r}")
    k, v = text.split("=", 1)
    k = k.strip()
    if not k:
        raise UsageError(f"warden narrow: --set needs a name before '=', got {text!r}")
    try:
        value = json.loads(v)
    except ValueError:
        value = v
    return k, value


def cmd_narrow(args: argparse.Namespace) -> int:
    assignments = dict(parse_assignment(a) for a in (args.assign or []))
    return run_action(args, lambda led: led.plan_narrow(args.task, set=assignments, exclude=args.exclude or (),
                                                        reason=args.reason))


def cmd_rewind(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_rewind(args.task, args.key, reason=args.reason))


def cmd_abort(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_abort(args.task, reason=args.reason), confirm_task_id=True)


def cmd_resolve(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_resolve(args.handoff, option=args.option, answer=args.answer))


def handoff_json(h: Any, now: float) -> dict[str, Any]:
    return {
        "id": h.id, "task_id": h.task_id, "node": h.node, "kind": h.kind, "question": h.question,
        "options": [dict(o) for o in h.options], "recommendation": h.recommendation, "status": h.status,
        "age_s": round(max(0.0, now - h.opened_at), 3),
        "opened_at": iso(h.opened_at), "opened_by": h.opened_by, "context": dict(h.context),
        "resolution": ({"option": h.resolution_option, "answer": h.resolution_answer, "by": h.resolved_by,
                        "at": iso(h.resolved_at)} if h.status in ("resolved", "withdrawn") else None),
    }


def cmd_handoffs(args: argparse.Namespace) -> int:
    from .cli import open_ledger, print_json
    from .glyphs import age_label

    with open_ledger(args) as ledger:
        if args.task is not None:
            ledger.task(args.task)  # NotFound for a typo
        rows = ledger.handoffs(status=None if args.all else "open", task_id=args.task)
        now = ledger.now()
    data = {"handoffs": [handoff_json(h, now) for h in rows]}
    if args.json:
        print_json(data)
        return 0
    c = Console(highlight=False, soft_wrap=False)
    if not rows:
        c.print("no open handoffs" if not args.all else "no handoffs")
        return 0
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("ID", "TASK", "NODE", "KIND", "AGE", "STATUS", "QUESTION", "OPTIONS"):
        t.add_column(col, no_wrap=col not in ("QUESTION", "OPTIONS"), overflow="fold")
    for h in rows:
        opts = ", ".join(("*" if o.get("id") == h.recommendation else "") + str(o.get("id")) for o in h.options)
        t.add_row(h.id, Text(safe_line(h.task_id)), Text(safe_line(h.node)), Text(safe_line(h.kind)),
                  age_label(now - h.opened_at), h.status, Text(safe_line(h.question)), Text(safe_line(opts)))
    c.print(t)
    c.print(Text("resolve with: warden resolve ID --option OPTION [--answer TEXT]   (* = recommended)", style="dim"))
    return 0

"""Operator action subcommands: park, resume, narrow, rewind, abort, resolve, compensated; and
check-wakes, the system's own action (the wake conditions nothing else looks at: ``at:``, ``file:``).

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
from rich.text import Text

from ..glyphs import node_status_label, task_status_label
from ..text import safe_line
from .errors import CliFailure
from .common import UsageError, flags, honours, open_ledger, operator_of, out_console, print_json

ACT = ("ledger", "operator", "json", "yes", "dry_run")  # the shared flags every action honours
WAKES = ("ledger", "json")  # check-wakes: nothing to preview or confirm; what it does is audited as "system"

LIST_LIMIT = 20  # node keys shown per line of a text preview before "and N more"


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("park", parents=flags(*ACT), help="park a task (or one node) until an outside signal")
    p.add_argument("task", metavar="TASK")
    p.add_argument("--node", metavar="KEY", help="park only this node")
    p.add_argument("--reason", required=True, metavar="R", help="why (required; recorded and shown)")
    p.add_argument("--until", metavar="T", help="when to look again: 15m, 2h, 1d or an ISO time")
    p.add_argument("--wake-on", metavar="C", action="append",
                   help="what wakes it: handoff:<id>, node:<key>, effect:<key>, file:<path> or at:<time> "
                        "(repeatable: any one wakes it)")
    p.add_argument("--auto-resume", action="store_true", help="resume on its own when a wake condition is met")
    p.add_argument("--now", action="store_true", help="revoke running leases now (running nodes → parked)")
    honours(p, *ACT)
    p.set_defaults(func=cmd_park)

    p = sub.add_parser("resume", parents=flags(*ACT), help="undo a park")
    p.add_argument("task", metavar="TASK")
    p.add_argument("--node", metavar="KEY", help="resume only this node")
    p.add_argument("--reason", metavar="R", default="", help="why (optional)")
    honours(p, *ACT)
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("narrow", parents=flags(*ACT), help="change a task's preconditions or exclude nodes")
    p.add_argument("task", metavar="TASK")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--set", action="append", metavar="K=V", dest="assign",
                   help="precondition K takes value V (V parsed as JSON, else a string); repeatable")
    g.add_argument("--exclude", nargs="+", metavar="KEY", help="abandon these nodes")
    p.add_argument("--reason", required=True, metavar="R", help="why (required)")
    honours(p, *ACT)
    p.set_defaults(func=cmd_narrow)

    p = sub.add_parser("rewind", parents=flags(*ACT), help="a node and everything downstream → pending")
    p.add_argument("task", metavar="TASK")
    p.add_argument("key", metavar="KEY")
    p.add_argument("--reason", required=True, metavar="R", help="why (required; fed back to the agent)")
    honours(p, *ACT)
    p.set_defaults(func=cmd_rewind)

    p = sub.add_parser("abort", parents=flags(*ACT), help="abort a task (asks for the task id)")
    p.add_argument("task", metavar="TASK")
    p.add_argument("--reason", required=True, metavar="R", help="why (required)")
    honours(p, *ACT)
    p.set_defaults(func=cmd_abort)

    p = sub.add_parser("compensated", parents=flags(*ACT),
                       help="record that a confirmed effect was undone by hand (its compensation node is dropped)")
    p.add_argument("task", metavar="TASK")
    p.add_argument("effect", metavar="EFFECT_KEY")
    p.add_argument("--reason", required=True, metavar="R", help="what was done, by whom (required; recorded)")
    honours(p, *ACT)
    p.set_defaults(func=cmd_compensated)

    p = sub.add_parser("check-wakes", parents=flags(*WAKES),
                       help="look at parked tasks' wake conditions now: journal the met ones, auto-resume; "
                            "fail expired work that cannot safely run twice and ask a human (for cron)")
    p.add_argument("--task", metavar="T", action="append", help="only this task (repeatable)")
    honours(p, *WAKES)
    p.set_defaults(func=cmd_check_wakes)


def register_resolve(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("resolve", parents=flags(*ACT), help="answer a handoff with one of its options")
    p.add_argument("handoff", metavar="HANDOFF")
    p.add_argument("--option", metavar="ID", help="one of the handoff's option ids")
    p.add_argument("--answer", metavar="TEXT", help="free text for the agent")
    honours(p, *ACT)
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


def run_action(args: argparse.Namespace, make_plan: Callable[[Any], Any], *, confirm_task_id: bool = False) -> int:
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
            out_console().print(
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


# ---------------------------------------------------------------------- subcommands
def cmd_park(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_park(args.task, node=args.node, reason=args.reason, until=args.until,
                                                      wake_on=args.wake_on, now=args.now,
                                                      auto_resume=args.auto_resume))


def cmd_resume(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_resume(args.task, node=args.node, reason=args.reason))


def parse_assignment(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise UsageError(f"warden narrow: --set needs K=V, got {text!r}")
    k, v = text.split("=", 1)
    k = k.strip()
    if not k:
        raise UsageError(f"warden narrow: --set needs a name before '=', got {text!r}")
    try:
        value = json.loads(v)
    except ValueError:
        value = v  # not JSON: the text itself
    except RecursionError:
        raise UsageError(f"warden narrow: --set {k}: the JSON value is nested too deeply") from None
    return k, value


def cmd_narrow(args: argparse.Namespace) -> int:
    assignments = dict(parse_assignment(a) for a in (args.assign or []))
    return run_action(args, lambda led: led.plan_narrow(args.task, set=assignments, exclude=args.exclude or (),
                                                        reason=args.reason))


def cmd_rewind(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_rewind(args.task, args.key, reason=args.reason))


def cmd_abort(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_abort(args.task, reason=args.reason), confirm_task_id=True)


def cmd_compensated(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_compensated(args.task, args.effect, reason=args.reason))


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


def _resumed(ledger: Any, wake: dict[str, Any]) -> bool:
    """Whether the woken park ended (an auto-resume that applied)."""
    if not wake.get("auto_resume"):
        return False
    if wake.get("node"):
        return str(ledger.node(wake["task_id"], wake["node"]).status) != "parked"
    return str(ledger.task(wake["task_id"]).status) != "parked"


def cmd_resolve(args: argparse.Namespace) -> int:
    return run_action(args, lambda led: led.plan_resolve(args.handoff, option=args.option, answer=args.answer))


__all__ = ["cmd_abort", "cmd_check_wakes", "cmd_compensated", "cmd_narrow", "cmd_park", "cmd_resolve", "cmd_resume", "cmd_rewind", "parse_assignment",
           "register", "register_resolve", "render_plan", "run_action"]

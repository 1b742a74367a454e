"""``warden report TASK [--json]``: what a task leaves behind — the best result so far, what is
unfinished, the budget per gate, open handoffs, effects never confirmed (and, after an abort, the
effects still to compensate). A pure read (the ledger is opened read-only), at any time; the one
thing a task at the stop gate still delivers. The JSON is ``store.reading.task_report.task_report`` as is;
the text is ``console.report_view.report_text``, the same the console's report screen shows.
"""

from __future__ import annotations

import argparse

from store.reading.task_report import task_report

from ..report_view import report_text
from .common import Subcommands, command, flags, honours, open_ledger, out_console, print_json

READ = ("ledger", "json")  # the shared flags it honours (as every read: console/cli/inspection.py)


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = command(sub, "report", parents=flags(*READ),
                help="what a task leaves behind: best result, unfinished nodes, budget, handoffs, effects",
                examples=("warden report nightly", "warden report nightly --json | jq .best_artifact"))
    p.add_argument("task", metavar="TASK", help="the task's id (warden status lists them)")
    honours(p, *READ)
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
        data = task_report(ledger, args.task)
    if args.json:
        print_json(data)
    else:
        out_console().print(report_text(data), end="")
    return 0


__all__ = ["cmd_report", "register"]

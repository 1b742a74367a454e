"""The ``warden`` command: the parser, the dispatch, and the two commands that open a UI.

Exit status: 0 done, 1 refused or failed (one clear line on stderr, no traceback), 2 usage error.

Subcommands live by kind, each module exposing ``register(sub, parents)``:

- ``console``, ``demo`` — here: they start the console (``console.app``) or the demo
  (``console.demo``);
- ``console.cli.inspection`` — status, graph, events, handoffs, export, migrate (reads);
- ``console.cli.actions`` — park, resume, narrow, rewind, abort, compensated, resolve (plan, confirm,
  apply);
- ``console.cli.recovery`` — recover, verify-record;
- ``console.cli.report`` — report (what a task leaves behind);
- ``console.cli.serve`` — serve (the console in a browser; the server is ``console.serve``).

A new subcommand is a module beside these with its own ``register`` and one line
in :data:`REGISTRARS`. The CLI is the top of the console: nothing in ``console`` imports it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Sequence

from store import WardenError

from . import actions, inspection, recovery, report, serve
from .common import CliParser, UsageError, ledger_target, operator_of, runs_dir

Registrar = Callable[[Any, list[argparse.ArgumentParser]], None]

# Order is the order of ``warden --help``.
REGISTRARS: tuple[Registrar, ...] = (
    inspection.register,         # status, graph, events, export, migrate
    report.register,             # report
    actions.register,            # park, resume, narrow, rewind, abort, compensated
    inspection.register_handoffs,
    actions.register_resolve,
    recovery.register,           # recover, verify-record
    serve.register,              # serve (the console in a browser)
)


def common_parent() -> argparse.ArgumentParser:
    p = CliParser(add_help=False)
    g = p.add_argument_group("common options")
    g.add_argument("--ledger", metavar="PATH|URL", help="ledger path or URL (default $WARDEN_LEDGER, else ./ledger.db)")
    g.add_argument("--runs", metavar="DIR", help="run directories (default $WARDEN_RUNS, else ./runs)")
    g.add_argument("--project", metavar="DIR", help="project dir for recovery (default: parent of --runs)")
    g.add_argument("--records", metavar="DIR", help="recovery records (default: <project>/recovery-records)")
    g.add_argument("--operator", metavar="NAME", help="who acts (default $USER@host, plus the SSH client)")
    g.add_argument("--json", action="store_true", help="print one JSON object (or JSON Lines for events)")
    g.add_argument("--yes", action="store_true", help="apply without asking")
    g.add_argument("--dry-run", action="store_true", help="only print the preview")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = CliParser(prog="warden", description="Warden: an operator console for long-running AI agents.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CliParser)
    parents = [common_parent()]

    p = sub.add_parser("console", parents=parents, help="the console (the default)")
    p.add_argument("--read-only", action="store_true", help="open the ledger read-only; actions are hidden")
    p.set_defaults(func=cmd_console)

    p = sub.add_parser("demo", parents=parents, help="simulated agents on a throw-away ledger, and the console")
    p.add_argument("--dir", metavar="DIR", help="where to put the demo ledger and runs (default: a temp dir)")
    p.add_argument("--speed", type=float, default=1.0, metavar="X", help="time scale (2 = twice as fast)")
    p.add_argument("--seed", type=int, default=7, metavar="N", help="random seed (repeatable runs)")
    p.add_argument("--no-console", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_demo)

    for register in REGISTRARS:
        register(sub, parents)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["console", *argv]
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except UsageError as e:
        print(str(e), file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return int(e.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(str(e), file=sys.stderr)
        return 2
    except WardenError as e:
        print(f"warden: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("warden: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as e:  # no tracebacks for the operator
        if os.environ.get("WARDEN_DEBUG"):
            raise
        print(f"warden: internal error: {type(e).__name__}: {' '.join(str(e).split())} "
              "(set WARDEN_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


# ---------------------------------------------------------------------- the UIs
def cmd_console(args: argparse.Namespace) -> int:
    from ..app import run_console  # imported when used: the other subcommands never load Textual

    return run_console(
        ledger=ledger_target(args), runs=runs_dir(args), read_only=args.read_only,
        operator=operator_of(args), project=args.project, records=args.records,
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    return run_demo(directory=args.dir, speed=args.speed, seed=args.seed, operator=operator_of(args),
                    with_console=not args.no_console)


__all__ = ["REGISTRARS", "build_parser", "common_parent", "main"]

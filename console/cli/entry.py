"""The ``warden`` command: the parser, the dispatch, and the two commands that open a UI.

Conventions for scripts (docs/console.md, "The warden command in scripts"):

- ``warden --version``; ``warden`` alone is the console.
- Shared flags (``--ledger``, ``--runs``, ``--project``, ``--records``, ``--operator``, ``--json``,
  ``--yes``, ``--dry-run``, ``--read-only``) go before or after the subcommand; each subcommand
  takes only the ones it honours (``warden status --yes`` is a usage error, not ignored).
- Exit status: 0 ok, 1 refused or failed, 2 usage, 3 not found, 4 ledger unavailable (130 on
  Ctrl+C); every failure is one clear line on stderr (escaped), no traceback; with ``--json`` also
  one object ``{"error": {"code", "message"}}`` on stdout (``console.cli.errors``).

Subcommands live by kind, each module exposing ``register(sub, parents)``:

- ``console``, ``demo`` — here: they start the console (``console.app``) or the demo
  (``console.demo``);
- ``console.cli.inspection`` — status, graph, events, handoffs, export, migrate (reads);
- ``console.cli.actions`` — one subcommand per registered action (park, resume, narrow, rewind,
  abort, compensated, resolve: plan, confirm, apply; store/actions/registry.py); check-wakes (the
  system's look at wake conditions, for cron);
- ``console.cli.recovery`` — recover, verify-record;
- ``console.cli.report`` — report (what a task leaves behind);
- ``console.cli.mind`` — mind, plans, memory (the task's mind; ``memory confirm|reject`` is an action);
- ``console.cli.serve`` — serve (the console in a browser; the server is ``console.serve``).

A new subcommand is a module beside these with its own ``register`` and one line in
:data:`REGISTRARS`; it takes its shared flags with ``parents=flags(...)`` and records them with
``honours(parser, ...)``. The CLI is the top of the console: nothing in ``console`` imports it.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import os
import sys
from typing import Callable, Sequence

from store import WardenError
from store.storage.db import masked

from . import actions, agents, inspection, meta, mind, notify, otel, quotas, recovery, report, serve
from .common import (GLOBALS, CliParser, Subcommands, alert_hook, command, connect_timeout, fill_globals, flags, honours,
                     ledger_target, operator_of, runs_dir)
from .errors import CliFailure, UsageError
from .errors import report as report_failure
from ..glyphs import ascii_terminal, use_ascii
from ..ledgers import ContextError, Named, resolve
from ..text import safe_line

Registrar = Callable[[Subcommands, list[argparse.ArgumentParser]], None]

# Order is the order of ``warden --help``.
REGISTRARS: tuple[Registrar, ...] = (
    inspection.register,         # status, graph, events, export, migrate
    report.register,             # report
    actions.register,            # park, resume, narrow, rewind, abort, compensated, check-wakes
    inspection.register_handoffs,
    actions.registrar_after("handoffs"),  # resolve
    mind.register,               # mind, plans, memory (the task's mind)
    quotas.register,             # quotas, quota (shared external quotas)
    recovery.register,           # recover, verify-record
    serve.register,              # serve (the console in a browser)
    notify.register,             # notify (push notifications through apprise)
    otel.register,               # otel export (spans to an OpenTelemetry collector)
    agents.register,             # run, mcp, hook (the agent side: integrations of agents people run)
)


def common_parent() -> argparse.ArgumentParser:
    """Every shared flag (for a registrar that does not say which it honours)."""
    return flags(*GLOBALS)[0]


def build_parser() -> CliParser:
    parser = CliParser(prog="warden", description="Warden: an operator console for long-running AI agents.",
                       parents=flags(*GLOBALS, top=True))
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CliParser)
    parents = [common_parent()]

    p = command(sub, "console", parents=flags("runs", "connect_timeout", "project", "records", "operator", "read_only",
                                              "no_bell", "on_alert"),
                help="the console (the default)",
                description="The console: every task, its graph, signals, handoffs and the operator's actions "
                            "(warden alone opens it).",
                examples=("warden", "warden console --ledger postgresql://warden@db/warden --read-only",
                          "warden console --ledger api.db --ledger postgresql://warden@db/batch",
                          "warden --on-alert 'notify-send warden'"))
    p.add_argument("--ledger", dest="ledgers", action="append", metavar="PATH|URL|NAME",
                   help="a ledger path or URL, or a name from the contexts file; repeat it to watch several ledgers "
                        "in one list (default $WARDEN_LEDGER, else the contexts file's open list, else ./ledger.db)")
    honours(p, "ledger", "runs", "project", "records", "operator", "read_only", "no_bell", "on_alert")
    p.set_defaults(func=cmd_console)

    p = command(sub, "demo", parents=flags("operator", "no_bell", "on_alert"),
                help="simulated agents on a throw-away ledger, and the console",
                examples=("warden demo", "warden demo --speed 4 --dir /tmp/warden-demo"))
    honours(p, "operator", "no_bell", "on_alert")
    p.add_argument("--dir", metavar="DIR", help="where to put the demo ledger and runs (default: a temp dir)")
    p.add_argument("--speed", type=_positive, default=1.0, metavar="X", help="time scale (2 = twice as fast)")
    p.add_argument("--seed", type=int, default=7, metavar="N", help="random seed (repeatable runs)")
    p.add_argument("--no-console", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_demo)

    for register in REGISTRARS:
        register(sub, parents)
    meta.register(sub, parser)  # help, completion: last, they read the whole parser
    parser.subcommand_names = frozenset(sub.choices)
    parser.honoured = {name: sp.get_default("_honours") for name, sp in sub.choices.items()}
    return parser


def _positive(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (0 < x < 1e6):
        raise argparse.ArgumentTypeError(f"must be above 0 and below 1000000: {text!r}")
    return x


def version() -> str:
    try:
        return importlib.metadata.version("warden")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _wants_json(argv: Sequence[str]) -> bool:
    head = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in head


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``: no subcommand means the console; shared flags given before the subcommand
    must be ones it honours."""
    parser = build_parser()
    names = parser.subcommand_names
    head = argv[: argv.index("--")] if "--" in argv else argv
    word = _first_word(head)  # not a flag, not a flag's value: the command
    if word is not None and word not in names:
        raise UsageError(f"warden: unknown command '{safe_line(word, limit=80)}'{_did_you_mean(word, names)}")
    # a command's name anywhere (even as a flag's value: --operator status) is no console
    if not any(a in names for a in head) and not {"--version", "-h", "--help"} & set(head):
        argv = ["console", *argv]
    try:
        args, extra = parser.parse_known_args(argv)
    except UsageError as refused:
        try:
            _misplaced_shared_flag(parser, argv)
        except UsageError as misplaced:  # both named: what is missing, and the flag that does not apply
            raise UsageError(f"{refused}; {str(misplaced).split(': ', 1)[-1]}") from None
        raise
    if getattr(args, "version", False) and not extra:
        return args
    if extra:
        where = f"warden {args.command}" if getattr(args, "command", None) else "warden"
        shared = [a.split("=", 1)[0] for a in extra if a.split("=", 1)[0] in {f for f, _, _ in GLOBALS.values()}]
        if shared and getattr(args, "command", None):
            raise UsageError(f"{where}: {', '.join(dict.fromkeys(shared))} does not apply to {args.command}")
        raise UsageError(f"{where}: unrecognized arguments: {safe_line(' '.join(extra), limit=200)}")
    if not getattr(args, "func", None):
        raise UsageError("warden: give a subcommand (warden --help lists them)")
    return fill_globals(args)


def _first_word(head: list[str]) -> str | None:
    """The first argument before any subcommand that is neither a flag nor a flag's value."""
    valued = {flag for flag, kwargs, _ in GLOBALS.values() if kwargs.get("action") != "store_true"}
    skip = False
    for a in head:
        if skip:
            skip = False
        elif a.startswith("-") and a != "-":
            skip = a in valued
        else:
            return a
    return None


def _did_you_mean(word: str, names: frozenset[str]) -> str:
    close = difflib.get_close_matches(word, sorted(names), n=1, cutoff=0.7)
    return f"; did you mean '{close[0]}'?" if close else " (warden help lists the commands)"


def _misplaced_shared_flag(parser: CliParser, argv: list[str]) -> None:
    """Raise "FLAG does not apply to COMMAND" for a shared flag the subcommand does not take."""
    i = _first_command(argv, parser.subcommand_names)
    if i >= len(argv) or argv[i] == "--":
        return
    command, allowed = argv[i], _nested_honours(parser, argv[i + 1:]).get(argv[i], parser.honoured.get(argv[i]))
    if allowed is None:
        return
    flags_of = {flag: name for name, (flag, _, _) in GLOBALS.items()}
    head = argv[: argv.index("--")] if "--" in argv else argv
    wrong = [a.split("=", 1)[0] for a in head
             if a.split("=", 1)[0] in flags_of and flags_of[a.split("=", 1)[0]] not in allowed]
    if wrong:
        raise UsageError(f"warden {command}: {', '.join(dict.fromkeys(wrong))} does not apply to {command}")


def _nested_honours(parser: CliParser, rest: list[str]) -> dict[str, frozenset[str] | None]:
    """The shared flags a command's own subcommand takes (``memory confirm`` takes ``--yes``,
    ``memory`` does not), when ``rest`` names one: {command: its flags}."""
    out: dict[str, frozenset[str] | None] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                for inner in sp._actions:
                    if isinstance(inner, argparse._SubParsersAction):
                        word = next((a for a in rest if a in inner.choices), None)
                        if word is not None:
                            out[name] = inner.choices[word].get_default("_honours")
    return out


def _first_command(argv: list[str], names: frozenset[str]) -> int:
    for i, a in enumerate(argv):
        if a == "--" or a in names:
            return i
    return len(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(argv)
    try:
        args = parse(argv)
    except UsageError as e:
        return report_failure(e, as_json=as_json)
    except SystemExit as e:  # --help
        return int(e.code or 0)
    if args.version:
        print(f"warden {version()}")
        return 0
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        return 1
    except (Exception, KeyboardInterrupt) as e:  # no tracebacks for the operator
        if os.environ.get("WARDEN_DEBUG") and not isinstance(e, (WardenError, UsageError, CliFailure,
                                                                  KeyboardInterrupt)):
            raise
        return report_failure(e, as_json=bool(args.json), ledger=masked(ledger_target(args)))


# ---------------------------------------------------------------------- the UIs
def cmd_console(args: argparse.Namespace) -> int:
    hook = alert_hook(args)
    named = console_ledgers(args)
    terminal = terminal_kind()
    if terminal == "lines" and len(named) > 1:
        raise UsageError("warden console: this terminal (TERM=dumb) shows one ledger; give one --ledger")
    if terminal == "lines":  # TERM=dumb: no full screen (docs/console.md, "Sizes and terminals")
        from .lines import run_lines

        return run_lines(args, bell=not args.no_bell, hook=hook)
    from ..app import run_console  # imported when used: the other subcommands never load Textual

    background = notify.in_console(ledger_target(args))  # the notifier, when configured to run here
    try:
        return run_console(
            ledger=ledger_target(args), runs=runs_dir(args), read_only=args.read_only,
            operator=operator_of(args), project=args.project, records=args.records,
            bell=not args.no_bell, on_alert=hook, connect_timeout_s=connect_timeout(args),
            ledger_name=named[0].name if len(named) > 1 else "", more=[(n.name, n.target) for n in named[1:]],
        )
    finally:
        if background is not None:
            background.stop()


def console_ledgers(args: argparse.Namespace) -> list[Named]:
    """The ledgers `warden console` opens (console/ledgers.py): every --ledger (before the
    subcommand, then after it), else $WARDEN_LEDGER, else the contexts file's ``open`` list, else
    ./ledger.db. The first one is also ``args.ledger`` (what one ledger's paths read)."""
    given = ([args.ledger] if args.ledger else []) + list(getattr(args, "ledgers", None) or [])
    env = os.environ
    if not given and env.get("WARDEN_LEDGER"):
        given = [env["WARDEN_LEDGER"]]
    try:
        named = resolve(given, env)
    except ContextError as e:
        raise UsageError(f"warden console: {safe_line(str(e))}") from None
    if not named:
        named = [Named("ledger", ledger_target(args))]
    args.ledger = named[0].target
    return named


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    hook = alert_hook(args)
    if not args.no_console and terminal_kind() == "lines":
        raise UsageError("warden demo: this terminal (TERM=dumb) cannot show the console; run it in a terminal "
                         "that can, or add --no-console")
    return run_demo(directory=args.dir, speed=args.speed, seed=args.seed, operator=operator_of(args),
                    with_console=not args.no_console, bell=not args.no_bell, on_alert=hook)


def terminal_kind() -> str:
    """``lines`` on a terminal that cannot do full screen (TERM=dumb, or no TERM at all, on a
    terminal); else ``screen``, with ASCII glyphs turned on for a plain one (TERM=linux...)."""
    term = os.environ.get("TERM", "")
    tty = sys.stdout.isatty()
    if tty and ascii_terminal():
        use_ascii()
    if tty and term in ("dumb", ""):
        return "lines"
    return "screen"


__all__ = ["REGISTRARS", "build_parser", "common_parent", "main", "parse", "version"]

"""What every ``warden`` subcommand shares: the parser class, the ledger and directory defaults,
who acts, and the two ways of printing (one JSON object; a plain table that fits the terminal).

Everything an agent wrote reaches the terminal as literal text (``rich.text.Text`` of
``console.text.safe_line``) or as ASCII-escaped JSON, never as markup or raw control bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import os
import shlex
import shutil
import signal
import sys
from typing import Awaitable, Callable, Sequence, TextIO, TypeAlias, TypedDict, Unpack

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from store import Ledger
from store.storage.db import CONNECT_TIMEOUT_S
from store.jsontypes import JsonArray, JsonObject

from ..operator import resolve_operator
from ..text import safe_line
from .errors import UsageError


class ParserOptions(TypedDict, total=False):
    """What ``argparse.ArgumentParser`` takes (``add_parser`` passes its keywords on)."""

    prog: str | None
    usage: str | None
    description: str | None
    epilog: str | None
    parents: Sequence[argparse.ArgumentParser]
    formatter_class: type[argparse.HelpFormatter]
    prefix_chars: str
    fromfile_prefix_chars: str | None
    argument_default: object
    conflict_handler: str
    add_help: bool
    allow_abbrev: bool
    exit_on_error: bool


class CliParser(argparse.ArgumentParser):
    """One line and exit 2 for a usage error (no usage dump); no abbreviated flags (a script's
    ``--dry`` must not mean ``--dry-run`` today and something else tomorrow)."""

    subcommand_names: frozenset[str] = frozenset()  # the top-level parser's, set by build_parser
    honoured: dict[str, frozenset[str] | None] = {}  # subcommand → the shared flags it takes

    def __init__(self, **kwargs: Unpack[ParserOptions]) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(**kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {safe_line(message)}")


def until_stopped(run: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run a follower (``run(stop)``) until SIGINT or SIGTERM sets ``stop``: a service's foreground
    loop (`warden notify --follow`, `warden otel export --follow`)."""
    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run(stop)

    asyncio.run(main())


def seconds(text: str) -> float:
    """A ``--connect-timeout`` value: a positive number of seconds, at most an hour."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {safe_line(repr(text))}") from None
    if not (0 < value <= 3600):  # NaN fails this too
        raise argparse.ArgumentTypeError(f"{safe_line(repr(text))}: seconds must be more than 0 and at most 3600")
    return value


# The flags a subcommand may share with others. Each subcommand takes only those it honours
# (:func:`flags`); given before the subcommand (``warden --ledger x status``) they are checked
# against the same list. Their defaults are filled in after parsing (:func:`fill_globals`), so a
# flag given before the subcommand is not reset by the subcommand's parser.
class FlagOptions(TypedDict, total=False):
    """A shared flag's ``add_argument`` keywords."""

    metavar: str
    help: str
    action: str
    type: Callable[[str], float]


GLOBALS: dict[str, tuple[str, FlagOptions, bool | None]] = {
    "ledger": ("--ledger", dict(metavar="PATH|URL", help="ledger path or URL (default $WARDEN_LEDGER, else "
                                                          "./ledger.db)"), None),
    "runs": ("--runs", dict(metavar="DIR", help="run directories (default $WARDEN_RUNS, else ./runs; read by console "
                                                   "and recover)"), None),
    "project": ("--project", dict(metavar="DIR", help="project dir for recovery (default: parent of --runs)"), None),
    "records": ("--records", dict(metavar="DIR", help="recovery records (default: <project>/recovery-records)"),
                None),
    "operator": ("--operator", dict(metavar="NAME", help="who acts (default $USER@host, plus the SSH client)"),
                 None),
    "json": ("--json", dict(action="store_true", help="print one JSON object (JSON Lines for events); errors too"),
             False),
    "yes": ("--yes", dict(action="store_true", help="apply without asking"), False),
    "dry_run": ("--dry-run", dict(action="store_true", help="only print the preview"), False),
    "read_only": ("--read-only", dict(action="store_true", help="open the ledger read-only; actions are hidden"),
                  False),
    "no_bell": ("--no-bell", dict(action="store_true", help="alerts do not ring the terminal bell"), False),
    "on_alert": ("--on-alert", dict(metavar="CMD", help="run CMD (split like a shell line, no shell) for each "
                                                        "alert, the alert as one JSON object on its stdin"), None),
    "connect_timeout": ("--connect-timeout", dict(metavar="S", type=seconds, help=(
        f"PostgreSQL: seconds to keep trying a server that cannot be reached before saying so "
        f"(default {CONNECT_TIMEOUT_S:g})")), None),
}


TOP = "top_"  # dest prefix of a shared flag given before the subcommand


def with_workspace(names: tuple[str, ...]) -> tuple[str, ...]:
    """The contract (docs/contracts.md "The warden command"): every subcommand that takes ``--ledger`` also takes ``--runs`` (the
    workspace pair, like ``$WARDEN_LEDGER``/``$WARDEN_RUNS``), so a script can pass both to any of
    them; only the console and recovery read run directories. And ``--connect-timeout``, which
    every ledger takes (it means something for PostgreSQL only)."""
    if "ledger" not in names:
        return names
    return names + tuple(n for n in ("runs", "connect_timeout") if n not in names)


def flags(*names: str, top: bool = False) -> list[CliParser]:
    """A parents list giving a parser exactly these shared flags (defaults left unset; ``top``:
    the top-level parser's copies, kept apart until :func:`fill_globals` checks them)."""
    names = with_workspace(names)
    p = CliParser(add_help=False)
    g = p.add_argument_group("common options")
    for name in names:
        flag, kwargs, _ = GLOBALS[name]
        g.add_argument(flag, dest=TOP + name if top else name, default=argparse.SUPPRESS, **kwargs)
    return [p]


#: what ``parser.add_subparsers()`` gives a CliParser: where ``warden``'s subcommands are added
Subcommands: TypeAlias = "argparse._SubParsersAction[CliParser]"


def command(sub: Subcommands, name: str, *, help: str, examples: tuple[str, ...] | list[str],
            description: str | None = None, parents: Sequence[CliParser] = ()) -> CliParser:
    """``warden NAME``'s parser with the help every subcommand has (tests/console/test_cli_help.py):
    ``help`` is its line in ``warden --help`` and, unless ``description`` says more, the first line
    of its own ``--help``; ``examples`` are command lines shown at the end ("examples:")."""
    return sub.add_parser(
        name, help=help, description=description or sentence(help), epilog=examples_text(examples),
        formatter_class=argparse.RawDescriptionHelpFormatter, parents=parents)


def sentence(text: str) -> str:
    """A help line as the first line of a help page: "park a task" → "Park a task."."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?", "!", ")")) else ".")


def examples_text(lines: tuple[str, ...] | list[str]) -> str:
    return ("example:" if len(lines) == 1 else "examples:") + "".join(f"\n  {line}" for line in lines)


def honours(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    """Record which shared flags a subcommand takes (checked for flags given before it)."""
    parser.set_defaults(_honours=frozenset(with_workspace(names)))
    return parser


def fill_globals(args: argparse.Namespace) -> argparse.Namespace:
    """Shared flags given before the subcommand: refused (usage) when the subcommand does not
    honour them, else taken unless also given after it. Then every default is filled in."""
    allowed = getattr(args, "_honours", None)
    given = {n: getattr(args, TOP + n) for n in GLOBALS if hasattr(args, TOP + n)}
    wrong = sorted(n for n in given if allowed is not None and n not in allowed)
    if wrong:
        shown = ", ".join(GLOBALS[n][0] for n in wrong)
        raise UsageError(f"warden {args.command}: {shown} does not apply to {args.command}")
    for name, (_, _, default) in GLOBALS.items():
        if hasattr(args, TOP + name):
            if not hasattr(args, name):
                setattr(args, name, getattr(args, TOP + name))
            delattr(args, TOP + name)
        if not hasattr(args, name):
            setattr(args, name, default)
    return args


def alert_hook(args: argparse.Namespace) -> list[str] | None:
    """``--on-alert CMD`` as an argv (``shlex`` rules, no shell), checked now: a command that
    cannot run is a usage error before the console opens, not a failure at the first alert."""
    text = getattr(args, "on_alert", None)
    if text is None:
        return None
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise UsageError(f"warden {args.command}: --on-alert: {safe_line(str(e))}") from None
    if not argv:
        raise UsageError(f"warden {args.command}: --on-alert needs a command")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"warden {args.command}: --on-alert: no such command: {safe_line(argv[0])}")
    return argv


def ledger_target(args: argparse.Namespace) -> str:
    return args.ledger or os.environ.get("WARDEN_LEDGER") or "ledger.db"


def runs_dir(args: argparse.Namespace) -> str:
    return args.runs or os.environ.get("WARDEN_RUNS") or "runs"


APPLICATION_NAME = "warden-cli"  # what PostgreSQL's pg_stat_activity shows for these connections


def connect_timeout(args: argparse.Namespace) -> float:
    """``--connect-timeout`` (PostgreSQL: how long to keep trying a server it cannot reach)."""
    value = getattr(args, "connect_timeout", None)
    return CONNECT_TIMEOUT_S if value is None else float(value)


def open_ledger(args: argparse.Namespace, *, read_only: bool) -> Ledger:
    """Open an existing ledger (never create one: a typo must not leave an empty database).
    Every command that only reads opens it ``read_only`` (SQLite ``mode=ro``): it never writes."""
    return Ledger.open(ledger_target(args), create=False, read_only=read_only, application_name=APPLICATION_NAME,
                       connect_timeout_s=connect_timeout(args))


def operator_of(args: argparse.Namespace) -> str:
    """``--operator``, else ``$USER@host`` (console/operator.py)."""
    return resolve_operator(getattr(args, "operator", None))


def print_json(obj: JsonObject | JsonArray, *, err: bool = False) -> None:
    # ensure_ascii: agent text with C1 or bidi controls stays escaped (\\u202e) on the terminal;
    # allow_nan=False: a ledger from elsewhere may hold an infinity, which JSON has no word for.
    stream = sys.stderr if err else sys.stdout
    try:
        text = json.dumps(obj, ensure_ascii=True, sort_keys=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), ensure_ascii=True, sort_keys=False, allow_nan=False)
    stream.write(text + "\n")
    stream.flush()


def _finite(obj: object) -> object:
    """``obj`` with every NaN or infinity as null (valid JSON for any reader)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


UNBOUNDED = 1_000_000  # the width of output that is not a terminal: a line is never cut or wrapped


def is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed, or not a file at all
        return False


def out_console(*, err: bool = False) -> Console:
    """Where a subcommand prints. On a terminal: its width (tables fit it, long lines wrap). Piped
    or redirected (``warden events | grep``): no width at all — every event, title and line is
    printed whole, one line each, whatever ``$COLUMNS`` says."""
    stream = sys.stderr if err else sys.stdout
    if is_terminal(stream):
        return Console(stderr=err, highlight=False, soft_wrap=False)
    return Console(stderr=err, highlight=False, soft_wrap=False, width=UNBOUNDED)


def print_fitted(c: Console, headers: list[str], rows: list[list[str]], give_way: list[str]) -> None:
    """A plain table that fits the terminal: columns in ``give_way`` shrink (then vanish), in that
    order, before any other column is touched (not piped output: :func:`out_console` gives it no
    width to fit). Cells are plain (already made safe) text."""
    widths = [max([cell_len(h)] + [cell_len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    avail = max(20, c.width)

    def total() -> int:
        shown = [w for w in widths if w > 0]
        return sum(shown) + 2 * (len(shown) - 1)

    for name in give_way:
        i = headers.index(name)
        excess = total() - avail
        if excess <= 0:
            break
        keep = widths[i] - excess
        widths[i] = keep if keep >= max(6, cell_len(name)) else 0
    t = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0), collapse_padding=True)
    keep_cols = [i for i, w in enumerate(widths) if w > 0]
    for i in keep_cols:
        t.add_column(headers[i], width=widths[i], no_wrap=True, overflow="ellipsis")
    for r in rows:
        t.add_row(*(Text(r[i]) for i in keep_cols))
    if c.color_system is not None:  # a terminal: its width, its colours
        c.print(t)
        return
    buffer = io.StringIO()
    Console(file=buffer, width=c.width, color_system=None, highlight=False, soft_wrap=False).print(t)
    # a table pads its last column: no trailing blanks in a pipe
    c.out("\n".join(line.rstrip() for line in buffer.getvalue().splitlines()), highlight=False)


__all__ = [
    "GLOBALS", "UNBOUNDED", "CliParser", "UsageError", "alert_hook", "command", "connect_timeout", "examples_text",
    "fill_globals", "flags", "honours", "is_terminal", "ledger_target", "open_ledger", "operator_of", "out_console",
    "print_fitted", "print_json", "runs_dir", "sentence",
]

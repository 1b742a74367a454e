"""The `warden` command.

Exit status: 0 done, 1 refused or failed (one clear line on stderr, no traceback), 2 usage error.
Subcommands for operator actions live in ``cli_actions``, for recovery in ``cli_recover``; each
module exposes ``register(sub, parents)``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
import time
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from store import Ledger, WardenError
from store.clock import iso
from store.errors import NotFound, Refused

from store import report

from .glyphs import budget_label, eta_label, node_status_label, signals_label, task_status_label
from .text import safe_line

SUBCOMMANDS = (
    "console", "demo", "status", "graph", "events", "park", "resume", "narrow", "rewind", "abort",
    "handoffs", "resolve", "recover", "verify-record", "export", "migrate",
)


class UsageError(Exception):
    """A usage error: exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        raise UsageError(f"{self.prog}: {message}")


def default_operator() -> str:
    """``$USER@host``, plus the SSH client address when ``SSH_CONNECTION`` is set."""
    try:
        user = os.environ.get("USER") or getpass.getuser()
    except Exception:
        user = "unknown"
    who = f"{user}@{socket.gethostname()}"
    ssh = os.environ.get("SSH_CONNECTION", "").split()
    if ssh:
        who += f" (ssh from {ssh[0]})"
    return who


def ledger_target(args: argparse.Namespace) -> str:
    return args.ledger or os.environ.get("WARDEN_LEDGER") or "ledger.db"


def runs_dir(args: argparse.Namespace) -> str:
    return args.runs or os.environ.get("WARDEN_RUNS") or "runs"


def open_ledger(args: argparse.Namespace, *, read_only: bool = False) -> Ledger:
    """Open an existing ledger (never create one: a typo must not leave an empty database)."""
    return Ledger.open(ledger_target(args), create=False, read_only=read_only)


def common_parent() -> argparse.ArgumentParser:
    p = _Parser(add_help=False)
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
    parser = _Parser(prog="warden", description="Warden: an operator console for long-running AI agents.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
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

    p = sub.add_parser("status", parents=parents, help="tasks: counts, P80 ETA, budget gate, stalls, handoffs")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("graph", parents=parents, help="a task's nodes with status, deps, lease, estimate, signals")
    p.add_argument("task", metavar="TASK")
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser("events", parents=parents, help="the journal (JSON Lines with --json)")
    p.add_argument("--task", metavar="T")
    p.add_argument("--since", type=int, default=0, metavar="ID")
    p.add_argument("--follow", action="store_true", help="keep printing new events")
    p.set_defaults(func=cmd_events)

    p = sub.add_parser("export", parents=parents, help="write a task's latest committed artifact")
    p.add_argument("task", metavar="TASK")
    p.add_argument("--output", required=True, metavar="FILE")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("migrate", parents=parents, help="upgrade the ledger's schema in place")
    p.set_defaults(func=cmd_migrate)

    from . import cli_actions, cli_recover

    cli_actions.register(sub, parents)
    cli_recover.register(sub, parents)
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


def print_json(obj: Any) -> None:
    # ensure_ascii: agent text with C1 or bidi controls stays escaped (\\u202e) on the terminal
    sys.stdout.write(json.dumps(obj, ensure_ascii=True, sort_keys=False) + "\n")
    sys.stdout.flush()


def out_console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def print_fitted(c: Console, headers: list[str], rows: list[list[str]], give_way: list[str]) -> None:
    """A plain table that fits the terminal: columns in ``give_way`` shrink (then vanish), in that
    order, before any other column is touched. Cells are plain (already made safe) text."""
    from rich.cells import cell_len

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
    c.print(t)


def _until_label(until_iso: str | None, now: float) -> str:
    from datetime import datetime

    from .glyphs import duration_label

    if not until_iso:
        return ""
    at = datetime.fromisoformat(until_iso.replace("Z", "+00:00")).timestamp()
    return f"expired {duration_label(now - at)} ago" if at <= now else f"{duration_label(at - now)} left"


# ---------------------------------------------------------------------- subcommands
def cmd_console(args: argparse.Namespace) -> int:
    from .app import run_console

    return run_console(
        ledger=ledger_target(args), runs=runs_dir(args), read_only=args.read_only,
        operator=args.operator or default_operator(), project=args.project, records=args.records,
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(directory=args.dir, speed=args.speed, seed=args.seed, operator=args.operator or default_operator(),
                    with_console=not args.no_console)


def cmd_status(args: argparse.Namespace) -> int:
    with open_ledger(args) as ledger:
        data = report.status_json(ledger)
    if args.json:
        print_json(data)
        return 0
    c = out_console()
    if not data["tasks"]:
        c.print(f"no tasks in {ledger.display}")
        return 0
    rows = []
    for task in data["tasks"]:
        counts = task["counts"]
        total = sum(counts.values())
        done = counts.get("succeeded", 0) + counts.get("abandoned", 0)
        ab = counts.get("abandoned", 0)
        rows.append([
            safe_line(task["task_id"]), task_status_label(task["status"]),
            f"{done}/{total}" + (f" ({ab} abandoned)" if ab else ""), eta_label(task["eta"]),
            signals_label(task["signals"]), str(task["handoffs_open"] or "—"), budget_label(task["budget"]),
            safe_line(task["title"]),
        ])
    # At 80 columns the title and the budget give way first; id, status, progress, P80, signals
    # and handoffs stay whole.
    print_fitted(c, ["TASK", "STATUS", "DONE", "P80", "SIGNALS", "HANDOFFS", "BUDGET", "TITLE"], rows,
                 give_way=["TITLE", "BUDGET"])
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    with open_ledger(args) as ledger:
        data = report.graph_json(ledger, args.task)
    if args.json:
        print_json(data)
        return 0
    c = out_console()
    task = data["task"]
    c.print(Text.assemble(Text(safe_line(task["task_id"]), style="bold"), "  ",
                          task_status_label(task["status"]), "  ", safe_line(task["title"])))
    rows = []
    now = time.time()
    for n in data["nodes"]:
        lease = n["lease"]
        rows.append([
            safe_line(n["key"]), node_status_label(n["status"]), str(n["attempt"]), eta_label(n["eta"]),
            signals_label(n["signals"]),
            safe_line(f"{lease['owner']} {_until_label(lease['until'], now)}") if lease else "—",
            safe_line(n["kind"]), safe_line(", ".join(n["deps"])) or "—",
        ])
    print_fitted(c, ["NODE", "STATUS", "ATT", "P80", "SIGNALS", "LEASE", "KIND", "DEPS"], rows,
                 give_way=["DEPS", "KIND", "LEASE"])
    for sig in task["signals"]:  # what fired each signal, one line each (agent text made safe)
        c.print(Text(safe_line(f"⚠ {sig['severity']} {sig['kind']} {sig['node'] or task['task_id']}: {sig['evidence']}")),
                soft_wrap=True)
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    with open_ledger(args) as ledger:
        if args.task is not None:
            ledger.task(args.task)  # NotFound for a typo
        last = ledger.last_event_id()
    c = out_console()

    def show(e: Any) -> None:
        if args.json:
            print_json(report.event_json(e))
        else:
            c.print(Text.assemble(
                (f"{e.id:>7} ", "dim"), iso(e.at) or "", " ", (f"{e.layer:<9}", "cyan"), " ",
                Text(safe_line(e.task_id or "-")), " ", Text(safe_line(e.node or "-")), " ",
                (e.kind, "bold"), " ", Text(safe_line(e.actor)), ": ", Text(safe_line(e.summary)),
            ))

    from store.feed import Feed

    feed = Feed(ledger_target(args), read_only=True)

    def drain(cursor: int, upto: int | None = None) -> int:
        while True:
            delta = feed.since(cursor, task_id=args.task)
            for e in delta.events:
                if upto is not None and e.id > upto:
                    return cursor
                show(e)
                cursor = e.id
            if not delta.more:
                return delta.cursor if upto is None else cursor

    try:
        cursor = drain(args.since, None if args.follow else last)
        if not args.follow:
            return 0

        async def follow(cursor: int) -> None:
            # Woken by the ledger's files (SQLite) or NOTIFY (PostgreSQL), with a slow fallback
            # poll; a wake-up is a hint, the cursor is the truth.
            async for _ in feed.wakeups():
                cursor = drain(cursor)

        import asyncio

        asyncio.run(follow(cursor))
        return 0
    finally:
        feed.close()


def cmd_export(args: argparse.Namespace) -> int:
    with open_ledger(args) as ledger:
        view, data = ledger.latest_artifact(args.task)
    path = args.output
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        raise Refused(f"{path} exists; not overwritten (choose another --output)") from None
    except OSError as e:
        raise Refused(f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise Refused(f"cannot write {path}: {e.strerror}") from None
    if args.json:
        print_json({"task_id": args.task, "artifact": view.name, "node": view.node, "sha256": view.sha256,
                    "bytes": view.size, "output": path})
    else:
        print(f"wrote {path}: {view.name} from {view.node}, {view.size} bytes, sha256 {view.sha256}")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from store.db import connect_checked, open_database
    from store.schema import migrate

    db = open_database(ledger_target(args), create=False)
    connect_checked(db)
    try:
        before, after = migrate(db)
    finally:
        db.close()
    if args.json:
        print_json({"from": before, "to": after})
    elif before == after:
        print(f"{getattr(db, 'display', '')}: schema {after} is current; nothing to do")
    else:
        print(f"{getattr(db, 'display', '')}: migrated schema {before} → {after}")
    return 0


__all__ = ["main", "build_parser", "default_operator", "open_ledger", "print_json", "NotFound"]

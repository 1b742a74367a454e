"""Inspection subcommands — they read, never act: status, graph, events, handoffs, export, migrate.

    warden status [--json]                         tasks: counts, P80 ETA, budget gate, stalls, handoffs
    warden graph TASK [--json]                     a task's nodes with status, deps, lease, estimate, signals
    warden events [--task T] [--since ID] [--follow] [--json]   the journal (JSON Lines with --json)
    warden handoffs [--task T] [--all] [--json]    open needs_human handoffs
    warden export TASK --output FILE [--unverified] a task's latest committed artifact (never overwrites; a
                                                   draft that failed verification only marked, with --unverified)
    warden migrate                                 the schema upgrade in place

(``export`` and ``migrate`` write, but they are not operator actions on the graph: no plan, no
confirmation.) Registered by ``console.cli.entry`` through ``register(sub, parents)``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from datetime import datetime

from rich.console import Console
from rich.table import Table
from rich.text import Text

from store.reading import cli_json as report
from store.clock import iso
from store.errors import Refused
from store.reading.feed import Feed
from store.jsontypes import JsonMapping, JsonObject
from store.reading import verified
from store.views import ArtifactView, EventView, HandoffView

from ..glyphs import age_label, budget_label, duration_label, eta_label, node_status_label, pause_label, signals_label
from ..glyphs import MARKS, task_label, task_status_label
from ..text import safe_line
from .common import (APPLICATION_NAME, Subcommands, command, connect_timeout, flags, honours, is_terminal, ledger_target,
                     open_ledger, out_console, print_fitted, print_json)

READ = ("ledger", "json")  # the shared flags every inspection subcommand honours
TASK_HELP = "the task's id (warden status lists them)"


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = command(sub, "status", parents=flags(*READ), help="tasks: counts, P80 ETA, budget gate, stalls, handoffs",
                examples=("warden status", "warden status --watch  # redraw on every change; Ctrl-C stops",
                          "warden status --json | jq '.tasks[].task_id'"))
    p.add_argument("--watch", action="store_true",
                   help="show it again on every change until Ctrl-C (piped: one snapshot per change)")
    honours(p, *READ)
    p.set_defaults(func=cmd_status)

    p = command(sub, "graph", parents=flags(*READ), help="a task's nodes with status, deps, lease, estimate, signals",
                examples=("warden graph nightly", "warden graph nightly --json | jq '.nodes[] | select(.signals != [])'"))
    p.add_argument("task", metavar="TASK", help=TASK_HELP)
    honours(p, *READ)
    p.set_defaults(func=cmd_graph)

    p = command(sub, "events", parents=flags(*READ), help="the journal (JSON Lines with --json)",
                examples=("warden events --task nightly", "warden events --follow | grep handoff",
                          "warden events --since 1200 --json"))
    p.add_argument("--task", metavar="T", help="only this task's events")
    p.add_argument("--since", type=int, default=0, metavar="ID", help="only the events after this id")
    p.add_argument("--follow", action="store_true", help="keep printing new events")
    honours(p, *READ)
    p.set_defaults(func=cmd_events)

    p = command(sub, "export", parents=flags(*READ), help="write a task's latest committed artifact",
                examples=("warden export nightly --output report.md",))
    p.add_argument("task", metavar="TASK", help=TASK_HELP)
    p.add_argument("--output", required=True, metavar="FILE", help="where to write it (never overwritten)")
    p.add_argument("--unverified", action="store_true",
                   help="write a draft that failed verification anyway, marked as such on its first line")
    honours(p, *READ)
    p.set_defaults(func=cmd_export)

    p = command(sub, "migrate", parents=flags(*READ), help="upgrade the ledger's schema in place",
                examples=("warden migrate --ledger /srv/warden/ledger.db",))
    honours(p, *READ)
    p.set_defaults(func=cmd_migrate)


def register_handoffs(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    """``handoffs`` sits between the actions in ``warden --help`` (beside ``resolve``)."""
    p = command(sub, "handoffs", parents=flags(*READ), help="open needs_human handoffs",
                examples=("warden handoffs", "warden handoffs --task nightly --all"))
    p.add_argument("--task", metavar="T", help="only this task")
    p.add_argument("--all", action="store_true", help="every handoff, not only the open ones")
    honours(p, *READ)
    p.set_defaults(func=cmd_handoffs)


def _until_label(until_iso: str | None, now: float) -> str:
    if not until_iso:
        return ""
    at = datetime.fromisoformat(until_iso.replace("Z", "+00:00")).timestamp()
    return f"expired {duration_label(now - at)} ago" if at <= now else f"{duration_label(at - now)} left"


# ---------------------------------------------------------------------- status, graph
def cmd_status(args: argparse.Namespace) -> int:
    if args.watch:
        return watch_status(args)
    with open_ledger(args, read_only=True) as ledger:
        data = report.status_json(ledger)
    if args.json:
        print_json(data)
        return 0
    print_status(out_console(), data, ledger.display)
    return 0


def print_status(c: Console, data: JsonMapping, display: str) -> None:
    print_tasks(c, data, display)
    taught = data.get("marked_healthy") or []
    if taught:  # what operators taught the loop alarms: a kind's normal (docs/estimates.md "Each kind's normal")
        total = sum(int(t["marked"]) for t in taught)
        kinds = ", ".join(f"{safe_line(t['kind'], limit=40)} {t['marked']}" for t in taught[:5])
        more = f", {len(taught) - 5} more kinds" if len(taught) > 5 else ""
        c.print(Text(f"loop alarms marked healthy: {total} ({kinds}{more})"), soft_wrap=True)


def print_tasks(c: Console, data: JsonMapping, display: str) -> None:
    if not data["tasks"]:
        c.print(Text(f"no tasks in {safe_line(display)}"))
        return
    rows = []
    for task in data["tasks"]:
        counts = task["counts"]
        total = sum(counts.values())
        done = counts.get("succeeded", 0) + counts.get("abandoned", 0)
        ab = counts.get("abandoned", 0)
        rows.append([
            task_label(task["task_id"], task.get("origin")), task_status_label(task["status"]),
            f"{done}/{total}" + (f" ({ab} abandoned)" if ab else ""), eta_label(task["eta"]),
            signals_label(task["signals"]), str(task["handoffs_open"] or MARKS["dash"]), budget_label(task["budget"]),
            safe_line(task["title"]),
        ])
    # At 80 columns the title and the budget give way first; id, status, progress, P80, signals
    # and handoffs stay whole.
    print_fitted(c, ["TASK", "STATUS", "DONE", "P80", "SIGNALS", "HANDOFFS", "BUDGET", "TITLE"], rows,
                 give_way=["TITLE", "BUDGET"])
    for task in data["tasks"]:  # waiting is not work: say whose budget clock stands still, since when
        pause = pause_label(task["budget"])
        if pause:
            c.print(Text(safe_line(task["task_id"])) + Text(f": {pause}"), soft_wrap=True)


def watch_status(args: argparse.Namespace) -> int:
    """``warden status --watch``: the status again on every change of the ledger (and at least
    every few seconds, so ages and estimates move) until Ctrl-C, which ends it quietly (exit 0).
    On a terminal the screen is redrawn; piped, each snapshot that differs from the last is
    printed whole after a ``-- <time>`` line (with ``--json``: one object a line)."""
    with open_ledger(args, read_only=True):
        pass  # a missing or unreadable ledger fails here, in one line, before anything is drawn
    out = sys.stdout
    tty = is_terminal(out)
    feed = Feed(ledger_target(args), read_only=True, application_name=APPLICATION_NAME,
                connect_timeout_s=connect_timeout(args))
    last = None

    def draw() -> None:
        nonlocal last
        feed.check()  # a replaced file is reopened; a deleted one fails in one line
        data = feed.read(report.status_json)
        if args.json:
            text = json.dumps(data, ensure_ascii=True, allow_nan=False) + "\n"
        else:
            c = out_console()
            with c.capture() as captured:
                print_status(c, data, feed.ledger.display)
            text = captured.get()
        if text == last:
            return
        last = text
        when = time.strftime("%H:%M:%S")
        if tty:
            out.write(f"\x1b[H\x1b[2J\x1b[3J{WATCH_TITLE.format(when=when)}\n\n{text}")
        else:
            out.write(text if args.json else f"-- {when}\n{text}")
        out.flush()

    async def watch() -> None:
        async for _ in feed.wakeups():  # "start" first, then every change and the slow poll
            draw()

    try:
        asyncio.run(watch())
    except KeyboardInterrupt:  # the way to stop watching: no traceback, no "interrupted" line
        if tty:
            out.write("\n")
        return 0
    finally:
        feed.close()
    return 0


WATCH_TITLE = "warden status --watch  ·  {when}  ·  Ctrl-C stops"


def cmd_graph(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
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
    pause = pause_label(task["budget"])
    if pause:
        c.print(pause)
    if data.get("effects"):
        c.print(Text(f"effects ({len(data['effects'])}):", style="bold"))
        for e in data["effects"]:
            line = Text(f"  {e['status']:<11} ") + Text(safe_line(e["effect_key"])) + Text(" (")
            line += Text(safe_line(e["node"])) + Text(")")
            if e["status"] == "compensated":
                line += Text(" by ") + Text(safe_line(e.get("compensated_by") or "?"))
            elif e.get("compensation_node"):
                line += Text(" → ") + Text(safe_line(e["compensation_node"]))
            c.print(line, soft_wrap=True)
    return 0


# ---------------------------------------------------------------------- events
def event_line(e: EventView) -> Text:
    """An event as ``warden events`` prints it (and the console's line mode, console/cli/lines.py):
    id, time, layer, task, node, kind, actor and summary, every ledger string made safe."""
    return Text.assemble(
        (f"{e.id:>7} ", "dim"), iso(e.at) or "", " ", (f"{safe_line(e.layer):<9}", "cyan"), " ",
        Text(safe_line(e.task_id or "-")), " ", Text(safe_line(e.node or "-")), " ",
        (safe_line(e.kind), "bold"), " ", Text(safe_line(e.actor)), ": ", Text(safe_line(e.summary)),
    )


def cmd_events(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
        if args.task is not None:
            ledger.task(args.task)  # NotFound for a typo
        last = ledger.last_event_id()
    c = out_console()

    def show(e: EventView) -> None:
        if args.json:
            print_json(report.event_json(e))
        else:
            c.print(event_line(e))

    feed = Feed(ledger_target(args), read_only=True, application_name=APPLICATION_NAME,
                connect_timeout_s=connect_timeout(args))

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

        asyncio.run(follow(cursor))
        return 0
    finally:
        feed.close()


# ---------------------------------------------------------------------- handoffs
def handoff_json(h: HandoffView, now: float) -> JsonObject:
    return {
        "id": h.id, "task_id": h.task_id, "node": h.node, "kind": h.kind, "question": h.question,
        "options": [dict(o) for o in h.options], "recommendation": h.recommendation, "status": h.status,
        "age_s": round(max(0.0, now - h.opened_at), 3),
        "opened_at": iso(h.opened_at), "opened_by": h.opened_by, "context": dict(h.context),
        "resolution": ({"option": h.resolution_option, "answer": h.resolution_answer, "by": h.resolved_by,
                        "at": iso(h.resolved_at)} if h.status in ("resolved", "withdrawn") else None),
    }


def cmd_handoffs(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
        if args.task is not None:
            ledger.task(args.task)  # NotFound for a typo
        rows = ledger.handoffs(status=None if args.all else "open", task_id=args.task)
        now = ledger.now()
    data = {"handoffs": [handoff_json(h, now) for h in rows]}
    if args.json:
        print_json(data)
        return 0
    c = out_console()
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


# ---------------------------------------------------------------------- export, migrate
def cmd_export(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
        view, data = ledger.latest_artifact(args.task)
        check = verified.verification(ledger, view)
        now = ledger.now()
    if check["status"] == verified.FAILED:
        data = _marked(view, check, data, now, unverified=args.unverified)
    path = args.output
    shown = safe_line(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        raise Refused(f"{shown} exists; not overwritten (choose another --output)") from None
    except OSError as e:
        raise Refused(f"cannot write {shown}: {e.strerror}") from None
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
        raise Refused(f"cannot write {shown}: {e.strerror}") from None
    failed = check["status"] == verified.FAILED
    if args.json:
        print_json({"task_id": args.task, "artifact": view.name, "node": view.node, "sha256": view.sha256,
                    "bytes": view.size, "output": path, "verification": check, "unverified": failed})
    else:
        # The artifact's name and node are the agent's words: escaped, never raw (an OSC title, C1...).
        print(safe_line(f"wrote {path}: {view.name} from {view.node}, {view.size} bytes, sha256 {view.sha256}"
                        + (f" — UNVERIFIED (failed verification by {check['by']}; marked on its first line)"
                           if failed else "")))
    return 0


def _marked(view: ArtifactView, check: JsonMapping, data: bytes, now: float, *, unverified: bool) -> bytes:
    """A draft that failed verification: refused, or (``--unverified``) its bytes under a first
    line saying so. A binary draft cannot carry that line: refused either way."""
    why = (f"{view.name} (node {view.node}) failed verification by node {check['by']}: {check['verdict']}")
    if not unverified:
        raise Refused(f"{why}; not exported (warden export --unverified writes it, marked as unverified)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        raise Refused(f"{why}; it is not text, so it cannot be marked as unverified: not exported")
    return (verified.marker(view, dict(check), now) + "\n\n").encode("utf-8") + data


def cmd_migrate(args: argparse.Namespace) -> int:
    from store.storage.db import close_database, connect_checked, open_database
    from store.storage.schema import migrate

    db = open_database(ledger_target(args), create=False, application_name=APPLICATION_NAME)
    connect_checked(db)
    try:
        before, after = migrate(db)
    finally:
        close_database(db)  # a refused migration leaves the directory as it found it
    if args.json:
        print_json({"from": before, "to": after})
    elif before == after:
        print(safe_line(f"{getattr(db, 'display', '')}: schema {after} is current; nothing to do"))
    else:
        print(safe_line(f"{getattr(db, 'display', '')}: migrated schema {before} → {after}"))
    return 0


__all__ = ["cmd_events", "cmd_export", "cmd_graph", "cmd_handoffs", "cmd_migrate", "cmd_status", "event_line",
           "handoff_json", "register", "register_handoffs"]

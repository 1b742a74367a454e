"""Recovery subcommands: ``warden recover`` and ``warden verify-record``.

    warden recover RUN [--record NAME] [--json]     check a run; exit 0 only for reuse
    warden recover --task T --node K [--json]       advice for a failed/orphaned/blocked node
    warden verify-record NAME [--json]              exit 0 pass, 1 fail

Registered by ``console.cli.entry`` through ``register(sub, parents)``. Everything an agent wrote is
printed as literal text (``rich.text.Text`` of ``console.text.safe_line``), never as markup.
"""

from __future__ import annotations

import argparse
import os
import sys

from rich.table import Table
from rich.text import Text

from store.errors import Refused
from store.recovery import (
    REUSE,
    Advice,
    RecordRefused,
    Recovery,
    advise,
    check,
    default_records_dir,
    record,
    verify_record,
)
from store.runs import require_name

from ..text import safe_line
from .errors import CliFailure, classify
from .common import Subcommands, UsageError, command, flags, honours, open_ledger, operator_of, out_console, print_json

RECOVER_HELP = "check an interrupted run's evidence (or advise on a ledger node)"
VERIFY_HELP = "re-check a recovery record and its original run independently"
RECOVER = ("ledger", "runs", "project", "records", "operator", "json", "yes", "dry_run")
VERIFY = ("runs", "project", "records", "json")


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = command(
        sub, "recover", parents=flags(*RECOVER), help=RECOVER_HELP, description=RECOVER_HELP + ". Exit 0 "
        "only for reuse_existing_artifact (or when node advice was given), 1 otherwise.",
        examples=("warden recover fetch-2026-11-30 --record fetch-ok", "warden recover --task nightly --node fetch"))
    p.add_argument("run", nargs="?", metavar="RUN", help="run name under --runs")
    p.add_argument("--record", metavar="NAME",
                   help="write recovery-records/NAME if the decision is reuse_existing_artifact")
    p.add_argument("--task", metavar="T", help="with --node: advice for a ledger node")
    p.add_argument("--node", metavar="K", help="with --task: the node key")
    honours(p, *RECOVER)
    p.set_defaults(func=cmd_recover)

    p = command(sub, "verify-record", parents=flags(*VERIFY), help=VERIFY_HELP,
                description=VERIFY_HELP + ". Exit 0 pass, 1 fail.", examples=("warden verify-record fetch-ok",))
    p.add_argument("name", metavar="NAME", help="record name under --records")
    honours(p, *VERIFY)
    p.set_defaults(func=cmd_verify_record)


# --------------------------------------------------------------------------- paths


def resolve_dirs(args: argparse.Namespace) -> tuple[str, str, str]:
    """(runs, project, records) as absolute paths, with the documented defaults."""
    runs = os.path.abspath(getattr(args, "runs", None) or os.environ.get("WARDEN_RUNS") or "runs")
    project = os.path.abspath(getattr(args, "project", None) or os.path.dirname(runs))
    records = os.path.abspath(getattr(args, "records", None) or default_records_dir(project))
    return runs, project, records


def _usage(message: str) -> Exception:
    return UsageError(f"warden recover: {message}")


# --------------------------------------------------------------------------- recover


def cmd_recover(args: argparse.Namespace) -> int:
    if args.task is not None or args.node is not None:
        if args.run is not None or args.record is not None:
            raise _usage("give RUN (with --record) or --task/--node, not both")
        if args.task is None or args.node is None:
            raise _usage("--task and --node go together")
        return _advise(args)
    if args.run is None:
        raise _usage("give a RUN name (or --task T --node K)")
    run = require_name(args.run)  # refused before anything is read
    runs, project, records = resolve_dirs(args)
    if args.record is None:
        rec = check(runs, run, project)
        _show_recovery(args, rec, None)
        return 0 if rec.decision == REUSE else 1
    name = require_name(args.record, "record")
    if args.dry_run or not args.yes:
        rec = check(runs, run, project)  # the preview; record() checks afresh again
        target = os.path.join(records, name)
        if rec.decision != REUSE:
            raise _refused_showing(args, rec, Refused(f"run {run}: {rec.decision} ({rec.reason}); a record is "
                                                      f"written only for {REUSE}; nothing created"))
        if os.path.lexists(target):
            raise _refused_showing(args, rec, Refused(f"record {name} already exists in {safe_line(records)}; "
                                                      "records are never overwritten: choose another name"))
        plan = f"would write {target}/HANDOFF.md and recovery.json (the run is not modified)"
        if args.dry_run:
            _show_recovery(args, rec, None, note=f"dry run: {plan}")
            return 0
        if not sys.stdin.isatty():
            _show_recovery(args, rec, None, note=plan, err=True)
            raise CliFailure("warden: not written: no terminal to confirm; pass --yes to write the record",
                             "not_confirmed")
        _show_recovery(args, rec, None, note=plan)
        answer = input(f"Write record {name}? [y/N] ").strip().casefold()
        if answer not in ("y", "yes"):
            raise CliFailure("warden: not confirmed; nothing written", "not_confirmed")
    try:
        made = record(runs, run, name, records_dir=records, operator=operator_of(args),
                      project_dir=project)
    except RecordRefused as e:
        raise _refused_showing(args, e.recovery, e) from None
    _show_recovery(args, made.recovery, made.path)
    return 0


def _refused_showing(args: argparse.Namespace, rec: Recovery, e: Exception) -> Exception:
    """Show the checks that led to a refusal, then let it end the command. With ``--json`` the
    recovery and the error are one object (``"error": {"code", "message"}`` added), so stdout
    still holds exactly one JSON object."""
    if args.json:
        code, _, line = classify(e)
        _show_recovery(args, rec, None, error={"code": code, "message": safe_line(line.removeprefix("warden: "))})
        e.json_printed = True  # type: ignore[attr-defined]
    else:
        _show_recovery(args, rec, None)
    return e


def _show_recovery(args: argparse.Namespace, rec: Recovery, record_path: str | None, *,
                   note: str | None = None, err: bool = False, error: dict[str, str] | None = None) -> None:
    if args.json:
        out = rec.to_json(record_path)
        if note:
            out["note"] = note
        if error:
            out["error"] = error
        print_json(out, err=err)
        return
    c = out_console(err=err)
    mark = "✔" if rec.decision == REUSE else "✖"
    c.print(Text.assemble(("run ", "bold"), (rec.run, "bold"), ": ", (f"{mark} {rec.decision}",
                          "bold"), f" ({rec.reason})"))
    t = Table(box=None, header_style="bold", pad_edge=False, expand=False)
    t.add_column("CHECK", no_wrap=True)
    t.add_column("RESULT", no_wrap=True)
    t.add_column("EVIDENCE", overflow="fold")
    for ch in rec.checks:
        result = ("✔ ok" if ch.ok else "✖ failed") if ch.ran else "– not run"
        t.add_row(ch.name, result, Text(safe_line(ch.evidence)))
    c.print(t)
    facts = [f"original status: {safe_line(rec.original_status or '(unreadable)')}",
             "export replayed: no", "semantic review: pending"]
    if rec.simulation:
        facts.append("SIMULATION run")
    c.print(Text(" · ".join(facts)))
    if record_path:
        c.print(Text.assemble("record written: ", Text(safe_line(record_path)),
                              " (status needs_review, semantic review pending)"))
    if note:
        c.print(Text(safe_line(note)))


def _advise(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
        advice = advise(ledger, args.task, args.node)
    if args.json:
        print_json(advice.to_json())
        return 0
    _show_advice(advice)
    return 0


def _show_advice(a: Advice) -> None:
    c = out_console()
    c.print(Text.assemble(
        Text(safe_line(a.task_id), style="bold"), "/", Text(safe_line(a.node_key), style="bold"),
        f" ({a.situation}): ", (f"recommend {a.recommendation}", "bold"), f" ({a.reason})"))
    for i, line in enumerate(a.evidence):
        c.print(Text.assemble("  " if i else "→ ", Text(safe_line(line))))


# --------------------------------------------------------------------------- verify-record


def cmd_verify_record(args: argparse.Namespace) -> int:
    name = require_name(args.name, "record")
    runs, project, records = resolve_dirs(args)
    result = verify_record(records, name, runs, project)
    if args.json:
        print_json(result)
    else:
        c = out_console()
        ok = result["result"] == "pass"
        c.print(Text.assemble(("record ", "bold"), (name, "bold"), ": ",
                              ("✔ pass" if ok else "✖ fail", "bold")))
        c.print(Text(" · ".join(
            f"{k.replace('_', ' ')}: {safe_line(result.get(k) or '(unknown)')}"
            for k in ("status", "original_status", "semantic_review"))))
        for p in result["problems"]:
            c.print(Text.assemble("  ✖ ", Text(safe_line(p))))
    return 0 if result["result"] == "pass" else 1

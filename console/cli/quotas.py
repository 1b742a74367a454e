"""``warden quotas`` (the shared quotas and how much of each is in use) and ``warden quota NAME
--capacity N [--window S] [--task T]`` (declare or change one). A quota is a shared external limit
nodes draw on — an API's rate window, a licence, a GPU (docs/operations.md "Shared quotas")."""

from __future__ import annotations

import argparse

from store.clock import iso
from store.views import QuotaUse

from ..glyphs import duration_label
from ..text import safe_line
from .common import Subcommands, command, flags, honours, open_ledger, operator_of, out_console, print_fitted, print_json

READ = ("ledger", "json")


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = command(sub, "quotas", parents=flags(*READ), help="the shared quotas nodes draw on, and their use now",
                examples=("warden quotas", "warden quotas --task nightly --json"))
    p.add_argument("--task", metavar="T", help="also this task's own quotas")
    honours(p, *READ)
    p.set_defaults(func=cmd_quotas)

    p = command(sub, "quota", parents=flags("ledger", "json", "operator"),
                help="declare or change a shared quota (a rate limit, a licence, a GPU)",
                examples=("warden quota code-search --capacity 10 --window 60   # 10 claims a minute",
                          "warden quota gpu --capacity 2                        # 2 holders at once",
                          "warden quota api --capacity 1 --task nightly"))
    p.add_argument("name", metavar="NAME", help="the quota's name (nodes name it: add_node(..., quotas=[NAME]))")
    p.add_argument("--capacity", type=int, required=True, metavar="N", help="how many (claims per window, or holders)")
    p.add_argument("--window", type=float, metavar="S", help="seconds: at most N claims start in any S seconds "
                                                              "(without: at most N nodes hold it at once)")
    p.add_argument("--task", metavar="T", help="the task's own quota (default: the whole ledger's)")
    honours(p, "ledger", "json", "operator")
    p.set_defaults(func=cmd_quota)


def quota_json(q: QuotaUse) -> dict[str, object]:
    return {"name": q.name, "scope": q.scope or None, "capacity": q.capacity, "window_s": q.window_s,
            "in_use": q.in_use, "full": q.full, "frees_at": iso(q.frees_at)}


def cmd_quotas(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
        rows = ledger.quotas(args.task)
    if args.json:
        print_json({"quotas": [quota_json(q) for q in rows]})
        return 0
    c = out_console()
    if not rows:
        c.print("no quotas declared (warden quota NAME --capacity N [--window S])")
        return 0
    table = [[safe_line(q.name), safe_line(q.scope or "ledger"), f"{q.in_use}/{q.capacity}",
              "at once" if q.window_s is None else f"per {duration_label(q.window_s)}",
              "full" if q.full else "room"] for q in rows]
    print_fitted(c, ["QUOTA", "SCOPE", "USE", "WINDOW", "NOW"], table, give_way=["SCOPE"])
    return 0


def cmd_quota(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=False) as ledger:
        q = ledger.declare_quota(args.name, args.capacity, window_s=args.window, task_id=args.task,
                                 actor=operator_of(args))
    if args.json:
        print_json(quota_json(q))
    else:
        per = "at once" if q.window_s is None else f"per {duration_label(q.window_s)}"
        print(safe_line(f"quota {q.name} ({q.scope or 'ledger'}): {q.capacity} {per}; {q.in_use} in use now"))
    return 0


__all__ = ["cmd_quota", "cmd_quotas", "quota_json", "register"]

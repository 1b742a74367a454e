"""``warden report TASK [--json]``: what a task leaves behind — the best result so far, what is
unfinished, the budget per gate, open handoffs, effects never confirmed (and, after an abort, the
effects still to compensate). A pure read, at any time; the one thing a task at the stop gate
still delivers. The JSON is ``store.task_report.task_report`` as is.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.text import Text

from store.task_report import task_report

from ..glyphs import age_label, node_status_label, pause_label, task_status_label
from ..text import safe_line
from .common import open_ledger, out_console, print_json

LIST_LIMIT = 50  # lines per section before "… and N more" (the JSON has them all)


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", parents=parents,
                       help="what a task leaves behind: best result, unfinished nodes, budget, handoffs, effects")
    p.add_argument("task", metavar="TASK")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    with open_ledger(args, read_only=True) as ledger:
        data = task_report(ledger, args.task)
    if args.json:
        print_json(data)
    else:
        render_report(data, out_console())
    return 0


def _tokens(n: Any) -> str:
    return "—" if n is None else f"{int(n):,}"


def budget_lines(b: dict[str, Any]) -> list[str]:
    """The budget section as plain lines (numbers only: nothing agent-written)."""
    out = []
    used = f"tokens {_tokens(b['tokens_used'])}" + (f" of {_tokens(b['token_cap'])}" if b.get("token_cap") else "")
    wall = f"wall clock {b['wall_used_s']:.0f}s" + (f" of {b['wall_cap_s']:.0f}s" if b.get("wall_cap_s") else "")
    out.append(f"{used}; {wall}; gate {b['gate']}" + (f" ({b['ratio'] * 100:.0f} %)" if b.get("ratio") else ""))
    gates = b.get("gates") or {}
    parts = []
    for name in ("soft", "hard", "stop"):
        g = gates.get(name) or {}
        at = [x for x in (f"{_tokens(g['tokens'])} tokens" if g.get("tokens") is not None else "",
                          f"{g['wall_s']:.0f}s" if g.get("wall_s") is not None else "") if x]
        if at:
            parts.append(f"{name} from {' / '.join(at)}" + (" ✔ reached" if g.get("reached") else ""))
    if parts:
        out.append("gates: " + "; ".join(parts))
    pause = pause_label(b)
    if pause:
        out.append(pause)
    if b.get("waited_s"):
        out.append(f"time spent waiting (not counted): {b['waited_s']:.0f}s")
    return out


def render_report(r: dict[str, Any], c: Console) -> None:
    """The report as literal text (every agent-written string made safe)."""
    p = r["progress"]
    c.print(Text.assemble(Text(safe_line(r["task_id"]), style="bold"), "  ", task_status_label(r["status"]),
                          f"  {p['done']}/{p['total']} done  ", Text(safe_line(r["title"]), style="dim")))
    best = r["best_artifact"]
    if best is None:
        c.print("best result so far: none (no artifact committed)")
    else:
        line = Text("best result so far: ") + Text(safe_line(best["name"]), style="bold")
        line.append(f" from node ")
        line.append(Text(safe_line(best["node"])))
        line.append(f", {best['bytes']} bytes, sha256 {best['sha256']}, at {best['at']}")
        if not best["current"]:
            line.append("  (superseded: its node was rewound or failed since)", style="bold")
        c.print(line)
    c.print(Text("budget:", style="bold"))
    for line in budget_lines(r["budget"]):
        c.print("  " + line)
    _section(c, f"unfinished ({len(r['unfinished'])})", [
        Text(f"  {node_status_label(u['status'])}  ") + Text(safe_line(u["key"]))
        + Text(f"  ({safe_line(u['kind'])}{', closing step' if u['always_admit'] else ''})", style="dim")
        for u in r["unfinished"]])
    _section(c, f"handoffs open ({len(r['handoffs_open'])})", [
        Text(f"  #{h['id']} ") + Text(safe_line(h["node"])) + Text(f" {safe_line(h['kind'])}: ")
        + Text(safe_line(h["question"])) + Text(f"  ({age_label(h['age_s'])})", style="dim")
        for h in r["handoffs_open"]])
    _section(c, f"effects intended, never confirmed ({len(r['effects_unconfirmed'])}): check whether they happened", [
        Text("  ") + Text(safe_line(e["effect_key"])) + Text(" (") + Text(safe_line(e["node"])) + Text(")")
        for e in r["effects_unconfirmed"]])
    todo = r.get("effects_to_compensate") or []
    if r["status"] == "aborted" or todo:
        _section(c, f"effects confirmed, not compensated ({len(todo)})", [
            Text("  ") + Text(safe_line(e["effect_key"])) + Text(" — undo: ")
            + Text(safe_line(e.get("compensation") or "no compensation recorded"))
            + Text(f"  [{safe_line(e['compensation_node'])}: {e['compensation_node_status']}]"
                   if e.get("compensation_node") else "", style="dim")
            for e in todo])


def _section(c: Console, title: str, lines: list[Text]) -> None:
    c.print(Text(title + ":", style="bold") if lines else Text(title, style="dim"))
    for line in lines[:LIST_LIMIT]:
        c.print(line)
    if len(lines) > LIST_LIMIT:
        c.print(f"  … and {len(lines) - LIST_LIMIT} more (--json lists them all)")


__all__ = ["budget_lines", "cmd_report", "register", "render_report"]

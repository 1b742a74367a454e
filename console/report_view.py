"""A task's report (``store.reading.task_report``) as literal text: one renderer for ``warden report`` and
the console's report screen. Rich only (no Textual), so the CLI loads no UI to print it.
"""

from __future__ import annotations

from rich.text import Text

from store.jsontypes import JsonMapping

from .glyphs import age_label, node_status_label, pause_label, task_status_label
from .text import safe_line

LIST_LIMIT = 50  # lines per section before "… and N more" (the JSON has them all)


def _tokens(n: float | None) -> str:
    return "—" if n is None else f"{int(n):,}"


def budget_lines(b: JsonMapping) -> list[str]:
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


def report_text(r: JsonMapping) -> Text:
    """The report as one literal Text (every agent-written string made safe)."""
    out = Text()

    def put(t: Text | str) -> None:
        out.append_text(t if isinstance(t, Text) else Text(t))
        out.append("\n")

    p = r["progress"]
    put(Text.assemble(Text(safe_line(r["task_id"]), style="bold"), "  ", task_status_label(r["status"]),
                      f"  {p['done']}/{p['total']} done  ", Text(safe_line(r["title"]), style="dim")))
    best = r["best_artifact"]
    if best is None:
        put("best result so far: none (no artifact committed)")
    else:
        head = Text("best result so far: ") + Text(safe_line(best["name"]), style="bold")
        head.append(" from node ")
        head.append_text(Text(safe_line(best["node"])))
        head.append(f", {best['bytes']} bytes, sha256 {best['sha256']}, at {best['at']}")
        check = best.get("verification") or {}
        if check.get("status") == "failed":
            head.append("  UNVERIFIED: failed verification by ", style="bold")
            head.append_text(Text(safe_line(check.get("by")), style="bold"))
            head.append(": ")
            head.append_text(Text(safe_line(check.get("verdict"), limit=200)))
            head.append("  (warden export refuses it without --unverified)", style="dim")
        elif not best["current"]:
            head.append("  (superseded: its node was rewound or failed since)", style="bold")
        elif check.get("status") == "passed":
            head.append("  verified by ")
            head.append_text(Text(safe_line(check.get("by"))))
        put(head)
    put(Text("budget:", style="bold"))
    for text in budget_lines(r["budget"]):
        put("  " + text)
    _section(out, f"unfinished ({len(r['unfinished'])})", [
        Text(f"  {node_status_label(u['status'])}  ") + Text(safe_line(u["key"]))
        + Text(f"  ({safe_line(u['kind'])}{', closing step' if u['always_admit'] else ''})", style="dim")
        for u in r["unfinished"]])
    _section(out, f"handoffs open ({len(r['handoffs_open'])})", [
        Text(f"  #{h['id']} ") + Text(safe_line(h["node"])) + Text(f" {safe_line(h['kind'])}: ")
        + Text(safe_line(h["question"])) + Text(f"  ({age_label(h['age_s'])})", style="dim")
        for h in r["handoffs_open"]])
    _section(out, f"effects intended, never confirmed ({len(r['effects_unconfirmed'])}): "
                  "check whether they happened", [
        Text("  ") + Text(safe_line(e["effect_key"])) + Text(" (") + Text(safe_line(e["node"])) + Text(")")
        for e in r["effects_unconfirmed"]])
    todo = r.get("effects_to_compensate") or []
    if r["status"] == "aborted" or todo:
        _section(out, f"effects confirmed, not compensated ({len(todo)})", [
            Text("  ") + Text(safe_line(e["effect_key"])) + Text(" — undo: ")
            + Text(safe_line(e.get("compensation") or "no compensation recorded"))
            + Text(f"  [{safe_line(e['compensation_node'])}: {e['compensation_node_status']}]"
                   if e.get("compensation_node") else "", style="dim")
            for e in todo])
    return out


def _section(out: Text, title: str, lines: list[Text]) -> None:
    out.append_text(Text(title + ":", style="bold") if lines else Text(title, style="dim"))
    out.append("\n")
    for one in lines[:LIST_LIMIT]:
        out.append_text(one)
        out.append("\n")
    if len(lines) > LIST_LIMIT:
        out.append(f"  … and {len(lines) - LIST_LIMIT} more (--json lists them all)\n")


__all__ = ["LIST_LIMIT", "budget_lines", "report_text"]

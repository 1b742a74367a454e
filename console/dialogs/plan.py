"""A plan's preview: everything an operator action would change, as literal text.

:func:`render_plan` turns a ``store.actions.Plan`` into a ``rich.text.Text`` (every agent-written
string made safe); :class:`PlanPreview` shows it in a dialog, or a one-line state until there is
a plan ("computing the plan…", a refusal).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from ..glyphs import node_status_label, task_status_label
from ..text import safe, safe_line

if TYPE_CHECKING:
    from store.actions import Plan

LIST_CAP = 300  # node lines per list in a preview before "… and N more" (counts stay exact)
KEPT_NAMES = 12


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_plan(plan: "Plan") -> Text:
    """Everything a plan changes, as literal Text (agent-written keys made safe)."""
    out = Text()
    out.append(safe_line(plan.summary(), limit=200) + "\n", style="bold")
    before, after = plan.task_status
    if before != after:
        out.append(f"task {safe_line(plan.task_id)}: {task_status_label(before)} → {task_status_label(after)}\n")
    params = plan.params.to_json()
    if plan.action == "park":
        if params.get("until"):
            out.append(f"until {safe_line(params['until'])}\n")
        if params.get("wake_on"):
            out.append(f"wake on: {safe_line(params['wake_on'], limit=200)}\n")
        if params.get("auto_resume"):
            out.append("resumes on its own when a wake condition is met (as the system)\n")
    if plan.action == "compensated":
        out.append(f"effect {safe_line(params.get('effect_key'), limit=120)} of {safe_line(params.get('node'), limit=40)}"
                   " → compensated (undone by hand; the reason is recorded as its note)\n")
    if plan.action in ("memory-confirm", "memory-reject"):  # a decision on a proposed memory (store/actions/memory.py)
        where = (f"nodes of kind {safe_line(params.get('kind'), limit=64)}" if params.get("scope") == "kind"
                 else "every node") + f" in tasks of workflow {safe_line(params.get('workflow') or '(none)', limit=64)}"
        out.append("  " + safe_line(params.get("text"), limit=400) + "\n")
        out.append(f"  for {where}\n", style="dim")
    if plan.action == "narrow":
        b, a = params.get("preconditions_before") or {}, params.get("preconditions_after") or {}
        if b != a:
            out.append("preconditions: " + safe_line(json.dumps(b, ensure_ascii=False), limit=120) + " → "
                       + safe_line(json.dumps(a, ensure_ascii=False), limit=120) + "\n")
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for key, (a, b) in plan.changes.items():
        groups.setdefault(b, []).append((key, a, b))
    why = params.get("out_of_scope") or {}
    for to in ("pending", "abandoned", "parked", "blocked"):
        rows = groups.get(to) or []
        if not rows:
            continue
        out.append(f"\n→ {to} ({len(rows)})\n", style="bold")
        for key, a, b in rows[:LIST_CAP]:
            out.append(f"  {safe_line(key, limit=60)}  ")
            out.append(f"{node_status_label(a)} → {node_status_label(b)}", style="dim")
            if key in why:
                out.append(f"  ({safe_line(why[key], limit=60)})", style="dim")
            out.append("\n")
        if len(rows) > LIST_CAP:
            out.append(f"  … and {len(rows) - LIST_CAP} more\n", style="dim")
    if plan.kept:
        names = ", ".join(safe_line(k, limit=40) for k in plan.kept[:KEPT_NAMES])
        more = f" … and {len(plan.kept) - KEPT_NAMES} more" if len(plan.kept) > KEPT_NAMES else ""
        out.append(f"\nkept as they are ({len(plan.kept)}): ", style="bold")
        out.append(names + more + "\n", style="dim")
    unaffected = params.get("unaffected")
    if isinstance(unaffected, int) and unaffected > 0:
        out.append(f"\n{plural(unaffected, 'other node')} not affected\n", style="dim")
    if plan.revoked_leases:
        out.append(f"\nleases revoked ({len(plan.revoked_leases)})\n", style="bold")
        for r in plan.revoked_leases[:LIST_CAP]:
            out.append(f"  {safe_line(r.get('node'), limit=60)}  held by {safe_line(r.get('owner') or '?', limit=60)}\n")
    if plan.compensations:
        out.append(f"\ncompensation nodes added ({len(plan.compensations)}), run in this order\n", style="bold")
        for i, c in enumerate(plan.compensations[:LIST_CAP], 1):
            out.append(f"  {i}. {safe_line(c.get('node'), limit=60)}")
            out.append(f"  undo: {safe_line(c.get('compensation'), limit=120)}\n", style="dim")
        if len(plan.compensations) > LIST_CAP:
            out.append(f"  … and {len(plan.compensations) - LIST_CAP} more\n", style="dim")
    if plan.effects_not_undone:
        out.append(f"\neffects already done, NOT undone ({len(plan.effects_not_undone)}, newest first)\n",
                   style="bold")
        for e in plan.effects_not_undone[:LIST_CAP]:
            out.append(f"  {safe_line(e.get('effect_key'), limit=80)} ({safe_line(e.get('node'), limit=40)})")
            if e.get("external_id"):
                out.append(f" → {safe_line(e.get('external_id'), limit=40)}")
            out.append("\n")
            comp = e.get("compensation")
            out.append("     undo: " + (safe_line(comp, limit=160) if comp else "no compensation recorded") + "\n",
                       style="dim" if comp else "bold")
    if plan.handoffs_withdrawn:
        out.append(f"\nhandoffs withdrawn ({len(plan.handoffs_withdrawn)}): ", style="bold")
        out.append(", ".join("#" + safe_line(h) for h in plan.handoffs_withdrawn[:50]) + "\n")
    if plan.resolutions_reapplied:
        out.append(f"\nhandoff answers given again to the rerun ({len(plan.resolutions_reapplied)}): ", style="bold")
        out.append(", ".join("#" + safe_line(h) for h in plan.resolutions_reapplied[:50]) + "\n")
    if plan.warnings:
        out.append("\nwarnings\n", style="bold")
        for w in plan.warnings:
            out.append("  ⚠ " + safe_line(w, limit=300) + "\n")
    return out


class PlanPreview(Static):
    """A plan, rendered literally; a one-line state ("computing…", a refusal) until there is one."""

    DEFAULT_CSS = "PlanPreview { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(Text("computing the plan…", style="dim"), markup=False, id=id)
        self.plan: "Plan | None" = None

    def show_plan(self, plan: "Plan") -> None:
        self.plan = plan
        self.update(render_plan(plan))

    def show_line(self, text: str, style: str = "dim") -> None:
        self.plan = None
        self.update(Text(safe(text), style=style))


__all__ = ["KEPT_NAMES", "LIST_CAP", "PlanPreview", "plural", "render_plan"]

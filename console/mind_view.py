"""A task's mind (``store.mind``: requirements, conclusions, rejected paths, plan versions,
memories) as literal text: one renderer for ``warden mind`` / ``warden plans`` / ``warden memory``
and the console's Mind screen and memory inbox. Rich only (no Textual). Every agent-written string
goes through the one sanitiser (``safe_line``) into a ``Text``: markup never parsed, control
characters escaped, one line each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from rich.text import Text

from store.mind.views import MemoryView, MindEntry, MindView, NodeMind, PlanVersionView, RequirementUse
from store.text import safe_line

from store.clock import iso

from .glyphs import MARKS, NODE_GLYPHS, age_label, task_status_label

LIST_LIMIT = 50  # lines of a section in the CLI's text before "… and N more" (the JSON has them all)
TEXT_CHARS = 300  # characters of one agent-written text on one line (the JSON has it whole)
KEYS_SHOWN = 6  # node keys named on a requirement's line


def _t(value: object, limit: int = TEXT_CHARS, style: str = "") -> Text:
    return Text(safe_line(value, limit=limit), style=style)


def node_mark(key: str, status: str) -> Text:
    """``fix-a ✔`` — a key and its status glyph (the glyph, not colour, carries the status)."""
    return _t(key, 80) + Text(f" {NODE_GLYPHS.get(status, '?')}")


def _marks(out: Text, nodes: Sequence[tuple[str, str]], total: int) -> Text:
    """``out`` and the first ``KEYS_SHOWN`` of ``nodes`` (key, status) marked, ``… N more`` of ``total``."""
    for i, (key, status) in enumerate(nodes[:KEYS_SHOWN]):
        if i:
            out.append(", ")
        out.append_text(node_mark(key, status))
    if total > KEYS_SHOWN:
        out.append(f", … {total - KEYS_SHOWN} more")
    return out


# ---------------------------------------------------------------------- requirements
def requirement_line(u: RequirementUse) -> Text:
    r = u.requirement
    head = Text.assemble(_t(r.id, 64, "bold"), "  ")
    if r.status != "active":
        head.append(f"[dropped in plan v{r.dropped_in}] ", style="dim")
    head.append_text(_t(r.text))
    return head


def serving_line(u: RequirementUse) -> Text:
    if not u.total:
        return Text(f"    served by no node {MARKS['dash']} nothing works towards it", style="bold")
    return _marks(Text(f"    {u.total} node{'s' if u.total != 1 else ''} ({u.done} done): "), u.nodes, u.total)


def unserving_line(m: MindView) -> Text:
    if not m.unserving_total:
        return Text("every node serves a requirement", style="dim")
    return _marks(Text(f"serving no requirement ({m.unserving_total}): "), m.unserving, m.unserving_total)


def state_line(m: MindView) -> Text:
    """Drift and alignment in one line (numbers and ids only)."""
    s = m.state
    parts = [f"plan v{s.plan_version}"]
    if s.requirements:
        parts.append(f"drift run {s.run}/{s.drift_after}" if s.drift_after else "drift check off")
        if s.alignment_every:
            check = f"check {s.check} open" if s.check else f"{s.since_check}/{s.alignment_every} to the next check"
            parts.append(f"alignment: {check}")
            if s.verdict:
                parts.append(f"last verdict {s.verdict}")
        else:
            parts.append("alignment checks off")
    else:
        parts.append("no requirements: no drift or alignment checks")
    return Text(" · ".join(parts))


# ---------------------------------------------------------------------- entries
def entry_line(e: MindEntry, now: float, *, width: int | None = None) -> Text:
    """``3m ago  fix-a  text  (source)`` and, for a rejected path, ``— why: reason``."""
    out = Text(f"{age_label(now - e.at):>8}  ", style="dim")
    out.append_text(_t(e.node or "(task)", 60, "bold"))
    out.append("  ")
    out.append_text(_t(e.text))
    if e.kind == "rejected" and e.reason:
        out.append(" — why: ")
        out.append_text(_t(e.reason))
    source = e.source or (f"{e.origin} by {e.actor}" if e.actor else e.origin)
    out.append("  (", style="dim")
    out.append_text(_t(source, 120, "dim"))
    out.append(")", style="dim")
    if width is not None:
        out.truncate(width, overflow="ellipsis")
    return out


# ---------------------------------------------------------------------- plan versions
def plan_head(p: PlanVersionView, now: float) -> Text:
    if p.version == 1:
        return Text.assemble(("v1", "bold"), f"  the plan as first built  ({age_label(now - p.at)})")
    out = Text.assemble((f"v{p.version}", "bold"), "  ", _t(p.trigger, 40), " by ", _t(p.actor, 60),
                        f"  {age_label(now - p.at)}")
    if p.in_flight:
        out.append(f"  in flight: {p.in_flight}", style="dim")
    return out


def plan_lines(p: PlanVersionView) -> list[Text]:
    """What a version changed: its diff, the nodes in flight and what happened to them, why."""
    out: list[Text] = []
    if p.version == 1:
        return out
    out.append(Text("    why: ") + _t(p.reason))
    for label, sign, keys in (("added", "+", p.added), ("removed", "-", p.removed), ("reordered", "~", p.reordered)):
        if keys:
            out.append(Text(f"    {sign} {label} ({len(keys)}): ") + _t(", ".join(keys[:20])
                                                                          + (f", … {len(keys) - 20} more"
                                                                             if len(keys) > 20 else "")))
    if p.narrowed:
        dropped = list(p.narrowed.get("dropped") or [])
        line = Text("    goal narrowed")
        if dropped:
            line.append(": dropped ")
            line.append_text(_t(", ".join(dropped)))
        if p.narrowed.get("goal"):
            line.append(" — now: ")
            line.append_text(_t(p.narrowed["goal"]))
        out.append(line)
    for f in p.in_flight_nodes:
        out.append(Text("    in flight: ") + _t(f.get("node"), 80) + Text(f" ({safe_line(f.get('was'), limit=20)}) → ")
                   + _t(f.get("fate"), 80))
    if p.dependents_kept:
        out.append(Text("    runs without a removed dependency: ", style="dim") + _t(", ".join(p.dependents_kept), 200,
                                                                                        "dim"))
    return out


# ---------------------------------------------------------------------- memories
def memory_line(m: MemoryView, now: float) -> Text:
    where = (f"kind {safe_line(m.kind, limit=64)}" if m.scope == "kind" else "every kind") + \
        f", workflow {safe_line(m.workflow or '(none)', limit=64)}"
    out = Text.assemble((f"#{m.id}", "bold"), f"  {m.status:<9}  ")
    out.append_text(_t(m.text))
    out.append(f"  ({where}; from ", style="dim")
    out.append_text(_t(f"{m.task_id}/{m.node}", 120, "dim"))
    out.append(f", {age_label(now - m.proposed_at)})", style="dim")
    if m.source:
        out.append("  source: ", style="dim")
        out.append_text(_t(m.source, 200, "dim"))
    if m.decided_by:
        out.append("  ")
        out.append_text(_t(f"{m.status} by {m.decided_by}: {m.decision_reason or ''}", 200, "dim"))
    return out


# ---------------------------------------------------------------------- the whole mind (the CLI)
def mind_text(m: MindView, now: float) -> Text:
    out = Text()

    def put(t: Text | str) -> None:
        out.append_text(t if isinstance(t, Text) else Text(t))
        out.append("\n")

    put(Text.assemble(_t(m.task_id, 64, "bold"), "  ", task_status_label(m.status), "  ", _t(m.title, 80, "dim")))
    put(state_line(m))
    _section(put, f"requirements ({len(m.requirements)})",
             [line for u in m.requirements for line in (Text("  ") + requirement_line(u), serving_line(u))])
    if m.requirements:
        put(Text("  ") + unserving_line(m))
    _section(put, f"constraints ({len(m.constraints)})", [Text("  - ") + _t(c) for c in m.constraints])
    _section(put, f"conclusions ({len(m.conclusions)}, newest first)", [Text("  ") + entry_line(e, now)
                                                                        for e in m.conclusions])
    _section(put, f"rejected paths ({len(m.rejected)}, newest first)", [Text("  ") + entry_line(e, now)
                                                                        for e in m.rejected])
    _section(put, f"plan versions ({len(m.plans)})", [line for p in m.plans
                                                      for line in [Text("  ") + plan_head(p, now), *plan_lines(p)]])
    _section(put, f"memories proposed ({len(m.memories)})", [Text("  ") + memory_line(x, now) for x in m.memories])
    return out


def _section(put: Callable[[Text | str], None], title: str, lines: Sequence[Text]) -> None:
    put(Text(title + ":", style="bold") if lines else Text(title, style="dim"))
    for one in lines[:LIST_LIMIT]:
        put(one)
    if len(lines) > LIST_LIMIT:
        put(f"  … and {len(lines) - LIST_LIMIT} more (--json lists them all)")


def plans_text(task_id: str, plans: Sequence[PlanVersionView], now: float) -> Text:
    out = Text()
    out.append_text(_t(task_id, 64, "bold"))
    out.append(f"  plan v{plans[-1].version if plans else 1} ({len(plans)} version{'s' if len(plans) != 1 else ''})\n")
    for p in plans:
        out.append_text(plan_head(p, now))
        out.append("\n")
        for line in plan_lines(p):
            out.append_text(line)
            out.append("\n")
    return out


def memories_text(found: Sequence[MemoryView], now: float) -> Text:
    out = Text()
    if not found:
        out.append("no memories\n")
    for m in found:
        out.append_text(memory_line(m, now))
        out.append("\n")
    return out


# ---------------------------------------------------------------------- a node's place (node detail)
def mind_worth_showing(nm: NodeMind) -> bool:
    """A node of a task with requirements, or one whose next claim is handed anything beyond the
    task's inputs (constraints, rejected paths, conclusions, memories)."""
    mem = nm.memory or {}
    return bool(nm.task_requirements or nm.serves or nm.removed_in is not None
                or any(mem.get(k) for k in ("constraints", "rejected", "conclusions", "memories")))


def node_mind_text(nm: NodeMind, now: float) -> Text:
    """A node's place in the task's mind (``store.mind.views.NodeMind``): the requirements it
    serves, the plan version that removed it, and what its next claim is handed
    (``Claim.inputs["memory"]``), entry by entry."""
    out = Text()
    task_has_requirements = nm.task_requirements > 0
    if nm.serves:
        for r in nm.serves:
            out.append("  serves        ", style="dim")
            out.append_text(_t(r.get("id"), 64, "bold"))
            out.append("  ")
            out.append_text(_t(r.get("text") or "(unknown requirement)", 200, "dim" if r.get("status") != "active" else ""))
            if r.get("status") != "active":
                out.append(f"  [{safe_line(r.get('status'), limit=20)}]", style="dim")
            out.append("\n")
    else:
        out.append("  serves        ", style="dim")
        out.append("no requirement" + (": it counts towards drift" if task_has_requirements else "") + "\n",
                   style="bold" if task_has_requirements else "dim")
    if nm.removed_in is not None:
        out.append(f"  removed       by plan v{nm.removed_in}" + (f" while it ran ({safe_line(nm.removed_mode, limit=20)})"
                                                                   if nm.removed_mode else "") + "\n")
    mem = nm.memory or {}
    counts = [(len(mem.get(k) or ()), k) for k in ("constraints", "requirements", "rejected", "conclusions", "memories")]
    omitted = sum((mem.get("omitted") or {}).values())
    out.append("  next claim    ", style="dim")
    out.append(", ".join(f"{n} {k if n != 1 else k.rstrip('s')}" for n, k in counts)
               + (f" (+{omitted} left out by the bounds)" if omitted else "") + "\n")
    for label, key in (("rejected", "rejected"), ("conclusion", "conclusions"), ("memory", "memories")):
        for e in (mem.get(key) or [])[:5]:
            out.append(f"    {label:<11}", style="dim")
            if e.get("node"):
                out.append_text(_t(e["node"], 40, "bold"))
                out.append("  ")
            out.append_text(_t(e.get("text"), 160))
            if e.get("reason"):
                out.append(" — why: ")
                out.append_text(_t(e["reason"], 120))
            out.append("  (", style="dim")
            out.append_text(_t(e.get("source") or "", 80, "dim"))
            out.append(")\n", style="dim")
    if mem.get("alignment"):
        out.append("    alignment  ", style="dim")
        out.append_text(_t(f"last verdict {mem['alignment'].get('verdict')} ({mem['alignment'].get('at')})", 120))
        out.append("\n")
    return out


# ---------------------------------------------------------------------- rows (the Mind screen's list)
Cell = tuple[str, str]  # (safe text, style name): console/widgets/rowlist.py
SECTIONS = ("requirements", "constraints", "conclusions", "rejected", "plans", "memories")
MEMORY_STYLES = {"pending": "warn", "confirmed": "ok", "rejected": "dim"}  # a memory's status, on a row


@dataclass(frozen=True)
class MindRow:
    """One line of the Mind screen: two cells (a short mark — an id, an age, a version — and the
    text), the section it belongs to, the node it is about (``r`` rewinds it, ``enter`` opens it)
    and the full text shown under the list when it is selected."""

    cells: tuple[Cell, Cell]
    section: str
    node: str | None = None
    detail: Text | None = None


def _keys(nodes: Sequence[tuple[str, str]], total: int) -> str:
    out = ", ".join(f"{safe_line(k, limit=60)} {NODE_GLYPHS.get(s, '?')}" for k, s in nodes[:KEYS_SHOWN])
    return out + (f", +{total - KEYS_SHOWN} more" if total > KEYS_SHOWN else "")


def _entry_detail(e: MindEntry) -> Text:
    out = Text()
    out.append_text(_t(e.text, 2000))
    if e.reason:
        out.append("\nwhy: ", style="bold")
        out.append_text(_t(e.reason, 2000))
    out.append("\n")
    src = e.source or f"{e.origin} by {e.actor}"
    out.append_text(_t(f"{iso(e.at)} · node {e.node or '(the task)'} attempt {e.attempt} · {e.origin} by {e.actor} "
                       f"· source: {src}", 600, "dim"))
    return out


def mind_rows(m: MindView, now: float) -> list[MindRow]:
    """The Mind screen's lines: requirements (and the nodes serving each, and those serving none),
    constraints, conclusions and rejected paths (newest first), the plan history (newest first),
    the memories the task proposed. Every agent-written string made safe, one line each."""
    rows: list[MindRow] = []

    def head(section: str, title: str, hint: str = "") -> None:
        rows.append(MindRow((("", ""), (title + hint, "key")), section))

    st = m.state
    head("requirements", f"REQUIREMENTS ({len(m.requirements)})", f"  · {state_line(m).plain}")
    for u in m.requirements:
        r = u.requirement
        style = "dim" if r.status != "active" else ""
        text = (f"[dropped in v{r.dropped_in}] " if r.status != "active" else "") + safe_line(r.text, limit=TEXT_CHARS)
        rows.append(MindRow(((safe_line(r.id, limit=64), "key"), (text, style)), "requirements",
                            detail=requirement_line(u)))
        served = (f"{u.total} node{'s' if u.total != 1 else ''} ({u.done} done): " + _keys(u.nodes, u.total)
                  if u.total else "served by no node: nothing works towards it")
        rows.append(MindRow((("", ""), ("  " + served, "dim" if u.total else "warn")), "requirements",
                            detail=serving_line(u)))
    if m.requirements:
        drifting = bool(st.drift_after and st.run >= st.drift_after)
        text = (f"serving none ({m.unserving_total}): " + _keys(m.unserving, m.unserving_total)
                if m.unserving_total else "every node serves a requirement")
        rows.append(MindRow((("none", "warn" if drifting else "dim"), (text, "warn" if drifting else "dim")),
                            "requirements", detail=unserving_line(m)))
    else:
        rows.append(MindRow((("", ""), ("no requirements: nothing to judge drift against", "dim")), "requirements"))
    head("constraints", f"CONSTRAINTS ({len(m.constraints)})")
    for c in m.constraints:
        rows.append(MindRow((("-", "dim"), (safe_line(c, limit=TEXT_CHARS), "")), "constraints", detail=_t(c, 2000)))
    head("conclusions", f"CONCLUSIONS ({len(m.conclusions)}, newest first)", "  · r: rewind the node")
    for e in m.conclusions:
        text = f"{safe_line(e.node or '(task)', limit=60)}  {safe_line(e.text, limit=TEXT_CHARS)}"
        rows.append(MindRow(((age_label(now - e.at), "dim"), (text, "")), "conclusions", node=e.node,
                            detail=_entry_detail(e)))
    head("rejected", f"REJECTED PATHS ({len(m.rejected)}, newest first)")
    for e in m.rejected:
        text = f"{safe_line(e.node or '(task)', limit=60)}  {safe_line(e.text, limit=TEXT_CHARS)}"
        if e.reason:
            text += f" {MARKS['dash']} why: {safe_line(e.reason, limit=TEXT_CHARS)}"
        rows.append(MindRow(((age_label(now - e.at), "dim"), (text, "")), "rejected", node=e.node,
                            detail=_entry_detail(e)))
    head("plans", f"PLAN HISTORY (v{st.plan_version}, {len(m.plans)} version{'s' if len(m.plans) != 1 else ''})")
    for p in reversed(m.plans):  # newest first
        headline = plan_head(p, now)
        lines = plan_lines(p)
        whole = Text("\n").join([headline, *lines])  # every line of a version shows the whole version
        rows.append(MindRow(((f"v{p.version}", "key"), (headline.plain[len(f"v{p.version}"):].strip(), "")), "plans",
                            detail=whole))
        for line in lines:
            rows.append(MindRow((("", ""), (line.plain.strip(), "dim")), "plans", detail=whole))
    head("memories", f"MEMORIES PROPOSED ({len(m.memories)})", "  · M: the memory inbox")
    for x in m.memories:
        rows.append(MindRow(((f"#{safe_line(x.id)}", "key"), (f"{x.status:<9} {safe_line(x.text, limit=TEXT_CHARS)}",
                                                             MEMORY_STYLES.get(x.status, ""))),
                            "memories", detail=memory_line(x, now)))
    return rows


__all__ = ["MEMORY_STYLES", "MindRow", "SECTIONS", "entry_line", "mind_rows", "mind_worth_showing", "node_mind_text", "memories_text", "memory_line", "mind_text", "node_mark", "plan_head", "plan_lines",
           "plans_text", "requirement_line", "serving_line", "state_line", "unserving_line"]

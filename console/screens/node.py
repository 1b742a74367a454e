"""One node: lease and heartbeat, digests, attempts, observations (with a new-information
sparkline), effects, artifacts, rejections, handoffs, and its events (decision layer first)."""

from __future__ import annotations

import json
from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from store.clock import iso
from store.views import NodeDetail

from ..glyphs import age_label, duration_label, node_status_label
from ..text import safe, safe_line
from ..widgets import sparkline
from .base import WardenScreen


def _section(out: Text, title: str) -> None:
    out.append("\n" + title + "\n", style="bold underline")


def _field(out: Text, name: str, value: str, style: str = "") -> None:
    out.append(f"  {name:<14}", style="dim")
    out.append(value + "\n", style=style)


def render_detail(d: NodeDetail, now: float) -> Text:
    """The node detail as one Text; every agent-written string through safe()/safe_line()."""
    n = d.node
    out = Text()
    out.append(safe_line(n.key), style="bold")
    out.append(f"  {node_status_label(n.status)}  kind {safe_line(n.kind)}  attempt {n.attempt}\n")
    if n.title:
        out.append(safe_line(n.title) + "\n", style="italic")
    _field(out, "task", safe_line(n.task_id))
    _field(out, "deps", ", ".join(safe_line(k) for k in n.deps) or "—")
    _field(out, "dependents", ", ".join(safe_line(k) for k in d.dependents) or "—")

    _section(out, "Lease")
    if n.has_lease:
        left = (n.lease_until or 0) - now
        _field(out, "owner", safe_line(n.lease_owner))
        _field(out, "until", f"{iso(n.lease_until)} ({'expired ' + age_label(-left) if left <= 0 else 'in ' + duration_label(left)})",
               "" if left > 0 else "bold")
    else:
        _field(out, "owner", "— (no lease)")
    _field(out, "heartbeat", f"{age_label(now - n.heartbeat_at)} ({iso(n.heartbeat_at)})" if n.heartbeat_at else "—")
    _field(out, "claims", f"{n.claim_count}" + (f" of {n.max_claims}" if n.max_claims else ""))
    if n.next_retry_at:
        _field(out, "next retry", f"{iso(n.next_retry_at)} ({age_label(now - n.next_retry_at)})")

    _section(out, "Work")
    _field(out, "input digest", safe_line(n.input_digest) if n.input_digest else "—")
    _field(out, "output ref", safe_line(n.output_ref) if n.output_ref else "—")
    _field(out, "output digest", safe_line(n.output_digest) if n.output_digest else "—")
    if n.output is not None:
        _field(out, "output", safe_line(json.dumps(n.output, ensure_ascii=False, default=str), limit=300))
    units = "—" if n.units_total is None and n.units_done is None else f"{n.units_done or 0:g}/{n.units_total or 0:g}"
    _field(out, "units", units)
    _field(out, "tokens", f"{n.tokens_used}" + (f" (est {n.est_tokens})" if n.est_tokens else ""))
    _field(out, "wall", duration_label(n.wall_used_s) + (f" (est {duration_label(n.est_wall_s)})" if n.est_wall_s else ""))
    _field(out, "started", iso(n.started_at) or "—")
    _field(out, "finished", iso(n.finished_at) or "—")
    if n.error or n.failure_class:
        _field(out, "failure", f"{safe_line(n.failure_class or '—')} retryable={'yes' if n.retryable else 'no'}")
        _field(out, "error", safe_line(n.error or "—", limit=500), "bold")
    if n.status == "parked" or n.park_reason:
        _field(out, "parked", f"{iso(n.parked_at)}: {safe_line(n.park_reason or '')}"
               + (f" until {iso(n.park_until)}" if n.park_until else ""))

    _section(out, f"Rejections ({len(n.rejections)})")
    for r in n.rejections:
        out.append("  ✖ " + safe_line(r, limit=300) + "\n")

    _section(out, f"Observations ({len(d.observations)})")
    if d.observations:
        _field(out, "new info", sparkline([o.new_units for o in d.observations], width=60)
               + f"  (last: +{d.observations[-1].new_units})")
        for o in d.observations[-5:][::-1]:
            out.append(f"  {iso(o.at)} #{o.attempt} +{o.new_units} new, {o.lines} lines\n", style="dim")
            for line in safe(o.text, limit=600).splitlines()[:6]:
                out.append("    " + line + "\n")

    _section(out, f"Effects ({len(d.effects)})")
    for e in d.effects:
        out.append(f"  {safe_line(e.status):<11} {safe_line(e.effect_key, limit=80)}"
                   + (f" → {safe_line(e.external_id)}" if e.external_id else "")
                   + (f"  undo: {safe_line(e.compensation, limit=80)}" if e.compensation else "") + "\n")
        if e.status == "compensated":
            out.append(f"      compensated by {safe_line(e.compensated_by or '?', limit=40)} at {iso(e.compensated_at)}"
                       + (f": {safe_line(e.compensation_note, limit=100)}" if e.compensation_note else "") + "\n",
                       style="dim")
        elif e.compensation_node:
            out.append(f"      compensation node {safe_line(e.compensation_node, limit=80)}\n", style="dim")

    _section(out, f"Artifacts ({len(d.artifacts)})")
    for a in d.artifacts:
        out.append(f"  {safe_line(a.name)}  {a.size} bytes  sha256 {a.sha256[:16]}…  #{a.attempt}\n")

    _section(out, f"Handoffs ({len(d.handoffs)})")
    for h in d.handoffs:
        out.append(f"  [{safe_line(h.id)}] {safe_line(h.status)} {safe_line(h.kind)}: {safe_line(h.question, limit=200)}\n")
        if h.resolution_option:
            out.append(f"     resolved by {safe_line(h.resolved_by)}: {safe_line(h.resolution_option)}"
                       f" {safe_line(h.resolution_answer or '')}\n", style="dim")

    _section(out, f"Events ({len(d.events)}, decision layer first)")
    for e in d.events[:100]:
        out.append(f"  {iso(e.at)} ", style="dim")
        out.append(f"{safe_line(e.layer):<9} ", style="bold" if e.layer == "decision" else "")
        out.append(f"{safe_line(e.kind)}  {safe_line(e.actor)}: {safe_line(e.summary, limit=200)}\n")
    return out


class NodeDetailScreen(WardenScreen):
    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("up,k", "scroll(-1)", "Up", show=False),
        Binding("down,j", "scroll(1)", "Down", show=False),
    ]

    def __init__(self, task_id: str, key: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.key = key
        self.header = f"task {safe_line(task_id)} › {safe_line(key)}"
        self.detail: NodeDetail | None = None

    def compose_body(self) -> Iterable[Widget]:
        with VerticalScroll(id="detail-scroll"):
            yield Static(Text("loading…", style="dim"), id="detail", markup=False)

    def on_mount(self) -> None:
        self.query_one("#detail-scroll").focus()
        d = self.wapp.detail
        if d is not None and d.node.task_id == self.task_id and d.node.key == self.key:
            self.show_detail(d)

    def show_detail(self, detail: NodeDetail) -> None:
        self.detail = detail
        self.query_one("#detail", Static).update(render_detail(detail, self.wapp.now()))

    def tick(self) -> None:
        if self.detail is not None:
            self.query_one("#detail", Static).update(render_detail(self.detail, self.wapp.now()))

    def selected_task(self) -> str | None:
        return self.task_id

    def selected_node(self) -> str | None:
        return self.key

    def action_back(self) -> None:
        self.wapp.pop_screen()

    def action_scroll(self, step: int) -> None:
        self.query_one("#detail-scroll", VerticalScroll).scroll_relative(y=step, animate=False)

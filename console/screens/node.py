"""One node: its signals (each with its evidence and the action it suggests, one key away), its
estimate and why, its last failure, lease and heartbeat, digests, attempts, observations (identical
consecutive ones collapsed; a new-information sparkline), effects, artifacts, rejections, handoffs,
and its events (decision layer first)."""

from __future__ import annotations

import json
from typing import Iterable

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.message import Message
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from store.clock import iso
from store.errors import LedgerUnavailable, NotFound
from store.reading.signals import wait_text
from store.views import NodeDetail, NodeView, TaskView

from ..analysis import NodeExplanation, explain_node
from ..dialogs import EscalateDialog, open_action
from ..explain import failure_section, field, observations_section, section, signals_section, estimate_section
from ..explain import suggestion
from ..glyphs import READ_ONLY_NOTICE, age_label, duration_label, node_status_label
from ..text import safe_line
from ..widgets import sparkline
from ..mind_view import mind_worth_showing, node_mind_text
from .base import WardenScreen
from .resolve import ResolveHandoffScreen


def render_detail(d: NodeDetail, now: float, explained: NodeExplanation | None = None) -> Text:
    """The node detail as one Text; every agent-written string through safe()/safe_line(). It opens
    with the node's signals (and what to do about each) and its estimate (console/explain.py);
    ``explained`` None: still being computed."""
    n = d.node
    out = Text()
    out.append(safe_line(n.key), style="bold")
    out.append(f"  {node_status_label(n.status)}  kind {safe_line(n.kind)}  attempt {n.attempt}\n")
    if n.title:
        out.append(safe_line(n.title) + "\n", style="italic")
    field(out, "task", safe_line(n.task_id))
    field(out, "deps", ", ".join(safe_line(k) for k in n.deps) or "—")
    field(out, "dependents", ", ".join(safe_line(k) for k in d.dependents) or "—")

    signals_section(out, explained.signals if explained is not None else None, now, wait_text(n, now))
    estimate_section(out, explained.eta if explained is not None else None, n.status)
    failure_section(out, n, d.failure, now)

    section(out, "Lease")
    if n.has_lease:
        left = (n.lease_until or 0) - now
        field(out, "owner", safe_line(n.lease_owner))
        field(out, "until", f"{iso(n.lease_until)} ({'expired ' + age_label(-left) if left <= 0 else 'in ' + duration_label(left)})",
               "" if left > 0 else "bold")
    else:
        field(out, "owner", "— (no lease)")
    field(out, "heartbeat", f"{age_label(now - n.heartbeat_at)} ({iso(n.heartbeat_at)})" if n.heartbeat_at else "—")
    field(out, "claims", f"{n.claim_count}" + (f" of {n.max_claims}" if n.max_claims else ""))

    section(out, "Work")
    field(out, "input digest", safe_line(n.input_digest) if n.input_digest else "—")
    field(out, "output ref", safe_line(n.output_ref) if n.output_ref else "—")
    field(out, "output digest", safe_line(n.output_digest) if n.output_digest else "—")
    if n.output is not None:
        field(out, "output", safe_line(json.dumps(n.output, ensure_ascii=False, default=str), limit=300))
    units = "—" if n.units_total is None and n.units_done is None else f"{n.units_done or 0:g}/{n.units_total or 0:g}"
    field(out, "units", units)
    field(out, "tokens", f"{n.tokens_used}" + (f" (est {n.est_tokens})" if n.est_tokens else ""))
    field(out, "wall", duration_label(n.wall_used_s) + (f" (est {duration_label(n.est_wall_s)})" if n.est_wall_s else ""))
    field(out, "started", iso(n.started_at) or "—")
    field(out, "finished", iso(n.finished_at) or "—")
    if n.status == "parked" or n.park_reason:
        field(out, "parked", f"{iso(n.parked_at)}: {safe_line(n.park_reason or '')}"
               + (f" until {iso(n.park_until)}" if n.park_until else ""))

    section(out, f"Rejections ({len(n.rejections)})")
    for r in n.rejections:
        out.append("  ✖ " + safe_line(r, limit=300) + "\n")

    observations_section(out, d.observations, sparkline([o.new_units for o in d.observations], width=60), node=n)

    section(out, f"Effects ({len(d.effects)})")
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

    section(out, f"Artifacts ({len(d.artifacts)})")
    for a in d.artifacts:
        out.append(f"  {safe_line(a.name)}  {a.size} bytes  sha256 {a.sha256[:16]}…  #{a.attempt}\n")

    section(out, f"Handoffs ({len(d.handoffs)})")
    for h in d.handoffs:
        out.append(f"  [{safe_line(h.id)}] {safe_line(h.status)} {safe_line(h.kind)}: {safe_line(h.question, limit=200)}\n")
        if h.resolution_option:
            out.append(f"     resolved by {safe_line(h.resolved_by)}: {safe_line(h.resolution_option)}"
                       f" {safe_line(h.resolution_answer or '')}\n", style="dim")

    if d.mind is not None and mind_worth_showing(d.mind):  # the task's mind: what it serves, what it is handed
        section(out, "Mind")
        out.append_text(node_mind_text(d.mind, now))

    section(out, f"Events ({len(d.events)}, decision layer first)")
    for ev in d.events[:100]:
        out.append(f"  {iso(ev.at)} ", style="dim")
        out.append(f"{safe_line(ev.layer):<9} ", style="bold" if ev.layer == "decision" else "")
        out.append(f"{safe_line(ev.kind)}  {safe_line(ev.actor)}: {safe_line(ev.summary, limit=200)}\n")
    return out


EXPLAIN_EVERY_S = 5.0  # signals move with the clock (a heartbeat going stale): recomputed this often


class Explained(Message):
    """The node's signals and estimate, computed in the screen's worker."""

    def __init__(self, seq: int, explained: NodeExplanation) -> None:
        super().__init__()
        self.seq, self.explained = seq, explained


class NodeDetailScreen(WardenScreen):
    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("up,k", "scroll(-1)", "Up", show=False),
        Binding("down,j", "scroll(1)", "Down", show=False),
        Binding("s", "act(0)", "Act on signal", id="act"),
        *[Binding(str(i + 1), f"act({i})", f"Act on signal {i + 1}", show=False) for i in range(9)],
    ]

    def __init__(self, task_id: str, key: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.key = key
        self.header = f"task {safe_line(task_id)} › {safe_line(key)}"
        self.detail: NodeDetail | None = None
        self.explained: NodeExplanation | None = None
        self._explain_seq = 0
        self._explain_busy = False
        self._explain_again = False
        self._explained_at = 0.0

    def compose_body(self) -> Iterable[Widget]:
        with VerticalScroll(id="detail-scroll"):
            yield Static(Text("loading…", style="dim"), id="detail", markup=False)

    def on_mount(self) -> None:
        self.query_one("#detail-scroll").focus()
        hub = self.wapp.hub
        hub.subscribe(self, hub.details_read, self._detail_read)
        hub.watch_detail(self, self.task_id, self.key)  # read now, and whenever an event names the node
        self.explain()

    def _detail_read(self, detail: NodeDetail) -> None:
        if (detail.node.task_id, detail.node.key) == (self.task_id, self.key):
            self.show_detail(detail)

    def shown_node(self, task_id: str, key: str) -> NodeView | None:
        if self.detail is None or (task_id, key) != (self.task_id, self.key):
            return None
        return self.detail.node

    def show_detail(self, detail: NodeDetail) -> None:
        changed = self.detail is not None and self.detail.node.version != detail.node.version
        self.detail = detail
        self.repaint()
        if changed:
            self.explain()

    def repaint(self) -> None:
        if self.detail is not None:
            self.query_one("#detail", Static).update(render_detail(self.detail, self.wapp.now(), self.explained))

    def tick(self) -> None:
        self.repaint()
        if self.wapp.now() - self._explained_at >= EXPLAIN_EVERY_S:
            self.explain()

    # ---- signals and estimate (a worker; the same store functions as `warden graph`)
    def explain(self) -> None:
        if self._explain_busy:
            self._explain_again = True
            return
        self._explain_busy = True
        self._explain_seq += 1
        self._explained_at = self.wapp.now()
        tasks = self.wapp.tasks_model
        i = tasks.index.get(self.task_id)
        self._explain(self._explain_seq, self.wapp.now(), tasks.rows[i].view if i is not None else None)

    @work(thread=True, exit_on_error=False, group="explain")
    def _explain(self, seq: int, now: float, task: TaskView | None) -> None:
        try:
            got = self.wapp.feed.read(lambda ledger: explain_node(ledger, self.task_id, self.key, now, task=task))
            self.post_message(Explained(seq, got))
        except (LedgerUnavailable, NotFound):
            pass  # the header says the ledger is unavailable; a node gone shows as it was last read
        finally:
            try:
                self.app.call_from_thread(self._explain_done)
            except RuntimeError:
                pass  # the app is closing

    def _explain_done(self) -> None:
        self._explain_busy = False
        if self._explain_again:
            self._explain_again = False
            self.explain()

    @on(Explained)
    def _explained(self, msg: Explained) -> None:
        if msg.seq == self._explain_seq:
            had = bool(self.explained and self.explained.signals)
            self.explained = msg.explained
            self.repaint()
            if had != bool(msg.explained.signals):
                self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`s` is in the footer only while the node has a signal to act on."""
        if action == "act":
            return bool(self.explained and self.explained.signals)
        return True

    # ---- acting on a signal
    def action_act(self, index: int) -> None:
        """The action the ``index``-th signal suggests, its dialog prefilled (console/explain.py)."""
        sigs = self.explained.signals if self.explained is not None else ()
        if index >= len(sigs):
            self.wapp.notify(safe_line("no signal to act on" if not sigs else f"there is no signal {index + 1}"),
                             severity="warning", markup=False)
            return
        sig = sigs[index]
        sug = suggestion(sig)
        if sug is None:
            self.wapp.notify(safe_line(f"signal {index + 1} suggests no action"), severity="warning", markup=False)
            return
        if self.wapp.read_only:
            self.wapp.notify(READ_ONLY_NOTICE, severity="warning")
            return
        if sug.action == "resolve":
            hid = next((h.id for h in (self.detail.handoffs if self.detail else ()) if h.status == "open"), None)
            if hid is None:
                self.wapp.notify("the handoff is no longer open", severity="warning")
                return
            self.wapp.push_screen(ResolveHandoffScreen(hid))
        elif sug.action == "escalate":
            question = (f"{self.key} shows {sig.get('kind')}: {sig.get('evidence')}. "
                        "How should it go on?")
            self.wapp.push_screen(EscalateDialog(self.task_id, self.key, reason=sug.reason, question=question,
                                                 context={"signal": dict(sig)}))
        elif sug.action == "narrow":
            open_action(self.wapp, "narrow", self.task_id, None, reason=sug.reason, exclude=[self.key])
        elif sug.action == "resume":
            open_action(self.wapp, "resume", self.task_id, self.key)
        else:
            open_action(self.wapp, sug.action, self.task_id, self.key, reason=sug.reason)

    def selected_task(self) -> str | None:
        return self.task_id

    def selected_node(self) -> str | None:
        return self.key

    def action_back(self) -> None:
        self.wapp.pop_screen()

    def action_scroll(self, step: int) -> None:
        self.query_one("#detail-scroll", VerticalScroll).scroll_relative(y=step, animate=False)

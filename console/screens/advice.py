"""Recovery advice for one ledger node (`R` on a failed, orphaned or blocked node).

The advice (``store.recovery.advise``: a recommendation, the reason and its evidence) is read in a
thread worker and shown; accepting it opens the matching action dialog pre-filled — rewind →
the rewind dialog with the advice as its reason; retry → a rewind of that node (a failed node
rewound is a retry); abandon → the narrow dialog with that node marked for exclusion;
needs_human → the node's open handoff in the resolution screen (or, without one, a notice: a
person decides). Nothing is written here: the dialog it opens previews and applies as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Static

from store.errors import WardenError

from ..dialogs.base import WardenModal, read_only_notice
from ..dialogs.opening import open_action
from ..glyphs import node_status_label
from ..text import literal, safe_line
from ..widgets import KeyFooter
from .resolve import ResolveHandoffScreen

if TYPE_CHECKING:
    from store import Ledger
    from store.recovery.advice import Advice
    from store.views import HandoffView

ACCEPT_LABELS = {
    "rewind": "Rewind from {node}",
    "retry": "Retry {node}",
    "abandon": "Abandon {node}",
    "needs_human": "Answer handoff #{handoff}",
}


class AdviceReady(Message):
    def __init__(self, advice: "Advice | None", handoffs: "list[HandoffView]", error: str | None = None) -> None:
        super().__init__()
        self.advice, self.handoffs, self.error = advice, handoffs, error


def render_advice(advice: "Advice", handoffs: "list[HandoffView]") -> Text:
    out = Text()
    out.append("situation       ", style="dim")
    out.append(node_status_label(advice.status) + (" (orphaned: lease expired)" if advice.situation == "orphaned" else "")
               + "\n")
    out.append("recommendation  ", style="dim")
    out.append(safe_line(advice.recommendation), style="bold")
    out.append(f"  ({safe_line(advice.reason)})\n")
    if advice.evidence:
        out.append("why             ", style="dim")
        out.append(safe_line(advice.evidence[0], limit=300) + "\n")
    out.append("\nevidence\n", style="bold")
    for e in advice.evidence[1:]:
        out.append("  • " + safe_line(e, limit=400) + "\n")
    if advice.recommendation == "needs_human" and not handoffs:
        out.append("\nA person decides: there is no open handoff to answer here. Look at the evidence, then "
                   "act with p / n / r / a as you judge.\n", style="bold")
    return out


class AdviceDialog(WardenModal[None]):
    """The advice for one node; Accept opens the matching action dialog, pre-filled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="dialog-cancel"),
        Binding("ctrl+s", "accept", "Accept", id="dialog-accept", priority=True),
    ]

    def __init__(self, task_id: str, node: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.node = node
        self.advice: "Advice | None" = None
        self.handoffs: "list[HandoffView]" = []
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            title = Text("Recovery advice ", style="bold")
            title.append(f"node {safe_line(self.node)} of task {safe_line(self.task_id)}", style="")
            yield Static(title, id="dialog-title", markup=False)
            with VerticalScroll(id="preview-scroll"):
                yield Static(Text("reading the node's evidence…", style="dim"), id="advice", markup=False)
            yield Static("", id="dialog-error", markup=False, classes="-empty")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", variant="primary", compact=True)
                yield Button("Accept", id="accept", variant="warning", disabled=True, compact=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()
        self._read()

    @work(thread=True, exclusive=True, exit_on_error=False, group="advice")
    def _read(self) -> None:
        from store.recovery import advise

        def read(ledger: "Ledger") -> "tuple[Advice, list[HandoffView]]":
            advice = advise(ledger, self.task_id, self.node)
            hs = [h for h in ledger.handoffs(task_id=self.task_id) if h.node == self.node]
            return advice, hs

        try:
            advice, hs = self.host.feed.read(read)
        except WardenError as e:
            self.post_message(AdviceReady(None, [], error=str(e)))
        else:
            self.post_message(AdviceReady(advice, hs))

    @on(AdviceReady)
    def _ready(self, msg: AdviceReady) -> None:
        msg.stop()
        body = self.query_one("#advice", Static)
        accept = self.query_one("#accept", Button)
        if msg.advice is None:
            self.error = msg.error
            body.update(Text("no advice: " + safe_line(msg.error or "", limit=300), style="bold"))
            return
        self.advice, self.handoffs = msg.advice, msg.handoffs
        body.update(render_advice(msg.advice, msg.handoffs))
        label = self.accept_label()
        if label is None:
            accept.label = "A person decides"
            accept.disabled = True
        else:
            accept.label = literal(label)
            accept.disabled = False
        accept.refresh(layout=True)

    def accept_label(self) -> str | None:
        a = self.advice
        if a is None:
            return None
        if a.recommendation == "needs_human":
            if not self.handoffs:
                return None
            return ACCEPT_LABELS["needs_human"].format(handoff=safe_line(self.handoffs[0].id))
        tpl = ACCEPT_LABELS.get(a.recommendation)
        return tpl.format(node=safe_line(a.target, limit=30)) if tpl else None

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()

    @on(Button.Pressed, "#accept")
    def _accept_pressed(self) -> None:
        self.action_accept()

    def action_accept(self) -> None:
        a = self.advice
        if a is None or self.accept_label() is None:
            return
        app = self.host
        if app.read_only:
            read_only_notice(app)
            return
        lead = a.evidence[0] if a.evidence else a.reason
        self.dismiss(None)
        if a.recommendation in ("rewind", "retry"):
            verb = "retry" if a.recommendation == "retry" else "rewind"
            open_action(app, "rewind", a.task_id, a.target,
                                      reason=f"recovery advice: {verb} ({a.reason}): {lead}"[:300])
        elif a.recommendation == "abandon":
            open_action(app, "narrow", a.task_id, None, exclude=[a.target],
                                      reason=f"recovery advice: abandon {a.target} ({a.reason}): {lead}"[:300])
        elif a.recommendation == "needs_human" and self.handoffs:
            screen = ResolveHandoffScreen(self.handoffs[0].id)
            app.push_screen(screen)


__all__ = ["AdviceDialog", "render_advice"]

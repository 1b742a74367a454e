"""Resolving a needs_human handoff (from the handoff inbox, `enter`; or from recovery advice).

The screen shows what the agent asks, what is done and where it is stuck (the handoff's context),
each option with its consequence, and the recommendation with its why. Arrows move through the
options and `enter` chooses one and moves to the answer — the words typed after `enter` are the
answer, and so are words typed while the options have the focus; the answer is optional (required
when the handoff offers no options); `ctrl+s` resolves. Resolving plans (``ledger.plan_resolve``) and applies in one
thread worker; a handoff resolved elsewhere meanwhile is refused by the store and the screen shows
its message (who resolved it, when, with which option). After a resolution the next open handoff
of the same task is offered in place, so all of a task's questions can be answered in one pass.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from store.actions import ResolveParams
from store.errors import Refused, StaleRevision, WardenError
from store.adapters.permission_rules import rules_for
from store.jsontypes import JsonMapping, JsonObject, JsonValue

from ..dialogs.base import WardenModal, read_only_notice
from ..dialogs.registry import dialog_for
from ..operator import resolve_operator
from ..glyphs import MARKS, NODE_GLYPHS, age_label
from ..text import literal, safe, safe_line
from ..typeahead import after_pending_keys
from ..widgets import KeyFooter

if TYPE_CHECKING:
    from store import Ledger
    from store.actions import Plan
    from store.views import HandoffView

# Context keys shown under their own headings (agents may add any others; those follow, literally).
DONE_KEYS = ("done", "what_is_done", "progress")
STUCK_KEYS = ("stuck", "where_stuck", "blocked_on", "problem")
WHY_KEYS = ("why", "recommendation_why")

class HandoffLoaded(Message):
    def __init__(self, handoff: "HandoffView | None", remaining: int, error: str | None = None,
                 granted: "list[JsonObject] | None" = None) -> None:
        super().__init__()
        self.handoff, self.remaining, self.error, self.granted = handoff, remaining, error, granted or []


class ResolveDone(Message):
    def __init__(self, plan: "Plan | None", error: str | None = None, lost: bool = False, next_id: str | None = None,
                 remaining: int = 0) -> None:
        super().__init__()
        self.plan, self.error, self.lost, self.next_id, self.remaining = plan, error, lost, next_id, remaining


def _pick(ctx: JsonMapping, keys: tuple[str, ...]) -> tuple[str | None, JsonValue]:
    for k in keys:
        if k in ctx and ctx[k] not in (None, "", [], {}):
            return k, ctx[k]
    return None, None


def _value_text(v: JsonValue) -> str:
    if isinstance(v, str):
        return safe(v, limit=2000)
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return "\n".join("• " + safe_line(x, limit=300) for x in v)
    return safe(json.dumps(v, ensure_ascii=False, indent=1, default=str), limit=2000)


def render_granted(granted: "list[JsonObject]", now: float) -> Text:
    """The "always allow" rules already granted in the task: the rule, its session, who, when."""
    out = Text("\nRules granted in this task\n", style="bold underline")
    for g in granted:
        out.append(NODE_GLYPHS["succeeded"] + " " + safe_line(g.get("text"), limit=120), style="bold")
        at = g.get("at")
        when = age_label(now - at) if isinstance(at, (int, float)) else "?"
        session = g.get("session")
        out.append(f"  · by {safe_line(g.get('by'), limit=60)} {when}"
                   + (f" · session {safe_line(session, limit=40)}" if session else "") + "\n", style="dim")
    return out


def render_handoff(h: "HandoffView", now: float, granted: "list[JsonObject] | None" = None) -> Text:
    """What the operator needs to decide: the question, what is done, where it is stuck, why, and
    for a permission request the rules already granted in its task."""
    out = Text()
    out.append(f"#{safe_line(h.id)} ", style="bold")
    out.append(f"{safe_line(h.kind)} · task {safe_line(h.task_id)} › node {safe_line(h.node)} · "
               f"opened {age_label(now - h.opened_at)} by {safe_line(h.opened_by, limit=40)} · attempt {h.attempt}\n",
               style="dim")
    out.append(safe(h.question, limit=2000) + "\n", style="bold")
    ctx = dict(h.context or {})
    shown: set[str] = set()
    eff = ctx.get("effect")
    if isinstance(eff, dict) and isinstance(eff.get("key"), str):  # an irreversible effect to confirm: first
        shown.add("effect")
        out.append("\nIrreversible effect (cannot be undone)\n", style="bold underline")
        out.append(safe_line(eff["key"], limit=300) + "\n", style="bold")
        details = eff.get("details")
        for k, v in (details.items() if isinstance(details, dict) else [("details", details)]):
            out.append(f"{safe_line(k, limit=40)}: ", style="dim")
            out.append(_value_text(v) + "\n")
    for title, keys in (("What is done", DONE_KEYS), ("Where it is stuck", STUCK_KEYS)):
        k, v = _pick(ctx, keys)
        if k is not None:
            shown.add(k)
            out.append(f"\n{title}\n", style="bold underline")
            out.append(_value_text(v) + "\n")
    rec = h.recommendation
    if rec:
        label = next((o.get("label") for o in h.options if str(o.get("id")) == str(rec)), None)
        out.append("\nRecommended: ", style="bold")
        out.append(safe_line(rec) + (f" ({safe_line(label, limit=60)})" if label else "") + "\n")
        k, v = _pick(ctx, WHY_KEYS)
        if k is not None:
            shown.add(k)
            out.append("why: ", style="dim")
            out.append(_value_text(v) + "\n")
    elif ctx.get("no_recommendation"):
        shown.add("no_recommendation")
        out.append("\nNo recommendation: ", style="bold")
        out.append(_value_text(ctx["no_recommendation"]) + "\n")
    if h.kind == "permission" and isinstance(ctx.get("rules"), list):
        shown.add("rules")  # the rules offered are the options below, in words
    rest = [k for k in ctx if k not in shown]
    if rest:
        out.append("\nContext\n", style="bold underline")
        for k in rest:
            out.append(f"{safe_line(k, limit=40)}: ", style="dim")
            out.append(_value_text(ctx[k]) + "\n")
    if granted:
        out.append_text(render_granted(granted, now))
    return out


def option_prompt(o: JsonMapping, recommended: bool) -> Text:
    t = Text()
    t.append(safe_line(o.get("id"), limit=30), style="bold")
    if o.get("label"):
        t.append(" — " + safe_line(o.get("label"), limit=60))
    if recommended:
        t.append(f"  {MARKS['star']} recommended", style="bold")
    cons = o.get("consequence")
    t.append("\n   → " + (safe_line(cons, limit=200) if cons else "(no consequence given)"), style="dim")
    return t


@dialog_for(ResolveParams)  # opened on a handoff (enter in the inbox), not on the selection
class ResolveHandoffScreen(WardenModal[bool]):
    """One open handoff, its options, an answer; ctrl+s resolves. Dismisses True if any was resolved."""

    BINDINGS = [
        Binding("escape", "cancel", "Close", id="dialog-cancel"),
        Binding("ctrl+s", "resolve", "Resolve", id="dialog-resolve", priority=True),
        Binding("n", "next", "Next handoff", id="dialog-next"),
    ]

    def __init__(self, handoff_id: str) -> None:
        super().__init__()
        self.handoff_id = str(handoff_id)
        self.handoff: "HandoffView | None" = None
        self.remaining = 0
        self.chosen: str | None = None
        self.option_ids: list[str] = []
        self.busy = False
        self.closed_reason: str | None = None  # the store's refusal: resolved elsewhere, withdrawn…
        self.resolved: list["Plan"] = []  # plans applied from this screen
        self.next_id: str | None = None  # offered after a lost race

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text("Resolve handoff", style="bold"), id="dialog-title", markup=False)
            banner = Static("", id="banner", markup=False)
            banner.display = False
            yield banner
            with VerticalScroll(id="handoff-scroll"):
                yield Static(Text("loading the handoff…", style="dim"), id="handoff", markup=False)
            yield OptionList(id="options", markup=False)
            with Horizontal(classes="field"):
                yield Label("chosen", classes="field-label")
                yield Static(Text("— (arrows to move, enter to choose)", style="dim"), id="chosen", markup=False)
            with Horizontal(classes="field"):
                yield Label("answer", classes="field-label")
                yield Input(placeholder="optional: free text for the agent", id="answer", compact=True,
                            select_on_focus=False)  # words typed on the options add to it, never replace it
            yield Static("", id="dialog-error", markup=False, classes="-empty")
            with Horizontal(id="buttons"):
                yield Button("Close", id="cancel", variant="primary", compact=True)
                yield Button("Resolve", id="apply", variant="warning", disabled=True, compact=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        self._load(self.handoff_id)

    # ---- loading
    @work(thread=True, exclusive=True, exit_on_error=False, group="handoff")
    def _load(self, hid: str) -> None:
        def read(ledger: "Ledger") -> "tuple[HandoffView, int, list[JsonObject]]":
            h = ledger.handoff(hid)
            others = [x for x in ledger.handoffs(task_id=h.task_id) if x.id != h.id]
            return h, len(others), rules_for(ledger, h.task_id) if h.kind == "permission" else []

        try:
            h, remaining, granted = self.host.feed.read(read)
        except WardenError as e:
            self.post_message(HandoffLoaded(None, 0, error=str(e)))
        else:
            self.post_message(HandoffLoaded(h, remaining, granted=granted))

    @on(HandoffLoaded)
    def _loaded(self, msg: HandoffLoaded) -> None:
        msg.stop()
        body = self.query_one("#handoff", Static)
        if msg.handoff is None:
            body.update(Text(safe_line(msg.error or "handoff not found"), style="bold"))
            self.closed_reason = msg.error
            self.update_buttons()
            return
        h = self.handoff = msg.handoff
        self.handoff_id = h.id
        self.remaining = msg.remaining
        self.chosen = None
        self.closed_reason = None
        body.update(render_handoff(h, self.host.now(), msg.granted))
        self.query_one("#handoff-scroll", VerticalScroll).scroll_home(animate=False)
        title = Text("Resolve handoff ", style="bold")
        title.append(f"#{safe_line(h.id)} of task {safe_line(h.task_id)}")
        if msg.remaining:
            title.append(f"  ({msg.remaining} more open in this task)", style="dim")
        self.query_one("#dialog-title", Static).update(title)
        opts = self.query_one("#options", OptionList)
        opts.clear_options()
        rec = str(h.recommendation) if h.recommendation is not None else None
        # The OptionList's own ids are positions: an agent's option ids may repeat (a ledger from
        # elsewhere) or be anything at all; the chosen option's id is looked up by position.
        self.option_ids = [str(o.get("id")) for o in h.options]
        for i, o in enumerate(h.options):
            opts.add_option(Option(option_prompt(o, str(o.get("id")) == rec), id=f"option-{i}"))
        opts.display = bool(h.options)
        answer = self.query_one("#answer", Input)
        answer.value = ""
        answer.placeholder = ("optional: free text for the agent" if h.options
                              else "required: this handoff offers no options; answer in words")
        if h.status != "open":
            self.closed_reason = f"handoff {h.id} is {h.status}" + (
                f" (by {h.resolved_by})" if h.resolved_by else "")
            self.say(Text(safe_line(self.closed_reason), style="bold"))
        if h.options:
            if rec is not None:
                idx = next((i for i, o in enumerate(h.options) if str(o.get("id")) == rec), 0)
                opts.highlighted = idx
            else:
                opts.highlighted = 0
            opts.focus()
        else:
            answer.focus()
        self._show_chosen()
        self.update_buttons()

    # ---- choosing
    @on(OptionList.OptionSelected, "#options")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        """enter chose an option: the focus moves to the answer, and the words typed right after
        enter (in the same burst) go into it, in order."""
        event.stop()
        self.chosen = self.option_ids[event.option_index] if 0 <= event.option_index < len(self.option_ids) else None
        self._show_chosen()
        self.update_buttons()
        self.type_into(self.query_one("#answer", Input))

    def text_field(self) -> Input:
        return self.query_one("#answer", Input)

    def _show_chosen(self) -> None:
        w = self.query_one("#chosen", Static)
        h = self.handoff
        if h is None or not h.options:
            w.update(Text("— (no options: answer below)", style="dim"))
            return
        if self.chosen is None:
            if h.recommendation is not None and str(h.recommendation) in self.option_ids:
                # the cursor starts there (_loaded): say so, or enter would look like a free choice
                w.update(Text(f"{MARKS['dash']} (the cursor starts on the recommended option, "
                              f"{safe_line(h.recommendation, limit=30)} {MARKS['star']}: enter takes it; "
                              "arrows to move)", style="dim"))
            else:
                w.update(Text(f"{MARKS['dash']} (arrows to move, enter to choose)", style="dim"))
            return
        o: JsonMapping = next((o for o in h.options if str(o.get("id")) == self.chosen), {})
        t = Text(safe_line(self.chosen, limit=30), style="bold")
        t.append(" → " + safe_line(o.get("consequence") or o.get("label") or "", limit=120))
        w.update(t)

    @on(Input.Changed, "#answer")
    def _answer_changed(self) -> None:
        self.update_buttons()

    @on(Input.Submitted, "#answer")
    def _answer_submitted(self, event: Input.Submitted) -> None:
        """enter in the answer never resolves."""
        event.stop()
        self.focus_next()

    def answer(self) -> str:
        return self.query_one("#answer", Input).value.strip()

    def blockers(self) -> list[str]:
        out = []
        h = self.handoff
        if self.busy:
            out.append("resolving…")
        elif h is None:
            out.append("no handoff loaded")
        elif self.closed_reason:
            out.append("it is no longer open")
        elif h.options and self.chosen is None:
            out.append("choose an option (enter)")
        elif not h.options and not self.answer():
            out.append("type an answer")
        return out

    def update_buttons(self) -> None:
        btn = self.query_one("#apply", Button)
        if self.host.read_only:
            btn.label = "read-only"
            btn.disabled = True
            return
        label = f"Resolve: {safe_line(self.chosen, limit=20)}" if self.chosen else "Resolve"
        if str(btn.label) != label:
            btn.label = literal(label)  # an option id like "[/]" is text, never markup
            btn.refresh(layout=True)
        btn.disabled = bool(self.blockers())

    # ---- resolving
    def action_cancel(self) -> None:
        if not self.busy:
            self.dismiss(bool(self.resolved))

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()

    @on(Button.Pressed, "#apply")
    def _apply_pressed(self) -> None:
        self.action_resolve()

    def action_resolve(self) -> None:
        """ctrl+s (a priority binding, run as soon as the app reads it) or Resolve: resolved once the
        keys typed before it have landed, so the answer is the one typed in full."""
        after_pending_keys(self, self._resolve_now)

    def _resolve_now(self) -> None:
        if self.busy or not self.is_attached:
            return
        if self.host.read_only:
            read_only_notice(self.host)
            return
        b = self.blockers()
        if b:
            self.say(Text("cannot resolve yet: " + "; ".join(b), style="bold"))
            return
        self.busy = True
        self.update_buttons()
        self.say(Text("resolving…", style="dim"))
        self._resolve(self.handoff, self.chosen, self.answer() or None, resolve_operator(self.host.operator))

    @work(thread=True, exclusive=True, exit_on_error=False, group="resolve")
    def _resolve(self, h: "HandoffView", option: str | None, answer: str | None, operator: str) -> None:
        feed = self.host.feed

        def go(ledger: "Ledger") -> "Plan":
            plan = ledger.plan_resolve(h.id, option=option, answer=answer)
            return ledger.apply(plan, operator=operator)

        def next_open(ledger: "Ledger") -> tuple[str | None, int]:
            hs = [x for x in ledger.handoffs(task_id=h.task_id) if x.id != h.id]
            return (hs[0].id if hs else None), len(hs)

        try:
            try:
                done = feed.read(go)
            except StaleRevision:
                # Something else moved (the node, the task): plan again once; a handoff resolved
                # elsewhere is refused by plan_resolve with who resolved it.
                done = feed.read(go)
        except (Refused, StaleRevision) as e:
            nxt, remaining = feed.read(next_open)
            self.post_message(ResolveDone(None, error=str(e), lost=True, next_id=nxt, remaining=remaining))
            return
        except WardenError as e:
            self.post_message(ResolveDone(None, error=str(e)))
            return
        nxt, remaining = feed.read(next_open)
        self.post_message(ResolveDone(done, next_id=nxt, remaining=remaining))

    @on(ResolveDone)
    def _done(self, msg: ResolveDone) -> None:
        msg.stop()
        self.busy = False
        banner = self.query_one("#banner", Static)
        if msg.plan is None:
            if msg.lost:
                self.closed_reason = msg.error
                banner.update(Text("not resolved: " + safe_line(msg.error or "", limit=300), style="bold")
                              + (Text(f"\nnext open handoff of this task: #{safe_line(msg.next_id)} — press n",
                                      style="dim") if msg.next_id else Text("")))
                banner.display = True
                self.next_id = msg.next_id
                self.say("")
            else:
                self.say(Text("not resolved: " + safe_line(msg.error or "", limit=300), style="bold"))
            self.update_buttons()
            return
        done = msg.plan
        self.resolved.append(done)
        self.app.notify(safe_line(f"resolved handoff {done.target} with {done.reason} (action {done.action_id})",
                                  limit=300), title="Resolve", markup=False)
        if msg.next_id is None:
            self.dismiss(True)
            return
        banner.update(Text(f"✔ resolved #{safe_line(done.target)} ({safe_line(done.reason, limit=60)}). "
                           f"Next open handoff of this task ({msg.remaining} left):", style="bold"))
        banner.display = True
        self.say("")
        self._load(msg.next_id)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next":
            return bool(self.next_id and self.closed_reason)
        return True

    def action_next(self) -> None:
        if self.next_id and self.closed_reason and not isinstance(self.focused, Input):
            nxt, self.next_id = self.next_id, None
            self.query_one("#banner", Static).display = False
            self._load(nxt)


__all__ = ["ResolveHandoffScreen", "render_handoff"]

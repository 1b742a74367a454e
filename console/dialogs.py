"""Operator action dialogs: park, resume, narrow, rewind, abort (and the recovery advice).

Every dialog follows one pattern (DESIGN.md "Dialogs"; STYLE.md):

1. It opens at once and computes the plan in a thread worker (a pure read, ``ledger.plan_*``),
   showing "computing the plan…" meanwhile; a keypress never waits on the database.
2. :class:`PlanPreview` shows exactly what the plan changes: the task's status, each node that
   changes (from → to), the leases revoked and their owners, the effects already done that the
   action does not undo (with their compensation hints), the handoffs withdrawn, the warnings.
   The preview scrolls inside the dialog, so a long plan fits an 80×24 terminal.
3. Focus starts in the reason input (on Cancel when the dialog has none, e.g. resume). Apply is
   disabled until the plan is ready and the reason — and for abort the exact task id — is filled.
   ``ctrl+s`` or the Apply button applies; ``enter`` in an input never does; ``escape`` cancels.
   The Apply button names the effect ("Rewind 5 nodes", "Abort task maint-1", "Park task").
4. Apply runs in a thread worker (``ledger.apply``). On ``StaleRevision`` the dialog recomputes
   the plan, shows the fresh one under a banner ("the ledger changed since this preview — review
   again") and waits for Apply to be pressed again. Nothing is applied on that path.
5. The result is notified; the views follow from the change feed.

The plan is computed with a placeholder reason (the store requires one) and the operator's reason
is put into that same plan at apply time: the impact applied is exactly the impact previewed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from rich.segment import Segment
from textual.strip import Strip
from textual.widgets import Button, Checkbox, Footer, Input, Label, Select, SelectionList, Static
from textual.widgets._toggle_button import ToggleButton
from textual.widgets.option_list import OptionDoesNotExist

from store.errors import Refused, StaleRevision, WardenError

from .glyphs import READ_ONLY_NOTICE, node_status_label, task_status_label
from .text import safe, safe_line

if TYPE_CHECKING:
    from store.actions import Plan

PREVIEW_PLACEHOLDER = "(preview)"  # the store requires a reason to plan; the operator's replaces it
LIST_CAP = 300  # node lines per list in a preview before "… and N more" (counts stay exact)
KEPT_NAMES = 12
STALE_BANNER = "⚠ the ledger changed since this preview — review again"

ACTION_TITLES = {
    "park": "Park", "resume": "Resume", "narrow": "Narrow", "rewind": "Rewind", "abort": "Abort",
    "escalate": "Ask a human about",
}


def operator_name(app: Any) -> str:
    name = (getattr(app, "operator", "") or "").strip()
    if name:
        return name
    from .cli import default_operator

    return default_operator()


# ---------------------------------------------------------------------- the preview
def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_plan(plan: "Plan") -> Text:
    """Everything a plan changes, as literal Text (agent-written keys made safe)."""
    out = Text()
    out.append(safe_line(plan.summary(), limit=200) + "\n", style="bold")
    before, after = plan.task_status
    if before != after:
        out.append(f"task {safe_line(plan.task_id)}: {task_status_label(before)} → {task_status_label(after)}\n")
    params = plan.params or {}
    if plan.action == "park":
        if params.get("until"):
            out.append(f"until {safe_line(params['until'])}\n")
        if params.get("wake_on"):
            out.append(f"wake on: {safe_line(params['wake_on'], limit=200)}\n")
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
        out.append(f"\n{_plural(unaffected, 'other node')} not affected\n", style="dim")
    if plan.revoked_leases:
        out.append(f"\nleases revoked ({len(plan.revoked_leases)})\n", style="bold")
        for r in plan.revoked_leases[:LIST_CAP]:
            out.append(f"  {safe_line(r.get('node'), limit=60)}  held by {safe_line(r.get('owner') or '?', limit=60)}\n")
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

    def __init__(self, **kw: Any) -> None:
        super().__init__(Text("computing the plan…", style="dim"), markup=False, **kw)
        self.plan: "Plan | None" = None

    def show_plan(self, plan: "Plan") -> None:
        self.plan = plan
        self.update(render_plan(plan))

    def show_line(self, text: str, style: str = "dim") -> None:
        self.plan = None
        self.update(Text(safe(text), style=style))


# Layout the dialogs need to fit and work in 80×24 anywhere (colours stay theme variables).
DIALOG_CSS = """
ModalScreen.warden-modal {
    align: center middle;
    background: $background 70%;
}
.warden-modal #dialog {
    width: 100%;
    max-width: 100;
    height: 1fr;
    border: round $accent;
    border-title-align: left;
    padding: 0 1;
    background: $surface;
}
.warden-modal #dialog-title { height: auto; }
.warden-modal #banner { height: auto; color: $warning; text-style: bold; border-left: thick $warning; padding-left: 1; }
.warden-modal #preview-scroll { height: 1fr; min-height: 3; border-top: hkey $panel; border-bottom: hkey $panel; }
.warden-modal .field { height: 1; }
.warden-modal .field-label { width: 9; color: $text-muted; }
.warden-modal .field-help { color: $text-muted; }
.warden-modal .field Input { width: 1fr; }
.warden-modal .field Select { width: 1fr; }
.warden-modal .field Checkbox { width: auto; margin-right: 2; }
.warden-modal #exclude { height: 4; }
.warden-modal #dialog-error { height: auto; color: $error; }
.warden-modal #dialog-error.-empty { display: none; }
.warden-modal #buttons { height: 1; align-horizontal: right; margin-top: 1; }
.warden-modal #buttons Button { margin-left: 2; min-width: 10; width: auto; }
"""


class Tick(Checkbox):
    """A checkbox whose mark is a character, not only a colour: [X] on, [ ] off (NO_COLOR)."""

    BUTTON_LEFT = "["
    BUTTON_RIGHT = "]"

    @property
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # noqa: N802 - Textual's name
        return "X" if self.value else " "


class MarkList(SelectionList):
    """A selection list whose mark is a character, not only a colour: [X] marked, [ ] not."""

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        segs = list(strip)
        try:
            sel = self.get_option_at_index(self.scroll_offset[1] + y)
        except OptionDoesNotExist:
            return strip
        if len(segs) >= 3 and segs[1].text == ToggleButton.BUTTON_INNER:
            segs[0] = Segment("[", segs[0].style)
            segs[1] = Segment("X" if sel.value in self._selected else " ", segs[1].style)
            segs[2] = Segment("]", segs[2].style)
            return Strip(segs, strip.cell_length)
        return strip


# ---------------------------------------------------------------------- messages from workers
class PlanReady(Message):
    def __init__(self, seq: int, plan: "Plan | None", error: str | None = None, stale: str | None = None,
                 extra: Any = None) -> None:
        super().__init__()
        self.seq, self.plan, self.error, self.stale, self.extra = seq, plan, error, stale, extra


class ApplyDone(Message):
    def __init__(self, plan: "Plan | None", error: str | None = None) -> None:
        super().__init__()
        self.plan, self.error = plan, error


# ---------------------------------------------------------------------- the dialog
class OneLineMessage:
    """A modal's one-line message under its inputs (``#dialog-error``), hidden when empty."""

    def say(self, text: Any) -> None:
        w = self.query_one("#dialog-error", Static)  # type: ignore[attr-defined]
        w.update(text)
        w.set_class(not str(text), "-empty")


class ActionDialog(OneLineMessage, ModalScreen["Plan | None"]):
    """The common dialog: options (per action), preview, reason, Cancel / Apply."""

    DEFAULT_CSS = DIALOG_CSS
    SCOPED_CSS = False


    action = ""
    needs_reason = True

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="dialog-cancel"),
        Binding("ctrl+s", "apply", "Apply", id="dialog-apply", priority=True),
    ]

    def __init__(self, task_id: str, node: str | None = None, *, reason: str = "") -> None:
        super().__init__(classes="warden-modal")
        self.task_id = task_id
        self.node = node
        self.initial_reason = reason
        self.plan: "Plan | None" = None
        self.plan_error: str | None = None
        self.planning = False
        self.applying = False
        self.stale: str | None = None  # the store's message when the last apply met a moved ledger
        self.result: "Plan | None" = None
        self._seq = 0
        self.apply_attempts = 0

    # ---- layout
    def title_text(self) -> Text:
        out = Text()
        out.append(f"{ACTION_TITLES.get(self.action, self.action)} ", style="bold")
        out.append(self.target_label())
        return out

    def target_label(self) -> str:
        if self.node:
            return f"node {safe_line(self.node)} of task {safe_line(self.task_id)}"
        return f"task {safe_line(self.task_id)}"

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="warden-dialog"):
            yield Static(self.title_text(), id="dialog-title", markup=False)
            banner = Static("", id="banner", markup=False)
            banner.display = False
            yield banner
            yield from self.compose_options()
            with VerticalScroll(id="preview-scroll"):
                yield PlanPreview(id="preview")
            if self.needs_reason:
                with Horizontal(classes="field"):
                    yield Label("reason", classes="field-label")
                    yield Input(self.initial_reason, placeholder="why? required: recorded, shown to the agent",
                                id="reason", compact=True, select_on_focus=False)
            yield from self.compose_confirm()
            yield Static("", id="dialog-error", markup=False, classes="-empty")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", variant="primary", compact=True)
                yield Button(self.apply_label(None), id="apply", variant="error", disabled=True, compact=True)
        yield Footer()

    def compose_options(self) -> Iterable[Any]:
        return ()

    def compose_confirm(self) -> Iterable[Any]:
        return ()

    def on_mount(self) -> None:
        if self.needs_reason:
            self.query_one("#reason", Input).focus()
        else:
            self.query_one("#cancel", Button).focus()
        self.replan()

    # ---- the plan (thread worker; a pure read)
    def plan_args(self) -> dict[str, Any] | None:
        """The arguments for :meth:`compute` from the current choices (None: nothing to plan yet)."""
        return {}

    def compute(self, ledger: Any, args: Mapping[str, Any]) -> "Plan":
        raise NotImplementedError

    def waiting_text(self) -> str:
        return "computing the plan…"

    def replan(self) -> None:
        args = self.plan_args()
        self._seq += 1
        self.plan = None
        self.plan_error = None
        preview = self.query_one("#preview", PlanPreview)
        if args is None:
            self.planning = False
            preview.show_line(self.waiting_text())
        else:
            self.planning = True
            preview.show_line("computing the plan…")
            self._compute(self._seq, args)
        self.update_buttons()

    @work(thread=True, exclusive=True, exit_on_error=False, group="plan")
    def _compute(self, seq: int, args: Mapping[str, Any]) -> None:
        try:
            plan = self.app.feed.read(lambda ledger: self.compute(ledger, args))  # type: ignore[attr-defined]
        except WardenError as e:
            self.post_message(PlanReady(seq, None, error=str(e)))
        except Exception as e:  # noqa: BLE001 - shown in the dialog, the app keeps running
            self.post_message(PlanReady(seq, None, error=f"{type(e).__name__}: {e}"))
        else:
            self.post_message(PlanReady(seq, plan))

    @on(PlanReady)
    def _plan_ready(self, msg: PlanReady) -> None:
        msg.stop()
        if msg.seq != self._seq:
            return  # an older request: a newer one is on its way
        self.planning = False
        self.applying = False
        preview = self.query_one("#preview", PlanPreview)
        if msg.stale is not None:
            self.stale = msg.stale
            self.say("")
            banner = self.query_one("#banner", Static)
            banner.update(Text(STALE_BANNER + "\n", style="bold") + Text(safe_line(msg.stale, limit=200), style="dim"))
            banner.display = True
        if msg.plan is not None:
            self.plan = msg.plan
            self.plan_error = None
            preview.show_plan(msg.plan)
        else:
            self.plan = None
            self.plan_error = msg.error
            preview.show_line(self.refusal_text(msg.error or "no plan"), style="bold")
        self.plan_changed()
        self.update_buttons()

    def refusal_text(self, error: str) -> str:
        return f"cannot {self.action}: {error}"

    def plan_changed(self) -> None:
        """Hook: a new plan (or refusal) arrived."""

    # ---- apply
    def reason(self) -> str:
        if not self.needs_reason:
            return ""
        return self.query_one("#reason", Input).value.strip()

    def confirmed(self) -> bool:
        return True

    def blockers(self) -> list[str]:
        """Why Apply is disabled right now (empty: it can apply)."""
        out = []
        if self.applying:
            out.append("applying…")
        elif self.planning:
            out.append("the plan is being computed")
        elif self.plan is None:
            out.append("there is no plan to apply")
        if self.needs_reason and not self.reason():
            out.append("type a reason")
        if not self.confirmed():
            out.append(f"type the task id {safe_line(self.task_id)} to confirm")
        return out

    def can_apply(self) -> bool:
        return not self.blockers()

    def apply_label(self, plan: "Plan | None") -> str:
        return ACTION_TITLES.get(self.action, "Apply")

    def update_buttons(self) -> None:
        btn = self.query_one("#apply", Button)
        label = self.apply_label(self.plan)
        if str(btn.label) != label:
            btn.label = label
            btn.refresh(layout=True)  # the button's width follows its label
        btn.disabled = not self.can_apply()

    @on(Input.Changed)
    def _input_changed(self, event: Input.Changed) -> None:
        if event.input.id in ("reason", "confirm"):
            self.say("")
            self.update_buttons()

    @on(Input.Submitted)
    def _input_submitted(self, event: Input.Submitted) -> None:
        """enter in an input never applies: it moves to the next field."""
        event.stop()
        self.focus_next()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    @on(Button.Pressed, "#apply")
    def _apply_pressed(self) -> None:
        self.action_apply()

    def action_cancel(self) -> None:
        if not self.applying:
            self.dismiss(None)

    def action_apply(self) -> None:
        blockers = self.blockers()
        if blockers:
            self.say(Text("cannot apply yet: " + "; ".join(blockers),
                                                                style="bold"))
            return
        assert self.plan is not None
        plan = replace(self.plan, reason=self.reason())
        args = self.plan_args() or {}
        self.applying = True
        self.apply_attempts += 1
        self.say(Text("applying…", style="dim"))
        self.update_buttons()
        self._seq += 1
        self._apply(self._seq, plan, args, operator_name(self.app))

    @work(thread=True, exclusive=True, exit_on_error=False, group="apply")
    def _apply(self, seq: int, plan: "Plan", args: Mapping[str, Any], operator: str) -> None:
        feed = self.app.feed  # type: ignore[attr-defined]
        try:
            done = feed.read(lambda ledger: ledger.apply(plan, operator=operator))
        except StaleRevision as e:
            try:
                fresh = feed.read(lambda ledger: self.compute(ledger, args))
            except WardenError as e2:
                self.post_message(PlanReady(seq, None, error=str(e2), stale=str(e)))
            else:
                self.post_message(PlanReady(seq, fresh, stale=str(e)))
        except WardenError as e:
            self.post_message(ApplyDone(None, error=str(e)))
        except Exception as e:  # noqa: BLE001
            self.post_message(ApplyDone(None, error=f"{type(e).__name__}: {e}"))
        else:
            self.post_message(ApplyDone(done))

    @on(ApplyDone)
    def _apply_done(self, msg: ApplyDone) -> None:
        msg.stop()
        self.applying = False
        if msg.plan is None:
            self.say(
                Text("not applied: " + safe_line(msg.error or "unknown error", limit=300), style="bold"))
            self.update_buttons()
            return
        done = msg.plan
        self.result = done
        self.app.notify(safe_line(f"applied (action {done.action_id}): {done.summary()}", limit=300),
                        title=ACTION_TITLES.get(self.action, self.action))
        self.dismiss(done)


# ---------------------------------------------------------------------- the five actions
class ScopeMixin:
    """park / resume: the whole task, or only the selected node."""

    def scope_checkbox(self: Any, checked: bool) -> Iterable[Any]:
        if self.node:
            yield Tick(f"only node {safe_line(self.node)}", checked, id="only-node", compact=True)

    def only_node(self: Any) -> bool:
        if not self.node:
            return False
        boxes = self.query("#only-node")
        return bool(boxes.first(Checkbox).value) if boxes else False

    def target_label(self: Any) -> str:
        return f"task {safe_line(self.task_id)}" + (f" (selected node {safe_line(self.node)})" if self.node else "")


class ParkDialog(ScopeMixin, ActionDialog):
    action = "park"

    def compose_options(self) -> Iterable[Any]:
        with Horizontal(classes="field"):
            yield Label("until", classes="field-label")
            yield Input(placeholder="optional: 2h, 1d or an ISO time", id="until", compact=True)
        with Horizontal(classes="field"):
            yield Label("wake on", classes="field-label")
            yield Input(placeholder="optional: the outside signal being waited for", id="wake-on", compact=True)
        with Horizontal(classes="field"):
            yield Tick("stop running work now (revoke leases)", False, id="now", compact=True)
            yield from self.scope_checkbox(False)

    def plan_args(self) -> dict[str, Any]:
        return {
            "until": self.query_one("#until", Input).value.strip() or None,
            "wake_on": self.query_one("#wake-on", Input).value.strip() or None,
            "now": bool(self.query_one("#now", Checkbox).value),
            "node": self.node if self.only_node() else None,
        }

    def compute(self, ledger: Any, args: Mapping[str, Any]) -> "Plan":
        return ledger.plan_park(self.task_id, reason=PREVIEW_PLACEHOLDER, node=args["node"], until=args["until"],
                                wake_on=args["wake_on"], now=args["now"])

    def apply_label(self, plan: "Plan | None") -> str:
        if plan is not None and plan.params.get("node"):
            return f"Park node {safe_line(plan.target, limit=30)}"
        return "Park node" if self.only_node() else "Park task"

    @on(Input.Changed, "#until,#wake-on")
    def _opts_changed(self) -> None:
        self.replan()

    @on(Checkbox.Changed)
    def _check_changed(self) -> None:
        self.replan()


class ResumeDialog(ScopeMixin, ActionDialog):
    action = "resume"
    needs_reason = False

    def __init__(self, task_id: str, node: str | None = None, *, reason: str = "",
                 node_parked: bool = False, task_parked: bool = True) -> None:
        super().__init__(task_id, node, reason=reason)
        self.default_node = bool(node) and node_parked and not task_parked

    def compose_options(self) -> Iterable[Any]:
        yield from self.scope_checkbox(self.default_node)

    def plan_args(self) -> dict[str, Any]:
        return {"node": self.node if self.only_node() else None}

    def compute(self, ledger: Any, args: Mapping[str, Any]) -> "Plan":
        return ledger.plan_resume(self.task_id, node=args["node"])

    def apply_label(self, plan: "Plan | None") -> str:
        if plan is not None and plan.params.get("node"):
            return f"Resume node {safe_line(plan.target, limit=30)}"
        return "Resume node" if self.only_node() else "Resume task"

    @on(Checkbox.Changed)
    def _check_changed(self) -> None:
        self.replan()


class RewindDialog(ActionDialog):
    action = "rewind"

    def target_label(self) -> str:
        return f"node {safe_line(self.node)} of task {safe_line(self.task_id)} and everything downstream"

    def compute(self, ledger: Any, args: Mapping[str, Any]) -> "Plan":
        return ledger.plan_rewind(self.task_id, self.node, reason=PREVIEW_PLACEHOLDER)

    def apply_label(self, plan: "Plan | None") -> str:
        if plan is None:
            return "Rewind"
        return f"Rewind {_plural(len(plan.changes), 'node')}"


class AbortDialog(ActionDialog):
    action = "abort"

    def target_label(self) -> str:
        return f"task {safe_line(self.task_id)}: every unfinished node abandoned, for good"

    def compose_confirm(self) -> Iterable[Any]:
        with Horizontal(classes="field"):
            yield Label("confirm", classes="field-label")
            yield Input(placeholder=f"type the task id ({safe_line(self.task_id)}) to confirm", id="confirm",
                        compact=True)

    def compute(self, ledger: Any, args: Mapping[str, Any]) -> "Plan":
        return ledger.plan_abort(self.task_id, reason=PREVIEW_PLACEHOLDER)

    def confirmed(self) -> bool:
        return self.query_one("#confirm", Input).value == self.task_id

    def apply_label(self, plan: "Plan | None") -> str:
        return f"Abort task {safe_line(self.task_id, limit=40)}"


class NarrowChoices(Message):
    def __init__(self, keys: dict[str, dict[str, int]], current: dict[str, Any], nodes: list[tuple[str, str]],
                 error: str | None = None) -> None:
        super().__init__()
        self.keys, self.current, self.nodes, self.error = keys, current, nodes, error


def precondition_values(nodes: Iterable[Any]) -> dict[str, dict[str, int]]:
    """{key: {json value: number of nodes naming it}} over the nodes' preconditions (a list names
    each of its elements)."""
    out: dict[str, dict[str, int]] = {}
    for n in nodes:
        for k, v in (n.preconditions or {}).items():
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                try:
                    j = json.dumps(x, sort_keys=True, ensure_ascii=False)
                except (TypeError, ValueError):
                    continue
                out.setdefault(str(k), {})
                out[str(k)][j] = out[str(k)].get(j, 0) + 1
    return out


class NarrowDialog(ActionDialog):
    action = "narrow"

    def __init__(self, task_id: str, node: str | None = None, *, reason: str = "",
                 exclude: Iterable[str] = ()) -> None:
        super().__init__(task_id, node, reason=reason)
        self.preselected = list(exclude)
        self.choices: NarrowChoices | None = None

    def target_label(self) -> str:
        return f"task {safe_line(self.task_id)}: what is out of scope is abandoned (kept for audit)"

    def compose_options(self) -> Iterable[Any]:
        with Horizontal(classes="field", id="narrow-set"):
            yield Label("set", classes="field-label")
            yield Select([], prompt="precondition", id="pre-key", compact=True)
            yield Label(" = ")
            yield Select([], prompt="new value", id="pre-value", compact=True)
        yield Label("or exclude nodes (space to mark):", classes="field-help")
        yield MarkList(id="exclude", compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self._load_choices()

    @work(thread=True, exclusive=True, exit_on_error=False, group="choices")
    def _load_choices(self) -> None:
        try:
            graph = self.app.feed.read(lambda ledger: ledger.graph(self.task_id))  # type: ignore[attr-defined]
        except WardenError as e:
            self.post_message(NarrowChoices({}, {}, [], error=str(e)))
            return
        self.post_message(NarrowChoices(precondition_values(graph.nodes), dict(graph.task.preconditions or {}),
                                        [(n.key, n.status) for n in graph.nodes]))

    @on(NarrowChoices)
    def _choices(self, msg: NarrowChoices) -> None:
        msg.stop()
        self.choices = msg
        if msg.error:
            self.query_one("#preview", PlanPreview).show_line(msg.error, style="bold")
            return
        keys = sorted(set(msg.keys) | set(msg.current))
        key_sel = self.query_one("#pre-key", Select)
        key_sel.set_options([(Content(safe_line(k, limit=30)), k) for k in keys])
        if not keys:
            key_sel.disabled = True
            self.query_one("#pre-value", Select).disabled = True
        excl = self.query_one("#exclude", SelectionList)
        pre = set(self.preselected)
        for key, status in msg.nodes[:5000]:
            excl.add_option((Content(f"{safe_line(key, limit=50)}  {node_status_label(status)}"), key,
                             key in pre))
        if pre:
            self.replan()
        elif self.plan_args() is None:
            self.query_one("#preview", PlanPreview).show_line(self.waiting_text())

    def _values_for(self, key: str) -> list[tuple[Content, str]]:
        assert self.choices is not None
        counts = self.choices.keys.get(key, {})
        cur = self.choices.current.get(key, None)
        cur_j = json.dumps(cur, sort_keys=True, ensure_ascii=False) if key in self.choices.current else None
        out = []
        for j, n in sorted(counts.items()):
            label = f"{safe_line(j, limit=30)} ({_plural(n, 'node')})" + (" current" if j == cur_j else "")
            out.append((Content(label), j))
        if cur_j is not None and cur_j not in counts:
            out.append((Content(f"{safe_line(cur_j, limit=30)} current"), cur_j))
        return out

    @on(Select.Changed, "#pre-key")
    def _key_changed(self, event: Select.Changed) -> None:
        vals = self.query_one("#pre-value", Select)
        if isinstance(event.value, str):
            vals.set_options(self._values_for(event.value))
        else:
            vals.set_options([])
        self.replan()

    @on(Select.Changed, "#pre-value")
    def _value_changed(self) -> None:
        self.replan()

    @on(SelectionList.SelectedChanged, "#exclude")
    def _exclude_changed(self) -> None:
        self.replan()

    def plan_args(self) -> dict[str, Any] | None:
        try:
            key = self.query_one("#pre-key", Select).value
            value = self.query_one("#pre-value", Select).value
            exclude = list(self.query_one("#exclude", SelectionList).selected)
        except Exception:  # noqa: BLE001 - not mounted yet
            return None
        assign: dict[str, Any] = {}
        if isinstance(key, str) and isinstance(value, str):
            assign[key] = json.loads(value)
        if not assign and not exclude:
            return None
        return {"set": assign, "exclude": exclude}

    def waiting_text(self) -> str:
        if self.choices is None:
            return "reading the task's nodes…"
        return "choose a precondition and its new value, or mark nodes to exclude: the preview follows"

    def compute(self, ledger: Any, args: Mapping[str, Any]) -> "Plan":
        return ledger.plan_narrow(self.task_id, reason=PREVIEW_PLACEHOLDER, set=args["set"], exclude=args["exclude"])

    def apply_label(self, plan: "Plan | None") -> str:
        if plan is None:
            return "Narrow"
        return f"Narrow: abandon {_plural(len(plan.abandoned), 'node')}"


class EscalateDialog(ActionDialog):
    """Raise a needs_human handoff on a node (from the recovery wizard): node → blocked until a
    person resolves it; a running lease is revoked."""

    action = "escalate"

    def __init__(self, task_id: str, node: str | None = None, *, reason: str = "", question: str = "",
                 context: Mapping[str, Any] | None = None) -> None:
        super().__init__(task_id, node, reason=reason)
        self.question = question
        self.context = dict(context or {})

    def target_label(self) -> str:
        return f"node {safe_line(self.node)} of task {safe_line(self.task_id)}: blocked until a person answers"

    def compute(self, ledger: Any, args: Mapping[str, Any]) -> "Plan":
        return ledger.plan_escalate(self.task_id, self.node, reason=PREVIEW_PLACEHOLDER, question=self.question,
                                    context=self.context)

    def apply_label(self, plan: "Plan | None") -> str:
        return f"Ask a human about {safe_line(self.node or '', limit=30)}"


DIALOGS: dict[str, type[ActionDialog]] = {
    "park": ParkDialog, "resume": ResumeDialog, "narrow": NarrowDialog, "rewind": RewindDialog, "abort": AbortDialog,
}


# ---------------------------------------------------------------------- opening them
def read_only_notice(app: Any) -> None:
    app.notify(READ_ONLY_NOTICE, severity="warning")


def _graph_status(app: Any, task_id: str, node: str | None) -> tuple[str | None, str | None]:
    """(task status, node status) from what the console already shows (no database read)."""
    task_status = node_status = None
    row = next((r for r in getattr(app.tasks_model, "rows", []) if r.view.task_id == task_id), None)
    if row is not None:
        task_status = row.view.status
    g = getattr(app, "graph_model", None)
    if node and g is not None and g.task_id == task_id and node in g.index:
        node_status = g.nodes[g.index[node]].status
    d = getattr(app, "detail", None)
    if node and node_status is None and d is not None and (d.node.task_id, d.node.key) == (task_id, node):
        node_status = d.node.status
    return task_status, node_status


def open_action(app: Any, action: str, task_id: str | None, node: str | None, *,
                reason: str = "", exclude: Iterable[str] = (),
                callback: Callable[[Any], None] | None = None) -> ModalScreen | None:
    """Open the dialog for ``action`` on the selection (the app's p/u/n/r/a/R hook)."""
    if getattr(app, "read_only", False):
        read_only_notice(app)
        return None
    if action == "recover":
        if not task_id or not node:
            app.notify("recovery advice: select a node (in the task graph or node detail)", severity="warning")
            return None
        from .screens.advice import AdviceDialog

        screen: ModalScreen = AdviceDialog(task_id, node)
        app.push_screen(screen, callback)
        return screen
    if not task_id:
        app.notify(f"{action}: select a task first", severity="warning")
        return None
    if action == "rewind" and not node:
        app.notify("rewind: select a node (open the task's graph with enter)", severity="warning")
        return None
    cls = DIALOGS.get(action)
    if cls is None:
        app.notify(f"unknown action {safe_line(action)}", severity="error")
        return None
    if action == "resume":
        task_status, node_status = _graph_status(app, task_id, node)
        screen = ResumeDialog(task_id, node, node_parked=node_status == "parked",
                              task_parked=task_status == "parked" or task_status is None)
    elif action == "narrow":
        screen = NarrowDialog(task_id, node, reason=reason, exclude=exclude)
    elif action in ("rewind", "park"):
        screen = cls(task_id, node, reason=reason)
    else:
        screen = cls(task_id, None, reason=reason)
    app.push_screen(screen, callback)
    return screen


__all__ = [
    "AbortDialog", "ActionDialog", "DIALOGS", "EscalateDialog", "OneLineMessage", "NarrowDialog", "ParkDialog", "PlanPreview", "ResumeDialog",
    "RewindDialog", "STALE_BANNER", "open_action", "operator_name", "precondition_values", "render_plan",
]

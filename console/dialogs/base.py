"""The action dialogs' common ground: :class:`WardenModal` (every modal screen of the console) and
:class:`ActionDialog` (park, resume, narrow, rewind, abort, escalate).

Every action dialog follows one pattern (docs/contracts.md "Dialogs"):

1. It opens at once and computes the plan in a thread worker (a pure read, ``ledger.plan_*``),
   showing "computing the plan…" meanwhile; a keypress never waits on the database.
2. :class:`~console.dialogs.plan.PlanPreview` shows exactly what the plan changes: the task's
   status, each node that changes (from → to), the leases revoked and their owners, the effects
   already done that the action does not undo (with their compensation hints), the handoffs
   withdrawn, the warnings. The preview scrolls inside the dialog, so a long plan fits 80×24.
3. Focus starts in the reason input (on Cancel when the dialog has none, e.g. resume). Apply is
   disabled until the plan is ready and the reason — and for abort the exact task id — is filled.
   ``ctrl+s`` or the Apply button applies; ``enter`` in an input never does; ``escape`` cancels.
   The Apply button names the effect ("Rewind 5 nodes", "Abort task maint-1", "Park task").
4. Apply runs in a thread worker (``ledger.apply``). Agents' work while the operator read keeps
   the preview's promise and applies (store/actions/promise.py). On ``StaleRevision`` (another
   operator's action, the graph changed under it) the dialog recomputes the plan, shows the fresh
   one under a banner ("the ledger changed since this preview — review again") with the change
   that made it unsafe, and waits for Apply to be pressed again. Nothing is applied on that path.
5. The result is notified — with what differed from the preview, when something did; the views
   follow from the change feed.

The plan is computed with a placeholder reason (the store requires one) and the operator's reason
is put into that same plan at apply time: the impact applied is exactly the impact previewed.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Iterable, Mapping, TypeVar

from rich.text import Text
from textual import events, on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Static

from store.errors import StaleRevision, WardenError

from ..glyphs import READ_ONLY_NOTICE
from ..host import ConsoleHost, host_of
from ..operator import resolve_operator
from ..text import literal, safe, safe_line
from ..typeahead import TypeAhead, after_pending_keys, redirect_key, replayed
from ..widgets import KeyFooter
from .plan import PlanPreview

if TYPE_CHECKING:
    from store import Ledger
    from store.actions import Action, Plan

MODAL_TCSS = Path(__file__).with_name("modal.tcss")  # the layout of every modal screen
PREVIEW_PLACEHOLDER = "(preview)"  # the store requires a reason to plan; the operator's replaces it
STALE_BANNER = "⚠ the ledger changed since this preview — review again"
DIFFERED_NOTICE_S = 20.0  # … when it says what differed from the preview: long enough to read it

ResultType = TypeVar("ResultType")


def read_only_notice(app: ConsoleHost) -> None:
    app.notify(READ_ONLY_NOTICE, severity="warning")


# ---------------------------------------------------------------------- every modal screen
class WardenModal(ModalScreen[ResultType]):
    """A console modal: the ``warden-modal`` layout (modal.tcss), the app as a
    :class:`~console.host.ConsoleHost`, and a one-line message under the inputs
    (``#dialog-error``, hidden when empty)."""

    CSS_PATH = MODAL_TCSS
    # Tab moves between the fields the moment the app reads it (a priority binding), so the keys
    # typed right after it go to the next field, not to the one it left (console/typeahead.py).
    BINDINGS = [
        Binding("tab", "next_field", "Next field", show=False, priority=True),
        Binding("shift+tab", "previous_field", "Previous field", show=False, priority=True),
    ]

    def __init__(self) -> None:
        super().__init__(classes="warden-modal")
        # From the moment it is on top until its focus has landed, the keys typed are its own,
        # applied in order then (console/typeahead.py).
        self.typeahead = TypeAhead(self, taking=True)

    @property
    def host(self) -> ConsoleHost:
        return host_of(self)

    @on(events.Mount)
    def _keys_typed_ahead(self) -> None:
        stack = self.app.screen_stack
        below = stack[stack.index(self) - 1] if self in stack and stack.index(self) > 0 else None
        self.typeahead.start((below.focused or below) if below is not None else None)

    def action_next_field(self) -> None:
        self.focus_next()

    def action_previous_field(self) -> None:
        self.focus_previous()

    # A key (enter on a button) may show the modal's text field: characters typed right after it
    # wait for it instead of being dropped.
    fields_open_on_keys = False

    def text_field(self) -> Input | None:
        """The field the operator's words go to (a reason, an answer), if the modal has one."""
        return None

    def type_into(self, field: Input, first: events.Key | None = None) -> None:
        """Move the focus to ``field``; the keys typed meanwhile (``first`` and those still on
        their way) go into it in order once it has the focus (console/typeahead.py)."""
        before = self.focused or self
        field.focus()
        self.typeahead.start(before)
        if first is not None:
            self.typeahead.take(first)

    def on_key(self, event: events.Key) -> None:
        """A key that comes up to the modal unhandled is never dropped, nor the screen's underneath:
        while the modal takes keys it is taken; a character typed on a list, a box or a button goes
        into the modal's text field (:meth:`text_field`: what the operator types is never lost);
        any other character is nobody's."""
        if redirect_key(self, event):
            return
        if not (event.is_printable and event.character) or event.key in self.active_bindings:
            return
        field = self.text_field()
        if field is not None and self.focused is not field and field.display and not field.disabled:
            self.type_into(field, event)
            return
        if field is None and self.fields_open_on_keys and self.focused is not None and not replayed(event):
            # a key ahead of it (enter on a button) may be opening the field: the character waits
            # for the keys ahead, then goes where the focus is then (console/typeahead.py)
            self.typeahead.start(self.focused)
            self.typeahead.take(event)
            return
        if self.focused is None:
            event.stop()
            event.prevent_default()

    def say(self, text: str | Text) -> None:
        w = self.query_one("#dialog-error", Static)
        w.update(text)
        w.set_class(not str(text), "-empty")


# ---------------------------------------------------------------------- messages from workers
class PlanReady(Message):
    def __init__(self, seq: int, plan: "Plan | None", error: str | None = None, stale: str | None = None) -> None:
        super().__init__()
        self.seq, self.plan, self.error, self.stale = seq, plan, error, stale


class ApplyDone(Message):
    def __init__(self, plan: "Plan | None", error: str | None = None) -> None:
        super().__init__()
        self.plan, self.error = plan, error


# ---------------------------------------------------------------------- the action dialog
class ActionDialog(WardenModal["Plan | None"]):
    """The common dialog: options (per action), preview, reason, Cancel / Apply. A subclass is
    registered for its action with ``@dialog_for(XParams)`` (console/dialogs/registry.py), which
    sets ``params`` (the store's registered action), ``action`` and ``needs_reason``."""

    params: ClassVar["type[Action]"]
    action: ClassVar[str] = ""
    needs_reason: ClassVar[bool] = True
    takes_node: ClassVar[bool] = True  # opened on a selected node, it plans for that node (else: the task)

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="dialog-cancel"),
        Binding("ctrl+s", "apply", "Apply", id="dialog-apply", priority=True),
        # enter in an input moves to the next field the moment the app reads it (as Tab does)
        Binding("enter", "submit_field", "Next field", show=False, priority=True),
    ]

    def __init__(self, task_id: str, node: str | None = None, *, reason: str = "") -> None:
        super().__init__()
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

    @classmethod
    def opened(cls, host: ConsoleHost, task_id: str, node: str | None, *, reason: str = "",
               exclude: Iterable[str] = ()) -> "ActionDialog":
        """The dialog as the selection opens it (``open_action``): its task, its node, a reason and
        nodes to exclude suggested by the caller (each dialog takes what it uses)."""
        return cls(task_id, node if cls.takes_node else None, reason=reason)

    # ---- layout
    def title_text(self) -> Text:
        out = Text()
        out.append(f"{self.params.title} ", style="bold")
        out.append(self.target_label())
        ledger = getattr(self.host, "ledger_label", "")  # several ledgers open: which one this acts on
        if ledger:
            out.append(f" in ledger {safe_line(ledger)}", style="bold")
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
                    yield Input(self.initial_reason,
                                placeholder=("why? required: recorded, shown to the agent"
                                             if self.params.reason_to_agent
                                             else "why? required: recorded, not shown to the agent"),
                                id="reason", compact=True, select_on_focus=False)
            yield from self.compose_confirm()
            yield Static("", id="dialog-error", markup=False, classes="-empty")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", variant="primary", compact=True)
                yield Button(literal(self.apply_label(None)), id="apply", variant="error", disabled=True, compact=True)
        yield KeyFooter()

    def compose_options(self) -> Iterable[Widget]:
        return ()

    def compose_confirm(self) -> Iterable[Widget]:
        return ()

    def text_field(self) -> Input | None:
        return self.query_one("#reason", Input) if self.needs_reason else None

    def on_mount(self) -> None:
        if self.needs_reason:
            self.query_one("#reason", Input).focus()
        else:
            self.query_one("#cancel", Button).focus()
        self.replan()

    # ---- the plan (thread worker; a pure read)
    def plan_args(self) -> dict[str, object] | None:
        """The action's plan arguments from the current choices, beside the task id and the reason
        (None: nothing to plan yet)."""
        return {}

    def compute(self, ledger: "Ledger", args: Mapping[str, object]) -> "Plan":
        """The plan (``Ledger.plan`` with the task, a placeholder reason when the action needs one,
        and :meth:`plan_args`)."""
        reason = {"reason": PREVIEW_PLACEHOLDER} if self.needs_reason else {}
        return ledger.plan(self.action, {"task_id": self.task_id, **reason, **args})

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
    def _compute(self, seq: int, args: Mapping[str, object]) -> None:
        try:
            plan = self.host.feed.read(lambda ledger: self.compute(ledger, args))
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
        return f"cannot {self.params.verb or self.action}: {error}"

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
        return self.params.title

    def update_buttons(self) -> None:
        btn = self.query_one("#apply", Button)
        label = self.apply_label(self.plan)
        if str(btn.label) != label:
            btn.label = literal(label)  # never markup: a label may carry a task id or an option
            btn.refresh(layout=True)  # the button's width follows its label
        btn.disabled = not self.can_apply()

    @on(Input.Changed)
    def _input_changed(self, event: Input.Changed) -> None:
        if event.input.id in ("reason", "confirm"):
            self.say("")
            self.update_buttons()

    def action_submit_field(self) -> None:
        """enter in an input never applies: it moves to the next field (elsewhere enter is the
        focused widget's: a button presses, a box ticks)."""
        if not isinstance(self.focused, Input):
            raise SkipAction()
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
        """ctrl+s (a priority binding, run as soon as the app reads it) or Apply: applied once the
        keys typed before it have landed, so the reason is the one typed in full."""
        after_pending_keys(self, self._apply_now)

    def _apply_now(self) -> None:
        if self.applying or not self.is_attached:
            return
        blockers = self.blockers()
        if blockers:
            self.say(Text("cannot apply yet: " + "; ".join(blockers), style="bold"))
            return
        assert self.plan is not None
        plan = replace(self.plan, reason=self.reason())
        args = self.plan_args() or {}
        self.applying = True
        self.say(Text("applying…", style="dim"))
        self.update_buttons()
        self._seq += 1
        self._apply(self._seq, plan, args, resolve_operator(self.host.operator))

    @work(thread=True, exclusive=True, exit_on_error=False, group="apply")
    def _apply(self, seq: int, plan: "Plan", args: Mapping[str, object], operator: str) -> None:
        feed = self.host.feed
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
        # what differed stays long enough to read (the app's own notice time, when longer)
        self.app.notify(safe(applied_notice(done)), title=safe_line(self.params.title), markup=False,
                        timeout=max(self.app.NOTIFICATION_TIMEOUT, DIFFERED_NOTICE_S) if done.differed else None)
        self.dismiss(done)


def applied_notice(done: "Plan") -> str:
    """The notice of an applied action: what it did and, when the ledger moved while the operator
    read, what differed from the preview (each line made safe; the notice is never markup)."""
    lines = [safe_line(f"applied (action {done.action_id}): {done.summary()}", limit=300)]
    if done.differed:
        lines.append("differed from the preview:")
        lines += [safe_line(f"· {note}", limit=200) for note in done.differed.notes]
    return "\n".join(lines)


__all__ = [
    "ActionDialog", "ApplyDone", "MODAL_TCSS", "PREVIEW_PLACEHOLDER", "PlanReady", "STALE_BANNER",
    "WardenModal", "applied_notice", "read_only_notice",
]

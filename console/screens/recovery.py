"""The recovery wizard for one run directory (runs screen `g`, then `enter` on a run).

It checks the run (``store.recovery.check``, in a thread worker: a pure read of the run), then
steps through the five checks one at a time — each with its evidence; `enter` / `space` / `→`
next, `←` / `backspace` back — and ends on the decision with only the choices it allows:

* ``reuse_existing_artifact``: record the verification — asks a record name, previews the
  HANDOFF.md that will be written, `ctrl+s` writes it (``store.recovery.record``, which checks the
  run afresh and refuses anything but reuse; the run itself is never modified);
* a run linked to a ledger node (state.json ``task_id`` / ``node_key``): open that node;
* leave it (`escape`): nothing is written.

In ``--read-only`` the checks and the decision are shown; nothing is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Input, Label, Static

from store.errors import WardenError

from ..dialogs.base import WardenModal, read_only_notice
from ..dialogs.escalate import EscalateDialog
from ..operator import resolve_operator
from ..text import safe, safe_line
from ..widgets import KeyFooter

if TYPE_CHECKING:
    from store.recovery import Check, Recorded, Recovery

CHECK_HELP = {
    "layout": "the run name and layout are allowed and free of links",
    "context": "the current inputs match context.json",
    "state": "the state is one recovery understands (interrupted, one step running, no receipt)",
    "artifact": "the artifact verifies against its manifest",
    "stable": "nothing changed while checking",
}
DECISION_HELP = {
    "reuse_existing_artifact": "the artifact is complete and verified: only a verification is owed. "
                               "Record it (a new record directory; the run is not touched) or leave it.",
    "needs_human": "the evidence is incomplete or invalid: a person must look. Nothing can be recorded.",
    "context_changed": "the inputs or code changed since the run: compare versions before anything else. "
                       "Nothing can be recorded.",
    "unsupported_state": "the run is not in a state recovery understands. Nothing can be recorded.",
}

class RecoveryChecked(Message):
    def __init__(self, recovery: Recovery | None, error: str | None = None) -> None:
        super().__init__()
        self.recovery, self.error = recovery, error


class RecordWritten(Message):
    def __init__(self, recorded: Recorded | None, error: str | None = None) -> None:
        super().__init__()
        self.recorded, self.error = recorded, error


def check_mark(c: Check) -> str:
    if not c.ran:
        return "· not run"
    return "✔ passed" if c.ok else "✖ failed"


class RecoveryWizardScreen(WardenModal["Recorded | None"]):
    """Checks one at a time, then the decision and its allowed choices."""

    BINDINGS = [
        Binding("escape", "leave", "Leave it", id="dialog-cancel"),
        Binding("enter,space,right", "next", "Next", id="wizard-next"),
        Binding("left,backspace", "back", "Back", id="wizard-back"),
        Binding("ctrl+s", "confirm", "Write record", id="wizard-confirm", priority=True),
    ]

    def __init__(self, run: str) -> None:
        super().__init__()
        self.run = run
        self.recovery: Recovery | None = None
        self.error: str | None = None
        self.step = 0  # 0..4: the checks; 5: the decision
        self.mode = "loading"  # loading | check | decision | record | written | error
        self.recorded: Recorded | None = None
        self.writing = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            title = Text("Recovery ", style="bold")
            title.append(f"run {safe_line(self.run)}")
            yield Static(title, id="dialog-title", markup=False)
            yield Static("", id="steps", markup=False)
            with VerticalScroll(id="preview-scroll"):
                yield Static(Text("checking the run…", style="dim"), id="body", markup=False)
            with Horizontal(id="record-row", classes="field"):
                yield Label("record", classes="field-label")
                yield Input(placeholder="a new record name, e.g. review-01", id="record-name", compact=True)
            yield Static("", id="dialog-error", markup=False, classes="-empty")
            with Horizontal(id="buttons"):
                yield Button("Leave it", id="cancel", variant="primary", compact=True)
                yield Button("Open node", id="open-node", compact=True)
                yield Button("Ask a human…", id="escalate", variant="warning", compact=True)
                yield Button("Record the verification…", id="record", variant="warning", compact=True)
                yield Button("Write record", id="apply", variant="warning", compact=True, disabled=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#preview-scroll").focus()
        self._refresh()
        self._check()

    # ---- reading
    @work(thread=True, exclusive=True, exit_on_error=False, group="recovery")
    def _check(self) -> None:
        from store.recovery import check

        app = self.host
        try:
            rec = check(app.runs_dir, self.run, app.project)
        except WardenError as e:
            self.post_message(RecoveryChecked(None, error=str(e)))
        except OSError as e:
            self.post_message(RecoveryChecked(None, error=f"cannot read the run: {e}"))
        else:
            self.post_message(RecoveryChecked(rec))

    @on(RecoveryChecked)
    def _checked(self, msg: RecoveryChecked) -> None:
        msg.stop()
        if msg.recovery is None:
            self.error = msg.error
            self.mode = "error"
        else:
            self.recovery = msg.recovery
            self.mode = "check"
            self.step = 0
        self._refresh()

    # ---- navigation
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("next", "back"):
            return self.mode in ("check", "decision") or (action == "back" and self.mode == "record")
        if action == "confirm":
            return self.mode == "record"
        return True

    def action_next(self) -> None:
        if self.mode == "check":
            assert self.recovery is not None  # checked: a check is on screen
            self.step += 1
            if self.step >= len(self.recovery.checks):
                self.mode = "decision"
            self._refresh()
            if self.mode == "decision":
                self.query_one("#cancel", Button).focus()  # the default is to leave it

    def action_back(self) -> None:
        if self.mode == "record":
            self.mode = "decision"
        elif self.mode == "decision":
            assert self.recovery is not None  # checked: its decision is on screen
            self.mode = "check"
            self.step = len(self.recovery.checks) - 1
            self.query_one("#preview-scroll").focus()
        elif self.mode == "check" and self.step > 0:
            self.step -= 1
        self._refresh()

    def action_leave(self) -> None:
        if not self.writing:
            self.dismiss(self.recorded)

    @on(Button.Pressed, "#cancel")
    def _leave(self) -> None:
        self.action_leave()

    @on(Button.Pressed, "#open-node")
    def _open_node(self) -> None:
        rec = self.recovery
        if rec is None or not (rec.task_id and rec.node_key):
            return
        app = self.host
        self.dismiss(self.recorded)
        app.open_node(rec.task_id, rec.node_key)

    @on(Button.Pressed, "#escalate")
    def _escalate(self) -> None:
        """Raise a needs_human handoff on the run's node: the escalate dialog, pre-filled."""
        rec = self.recovery
        app = self.host
        if rec is None or not (rec.task_id and rec.node_key):
            return
        if app.read_only:
            read_only_notice(app)
            return
        failed = next((c for c in rec.checks if not c.ok and getattr(c, "ran", True)), None)
        question = (f"Run {rec.run} of node {rec.node_key} stopped as {rec.original_status}; recovery decided "
                    f"{rec.decision} ({rec.reason}). How should the node go on?")
        context = {"run": rec.run, "decision": rec.decision, "reason": rec.reason,
                   "failed_check": failed.name if failed else None,
                   "evidence": failed.evidence if failed else None, "stuck_at": rec.original_status}
        self.dismiss(self.recorded)
        app.push_screen(EscalateDialog(rec.task_id, rec.node_key, reason=f"recovery of run {rec.run}: {rec.decision}",
                                       question=question, context=context))

    @on(Button.Pressed, "#record")
    def _start_record(self) -> None:
        if self.host.read_only:
            read_only_notice(self.host)
            return
        if self.recovery is None or not self.recovery.reusable:
            return
        self.mode = "record"
        self._refresh()
        self.type_into(self.query_one("#record-name", Input))  # the name typed right after enter goes there

    fields_open_on_keys = True  # "Record the verification…" opens the name

    def text_field(self) -> Input | None:
        """While a record is being named, a character typed on a button goes into its name."""
        return self.query_one("#record-name", Input) if self.mode == "record" else None

    @on(Input.Changed, "#record-name")
    def _name_changed(self) -> None:
        self.say("")
        self._refresh()

    @on(Input.Submitted, "#record-name")
    def _name_submitted(self, event: Input.Submitted) -> None:
        """enter in the name never writes."""
        event.stop()
        self.query_one("#apply", Button).focus() if not self.query_one("#apply", Button).disabled else None

    @on(Button.Pressed, "#apply")
    def _apply_pressed(self) -> None:
        self.action_confirm()

    def record_name(self) -> str:
        return self.query_one("#record-name", Input).value.strip()

    def name_problem(self) -> str | None:
        from store.runs import valid_name

        name = self.record_name()
        if not name:
            return "type a record name"
        if not valid_name(name):
            return "a record name is letters, digits, . _ - (no leading dot), at most 64"
        return None

    def action_confirm(self) -> None:
        if self.mode != "record" or self.writing:
            return
        if self.host.read_only:
            read_only_notice(self.host)
            return
        problem = self.name_problem()
        if problem:
            self.say(Text(problem, style="bold"))
            return
        self.writing = True
        self._refresh()
        self._write(self.record_name(), resolve_operator(self.host.operator))

    @work(thread=True, exclusive=True, exit_on_error=False, group="recovery-record")
    def _write(self, name: str, operator: str) -> None:
        from store.recovery import record

        app = self.host
        try:
            made = record(app.runs_dir, self.run, name, records_dir=app.records, operator=operator,
                          clock=app.clock, project_dir=app.project)
        except WardenError as e:
            self.post_message(RecordWritten(None, error=str(e)))
        except OSError as e:
            self.post_message(RecordWritten(None, error=f"cannot write the record: {e}"))
        else:
            self.post_message(RecordWritten(made))

    @on(RecordWritten)
    def _written(self, msg: RecordWritten) -> None:
        msg.stop()
        self.writing = False
        if msg.recorded is None:
            self.say(
                Text("not recorded: " + safe_line(msg.error or "", limit=300), style="bold"))
            self._refresh()
            return
        self.recorded = msg.recorded
        self.mode = "written"
        self.app.notify(safe_line(f"recorded {msg.recorded.name}: {msg.recorded.path}", limit=300), markup=False,
                        title="Recovery")
        self._refresh()
        self.query_one("#cancel", Button).focus()

    # ---- drawing
    def _steps_line(self) -> Text:
        out = Text(no_wrap=True, overflow="ellipsis")
        rec = self.recovery
        if rec is None:
            return out
        for i, c in enumerate(rec.checks):
            seen = self.mode != "check" or i <= self.step
            mark = ("✔" if c.ok else ("·" if not c.ran else "✖")) if seen else "○"
            style = "bold reverse" if self.mode == "check" and i == self.step else ("" if seen else "dim")
            out.append(f"{mark} {c.name}", style=style)
            out.append("  ")
        out.append("→ decision", style="bold reverse" if self.mode != "check" else "dim")
        return out

    def _body(self) -> Text:
        rec = self.recovery
        out = Text()
        if self.mode == "loading":
            return Text("checking the run…", style="dim")
        if self.mode == "error":
            return Text("cannot check this run: " + safe_line(self.error or "", limit=300), style="bold")
        assert rec is not None  # the other modes come after the check
        if self.mode == "check":
            c = rec.checks[self.step]
            out.append(f"check {self.step + 1} of {len(rec.checks)}: {safe_line(c.name)}  ", style="bold")
            out.append(check_mark(c) + "\n", style="bold")
            out.append(CHECK_HELP.get(c.name, "") + "\n\n", style="dim")
            out.append("evidence\n", style="bold underline")
            out.append(safe(c.evidence, limit=4000) + "\n")
            out.append("\nenter / space: next check · ←: back · escape: leave it\n", style="dim")
            return out
        out.append("decision: ", style="bold")
        out.append(safe_line(rec.decision), style="bold")
        out.append(f" ({safe_line(rec.reason)})\n")
        out.append(DECISION_HELP.get(rec.decision, "") + "\n", style="dim")
        out.append(f"\nstate: {safe_line(rec.original_status or '—')}"
                   + (f"; interrupted step {safe_line(rec.step)}" if rec.step else "") + "\n")
        if rec.task_id or rec.node_key:
            out.append(f"linked to task {safe_line(rec.task_id or '—')} node {safe_line(rec.node_key or '—')}\n")
        if rec.simulation:
            out.append("SIMULATION.json: this run was constructed for testing\n", style="bold")
        failed = [c for c in rec.checks if c.ran and not c.ok]
        if failed:
            out.append(f"failed check: {safe_line(failed[0].name)}: {safe_line(failed[0].evidence, limit=300)}\n")
        if self.mode == "decision":
            if self.host.read_only:
                out.append("\nread-only: nothing is written from this console.\n", style="bold")
            return out
        if self.mode == "written":
            r = self.recorded
            assert r is not None  # written
            out.append("\n✔ record written: ", style="bold")
            out.append(safe_line(r.path) + "\n")
            out.append("recovery.json status needs_review, semantic review pending; the run was not modified.\n"
                       f"Check it any time with: warden verify-record {safe_line(r.name)}\n")
            return out
        # record: preview HANDOFF.md for the name being typed
        from store.clock import iso
        from store.recovery import render_handoff

        app = self.host
        name = self.record_name() or "NAME"
        out.append("\nHANDOFF.md that will be written (preview)\n", style="bold underline")
        out.append(safe(render_handoff(rec, name, resolve_operator(app.operator), iso(app.now()) or ""), limit=20000))
        return out

    def _refresh(self) -> None:
        self.query_one("#steps", Static).update(self._steps_line())
        self.query_one("#body", Static).update(self._body())
        rec = self.recovery
        at_decision = self.mode in ("decision", "record", "written") and rec is not None
        ro = self.host.read_only
        self.query_one("#record-row").display = self.mode == "record"
        self.query_one("#open-node").display = bool(at_decision and rec is not None and rec.task_id and rec.node_key)
        esc = self.query_one("#escalate", Button)
        esc.display = bool(self.mode == "decision" and rec is not None and not rec.reusable and rec.task_id
                           and rec.node_key)
        esc.disabled = ro
        rec_btn = self.query_one("#record", Button)
        rec_btn.display = bool(self.mode == "decision" and rec is not None and rec.reusable)
        rec_btn.disabled = ro
        apply = self.query_one("#apply", Button)
        apply.display = self.mode == "record"
        apply.disabled = ro or self.writing or self.name_problem() is not None
        self.query_one("#cancel", Button).label = "Close" if self.mode == "written" else "Leave it"
        self.refresh_bindings()


__all__ = ["RecoveryWizardScreen"]

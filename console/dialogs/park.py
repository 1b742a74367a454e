"""Park and resume: a task, or only the selected node (the "only node" box).

The park's "wake on" takes one or more conditions separated by commas (``handoff:<id>``,
``node:<key>``, ``effect:<key>``, ``file:<path>``, ``at:<time>``: store/parks/conditions.py); a bad
one shows as the preview's refusal. "resume on its own" is ``--auto-resume``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Mapping

from textual import on
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label

from store.actions import ParkParams, ResumeParams
from store.actions.park import PARK_NODE_NOW, USE_NOW

from ..host import ConsoleHost
from ..text import safe_line
from ..widgets import Tick
from .base import ActionDialog
from .opening import selection_status
from .registry import dialog_for

if TYPE_CHECKING:
    from store import Ledger
    from store.actions import Plan


class ScopedDialog(ActionDialog):
    """park / resume: the whole task, or only the selected node."""

    def scope_checkbox(self, checked: bool) -> Iterable[Widget]:
        if self.node:
            yield Tick(f"only node {safe_line(self.node)}", checked, id="only-node", compact=True)

    def only_node(self) -> bool:
        if not self.node:
            return False
        boxes = self.query("#only-node")
        return bool(boxes.first(Checkbox).value) if boxes else False

    def target_label(self) -> str:
        return f"task {safe_line(self.task_id)}" + (f" (selected node {safe_line(self.node)})" if self.node else "")


NOW_BOX = "stop running work now"  # the dialog's name for --now (its checkbox)


def dialog_words(text: str) -> str:
    """The store's refusals and warnings name the CLI's flags; here they are boxes to tick."""
    return (text.replace(PARK_NODE_NOW, f'select it, tick "only node" and "{NOW_BOX}"')
            .replace(USE_NOW, f'tick "{NOW_BOX}"'))


@dialog_for(ParkParams)
class ParkDialog(ScopedDialog):

    def compose_options(self) -> Iterable[Widget]:
        with Horizontal(classes="field"):
            yield Label("until", classes="field-label")
            yield Input(placeholder="optional: 2h, 1d or an ISO time", id="until", compact=True)
        with Horizontal(classes="field"):
            yield Label("wake on", classes="field-label")
            yield Input(placeholder="optional: handoff:ID, node:KEY, effect:KEY, file:PATH, at:2h (commas)",
                        id="wake-on", compact=True)
        with Horizontal(classes="field"):
            yield Tick(f"{NOW_BOX} (revoke leases)", False, id="now", compact=True)
            yield from self.scope_checkbox(False)
        with Horizontal(classes="field"):
            yield Tick("resume on its own when woken", False, id="auto-resume", compact=True)

    def plan_args(self) -> dict[str, object]:
        wake = [c.strip() for c in self.query_one("#wake-on", Input).value.split(",") if c.strip()]
        return {
            "until": self.query_one("#until", Input).value.strip() or None,
            "wake_on": wake or None,
            "now": bool(self.query_one("#now", Checkbox).value),
            "auto_resume": bool(self.query_one("#auto-resume", Checkbox).value),
            "node": self.node if self.only_node() else None,
        }

    def compute(self, ledger: "Ledger", args: Mapping[str, object]) -> "Plan":
        plan = super().compute(ledger, args)
        return replace(plan, warnings=tuple(dialog_words(w) for w in plan.warnings))

    def refusal_text(self, error: str) -> str:
        return super().refusal_text(dialog_words(error))

    def apply_label(self, plan: "Plan | None") -> str:
        if plan is not None and plan.node_target:
            return f"Park node {safe_line(plan.target, limit=30)}"
        return "Park node" if self.only_node() else "Park task"

    @on(Input.Changed, "#until,#wake-on")
    def _opts_changed(self) -> None:
        self.replan()

    @on(Checkbox.Changed)
    def _check_changed(self) -> None:
        self.replan()


@dialog_for(ResumeParams)
class ResumeDialog(ScopedDialog):
    def __init__(self, task_id: str, node: str | None = None, *, reason: str = "",
                 node_parked: bool = False, task_parked: bool = True) -> None:
        super().__init__(task_id, node, reason=reason)
        self.default_node = bool(node) and node_parked and not task_parked

    @classmethod
    def opened(cls, host: ConsoleHost, task_id: str, node: str | None, *, reason: str = "",
               exclude: Iterable[str] = ()) -> "ResumeDialog":
        """Only the node (the box ticked) when the selected node is parked and its task is not."""
        task_status, node_status = selection_status(host, task_id, node)
        return cls(task_id, node, node_parked=node_status == "parked",
                   task_parked=task_status == "parked" or task_status is None)

    def compose_options(self) -> Iterable[Widget]:
        yield from self.scope_checkbox(self.default_node)

    def plan_args(self) -> dict[str, object]:
        return {"node": self.node if self.only_node() else None}

    def apply_label(self, plan: "Plan | None") -> str:
        if plan is not None and plan.node_target:
            return f"Resume node {safe_line(plan.target, limit=30)}"
        return "Resume node" if self.only_node() else "Resume task"

    @on(Checkbox.Changed)
    def _check_changed(self) -> None:
        self.replan()


__all__ = ["NOW_BOX", "ParkDialog", "ResumeDialog", "ScopedDialog", "dialog_words"]

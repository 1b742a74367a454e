"""Rewind (a node and everything downstream → pending) and abort (every unfinished node
abandoned; Apply needs the exact task id typed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from textual.containers import Horizontal
from textual.widgets import Input, Label

from ..text import safe_line
from .base import PREVIEW_PLACEHOLDER, ActionDialog
from .plan import plural

if TYPE_CHECKING:
    from store.actions import Plan


class RewindDialog(ActionDialog):
    action = "rewind"

    def target_label(self) -> str:
        return f"node {safe_line(self.node)} of task {safe_line(self.task_id)} and everything downstream"

    def compute(self, ledger: Any, args: Mapping[str, Any]) -> "Plan":
        return ledger.plan_rewind(self.task_id, self.node, reason=PREVIEW_PLACEHOLDER)

    def apply_label(self, plan: "Plan | None") -> str:
        if plan is None:
            return "Rewind"
        return f"Rewind {plural(len(plan.changes), 'node')}"



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


__all__ = ["AbortDialog", "RewindDialog"]

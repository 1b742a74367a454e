"""Rewind (a node and everything downstream → pending) and abort (every unfinished node
abandoned; Apply needs the exact task id typed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Input, Label

from store.actions import AbortParams, RewindParams

from ..text import safe_line
from .base import ActionDialog
from .plan import plural
from .registry import dialog_for

if TYPE_CHECKING:
    from store.actions import Plan


@dialog_for(RewindParams)
class RewindDialog(ActionDialog):

    def target_label(self) -> str:
        return f"node {safe_line(self.node)} of task {safe_line(self.task_id)} and everything downstream"

    def plan_args(self) -> dict[str, object]:
        return {"node": self.node}

    def apply_label(self, plan: "Plan | None") -> str:
        if plan is None:
            return "Rewind"
        return f"Rewind {plural(len(plan.changes), 'node')}"


@dialog_for(AbortParams)
class AbortDialog(ActionDialog):
    takes_node = False

    def target_label(self) -> str:
        return f"task {safe_line(self.task_id)}: every unfinished node abandoned, for good"

    def compose_confirm(self) -> Iterable[Widget]:
        with Horizontal(classes="field"):
            yield Label("confirm", classes="field-label")
            yield Input(placeholder=f"type the task id ({safe_line(self.task_id)}) to confirm", id="confirm",
                        compact=True)

    def confirmed(self) -> bool:
        return self.query_one("#confirm", Input).value == self.task_id

    def apply_label(self, plan: "Plan | None") -> str:
        return f"Abort task {safe_line(self.task_id, limit=40)}"


__all__ = ["AbortDialog", "RewindDialog"]

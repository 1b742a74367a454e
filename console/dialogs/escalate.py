"""Escalate: raise a needs_human handoff on a node (from the recovery wizard)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.actions import EscalateParams
from store.jsontypes import JsonMapping

from ..text import safe_line
from .base import ActionDialog
from .registry import dialog_for

if TYPE_CHECKING:
    from store.actions import Plan


@dialog_for(EscalateParams)
class EscalateDialog(ActionDialog):
    """Raise a needs_human handoff on a node (from the recovery wizard): node → blocked until a
    person resolves it; a running lease is revoked."""

    def __init__(self, task_id: str, node: str | None = None, *, reason: str = "", question: str = "",
                 context: JsonMapping | None = None) -> None:
        super().__init__(task_id, node, reason=reason)
        self.question = question
        self.context = dict(context or {})

    def target_label(self) -> str:
        return f"node {safe_line(self.node)} of task {safe_line(self.task_id)}: blocked until a person answers"

    def plan_args(self) -> dict[str, object]:
        return {"node": self.node, "question": self.question, "context": self.context}

    def apply_label(self, plan: "Plan | None") -> str:
        return f"Ask a human about {safe_line(self.node or '', limit=30)}"


__all__ = ["EscalateDialog"]

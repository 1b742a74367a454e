"""Confirm or reject a memory an agent proposed (the memory inbox, ``M``): an operator action like
every other — the plan (``ledger.plan_memory``) shown first, a reason required, applied with
``ctrl+s`` only when the memory is still as previewed (another operator may have decided it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from rich.text import Text

from ..text import safe_line
from .base import PREVIEW_PLACEHOLDER, ActionDialog

if TYPE_CHECKING:
    from store.actions import Plan


class MemoryDialog(ActionDialog):
    """``decision``: ``confirm`` (later claims of its kind / workflow are handed it) or ``reject``
    (never handed out; a confirmed one is retracted)."""

    action = "memory"

    def __init__(self, task_id: str, memory_id: str, decision: str, *, reason: str = "") -> None:
        super().__init__(task_id, None, reason=reason)
        self.memory_id = memory_id
        self.decision = decision

    def title_text(self) -> Text:
        out = Text()
        out.append("Confirm " if self.decision == "confirm" else "Reject ", style="bold")
        out.append(self.target_label())
        return out

    def target_label(self) -> str:
        return f"memory #{safe_line(self.memory_id)} (proposed in task {safe_line(self.task_id)})"

    def compute(self, ledger: Any, args: Mapping[str, Any]) -> "Plan":
        return ledger.plan_memory(self.memory_id, decision=self.decision, reason=PREVIEW_PLACEHOLDER)

    def apply_label(self, plan: "Plan | None") -> str:
        return f"{'Confirm' if self.decision == 'confirm' else 'Reject'} memory #{safe_line(self.memory_id, limit=18)}"


__all__ = ["MemoryDialog"]

"""Confirm or reject a memory an agent proposed (the memory inbox, ``M``: ``y`` / ``x``): an
operator action like every other — the plan (``memory-confirm`` / ``memory-reject``) shown first,
a reason required, applied with ``ctrl+s`` only when the memory is still as previewed (another
operator may have decided it meanwhile)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from store.actions import ConfirmMemoryParams, RejectMemoryParams

from ..host import ConsoleHost
from ..text import safe_line
from .base import PREVIEW_PLACEHOLDER, ActionDialog
from .registry import dialog_for

if TYPE_CHECKING:
    from store import Ledger
    from store.actions import Plan


class MemoryDialog(ActionDialog):
    """A decision on memory ``memory_id`` (proposed in task ``task_id``)."""

    takes_node = False

    def __init__(self, task_id: str, memory_id: str | None = None, *, reason: str = "") -> None:
        super().__init__(task_id, None, reason=reason)
        self.memory_id = memory_id or ""

    @classmethod
    def opened(cls, host: ConsoleHost, task_id: str, node: str | None, *, reason: str = "",
               exclude: Iterable[str] = ()) -> "ActionDialog":
        """Opened from the memory inbox with the selected memory (there is no key elsewhere)."""
        return cls(task_id, None, reason=reason)

    def target_label(self) -> str:
        return f"#{safe_line(self.memory_id)} (proposed in task {safe_line(self.task_id)})"

    def plan_args(self) -> dict[str, object] | None:
        return {"memory_id": self.memory_id} if self.memory_id else None

    def compute(self, ledger: "Ledger", args: Mapping[str, object]) -> "Plan":
        return ledger.plan(self.action, {"reason": PREVIEW_PLACEHOLDER, **args})

    def apply_label(self, plan: "Plan | None") -> str:
        return f"{self.params.title} #{safe_line(self.memory_id, limit=18)}"


@dialog_for(ConfirmMemoryParams)
class ConfirmMemoryDialog(MemoryDialog):
    pass


@dialog_for(RejectMemoryParams)
class RejectMemoryDialog(MemoryDialog):
    pass


DECISION_DIALOGS: dict[str, type[MemoryDialog]] = {"confirm": ConfirmMemoryDialog, "reject": RejectMemoryDialog}

__all__ = ["ConfirmMemoryDialog", "DECISION_DIALOGS", "MemoryDialog", "RejectMemoryDialog"]

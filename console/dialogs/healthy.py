"""Healthy: mark a node's loop alarm (no_new_info / repeating) healthy — it is judged afresh and its
kind learns that such a stretch is normal (store/actions/healthy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.actions import HealthyParams

from ..text import safe_line
from .base import ActionDialog
from .registry import dialog_for

if TYPE_CHECKING:
    from store.actions import Plan


@dialog_for(HealthyParams)
class HealthyDialog(ActionDialog):
    """The selected node's loop alarm is normal work: clear it, and teach its kind."""

    def plan_args(self) -> dict[str, object]:
        return {"node": self.node}

    def apply_label(self, plan: "Plan | None") -> str:
        return f"Mark {safe_line(self.node or '', limit=30)} healthy"


__all__ = ["HealthyDialog"]

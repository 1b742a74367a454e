"""From the selection to its action dialog: which dialog, with what defaults, or why not.

The app's action keys (p/u/n/r/a) and the recovery advice's Accept come here; the recovery advice
itself (R) is a screen the app opens (console/screens/advice.py).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..host import ConsoleHost
from ..text import safe_line
from .base import ActionDialog, read_only_notice
from .compensated import CompensatedDialog
from .narrow import NarrowDialog
from .park import ParkDialog, ResumeDialog
from .rewind import AbortDialog, RewindDialog

DIALOGS: dict[str, type[ActionDialog]] = {
    "park": ParkDialog, "resume": ResumeDialog, "narrow": NarrowDialog, "rewind": RewindDialog, "abort": AbortDialog,
    "compensated": CompensatedDialog,
}


def _graph_status(app: ConsoleHost, task_id: str, node: str | None) -> tuple[str | None, str | None]:
    """(task status, node status) from what the console already shows (no database read)."""
    tasks = app.tasks_model
    i = tasks.index.get(task_id)
    task_status = tasks.rows[i].view.status if i is not None else None
    shown = app.shown_node(task_id, node) if node else None
    return task_status, shown.status if shown is not None else None


def open_action(app: Any, action: str, task_id: str | None, node: str | None, *,
                reason: str = "", exclude: Iterable[str] = (),
                callback: Callable[[Any], None] | None = None) -> ActionDialog | None:
    """Push the dialog for ``action`` (park, resume, narrow, rewind, abort, compensated) on the selection; None
    (and a notice saying why) when there is nothing to open."""
    if getattr(app, "read_only", False):
        read_only_notice(app)
        return None
    if not task_id:
        app.notify(f"{safe_line(action)}: select a task first", severity="warning", markup=False)
        return None
    if action == "rewind" and not node:
        app.notify("rewind: select a node (open the task's graph with enter)", severity="warning")
        return None
    cls = DIALOGS.get(action)
    if cls is None:
        app.notify(f"unknown action {safe_line(action)}", severity="error", markup=False)
        return None
    screen: ActionDialog
    if action == "resume":
        task_status, node_status = _graph_status(app, task_id, node)
        screen = ResumeDialog(task_id, node, node_parked=node_status == "parked",
                              task_parked=task_status == "parked" or task_status is None)
    elif action == "narrow":
        screen = NarrowDialog(task_id, node, reason=reason, exclude=exclude)
    elif action in ("rewind", "park", "compensated"):
        screen = cls(task_id, node, reason=reason)
    else:
        screen = cls(task_id, None, reason=reason)
    app.push_screen(screen, callback)
    return screen


__all__ = ["DIALOGS", "open_action"]

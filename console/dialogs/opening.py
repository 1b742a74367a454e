"""From the selection to its action dialog: which dialog, with what defaults, or why not.

The app's action keys (built from the store's registry: console/action_keys.py) and the recovery
advice's Accept come here; the dialog is the one registered for the action
(``@dialog_for``, console/dialogs/registry.py), and it decides what of the selection it takes
(``ActionDialog.opened``). The recovery advice itself (R) is a screen the app opens
(console/screens/advice.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from ..host import ConsoleHost
from ..text import safe_line
from .base import ActionDialog, read_only_notice
from .registry import DIALOGS

if TYPE_CHECKING:
    from store.actions import Plan


def selection_status(host: ConsoleHost, task_id: str, node: str | None) -> tuple[str | None, str | None]:
    """(task status, node status) from what the console already shows (no database read): the
    task list's row, and the node as the screen nearest the top that shows it has it."""
    tasks = host.tasks_model
    i = tasks.index.get(task_id)
    task_status = tasks.rows[i].view.status if i is not None else None
    shown = host.shown_node(task_id, node) if node else None
    return task_status, shown.status if shown is not None else None


def open_action(app: ConsoleHost, action: str, task_id: str | None, node: str | None, *,
                reason: str = "", exclude: Iterable[str] = (),
                callback: Callable[[Plan | None], None] | None = None) -> ActionDialog | None:
    """Push the dialog registered for ``action`` on the selection; None (and a notice saying why)
    when there is nothing to open."""
    if app.read_only:
        read_only_notice(app)
        return None
    if not task_id:
        app.notify(f"{safe_line(action)}: select a task first", severity="warning", markup=False)
        return None
    cls = DIALOGS.get(action)
    if cls is None or not issubclass(cls, ActionDialog):
        app.notify(f"unknown action {safe_line(action)}", severity="error", markup=False)
        return None
    if cls.params.needs_node and not node:
        app.notify(f"{safe_line(action)}: select a node (open the task's graph with enter)", severity="warning",
                   markup=False)
        return None
    screen = cls.opened(app, task_id, node, reason=reason, exclude=exclude)
    app.push_screen(screen, callback)
    return screen


__all__ = ["open_action", "selection_status"]

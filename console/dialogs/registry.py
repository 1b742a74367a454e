"""The console side of the action registry: which dialog (or screen) takes each registered action.

The store registers an action (``store/actions/registry.py``) with everything but its dialog —
the store never imports the console. Its dialog registers itself here::

    @dialog_for(ParkParams)
    class ParkDialog(ScopedDialog): ...

which also gives an :class:`~console.dialogs.base.ActionDialog` its ``params`` (the action's
name, title, whether it needs a reason). ``open_action`` (``opening.py``) opens the registered
dialog on the selection; a test fails when a registered action has none.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from textual.widget import Widget

from store.actions import Action

from .base import ActionDialog

T = TypeVar("T", bound=type[Widget])

DIALOGS: dict[str, type[Widget]] = {}  # action name → its dialog (or the screen that takes it)


def dialog_for(params: type[Action]) -> Callable[[T], T]:
    """Register the decorated class as the dialog of the action whose params class is ``params``."""

    def register(cls: T) -> T:
        if params.action in DIALOGS and DIALOGS[params.action] is not cls:
            raise RuntimeError(f"two dialogs for the action {params.action!r}: "
                               f"{DIALOGS[params.action].__name__} and {cls.__name__}")
        DIALOGS[params.action] = cls
        if issubclass(cls, ActionDialog):
            cls.params = params
            cls.action = params.action
            cls.needs_reason = params.reason_required
        return cls

    return register


__all__ = ["DIALOGS", "dialog_for"]

"""The operator action dialogs: park, resume, narrow, rewind, abort, escalate.

- ``base``: :class:`WardenModal` (every console modal: layout from ``modal.tcss``, the one-line
  message) and :class:`ActionDialog` (plan in a worker, preview, reason, Cancel / Apply, the
  stale-plan banner);
- ``plan``: the preview of a plan (:func:`render_plan`, :class:`PlanPreview`);
- ``park`` (park, resume), ``rewind`` (rewind, abort), ``narrow``, ``escalate``, ``compensated``, ``healthy`` (a loop alarm is normal work)
  (an effect undone by hand), ``memory`` (confirm, reject a proposed memory): one dialog each;
- ``registry``: :func:`dialog_for`, a dialog registering itself for an action of the store's registry;
- ``opening``: :func:`open_action`, from the selection to its registered dialog.

Dialogs depend on the store's public API, ``console.host`` and the small modules below them
(text, glyphs, operator, widgets); never on the app or the screens.
"""

from .base import MODAL_TCSS, STALE_BANNER, ActionDialog, WardenModal, read_only_notice
from .compensated import CompensatedDialog
from .escalate import EscalateDialog
from .healthy import HealthyDialog
from .memory import ConfirmMemoryDialog, RejectMemoryDialog
from .narrow import NarrowDialog, precondition_values
from .opening import open_action
from .park import ParkDialog, ResumeDialog
from .plan import PlanPreview, render_plan
from .registry import DIALOGS, dialog_for
from .rewind import AbortDialog, RewindDialog

__all__ = [
    "AbortDialog", "ActionDialog", "CompensatedDialog", "ConfirmMemoryDialog", "DIALOGS", "EscalateDialog", "HealthyDialog", "MODAL_TCSS", "NarrowDialog",
    "ParkDialog", "PlanPreview", "RejectMemoryDialog", "ResumeDialog", "RewindDialog", "STALE_BANNER", "WardenModal", "dialog_for",
    "open_action", "precondition_values", "read_only_notice", "render_plan",
]

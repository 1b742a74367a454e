"""Warden's store: the durable ledger and everything that reads or writes agent state.

Never imports Textual. The console talks to it through :class:`Ledger` and the frozen views.
"""

from .budget import admit as budget_admit
from .clock import ManualClock, system_clock
from .errors import (
    LeaseLost,
    LedgerBusy,
    LedgerUnavailable,
    NotFound,
    ReadOnly,
    Refused,
    SchemaMismatch,
    StaleRevision,
    WardenError,
)
from .facade import Ledger
from .views import Budget, Claim, NodeSpec, Pulse

__all__ = [
    "Budget", "Claim", "Ledger", "LeaseLost", "LedgerBusy", "LedgerUnavailable", "ManualClock", "NodeSpec", "NotFound",
    "Pulse", "ReadOnly", "Refused", "SchemaMismatch", "StaleRevision", "WardenError", "budget_admit",
    "system_clock",
]

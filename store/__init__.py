"""Warden's store: the durable ledger and everything that reads or writes agent state.

Never imports Textual. The console talks to it through :class:`Ledger` and the frozen views.
"""

from store.judges.budget import admit as budget_admit
from store.clock import ManualClock, system_clock
from store.errors import (
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
from store.facade import Ledger
from store.views import Budget, Claim, NodeSpec, Pulse

__all__ = [
    "Budget", "Claim", "Ledger", "LeaseLost", "LedgerBusy", "LedgerUnavailable", "ManualClock", "NodeSpec", "NotFound",
    "Pulse", "ReadOnly", "Refused", "SchemaMismatch", "StaleRevision", "WardenError", "budget_admit",
    "system_clock",
]

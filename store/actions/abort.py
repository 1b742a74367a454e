"""abort: task → aborted; every unfinished node (not succeeded / abandoned) → abandoned; leases
revoked; open handoffs withdrawn; confirmed effects listed newest first with their compensations.
Kept for audit; nothing further can be claimed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import sql
from ..db import read_tx
from ..ledger.core import LedgerCore
from . import planning as pl
from .changes import BUMP, REVOKE, ApplyTx, Outcome, set_nodes
from .plan import ActionParams, Plan


@dataclass(frozen=True)
class AbortParams(ActionParams):
    action = "abort"

    def to_json(self) -> dict[str, Any]:
        return {}


def plan_abort(core: LedgerCore, task_id: str, *, reason: str) -> Plan:
    """Abort a task: every unfinished node abandoned, leases revoked, open handoffs withdrawn."""
    with read_tx(core.db):
        task = pl.open_task(core, task_id)
        reason = pl.require_reason(reason, "abort")
        nodes = pl.all_nodes(core, task_id)
        changes = {n.key: (n.status, "abandoned") for n in nodes if n.status not in pl.FINISHED}
        kept = [n.key for n in nodes if n.key not in changes]
        handoffs = [str(r[0]) for r in sql.fetch_all(core.db, "SELECT id FROM handoff WHERE task_id = ? "
                                                              "AND status = 'open' ORDER BY id", [task_id])]
        effects, warnings = pl.effects(core, task_id, None)
        if task["status"] == "completed":
            warnings.insert(0, f"task {task_id} is completed: aborting only marks it aborted")
        if effects:
            warnings.insert(0, f"{len(effects)} confirmed effect(s) are not undone: compensate them newest first")
        return pl.make_plan(core, AbortParams(), task, task_id, reason, nodes, changes, kept=kept,
                            status_after="aborted", handoffs=handoffs, effects=effects, warnings=warnings)


def apply_abort(tx: ApplyTx, p: AbortParams) -> Outcome:
    set_nodes(tx, tx.changed_to("abandoned"), {"status": "abandoned", "finished_at": tx.now, "next_retry_at": None,
                                               **REVOKE, **BUMP})
    return Outcome(task_fields={"status": "aborted", "finished_at": tx.now})

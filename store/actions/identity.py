"""Who may decide for a person: a decision that only a person may take (a memory confirmed or
rejected, an irreversible effect confirmed) is refused when the operator named is an agent of the
task it concerns.

The ledger cannot authenticate anyone: the operator is the name the caller gives
(``--operator``, the console's ``--operator``, default ``$USER@host``). What it can do is refuse
the names it knows belong to agents: the worker that proposed (or asked), every worker that has
claimed a node of the task, and every name of an agent's form (the integrations' defaults
``run:…``, ``mcp:…``, ``claude:…``, ``codex:…``). Names are compared without case or surrounding
space. docs/operations.md "Who decides for a person" says what this does and does not stop.
"""

from __future__ import annotations

from typing import Iterable

from store.storage import sql
from store.storage.core import LedgerCore
from store.storage.events import NodeClaimed

AGENT_PREFIXES = ("run:", "mcp:", "claude:", "codex:", "langgraph:")


def _norm(name: str | None) -> str:
    return " ".join((name or "").split()).casefold()


def task_workers(core: LedgerCore, task_id: str) -> set[str]:
    """Every worker name that has held a lease on a node of ``task_id`` (normalised)."""
    names = {r[0] for r in sql.fetch_all(core.db, "SELECT DISTINCT actor FROM event WHERE task_id = ? AND kind = ?",
                                         [task_id, NodeClaimed.KIND])}
    names |= {r[0] for r in sql.fetch_all(core.db, "SELECT DISTINCT lease_owner FROM node WHERE task_id = ? "
                                                   "AND lease_owner IS NOT NULL", [task_id])}
    return {_norm(n) for n in names if n}


def agent_refusal(core: LedgerCore, task_id: str, operator: str, what: str, *,
                  also: Iterable[str | None] = ()) -> str | None:
    """Why ``operator`` may not take the person's decision ``what`` for task ``task_id``, or None."""
    who = _norm(operator)
    if who.startswith(AGENT_PREFIXES):
        return f"{operator!r} is an agent's name: {what} is a person's decision (give --operator)"
    if who in {_norm(a) for a in also if a}:
        return f"{operator!r} proposed it: {what} is another person's decision"
    if who in task_workers(core, task_id):
        return f"{operator!r} is a worker of task {task_id}: {what} is a person's decision, not its agents'"
    return None


__all__ = ["AGENT_PREFIXES", "agent_refusal", "task_workers"]

"""The agent's own writes to the task's mind, under its lease like every agent write: a
conclusion or a rejected path (``Ledger.conclude``) and a proposed memory
(``Ledger.propose_memory``). A lost lease raises ``LeaseLost`` and writes nothing."""

from __future__ import annotations

from store.storage import sql
from store.storage.db import retry_write, write_tx
from store.errors import Refused
from store.storage.core import LedgerCore
from store.ledger.fenced import fence
from store.views import Claim
from store.mind import record
from store.mind.rules import ENTRY_KINDS, MEMORY_SCOPES
from store.storage.events import MemoryProposed, MindConcluded, MindRejected


@retry_write
def conclude(core: LedgerCore, claim: Claim, text: str, *, source: str | None, kind: str,
             reason: str | None) -> int:
    """Record what the node found (``finding``) or tried and abandoned (``rejected``, with the
    reason). Returns the entry's id."""
    if kind not in ENTRY_KINDS:
        raise Refused(f"unknown conclusion kind {kind!r}: one of {', '.join(ENTRY_KINDS)}")
    _need_source(source, "a conclusion", "conclude")
    if kind == "rejected" and not (reason or "").strip():
        raise Refused("a rejected path needs its reason (why it was abandoned): conclude(..., reason=...)")
    now = core.now()
    with write_tx(core.db):
        row = fence(core, claim, now, lock=True)
        entry_id = record.entry(core, claim.task_id, row.id, claim.node_key, claim.attempt, kind, text,
                                source=source, reason=reason, origin="agent", actor=claim.worker, now=now,
                                strict=True)
        assert entry_id is not None
        label, said = ("rejected", MindRejected) if kind == "rejected" else ("concluded", MindConcluded)
        core.journal(claim.task_id, claim.node_key, claim.worker, f"{claim.node_key} {label}: {' '.join(text.split())[:160]}",
                     said(entry=entry_id, kind=kind, source=source, nodes=[claim.node_key]), at=now)
    return entry_id


def _need_source(source: str | None, what: str, call: str) -> str:
    """Every conclusion and memory says where it came from (a memory carries when it
    was made and its source — which file, which command's output — so a reader can judge it)."""
    if source is None or not str(source).strip():
        raise Refused(f"{what} needs its source: where it came from (a file, a command's output, a URL): "
                      f"{call}(..., source=...)")
    return str(source)


@retry_write
def propose_memory(core: LedgerCore, claim: Claim, text: str, *, scope: str, source: str | None) -> str:
    """Propose a memory for later tasks; it is used only once a person confirms it. Returns its id."""
    src = _need_source(source, "a memory", "propose_memory")
    if scope not in MEMORY_SCOPES:
        raise Refused(f"unknown memory scope {scope!r}: one of {', '.join(MEMORY_SCOPES)}")
    if not text.strip():
        raise Refused("a memory needs its text")
    now = core.now()
    with write_tx(core.db):
        fence(core, claim, now, lock=True)
        workflow = str(sql.scalar(core.db, "SELECT workflow FROM task WHERE task_id = ?", [claim.task_id]) or "")
        memory_id, new = record.propose(core, claim.task_id, workflow, claim.node_key, claim.kind, claim.attempt,
                                        text, scope, claim.worker, now, src)
        if new:
            where = f"kind {claim.kind} in " if scope == "kind" else ""
            core.journal(claim.task_id, claim.node_key, claim.worker,
                         f"{claim.node_key} proposes a memory for {where}workflow {workflow or '(none)'}: "
                         f"{' '.join(text.split())[:120]}",
                         MemoryProposed(memory=memory_id, scope=scope, source=src, nodes=[claim.node_key]), at=now)
    return memory_id

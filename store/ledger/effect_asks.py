"""Asking a person to confirm an irreversible effect (store/ledger/confirm.py says when one is
needed): an ordinary ``confirm`` handoff on the claimed node — the node is blocked until it is
answered — whose context holds the checkpoint's four parts and the effect."""

from __future__ import annotations

from store.errors import Refused
from store.jsontypes import JsonMapping
from store.ledger import confirm, fenced
from store.storage.core import LedgerCore
from store.views import Claim


def request_effect_confirmation(core: LedgerCore, claim: Claim, effect_key: str, *, details: JsonMapping,
                                done: str, why: str, question: str | None, stuck: str | None,
                                tokens: float | None) -> str:
    """Open the confirm handoff for ``effect_key`` (see ``Ledger.request_effect_confirmation``)."""
    if not effect_key:
        raise Refused("an effect needs a key")
    if not details:
        raise Refused("a person confirms an effect from its details: details={...} (what, to whom, how much)")
    ctx = confirm.context(effect_key, details, done=done, stuck=stuck, why=why)
    return fenced.request_human(core, claim, kind="confirm",
                                question=question or f"Perform {effect_key}? It cannot be undone.",
                                options=confirm.options(effect_key), recommendation=confirm.PROCEED, context=ctx,
                                tokens=tokens)


__all__ = ["request_effect_confirmation"]

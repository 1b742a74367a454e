"""Named points inside a write transaction, where a test may hold the transaction open to prove
what it blocks and what it does not:

* ``claim.locked`` — a claim holds its node's row (store/ledger/claims.py);
* ``effect.fenced`` — an effect intent passed its lease fence (store/ledger/fenced.py);
* ``tx.before_commit`` — a retried write recorded its outcome and is about to commit (store/storage/db.py;
  ``task_id`` is "" and ``node_key`` the write's name: "commit", "claim round", …).

In production :func:`reach` does nothing. A test replaces it — ``monkeypatch.setattr(checkpoints,
"reach", fn)``, or ``checkpoints.reach = fn`` in a child process of its own — so no production
object carries a test hook. Callers look it up at call time (``checkpoints.reach``),
never import the function itself.
"""

from __future__ import annotations


def reach(point: str, task_id: str, node_key: str) -> None:
    """``point`` is reached, for ``task_id`` / ``node_key``."""


__all__ = ["reach"]

"""Helpers of the loop-alarm tests: a node started on a task of its own, its loop signals as the
operator reads them, and the check that a heartbeat's answer (``Pulse.stall``) is that signal."""

from __future__ import annotations

from store import NodeSpec
from store.reading import signals as S


def loops(ledger, task="t", node="a"):
    return [s for s in S.signals_for_graph(ledger, ledger.graph(task)) if s.node == node
            and s.kind in ("no_new_info", "repeating")]


def agrees(ledger, p, task="t", node="a"):
    """The heartbeat's answer is the operator's loop signal at that moment: the same kind, the same evidence."""
    found = {s.kind: s.evidence for s in loops(ledger, task, node)}
    if p.stall is None:
        assert found == {}, found
    else:
        assert found.get(p.stall) == p.stall_evidence and (p.stall == "repeating" or "repeating" not in found), found
    return p


def start(ledger, task="t", kind="agent_step", worker="w1"):
    ledger.create_task(task)
    ledger.add_nodes(task, [NodeSpec("a", kind)])
    return ledger.claim(task, worker, lease_s=300)

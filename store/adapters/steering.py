"""What an operator did to a claim an integration holds, read from the public ledger API.

The three no-code integrations (``warden run``, ``warden mcp``, ``warden hook claude``) hold a
claim for an agent that is not written against :mod:`store`. When a heartbeat says the task is
parked, or a write raises ``LeaseLost``, they ask :func:`steer` what happened and act on it:

* ``parked``  — the task or node was parked (``park`` without ``--now`` keeps the lease: the
  heartbeat's ``Pulse.parked``; with ``--now`` the lease is revoked and the node is ``parked``);
* ``aborted`` — the task was aborted (or the node abandoned by a narrow);
* ``rewound`` — the node was rewound (it is pending again with one more rejection: its reason);
* ``blocked`` — the node waits on a handoff (the integration's own question, or an escalation);
* ``lost``    — anything else: the lease expired (whether or not another worker holds the node now),
  it finished...

:func:`reclaim` takes the node back by key once it can run again (resumed, rewound, expired),
and :func:`clean` turns what an agent printed into bounded observation text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from store.errors import NotFound
from store.facade import Ledger
from store.views import Claim, NodeView, Pulse, TaskView

__all__ = ["LINE_CAP", "Steer", "clean", "clean_lines", "pulse", "reclaim", "stall_advice", "steer"]

LINE_CAP = 1000  # characters of one output line kept in an observation
# ANSI escape sequences (CSI ... final byte, OSC ... BEL/ST, two-byte ESC x): colours and cursor
# moves are formatting, not information; the rest of the text is kept and escaped on display.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


@dataclass(frozen=True)
class Steer:
    """What happened to a claim: ``state`` is ``running`` (nothing: carry on), ``parked``,
    ``aborted``, ``rewound``, ``blocked`` or ``lost``; ``reason`` says why in the operator's words
    (the park reason, the abort reason, the rewind reason) or the ledger's."""

    state: str
    reason: str = ""
    handoff: str | None = None

    @property
    def answer(self) -> str:
        """The word an agent is told: ``parked``, ``aborted``, ``rewound: <reason>``…"""
        if self.state == "rewound":
            return f"rewound: {self.reason}" if self.reason else "rewound"
        return self.state


def _abort_reason(ledger: Ledger, task_id: str) -> str:
    for a in ledger.actions(task_id, limit=20):
        if a.action == "abort" and a.result == "applied":
            return a.reason
    return ""


def _node(ledger: Ledger, claim: Claim) -> tuple[TaskView, NodeView] | None:
    try:
        return ledger.task(claim.task_id), ledger.node(claim.task_id, claim.node_key)
    except NotFound:
        return None


def steer(ledger: Ledger, claim: Claim, *, lost_why: str = "") -> Steer:
    """What happened to ``claim`` (after ``LeaseLost``, or to check before acting)."""
    found = _node(ledger, claim)
    if found is None:
        return Steer("lost", lost_why or "the task or node no longer exists")
    task, node = found
    if task.status == "aborted" or node.status == "abandoned":
        return Steer("aborted", _abort_reason(ledger, claim.task_id) if task.status == "aborted"
                     else "the node was abandoned (out of scope)")
    before = list(claim.inputs.get("rejections") or [])
    if node.status == "pending" and len(node.rejections) > len(before):
        return Steer("rewound", node.rejections[-1])
    if node.status == "parked":
        return Steer("parked", node.park_reason or task.park_reason or "")
    if task.status == "parked" and node.status in ("running", "pending"):
        if node.status == "pending" or node.lease_owner == claim.worker:
            return Steer("parked", task.park_reason or "")
    if node.status == "blocked":
        open_ = ledger.handoffs(task_id=claim.task_id)
        mine = [h for h in open_ if h.node == claim.node_key]
        return Steer("blocked", mine[-1].question if mine else "", mine[-1].id if mine else None)
    if node.status == "running" and node.lease_owner == claim.worker and node.attempt == claim.attempt:
        if node.lease_until is not None and node.lease_until > ledger.now():
            return Steer("running")
        # Still ours on paper, but the lease ran out (a suspended machine, a loaded one that kept
        # the heartbeat from running in time) and nobody took the node: every write of the claim is
        # refused now, so the integration takes the node back (reclaim) rather than carry on with it.
        return Steer("lost", "the lease expired; the node can be claimed again")
    if node.status == "running":
        return Steer("lost", lost_why or f"another worker holds the node now ({node.lease_owner}, attempt "
                                          f"{node.attempt})")
    if node.status == "pending":
        return Steer("lost", lost_why or "the lease expired; the node can be claimed again")
    return Steer("lost", lost_why or f"the node is {node.status}")


def reclaim(ledger: Ledger, claim: Claim, *, lease_s: float | None = None) -> Claim | None:
    """Take the claim's node back (by key) when it can run again; None when it cannot now. Its own
    lapsed lease, nobody having claimed the node since, is renewed: the same attempt, no claim spent."""
    return ledger.claim(claim.task_id, claim.worker, lease_s=lease_s or claim.lease_s, key=claim.node_key,
                        renew=claim.token)


def pulse(ledger: Ledger, claim: Claim, *, observation: str | None = None, action: str | None = None,
          result: str | None = None, tokens: int = 0, units_done: float | None = None,
          units_total: float | None = None, waiting_on: str | None = None, wait_s: float | None = None) -> Pulse:
    """One heartbeat with what the step did (``action``) and learned (``result``): the ledger judges
    new information on results."""
    return ledger.heartbeat(claim, observation=observation, action=action, result=result, tokens=tokens,
                            units_done=units_done, units_total=units_total, waiting_on=waiting_on, wait_s=wait_s)


def stall_advice(p: Pulse) -> str | None:
    """What the agent is told when its heartbeat shows it looping or bringing nothing new (``Pulse.stall``):
    the judgement, its evidence and what to do — the same words through ``warden mcp`` and the hooks."""
    if p.stall is None:
        return None
    what = "looping" if p.stall == "repeating" else "bringing nothing new"
    return (f"Warden judges this step {what} ({p.stall}): {p.stall_evidence}. Change course: try a different "
            "approach rather than the same action again, or ask for help if you are stuck; an operator sees "
            "this alarm too.")


def clean(text: str | bytes, limit: int = LINE_CAP) -> str:
    """What an agent printed, as observation text: decoded (undecodable bytes replaced), ANSI
    formatting removed, carriage-return rewrites collapsed to their last state, cut to ``limit``
    characters. Control characters that remain are kept: the console escapes them on display."""
    s = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else str(text)
    s = _ANSI.sub("", s)
    s = "\n".join(part.rsplit("\r", 1)[-1] if "\r" in part.rstrip("\r") else part.rstrip("\r")
                  for part in s.split("\n"))
    return s if len(s) <= limit else s[:limit] + "…"


def clean_lines(lines: Sequence[str], *, cap: int) -> str:
    """Lines joined for one observation, the most recent kept when they exceed ``cap`` characters."""
    out: list[str] = []
    size = 0
    for line in reversed(lines):
        if size + len(line) + 1 > cap and out:
            out.append(f"[{len(lines) - len(out)} earlier lines left out]")
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(reversed(out))

"""A Claude Code session as the ledger sees it: one task, one node per turn (store/adapters/claude_hooks.py).

* **The task** is ``--task T`` (several sessions may share it) or ``claude-<session>`` (one per
  session: :func:`session_task_id`), made with origin ``claude``, titled after the working directory.
* **A turn is a node**: ``turn-1``, ``turn-2``… (``<session>.turn-N`` on a shared task), kind
  ``claude-turn``, each depending on the one before, so the graph reads as the session's history.
  The first hook of a turn (SessionStart, UserPromptSubmit, a tool call) opens and claims it, every
  tool call heartbeats it, ``Stop`` commits it with Claude's last message.
* **The lease lives between hook processes** in the session file (store/adapters/sessions.py);
  each hook extends it. One that ran out while Claude was thinking is taken back by key.
* **Questions the session opened** are remembered there too: a ``permission`` handoff while a
  PermissionRequest hook waits on it, and the ``notice`` a Notification opened (Claude waits for
  someone at its terminal): when the session goes on (its next hook), the session closes its own
  notice through the ordinary resolve action, recorded as done by the session's worker.
"""

from __future__ import annotations

import hashlib
import os
import re

from store.errors import LeaseLost, NotFound
from store.facade import Ledger
from store.jsontypes import JsonObject
from store.views import Claim
from store.adapters.sessions import SessionStore, claim_from_json, claim_to_json
from store.adapters.steering import Steer, reclaim, steer

__all__ = ["ClaudeSession", "session_task_id"]

KIND = "claude-turn"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _short(session_id: str) -> str:
    """A session's short name: a UUID's first 8 hex digits (Claude Code's ids are random UUIDs),
    else a digest of the id (ids that share a prefix must not share a name)."""
    if _UUID.fullmatch(session_id):
        return session_id[:8]
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def session_task_id(session_id: str) -> str:
    """``claude-<session>``: a UUID's first 13 characters (``claude-3b1f0c2e-8d4a``, 48 random bits:
    short enough for the task list, long enough not to meet another session), else a digest."""
    if _UUID.fullmatch(session_id):
        return f"claude-{session_id[:13]}"
    return f"claude-{hashlib.sha256(session_id.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


class ClaudeSession:
    """One session's ledger state, loaded from and saved to its session file (the caller holds
    the session's lock around every method that changes it)."""

    def __init__(self, ledger: Ledger, store: SessionStore, session_id: str, *, task: str | None, lease_s: float,
                 origin: str = "claude") -> None:
        self.ledger = ledger
        self.store = store
        self.session_id = session_id
        self.key = f"claude\0{ledger.target or ledger.display}\0{session_id}"
        self.shared = task is not None
        self.task = task or session_task_id(session_id)
        self.worker = f"claude:{_short(session_id)}"
        self.lease_s = lease_s
        self.origin = origin
        saved = store.load(self.key)
        self.turn = int(saved.get("turn") or 0) if isinstance(saved.get("turn"), int) else 0
        self.claim: Claim | None = claim_from_json(saved.get("claim"))
        handoff = saved.get("handoff")
        self.handoff: str | None = handoff if isinstance(handoff, str) else None
        self.handoff_kind: str | None = saved.get("handoff_kind") if isinstance(saved.get("handoff_kind"), str) \
            else None

    def save(self) -> None:
        self.store.save(self.key, {"task": self.task, "turn": self.turn, "handoff": self.handoff,
                                   "handoff_kind": self.handoff_kind,
                                   "claim": claim_to_json(self.claim) if self.claim else None})

    def drop(self) -> None:
        self.store.drop(self.key)

    def node_key(self, n: int) -> str:
        return f"{_short(self.session_id)}.turn-{n}" if self.shared else f"turn-{n}"

    # ------------------------------------------------------------------ the task and its turns
    def ensure_task(self, cwd: str) -> None:
        where = os.path.basename(os.path.normpath(cwd)) if cwd else ""
        title = f"Claude Code in {where}" if where else "Claude Code session"
        self.ledger.create_task(self.task, title=title, exist_ok=True, actor=self.worker, origin=self.origin)

    def _open_turn(self, title: str) -> Claim | None:
        n = self.turn + 1
        key = self.node_key(n)
        try:
            self.ledger.node(self.task, key)
        except NotFound:
            deps = [self.node_key(self.turn)] if self.turn else []
            self.ledger.add_node(self.task, key, kind=KIND, deps=deps, title=title[:200] or f"turn {n}",
                                 actor=self.worker)
        self.turn = n
        self.claim = self.ledger.claim(self.task, self.worker, lease_s=self.lease_s, key=key)
        self.save()
        return self.claim

    def why_not(self) -> Steer:
        """Why the turn cannot be claimed (the task parked, aborted, over its budget...)."""
        t = self.ledger.task(self.task)
        if t.status == "aborted":
            reason = next((a.reason for a in self.ledger.actions(self.task, limit=20) if a.action == "abort"), "")
            return Steer("aborted", reason)
        if t.status == "parked":
            return Steer("parked", t.park_reason or "")
        return Steer("lost", f"the turn cannot be claimed now (task {t.status}: a dependency, the budget or a "
                             "retry time holds it)")

    def ensure_turn(self, title: str) -> tuple[Claim | None, Steer | None]:
        """The turn's claim, opened or taken back as needed; or why there is none."""
        self.close_notice("the session went on")
        if self.handoff is not None:  # a permission question still open (its hook is waiting on it)
            return None, Steer("blocked", "", self.handoff)
        if self.claim is None:
            if self.ledger.task(self.task).status == "aborted":  # nothing can be added to it
                return None, self.why_not()
            claim = self._open_turn(title)
            return (claim, None) if claim is not None else (None, self.why_not())
        return self.claim, None

    def after_lost(self, e: LeaseLost | None = None) -> tuple[Claim | None, Steer]:
        """The lease is gone (or may be): take the turn back when it can run, else say why."""
        assert self.claim is not None
        st = steer(self.ledger, self.claim, lost_why=str(e) if e else "")
        if st.state == "running":
            return self.claim, st
        if st.state in ("rewound", "lost", "parked"):
            again = reclaim(self.ledger, self.claim, lease_s=self.lease_s)
            if again is not None:
                self.claim = again
                self.save()
                return again, st
        if st.state in ("aborted", "lost"):
            self.claim = None
            self.save()
        return None, st

    # ------------------------------------------------------------------ questions the session asked
    def close_notice(self, why: str) -> None:
        """Close the notice a Notification opened, now that the session went on (or ended)."""
        if self.handoff is None or self.handoff_kind != "notice":
            return
        try:
            h = self.ledger.handoff(self.handoff)
            if h.status == "open":
                plan = self.ledger.plan_resolve(self.handoff, option="seen", answer=why)
                self.ledger.apply(plan, operator=self.worker)
        except (NotFound, LeaseLost):
            pass
        self.handoff = self.handoff_kind = None
        if self.claim is not None:
            again = reclaim(self.ledger, self.claim, lease_s=self.lease_s)
            self.claim = again
        self.save()

    def notice(self, kind: str, question: str) -> str | None:
        """Open a notice (Claude waits on someone at its terminal): an alert in the console."""
        if self.handoff is not None:
            return None  # one question at a time: the open one already rings
        if self.claim is None:
            self.claim = self._open_turn("waiting for the next prompt")
        if self.claim is None:
            return None
        opts = [{"id": "seen", "label": "Seen", "consequence": "answer at the Claude Code terminal; this only "
                                                              "clears the question here"}]
        try:
            hid = self.ledger.request_human(self.claim, kind=kind, question=question, options=opts,
                                            context={"via": "claude-code notification", "session": self.session_id})
        except LeaseLost:
            return None
        self.handoff, self.handoff_kind = hid, "notice"
        self.save()
        return hid

    def ask_permission(self, question: str, context: JsonObject, options: list[dict[str, str]]) -> str:
        assert self.claim is not None
        hid = self.ledger.request_human(self.claim, kind="permission", question=question, options=options,
                                        context=context)
        self.handoff, self.handoff_kind = hid, "permission"
        self.save()
        return hid

    def permission_done(self) -> None:
        """The permission question is over: take the turn back (it is pending again)."""
        self.handoff = self.handoff_kind = None
        if self.claim is not None:
            self.claim = reclaim(self.ledger, self.claim, lease_s=self.lease_s)
        self.save()

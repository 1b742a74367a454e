"""A hook-driven session (Claude Code's or Codex's hooks) as the ledger sees it
(store/adapters/claude_hooks.py handles the events).

* **The task** is ``--task T`` (several sessions may share it) or ``<client>-<session>`` (one per
  session: :func:`session_task_id`), origin ``claude`` or ``codex``, titled after the directory.
* **Turns and the waits between them.** Each prompt is a node ``turn-N`` (kind ``claude-turn``),
  titled by the prompt, claimed when the prompt is submitted and committed at ``Stop``. Before each
  prompt the session waits for its user: a pending node ``await-N`` ("waiting for prompt N at the
  terminal", kind ``claude-await``) that the prompt claims and commits. So a live session's task
  stays active between turns — parkable (a parked task refuses the next prompt), shown as
  waiting for its user — and completes only when the session ends. The graph reads as the
  session's history: await-1 → turn-1 → await-2 → turn-2 …
* **The turn's lease lives between hook processes** in the session file
  (store/adapters/sessions.py); each hook extends it. One that ran out is taken back by key.
* **Questions** (permission requests, budget gates) are nodes of their own
  (store/adapters/questions.py), so they never block the turn or each other. The session file
  remembers each open one with the tool call it is about and the pid of the hook waiting on it:
  a question whose call went on at the terminal, or whose hook died, is settled by the session.
* **Tool calls** seen at ``PreToolUse`` are remembered until their result comes (``PostToolUse``,
  ``PostToolUseFailure``, ``PermissionDenied``); a call refused by the client itself (``claude -p``
  refuses what it may not do; Codex's policy rejects) gets its result from the transcript.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time

from store.errors import LeaseLost, NotFound, Refused
from store.facade import Ledger
from store.jsontypes import JsonObject, JsonValue
from store.views import Claim, NodeSpec
from store.adapters import questions
from store.adapters.sessions import SessionStore, claim_from_json, claim_to_json
from store.adapters.steering import Steer, reclaim, steer

__all__ = ["HookSession", "call_digest", "process_alive", "process_start", "session_task_id"]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
CALLS_KEEP = 64  # tool calls remembered while their result is awaited
TERMINAL = {"claude": "Claude Code", "codex": "Codex"}


def _short(session_id: str) -> str:
    """A session's short name: a UUID's first 8 hex digits, else a digest of the id (ids that
    share a prefix must not share a name)."""
    if _UUID.fullmatch(session_id):
        return session_id[:8]
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def session_task_id(session_id: str, client: str = "claude") -> str:
    """``claude-<session>``: a UUID's first 13 characters (``claude-3b1f0c2e-8d4a``), else a digest.
    Codex's ids are UUIDs too (time-ordered: the first digits are a timestamp, so the digest of
    the whole id names its task)."""
    if client == "claude" and _UUID.fullmatch(session_id):
        return f"claude-{session_id[:13]}"
    return f"{client}-{hashlib.sha256(session_id.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def call_digest(tool: object, tool_input: object) -> str:
    """What identifies a tool call across events that do not carry its id (PermissionRequest)."""
    blob = json.dumps([tool, tool_input], sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (with the pid, it names one process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def process_alive(pid: int, start: int | None) -> bool:
    """Whether the process ``pid`` started at ``start`` still runs (a reused pid is another one)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0] not in (b"Z", b"X") and (start is None or int(fields[19]) == start)
    except (OSError, ValueError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not os.path.isdir("/proc/self")  # no /proc: the signal is all we know


class HookSession:
    """One session's ledger state, loaded from and saved to its session file (the caller holds
    the session's lock around every method that changes it)."""

    def __init__(self, ledger: Ledger, store: SessionStore, session_id: str, *, task: str | None, lease_s: float,
                 client: str = "claude") -> None:
        self.ledger = ledger
        self.store = store
        self.session_id = session_id
        self.client = client
        self.key = f"{client}\0{ledger.target or ledger.display}\0{session_id}"
        self.shared = task is not None
        self.task = task or session_task_id(session_id, client)
        self.worker = f"{client}:{_short(session_id)}"
        self.lease_s = lease_s
        self.terminal = TERMINAL.get(client, client)
        saved = store.load(self.key)
        self.turn = _int(saved.get("turn"))
        self.awaiting = _int(saved.get("awaiting"))  # the await node pending (its number), 0: none
        self.claim: Claim | None = claim_from_json(saved.get("claim"))
        self.asks: dict[str, JsonObject] = _dict(saved.get("asks"))
        self.calls: dict[str, JsonObject] = _dict(saved.get("calls"))
        self.notes: dict[str, JsonObject] = _dict(saved.get("notes"))
        self.asked = _int(saved.get("asked"))
        self.notice: str | None = saved.get("notice") if isinstance(saved.get("notice"), str) else None
        self.transcript: JsonObject = _dict(saved.get("transcript"))
        self.unbilled = _int(saved.get("unbilled"))  # tokens read while no turn was claimed
        self.budget: JsonObject = _dict(saved.get("budget"))

    def save(self) -> None:
        self.store.save(self.key, {"task": self.task, "turn": self.turn, "awaiting": self.awaiting,
                                   "claim": claim_to_json(self.claim) if self.claim else None, "asks": self.asks,
                                   "calls": self.calls, "notes": self.notes, "asked": self.asked,
                                   "notice": self.notice, "transcript": self.transcript, "unbilled": self.unbilled,
                                   "budget": self.budget})

    def drop(self) -> None:
        self.store.drop(self.key)

    def node_key(self, what: str, n: int) -> str:
        return f"{_short(self.session_id)}.{what}-{n}" if self.shared else f"{what}-{n}"

    # ------------------------------------------------------------------ the task, its turns and waits
    def ensure_task(self, cwd: str) -> None:
        where = os.path.basename(os.path.normpath(cwd)) if cwd else ""
        title = f"{self.terminal} in {where}" if where else f"{self.terminal} session"
        self.ledger.create_task(self.task, title=title, exist_ok=True, actor=self.worker, origin=self.client)

    def ensure_waiting(self) -> None:
        """Between turns: the pending node that keeps the task active while the session waits for
        its user (nothing to add to an aborted task)."""
        if self.claim is not None or self.awaiting or self.ledger.task(self.task).status == "aborted":
            return
        spec = self._await_spec()
        try:
            self.ledger.node(self.task, spec.key)
        except NotFound:
            self.ledger.add_nodes(self.task, [spec], actor=self.worker)
        self.awaiting = self.turn + 1
        self.save()

    def _await_spec(self) -> NodeSpec:
        n = self.turn + 1
        return NodeSpec(self.node_key("await", n), kind=f"{self.client}-await",
                        deps=(self.node_key("turn", self.turn),) if self.turn else (),
                        title=f"waiting for prompt {n} at the {self.terminal} terminal")

    def start_turn(self, prompt: str) -> tuple[Claim | None, Steer | None]:
        """A prompt: the wait before it ends, its turn starts (titled by it); or why it cannot.
        The wait's commit adds the turn in the same transaction: the task is never done between."""
        if self.claim is not None:  # the previous turn never reached Stop (interrupted at the terminal)
            self.end_turn({"interrupted": True, "turn": self.turn, "session": self.session_id,
                           "last_message": None})
        self.ensure_waiting()
        if not self.awaiting:
            return None, self.why_not()
        n = self.awaiting
        wait_key, key = self.node_key("await", n), self.node_key("turn", n)
        turn = NodeSpec(key, kind=f"{self.client}-turn", deps=(wait_key,), title=prompt[:200] or f"turn {n}")
        wait = self.ledger.claim(self.task, self.worker, lease_s=self.lease_s, key=wait_key)
        if wait is not None:
            self.ledger.commit(wait, output={"prompt": prompt[:200], "turn": n}, next_nodes=[turn])
        elif self.ledger.node(self.task, wait_key).status != "succeeded":
            return self._take_back_rewound()
        self.turn, self.awaiting = n, 0
        self.claim = self.ledger.claim(self.task, self.worker, lease_s=self.lease_s, key=key)
        self.save()
        return (self.claim, None) if self.claim is not None else (None, self.why_not())

    def _take_back_rewound(self) -> tuple[Claim | None, Steer | None]:
        """The wait cannot end because the turn before it was rewound after it ended: the prompt
        takes that turn back (its next attempt, told the operator's reason); else why not."""
        if self.turn:
            key = self.node_key("turn", self.turn)
            node = self.ledger.node(self.task, key)
            if node.status == "pending" and node.rejections:
                again = self.ledger.claim(self.task, self.worker, lease_s=self.lease_s, key=key)
                if again is not None:
                    self.claim, self.awaiting = again, 0
                    self.save()
                    return again, Steer("rewound", node.rejections[-1])
        return None, self.why_not()

    def end_turn(self, output: JsonObject, *, tokens: int = 0) -> Steer | None:
        """Commit the turn (Stop) with the wait for the next prompt in the same transaction; None
        when done, else what stopped it (rewound: go on)."""
        assert self.claim is not None
        nxt = [self._await_spec()]
        try:
            self.ledger.commit(self.claim, output=output, tokens=tokens, next_nodes=nxt)
        except LeaseLost as e:
            again, st = self.after_lost(e)
            if again is None or st.state == "rewound":
                return st
            self.ledger.commit(again, output=output, tokens=tokens, next_nodes=nxt)  # taken back after a resume
        self.claim = None
        self.awaiting = self.turn + 1
        self.save()
        return None

    def end_session(self, reason: str) -> None:
        """The session ended: a turn still running fails, the wait for a prompt ends."""
        self.close_notice("the session ended")
        if self.claim is not None:
            try:
                self.ledger.fail(self.claim, error=f"the session ended mid-turn ({reason})", failure_class="transient",
                                 retryable=False)
            except LeaseLost:
                pass
            self.claim = None
        if self.awaiting:
            wait = self.ledger.claim(self.task, self.worker, lease_s=60.0, key=self.node_key("await", self.awaiting))
            if wait is not None:
                self.ledger.commit(wait, output={"session_ended": reason})
            self.awaiting = 0

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
        """The turn's claim for a tool call (one seen without a prompt opens a turn titled by it)."""
        self.close_notice("the session went on")
        if self.claim is None:
            if self.ledger.task(self.task).status == "aborted":
                return None, self.why_not()
            return self.start_turn(title)
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

    # ------------------------------------------------------------------ tool calls
    def call_seen(self, call_id: str, tool: str, tool_input: object, text: str) -> None:
        self.calls[call_id] = {"digest": call_digest(tool, tool_input), "call": text[:4000], "at": time.time()}
        while len(self.calls) > CALLS_KEEP:
            self.calls.pop(next(iter(self.calls)))

    def call_for(self, tool: str, tool_input: object) -> str | None:
        """The id of the pending call with this tool and input (the newest)."""
        digest = call_digest(tool, tool_input)
        found = [cid for cid, c in self.calls.items() if c.get("digest") == digest]
        return found[-1] if found else None

    # ------------------------------------------------------------------ questions
    def doing(self) -> str:
        """What the session has done so far, as far as the hooks know: the turn and its prompt."""
        if not self.turn:
            return f"the {self.client} session started; no prompt yet"
        try:
            prompt = self.ledger.node(self.task, self.node_key("turn", self.turn)).title
        except NotFound:
            prompt = ""
        return f"turn {self.turn} of the {self.client} session" + (f", on the prompt: {prompt}" if prompt else "")

    def ask(self, *, kind: str, title: str, question: str, options: list[dict[str, str]], context: JsonObject,
            call: str | None = None, digest: str | None = None, pid: int | None = None,
            recommendation: str | None = None) -> str:
        """Open a question of its own (a node beside the turn); remembered (by its node) until it is
        closed. The node's key is saved before anything is written, so a hook killed at any line
        leaves an entry the next event's :meth:`sweep` finishes. What was done (the turn's prompt)
        is added to ``context`` unless it says; the caller gives where it is stuck and the
        recommendation (with why) or why there is none (store/ledger/checkpoint.py)."""
        context = {"done": self.doing(), **context}
        self.asked += 1
        base = self.node_key("turn", self.turn) if self.turn else self.node_key("session", 0)
        key = f"{base}.ask-{self.asked}"
        self.asks[key] = {"handoff": None, "call": call, "digest": digest, "pid": pid,
                          "start": process_start(pid) if pid else None, "kind": kind}
        self.save()
        asked = questions.ask(self.ledger, self.task, key, worker=self.worker, kind=kind,
                              node_kind=f"{self.client}-question", title=title, question=question, options=options,
                              context=context, recommendation=recommendation)
        self.asks[key]["handoff"] = asked.handoff
        self.save()
        return asked.handoff

    def _entry(self, hid: str) -> str | None:
        return next((k for k, a in self.asks.items() if a.get("handoff") == hid), None)

    def close_ask(self, hid: str, output: JsonObject) -> None:
        """The question is answered and delivered (or settled): its node committed, forgotten."""
        key = self._entry(hid)
        if key is None:
            return
        if questions.close(self.ledger, self.task, key, worker=self.worker, output=output):
            self.asks.pop(key, None)
        else:
            self.asks[key]["delivered"] = True  # parked meanwhile: a later sweep commits it
        self.save()

    def settle_call(self, call_id: str | None, tool: str, tool_input: object, how: str, option: str) -> bool:
        """The client went on with a call whose permission question is still open: it was answered
        at its own terminal. Returns whether a question was settled."""
        digest = call_digest(tool, tool_input)
        done = False
        for ask in list(self.asks.values()):
            hid = ask.get("handoff")
            if not isinstance(hid, str) or ask.get("kind") != "permission" \
                    or not ((call_id and ask.get("call") == call_id) or ask.get("digest") == digest):
                continue
            if questions.settle(self.ledger, hid, option=option, answer=how, by=self.worker):
                done = True
                self.close_ask(hid, {"decision": option, "answered": how, "by": self.worker})
        return done

    def withdraw_all(self, why: str) -> None:
        for ask in list(self.asks.values()):
            hid = ask.get("handoff")
            if isinstance(hid, str):
                questions.settle(self.ledger, hid, option="deny" if ask.get("kind") == "permission" else "seen",
                                 answer=why, by=self.worker)
        self.sweep(force=True)

    def sweep(self, *, force: bool = False) -> list[str]:
        """Questions whose waiting hook died: settled (nobody could deliver the answer), then their
        nodes closed; answered ones whose hook ended are closed. Returns what it did, for notes."""
        said: list[str] = []
        if not self.asks:
            return said
        for key, ask in list(self.asks.items()):
            pid = ask.get("pid")
            waited = isinstance(pid, int)  # a hook waits on it (else: a notice nobody waits on)
            alive = waited and process_alive(int(pid), _opt_int(ask.get("start")))  # type: ignore[arg-type]
            if alive and not ask.get("delivered") and not force:
                continue
            hid = ask.get("handoff")
            if not isinstance(hid, str):  # the hook ended between the node and the question
                hid = next((h.id for h in self.ledger.handoffs(task_id=self.task) if h.node == key), None)
                ask["handoff"] = hid
            if hid is None:
                if questions.close(self.ledger, self.task, key, worker=self.worker,
                                   output={"decision": None, "answered": "never asked: its hook ended first"}):
                    self.asks.pop(key, None)
                continue
            try:
                status = self.ledger.handoff(hid).status
            except NotFound:
                self.asks.pop(key, None)
                continue
            if status == "open" and waited and not alive:
                why = (f"withdrawn: the hook waiting for this answer ended before one came (the {self.terminal} "
                       "dialog was answered or cancelled at its terminal, or the hook was killed)")
                if questions.settle(self.ledger, hid, option="deny", answer=why, by=self.worker):
                    said.append(f"question {hid} withdrawn: its hook ended")
                status = self.ledger.handoff(hid).status
            if status != "open":
                out: JsonObject = {"decision": None, "answered": "after its hook ended" if waited else "seen"}
                if questions.close(self.ledger, self.task, key, worker=self.worker, output=out):
                    self.asks.pop(key, None)
        self.save()
        return said

    # ------------------------------------------------------------------ notices (someone at the terminal)
    def close_notice(self, why: str) -> None:
        """Close the notice a Notification opened, now that the session went on (or ended)."""
        if self.notice is None:
            return
        questions.settle(self.ledger, self.notice, option="seen", answer=why, by=self.worker)
        self.close_ask(self.notice, {"seen": why})
        self.notice = None
        self.save()

    def open_notice(self, kind: str, question: str) -> str | None:
        """A notice (the client waits on someone at its terminal): an alert in the console."""
        if self.notice is not None:
            try:
                if self.ledger.handoff(self.notice).status == "open":
                    return None  # the open one already rings
            except NotFound:
                pass
        opts = [{"id": "seen", "label": "Seen", "consequence": f"answer at the {self.terminal} terminal; this only "
                                                               "clears the question here"}]
        try:
            self.notice = self.ask(kind=kind, title=f"{kind}: someone at the {self.terminal} terminal",
                                   question=question, options=opts, recommendation="seen",
                                   context={"via": f"{self.client} notification", "session": self.session_id,
                                            "stuck": f"{self.client} waits on someone at its terminal: {question}",
                                            "why": f"the answer is given at the {self.terminal} terminal; "
                                                   "this only clears the alert here"})
        except (Refused, LeaseLost):
            return None
        self.save()
        return self.notice


def _int(value: JsonValue | None) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _opt_int(value: JsonValue | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: JsonValue | None) -> dict[str, JsonObject]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}  # type: ignore[misc]

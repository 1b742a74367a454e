"""One agent's session as ``warden mcp`` serves it: the tools' meaning, apart from the protocol.

Every tool answers a JSON object whose ``status`` says what happened. The words an operator's
action turns into (store/adapters/steering.py) are answers, not errors, so any MCP client sees
them: ``parked`` (stop after saving your state; ask again later), ``aborted`` (stop, commit
nothing), ``rewound`` with ``answer: "rewound: <reason>"`` (the step starts again: the new
claim's inputs carry the reason). A value the ledger refuses raises ``WardenError`` (the server
turns it into a tool error, one line).

The lease is held between tool calls by a :class:`store.worker.LeaseKeeper` thread. What must
survive the process (the claim with its token, a question waiting for a person, the last commit)
is kept in the session file (store/adapters/sessions.py), under the session's lock, keyed by the
ledger, the worker and the task: a client that reconnects (a new ``warden mcp`` process with the
same ``--worker``) goes on with the same claim, and a commit it repeats because it never saw the
answer is recognised — the node already holds that output — and answered ``committed`` with
``already: true``, never committed twice nor onto another node.
"""

from __future__ import annotations

import json
import sys
import threading
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from store.clock import iso
from store.errors import LeaseLost, NotFound, Refused
from store.facade import Ledger
from store.jsontypes import JsonObject, JsonValue
from store.reading.task_report import task_report
from store import validate
from store.validate import json_value, show
from store.views import Claim
from store.worker import LeaseKeeper
from store.adapters import questions
from store.ledger import confirm
from store.adapters.sessions import SessionBusy, SessionStore, claim_from_json, claim_to_json
from store.adapters.steering import Steer, clean, pulse, reclaim, stall_advice, steer
from store.adapters.streams import summarize

__all__ = ["AgentSession", "SessionConfig"]

OBSERVATION_CAP = 8000  # characters of one observation, action or result a client sends


@dataclass(frozen=True)
class SessionConfig:
    worker: str
    task: str | None = None
    node: str = "main"
    kind: str = "agent"
    lease_s: float = 60.0
    kinds: tuple[str, ...] | None = None
    ask_wait_s: float = 50.0
    origin: str = "mcp"
    lock_wait_s: float = 10.0


def _normal(value: object, arg: str) -> JsonValue:
    """``value`` as the ledger will give it back (a JSON round trip); one the ledger cannot keep
    (not finite, too deep, a lone surrogate) is refused first, with its one line."""
    return json.loads(json.dumps(json_value(arg, value), allow_nan=False))


OPTIONS_MAX = 20  # options of one question
OPTION_TEXT_CAP = 1000  # characters of an option's label or consequence


def _options(options: Sequence[JsonValue] | None) -> list[JsonObject]:
    """A client's options as the ledger takes them: an id alone, or {id, label, consequence} —
    bounded (ids are checked by the ledger)."""
    items = list(options or ())
    if len(items) > OPTIONS_MAX:
        raise Refused(f"a question offers at most {OPTIONS_MAX} options")
    out: list[JsonObject] = []
    for o in items:
        if isinstance(o, str):
            out.append({"id": o, "label": clean(o, OPTION_TEXT_CAP)})
        elif isinstance(o, Mapping):
            opt = {k: (clean(v, OPTION_TEXT_CAP) if isinstance(v, str) and k != "id" else v)
                   for k, v in o.items() if k in ("id", "label", "consequence")}
            out.append(opt)
        else:
            raise Refused("an option is an id (a string) or {\"id\", \"label\", \"consequence\"}")
    return out


def _parts(claim: Claim, worker: str, **parts: str | None) -> JsonObject:
    """A question's context: where it comes from and the checkpoint's parts the client gave."""
    ctx: JsonObject = {"via": "mcp", "worker": worker, "step": claim.node_key}
    for k, v in parts.items():
        if v is not None:
            ctx[k] = clean(str(v), 4000)
    return ctx


class AgentSession:
    """The state one ``warden mcp`` process holds (thread-safe: tools run in worker threads)."""

    def __init__(self, ledger: Ledger, store: SessionStore, cfg: SessionConfig, *,
                 say: Callable[[str], None] | None = None) -> None:
        self.ledger = ledger
        self.store = store
        self.cfg = cfg
        self.worker = cfg.worker
        self.say = say if say is not None else (lambda line: print(line, file=sys.stderr, flush=True))
        self.lock = threading.RLock()
        self.stack = ExitStack()
        self.key: str | None = None
        self.task: str | None = None
        self.claim: Claim | None = None
        self.keeper: LeaseKeeper | None = None
        self.questions: dict[str, str] = {}  # open questions: handoff id -> its node
        self.asked = 0  # questions asked so far (their nodes' numbers)
        self.last_answer: JsonObject | None = None
        self.last_commit: JsonObject | None = None
        if cfg.task:
            self._bind(cfg.task)

    # ------------------------------------------------------------------ the session file
    def _bind(self, task: str) -> None:
        """Hold the session of (ledger, worker, task) for this process's life; go on with what it held."""
        base = self.worker
        for attempt in range(2):
            key = f"mcp\0{self.ledger.target or self.ledger.display}\0{self.worker}\0{task}"
            try:
                self.stack.enter_context(self.store.hold(key, wait_s=self.cfg.lock_wait_s))
                break
            except SessionBusy:
                if attempt:
                    raise
                self.worker = f"{base}#{id(self) % 100000}"
                self.say(f"warden mcp: another server holds {base}'s session for task {task}; "
                         f"working as {self.worker} (give each client its own --worker to resume after a reconnect)")
        self.key, self.task = key, task
        saved = self.store.load(key)
        self.claim = claim_from_json(saved.get("claim"))
        asked = saved.get("questions")
        self.questions = {str(k): str(v) for k, v in asked.items()} if isinstance(asked, dict) else {}
        self.asked = saved.get("asked") if isinstance(saved.get("asked"), int) else 0  # type: ignore[assignment]
        self.last_commit = saved.get("last_commit") if isinstance(saved.get("last_commit"), dict) else None
        if self.claim is not None:
            self._keep(self.claim)

    def _save(self) -> None:
        if self.key is not None:
            self.store.save(self.key, {"claim": claim_to_json(self.claim) if self.claim else None,
                                       "questions": dict(self.questions), "asked": self.asked,
                                       "last_commit": self.last_commit})

    def _keep(self, claim: Claim | None) -> None:
        """Hold ``claim``'s lease from a thread (stopping the keeper of the previous one)."""
        if self.keeper is not None:
            self.keeper.stop()
            self.keeper = None
        self.claim = claim
        if claim is not None:
            # no step time limit (max_step_s=None): an MCP agent's step lasts as long as the agent works on it
            self.keeper = LeaseKeeper(self.ledger, claim, max_step_s=None).start()

    def close(self) -> None:
        """The client went away: stop heartbeating (the lease runs out unless it reconnects)."""
        with self.lock:
            if self.keeper is not None:
                self.keeper.stop()
                self.keeper = None
            self._save()
            self.stack.close()

    # ------------------------------------------------------------------ what the operator did
    def _describe(self, claim: Claim) -> JsonObject:
        return {"task": claim.task_id, "node": claim.node_key, "kind": claim.kind, "attempt": claim.attempt,
                "lease_s": claim.lease_s, "inputs": dict(claim.inputs)}

    def _answer(self, st: Steer) -> JsonObject:
        """What the agent is told (the claim dropped, or replaced after a rewind)."""
        assert self.claim is not None
        old = self.claim
        if st.state == "rewound":
            again = reclaim(self.ledger, old, lease_s=self.cfg.lease_s)
            self._keep(again)
            self._save()
            out = {"status": "rewound", "answer": st.answer, "reason": st.reason,
                   "message": "The operator rewound this step: start it again and take the reason into account."}
            return {**out, **self._describe(again)} if again is not None else out
        if st.state == "parked":
            return {"status": "parked", "answer": "parked", "reason": st.reason,
                    "message": "The operator parked this work: save your state and stop; call heartbeat later "
                               "to learn when it is resumed."}
        if st.state == "blocked":
            return {"status": "waiting_for_human", "handoff": st.handoff, "question": st.reason}
        self._keep(None)
        self._save()
        if st.state == "aborted":
            return {"status": "aborted", "answer": "aborted", "reason": st.reason,
                    "message": "The operator aborted this task: stop now and commit nothing."}
        return {"status": "lost", "answer": "lost", "reason": st.reason,
                "message": "This claim is no longer ours: stop this step and call claim_next."}

    def _lost(self, e: LeaseLost) -> JsonObject | None:
        """A write found the lease gone: None when the claim was taken back (try once more), else
        the answer to give."""
        if self.keeper is None and self.claim is not None:
            self.keeper = LeaseKeeper(self.ledger, self.claim, max_step_s=None)  # not started: it only carries ``lost``
        if self.keeper is not None:
            self.keeper.lost = self.keeper.lost or str(e)
        return self._check()

    def _check(self) -> JsonObject | None:
        """None when the held claim is good to use (taken back by key after a resume or an
        expiry); else the answer to give."""
        if self.claim is None:
            return {"status": "no_claim", "message": "Call claim_next first."}
        if self.keeper is not None and not self.keeper.lost:
            return None
        st = steer(self.ledger, self.claim, lost_why=(self.keeper.lost or "") if self.keeper else "")
        if st.state == "running":
            self._keep(self.claim)
            return None
        if st.state in ("parked", "lost"):
            again = reclaim(self.ledger, self.claim, lease_s=self.cfg.lease_s)
            if again is not None:  # resumed, or our lease ran out and nobody else took the node
                self._keep(again)
                self._save()
                return None
        return self._answer(st)

    # ------------------------------------------------------------------ tools
    def claim_next(self, task: str | None = None, kinds: Sequence[str] | None = None) -> JsonObject:
        with self.lock:
            task = task or self.task or self.cfg.task
            if not task:
                raise Refused("claim_next needs a task (or start warden mcp with --task)")
            if self.key is None:
                self._bind(task)
            elif task != self.task:
                raise Refused(f"this session works on task {self.task}; start another warden mcp for {show(task)}")
            if self.claim is not None:
                stop = self._check()
                if stop is None:
                    assert self.claim is not None
                    return {"status": "claimed", "resumed": True, **self._describe(self.claim)}
                if stop["status"] not in ("aborted", "lost"):
                    return stop
            try:
                self.ledger.task(task)
            except NotFound:
                self.ledger.create_task(task, title=task, exist_ok=True, actor=self.worker, origin=self.cfg.origin)
                self.ledger.add_node(task, self.cfg.node, kind=self.cfg.kind, actor=self.worker)
            t = self.ledger.task(task)
            if t.status in ("parked", "aborted"):
                return {"status": t.status, "answer": t.status, "reason": t.park_reason or "",
                        "message": f"task {task} is {t.status}: nothing to claim now"}
            claim = self.ledger.claim(task, self.worker, lease_s=self.cfg.lease_s,
                                      kinds=list(kinds) if kinds else self.cfg.kinds)
            if claim is None:
                return {"status": "none", "task": task, "task_status": t.status, "counts": dict(t.counts),
                        "message": "Nothing is ready to claim now (done, waiting on dependencies, a retry, "
                                   "a person, or the budget)."}
            self._keep(claim)
            self._save()
            return {"status": "claimed", **self._describe(claim)}

    def heartbeat(self, progress: float | None = None, observation: str | None = None, action: str | None = None,
                  result: str | None = None, waiting_on: str | None = None, wait_s: float | None = None,
                  tokens: int = 0) -> JsonObject:
        if progress is not None and not (isinstance(progress, (int, float)) and 0.0 <= progress <= 1.0):
            raise Refused(f"progress is a fraction from 0 to 1, not {summarize(progress, 40)}")
        with self.lock:
            stop = self._check()
            if stop is not None:
                return stop
            said = {"observation": None if observation is None else clean(observation, OBSERVATION_CAP),
                    "action": None if action is None else clean(action, OBSERVATION_CAP),
                    "result": None if result is None else clean(result, OBSERVATION_CAP)}
            for again in (False, True):
                assert self.claim is not None
                try:
                    p = pulse(self.ledger, self.claim, **said, tokens=tokens, units_done=progress,
                              units_total=None if progress is None else 1.0, waiting_on=waiting_on, wait_s=wait_s)
                    break
                except LeaseLost as e:
                    stop = self._lost(e)
                    if stop is not None or again:
                        return stop or self._answer(steer(self.ledger, self.claim))
            if p.parked:
                assert self.claim is not None
                return self._answer(Steer("parked", self.ledger.task(self.claim.task_id).park_reason or ""))
            out: JsonObject = {"status": "ok", "lease_until": iso(p.lease_until), "new_units": p.new_units,
                               "budget": p.gate}
            advice = stall_advice(p)
            if advice is not None:  # looping or bringing nothing new: say so, so the agent can change course
                out.update(stall=p.stall, stall_evidence=p.stall_evidence, advice=advice)
            return out

    def commit(self, output: object) -> JsonObject:
        with self.lock:
            value = _normal(output, "output")
            if self.claim is None:
                if self.last_commit is not None and self.last_commit.get("output") == value:
                    return {"status": "committed", "already": True, **self.last_commit["where"]}
                return {"status": "no_claim", "message": "Call claim_next first."}
            waiting = self._open_question()
            if waiting is not None:
                return waiting
            claim = self.claim
            where = {"task": claim.task_id, "node": claim.node_key, "attempt": claim.attempt}
            if self.keeper is not None:
                self.keeper.stop()
            try:
                event = self.ledger.commit(claim, output=value)
            except LeaseLost as e:
                if self._already(claim, value):
                    return self._committed(where, value, already=True)
                stop = self._lost(e)
                if stop is None:  # taken back (resumed, or an expired lease nobody took): commit now
                    return self.commit(output)
                return stop
            except Refused:
                self._keep(claim)
                raise
            return self._committed(where, value, event=event)

    def _already(self, claim: Claim, value: JsonValue) -> bool:
        try:
            n = self.ledger.node(claim.task_id, claim.node_key)
        except NotFound:
            return False
        return n.status == "succeeded" and n.attempt == claim.attempt and n.output == value

    def _committed(self, where: JsonObject, value: JsonValue, *, already: bool = False,
                   event: int | None = None) -> JsonObject:
        self.last_commit = {"output": value, "where": where}
        self._keep(None)
        self._save()
        return {"status": "committed", "already": already, **where, **({"event": event} if event else {})}

    def _open_question(self) -> JsonObject | None:
        """A question of this step still waiting for a person (answered ones are closed here)."""
        for hid, key in list(self.questions.items()):
            try:
                status = self.ledger.handoff(hid).status
            except NotFound:
                status = "gone"
            if status == "open":
                return {"status": "waiting_for_human", "handoff": hid,
                        "message": "A question waits for a person: call wait_for_human(handoff) first."}
            if questions.close(self.ledger, self.task or "", key, worker=self.worker, output={"status": status}):
                self.questions.pop(hid, None)
                self._save()
        return None

    def fail(self, error: str, failure_class: str = "transient", retryable: bool | None = None) -> JsonObject:
        with self.lock:
            stop = self._check() or self._open_question()
            if stop is not None:
                return stop
            assert self.claim is not None
            claim = self.claim
            try:
                self.ledger.fail(claim, error=clean(error, OBSERVATION_CAP), failure_class=failure_class,
                                 retryable=retryable)
            except LeaseLost as e:
                stop = self._lost(e)
                return stop if stop is not None else self.fail(error, failure_class, retryable)
            self._keep(None)
            self._save()
            node = self.ledger.node(claim.task_id, claim.node_key)
            return {"status": "failed", "task": claim.task_id, "node": claim.node_key, "node_status": node.status,
                    "next_retry_at": iso(node.next_retry_at) if node.status == "pending" else None}

    def intend_effect(self, key: str, payload: object = None, why: str | None = None) -> JsonObject:
        """Log the effect; when the step's work is irreversible and nobody has confirmed this
        effect yet (store/ledger/confirm.py), first ask a person — a confirm question of its own
        carrying the effect's details (``payload``) — and intend it once they answer proceed."""
        with self.lock:
            stop = self._check()
            if stop is not None:
                return stop
            assert self.claim is not None
            claim = self.claim
            value = _normal(payload, "payload")
            validate.name("key", key)
            validate.text("why", why, optional=True, nul=False)
            need = confirm.needed(self.ledger, claim.task_id, claim.node_key, key)
            if need is None:
                return self._intend(key, value)
            if value is None or value == {} or value == []:
                raise Refused(f"{key}: {need}, so a person confirms it from its details: call intend_effect "
                              "again with payload={what, to whom, how much}")
            details = value if isinstance(value, dict) else {"payload": value}
            node = self.ledger.node(claim.task_id, claim.node_key)
            self.asked += 1
            ask_key = f"{claim.node_key}.ask-{self.asked}"
            self._save()
            ctx = confirm.context(key, details, done=f"step {claim.node_key} ({clean(node.title, 200)}) reached it",
                                  stuck=None, why=clean(why, 2000) if why else "the agent's step needs it done",
                                  extra={"via": "mcp", "worker": self.worker, "step": claim.node_key})
            asked = questions.ask(self.ledger, claim.task_id, ask_key, worker=self.worker, kind="confirm",
                                  node_kind="question", title=f"confirm: {clean(key, 150)}",
                                  question=f"Perform {clean(key, 500)}? It cannot be undone.",
                                  options=confirm.options(clean(key, 500)), context=ctx, lease_s=self.cfg.lease_s,
                                  recommendation=confirm.PROCEED)
            self.questions[asked.handoff] = asked.node
            self._save()
        got = self._wait(asked.handoff)
        if got.get("status") in ("answered", "resolved") and got.get("option") == confirm.PROCEED:
            with self.lock:
                stop = self._check()
                return stop if stop is not None else {**self._intend(key, value), "confirmed_by": got.get("by")}
        if got.get("status") in ("answered", "resolved"):
            return {**got, "status": "declined", "effect": key,
                    "message": "A person said not to: do not make this call. Finish the step without it, or fail."}
        if got.get("status") == "pending":
            return {**got, "effect": key, "message": "A person confirms this effect first. Call "
                    "wait_for_human with this handoff; once answered proceed, call intend_effect again."}
        return got

    def _intend(self, key: str, value: JsonValue) -> JsonObject:
        assert self.claim is not None
        eff = self.ledger.intend_effect(self.claim, key, payload=value)
        return {"status": eff.status, "effect": key, "external_id": eff.external_id,
                "message": "Already done: do not make this call again." if eff.status == "confirmed" else
                "Intended: make the external call, then confirm_effect."}

    def confirm_effect(self, key: str, external_id: str | None = None) -> JsonObject:
        with self.lock:
            stop = self._check()
            if stop is not None:
                return stop
            assert self.claim is not None
            eff = self.ledger.confirm_effect(self.claim, key, external_id=external_id)
            return {"status": eff.status, "effect": key, "external_id": eff.external_id}

    def ask_human(self, question: str, options: Sequence[JsonValue] | None = None, kind: str | None = None, *,
                  done: str | None = None, stuck: str | None = None, recommendation: str | None = None,
                  why: str | None = None, no_recommendation: str | None = None) -> JsonObject:
        """A question of its own (store/adapters/questions.py): the step keeps its claim, and
        questions asked at once (from several threads of the client) are each their own handoff.
        It carries the checkpoint's parts (store/ledger/checkpoint.py): what was done, where the
        agent is stuck, each option's consequence, a recommendation with why, or why none."""
        with self.lock:
            stop = self._check()
            if stop is not None:
                return stop
            assert self.claim is not None
            claim = self.claim
            opts = _options(options)
            self.asked += 1
            key = f"{claim.node_key}.ask-{self.asked}"
            self._save()  # the number is taken before anything is written: never reused
            asked = questions.ask(self.ledger, claim.task_id, key, worker=self.worker, kind=kind or "direction",
                                  node_kind="question", title=f"question: {clean(question, 150)}",
                                  question=clean(question, 4000), options=opts,
                                  context=_parts(claim, self.worker, done=done, stuck=stuck, why=why,
                                                 no_recommendation=no_recommendation),
                                  lease_s=self.cfg.lease_s,
                                  recommendation=None if recommendation is None else str(recommendation))
            self.questions[asked.handoff] = asked.node
            self._save()
        return self._wait(asked.handoff)

    def wait_for_human(self, handoff: str) -> JsonObject:
        with self.lock:
            hid = str(handoff)
            h = self.ledger.handoff(hid)
            if self.task is not None and h.task_id != self.task:
                raise Refused(f"handoff {hid} belongs to task {h.task_id}, not to this session's {self.task}")
        return self._wait(hid)

    def _wait(self, hid: str) -> JsonObject:
        res = self.ledger.wait_for_resolution(hid, timeout=self.cfg.ask_wait_s)  # no lock held: other tools answer
        with self.lock:
            if res is None:
                return {"status": "pending", "handoff": hid,
                        "message": "No answer yet. Call wait_for_human with this handoff to keep waiting."}
            answer: JsonObject = {"handoff": hid, "option": res.get("option"), "answer": res.get("answer"),
                                  "by": res.get("by")}
            key = self.questions.get(hid)
            if key is not None and questions.close(self.ledger, str(res.get("task_id") or self.task or ""), key,
                                                   worker=self.worker, output=answer):
                self.questions.pop(hid, None)
                self._save()
            if res["status"] == "resolved":
                self.last_answer = answer
                return {"status": "answered" if key is not None else "resolved", **answer}
            if key is None or self.claim is None:
                return {"status": res["status"], **answer}
            st = steer(self.ledger, self.claim)
            if st.state == "running":
                return {"status": res["status"], **answer}
            out = self._answer(st)
            return {**out, "handoff_status": res["status"], **answer}

    def report(self) -> JsonObject:
        with self.lock:
            task = self.task or self.cfg.task
            if not task:
                raise Refused("no task yet: call claim_next first")
            data = task_report(self.ledger, task)
            data["session"] = {"worker": self.worker, "claim": self._describe(self.claim) if self.claim else None,
                               "questions": sorted(self.questions)}
            return data

    # ------------------------------------------------------------------ resources
    def constraints(self) -> list[str]:
        with self.lock:
            task = self.task or self.cfg.task
            return list(self.ledger.task(task).constraints) if task else []

    def inputs(self) -> JsonObject:
        with self.lock:
            out = dict(self.claim.inputs) if self.claim is not None else {}
            if self.last_answer is not None:
                out["last_answer"] = self.last_answer  # the latest answer to one of this session's questions
            return out

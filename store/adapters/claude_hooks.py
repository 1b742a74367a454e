"""``warden hook claude``: one Claude Code hook event in (JSON on stdin), the answer the hooks
protocol expects out (https://code.claude.com/docs/en/hooks). How a session maps onto the ledger
is store/adapters/claude_turns.py; docs/agents.md shows the ``settings.json`` snippet.

===================  ===========================================  ==============================
event                in the ledger                                answer
===================  ===========================================  ==============================
SessionStart         task (origin ``claude``), turn claimed       context for Claude: supervised
UserPromptSubmit     the turn opened (titled by the prompt)       nothing
PreToolUse           heartbeat, ``action`` = the tool call        nothing, or: parked → waits
                                                                  (up to ``park_wait_s``) then
                                                                  ``continue: false``; aborted →
                                                                  deny + ``continue: false``;
                                                                  rewound → deny with the reason
PermissionRequest    a ``permission`` handoff (tool and input),   ``decision.behavior`` allow or
                     waited on up to ``permission_wait_s``        deny (deny on timeout, and the
                                                                  handoff closed as denied)
PostToolUse          heartbeat, ``result`` = the tool response    nothing, or as PreToolUse
Notification         ``permission_prompt`` / ``idle_prompt``:     nothing (Notification output
                     a notice handoff (an alert in the console)   is ignored)
Stop                 the turn committed (last message)            nothing, or rewound → ``decision:
                                                                  block`` with the reason
SessionEnd           a turn still running fails; session dropped  nothing
===================  ===========================================  ==============================

Everything in a payload is untrusted: read from at most ``PAYLOAD_CAP`` bytes, strings bounded,
stored as text (the console escapes it). A payload that cannot be read gets one line on stderr
and the safe default: a PermissionRequest is denied, a PreToolUse is denied, anything else exits
2 (which blocks the events that can be blocked and only shows the line for the others).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from contextlib import AbstractContextManager
from typing import Callable

from store.errors import LeaseLost, LedgerUnavailable, NotFound, WardenError
from store.facade import Ledger
from store.jsontypes import JsonMapping, JsonObject
from store.views import Claim
from store.adapters.claude_turns import ClaudeSession
from store.adapters.sessions import SessionStore
from store.adapters.steering import Steer, clean, pulse
from store.adapters.streams import summarize

__all__ = ["EVENTS", "HookAnswer", "HookConfig", "PAYLOAD_CAP", "handle", "parse", "run_hook"]

PAYLOAD_CAP = 4 * 1024 * 1024  # bytes of stdin read (a Write tool's content can be large)
TEXT_CAP = 4000  # characters of a prompt, a message, a tool's input or response kept
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Notification",
          "Stop", "SessionEnd")
NOTICES = {"permission_prompt": "permission", "idle_prompt": "direction"}


@dataclass(frozen=True)
class HookConfig:
    task: str | None = None  # a task shared by sessions; default: one task per session
    lease_s: float = 900.0
    permission_wait_s: float = 540.0  # under Claude Code's default hook timeout (600 s)
    park_wait_s: float = 540.0
    poll_s: float = 1.0


@dataclass(frozen=True)
class HookAnswer:
    """What the hook prints (one JSON object or nothing), its exit status and one line for stderr."""

    output: JsonObject | None = None
    exit_code: int = 0
    message: str | None = None


def _deny_permission(message: str, *, interrupt: bool = False) -> HookAnswer:
    decision: JsonObject = {"behavior": "deny", "message": message}
    if interrupt:
        decision["interrupt"] = True
    return HookAnswer({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}})


def _allow_permission() -> HookAnswer:
    return HookAnswer({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})


def _deny_tool(reason: str, extra: JsonMapping | None = None) -> HookAnswer:
    return HookAnswer({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                              "permissionDecisionReason": reason}, **(extra or {})})


def safe_default(event: str | None, why: str) -> HookAnswer:
    """What to answer when the hook cannot do its work: never an allow."""
    line = f"warden hook claude: {why}"
    if event == "PermissionRequest":
        return HookAnswer(_deny_permission(f"Warden could not ask the operator ({why}); denied by default").output,
                          message=line)
    if event == "PreToolUse":
        return HookAnswer(_deny_tool(f"Warden could not check this tool call ({why}); denied by default").output,
                          message=line)
    return HookAnswer(None, 2 if event is None else 1, line)


def parse(raw: bytes) -> tuple[JsonObject | None, str | None, str | None]:
    """(payload, event name, problem). The event name is given when it could be read even if the
    rest is bad, so the safe default fits the event."""
    if len(raw) > PAYLOAD_CAP:
        return None, None, f"the hook input is over {PAYLOAD_CAP} bytes"
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, None, "the hook input is not JSON"
    if not isinstance(payload, dict):
        return None, None, "the hook input is not a JSON object"
    event = payload.get("hook_event_name")
    if not isinstance(event, str) or event not in EVENTS:
        shown = summarize(event, 40) if event is not None else "none"
        known = event if isinstance(event, str) and len(event) < 40 and event.isalnum() else None
        return None, known, f"hook_event_name {shown} is not one this hook handles ({', '.join(EVENTS)})"
    sid = payload.get("session_id")
    if not isinstance(sid, str) or not sid.strip() or len(sid) > 200 or any(ord(c) < 32 for c in sid):
        return None, event, "session_id is missing or not a one-line string"
    if event in ("PreToolUse", "PermissionRequest", "PostToolUse") and not isinstance(payload.get("tool_name"), str):
        return None, event, "tool_name is missing or not a string"
    return payload, event, None


def _text(value: object, cap: int = TEXT_CAP) -> str:
    return clean(value if isinstance(value, str) else summarize(value, cap), cap)


def _tool_call(p: JsonMapping) -> str:
    return f"{_text(p.get('tool_name'), 80)}({summarize(p.get('tool_input'), TEXT_CAP)})"


class _Hook:
    """One event handled (see the module's table)."""

    def __init__(self, ledger: Ledger, store: SessionStore, cfg: HookConfig, payload: JsonObject,
                 sleep: Callable[[float], None]) -> None:
        self.ledger = ledger
        self.store = store
        self.cfg = cfg
        self.p = payload
        self.event = str(payload["hook_event_name"])
        self.sleep = sleep
        self.sid = str(payload["session_id"])

    def session(self) -> ClaudeSession:
        return ClaudeSession(self.ledger, self.store, self.sid, task=self.cfg.task, lease_s=self.cfg.lease_s)

    def locked(self) -> AbstractContextManager[int]:
        return self.store.hold(f"claude-lock\0{self.ledger.target or self.ledger.display}\0{self.sid}")

    # ------------------------------------------------------------------ dispatch
    def run(self) -> HookAnswer:
        if self.event == "PermissionRequest":
            return self.permission()
        if self.event in ("PreToolUse", "PostToolUse"):
            return self.tool()
        with self.locked():
            s = self.session()
            if self.event == "SessionStart":
                return self.session_start(s)
            if self.event == "UserPromptSubmit":
                s.ensure_task(str(self.p.get("cwd") or ""))
                claim, _ = s.ensure_turn(_text(self.p.get("prompt"), 200))
                if claim is not None:
                    self._note(claim, f"prompt: {_text(self.p.get('prompt'))}")
                return HookAnswer()
            if self.event == "Notification":
                return self.notification(s)
            if self.event == "Stop":
                return self.stop(s)
            return self.session_end(s)

    def _note(self, claim: Claim, text: str) -> None:
        try:
            self.ledger.note(claim, text, layer="decision")
        except LeaseLost:
            pass

    # ------------------------------------------------------------------ events
    def session_start(self, s: ClaudeSession) -> HookAnswer:
        s.ensure_task(str(self.p.get("cwd") or ""))
        claim, why = s.ensure_turn(f"session {_text(self.p.get('source'), 20) or 'start'}")
        where = f"task {s.task}" + (f", {claim.node_key}" if claim else "")
        context = (f"This Claude Code session is supervised by Warden as {where}: an operator may park, "
                   "rewind or abort it, and answers permission requests.")
        if claim is not None and claim.inputs.get("rejections"):
            context += " The operator rejected earlier attempts: " + "; ".join(
                _text(r, 500) for r in claim.inputs["rejections"])
        if why is not None and why.state in ("parked", "aborted"):
            context += f" The task is {why.state} now" + (f": {why.reason}" if why.reason else "") + "."
        return HookAnswer({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}})

    def tool(self) -> HookAnswer:
        pre = self.event == "PreToolUse"
        call = _tool_call(self.p)
        result = None if pre else _text(self.p.get("tool_response"))
        deadline = time.monotonic() + self.cfg.park_wait_s
        said = False
        while True:
            with self.locked():
                s = self.session()
                s.ensure_task(str(self.p.get("cwd") or ""))
                claim, why = s.ensure_turn(call[:200])
                if claim is not None:
                    why = self._beat(s, claim, None if said else call, None if said else result)
                    said = True  # while parked, later beats only keep the lease
                if why is None or why.state == "blocked":
                    return HookAnswer()
            if why.state == "parked" and time.monotonic() < deadline:
                self.sleep(self.cfg.poll_s)  # parked: this tool call waits (Claude stands still) until resumed
                continue
            return self._steered(why, pre)

    def _beat(self, s: ClaudeSession, claim: Claim, call: str | None, result: str | None) -> Steer | None:
        """Pre: the tool call as the action; Post: the call and its response as the pair."""
        try:
            p = pulse(self.ledger, claim, action=call, result=result)
        except LeaseLost as e:
            again, st = s.after_lost(e)
            if again is None or st.state == "rewound":
                return st
            return self._beat(s, again, call, result)
        if p.parked:
            return Steer("parked", self.ledger.task(s.task).park_reason or "")
        return None

    def _steered(self, st: Steer, pre: bool) -> HookAnswer:
        if st.state == "rewound":
            reason = (f"The operator rewound this turn in Warden: {st.reason}. Do not repeat what was rejected; "
                      "start the step again with this in mind.")
            return _deny_tool(reason) if pre else HookAnswer({"decision": "block", "reason": reason})
        if st.state == "parked":
            stop = f"Parked by the operator in Warden{': ' + st.reason if st.reason else ''}"
            extra: JsonObject = {"continue": False, "stopReason": stop}
            return _deny_tool(stop, extra) if pre else HookAnswer(extra)
        if st.state == "aborted":
            stop = f"Aborted by the operator in Warden{': ' + st.reason if st.reason else ''}"
            extra = {"continue": False, "stopReason": stop}
            return _deny_tool(stop, extra) if pre else HookAnswer(extra)
        return HookAnswer(message=f"warden hook claude: not recorded: {st.reason}")  # lost: no decision

    def permission(self) -> HookAnswer:
        tool = _text(self.p.get("tool_name"), 80)
        tool_input = self.p.get("tool_input")
        with self.locked():
            s = self.session()
            s.ensure_task(str(self.p.get("cwd") or ""))
            claim, why = s.ensure_turn(f"{tool}: permission")
            if claim is None:
                assert why is not None
                return _deny_permission(f"Warden: the task is {why.state}" + (f" ({why.reason})" if why.reason
                                                                             else "") + "; denied",
                                        interrupt=why.state == "aborted")
            question = f"Allow Claude Code to use {tool}?\n{summarize(tool_input, TEXT_CAP)}"
            context = {"tool": tool, "input": summarize(tool_input, TEXT_CAP), "cwd": _text(self.p.get("cwd"), 500),
                       "session": self.sid, "permission_mode": _text(self.p.get("permission_mode"), 40)}
            options = [{"id": "allow", "label": f"Allow {tool}", "consequence": "Claude Code runs it with this input"},
                       {"id": "deny", "label": "Deny", "consequence": "Claude Code is told it may not, and goes on"}]
            try:
                hid = s.ask_permission(question, context, options)
            except LeaseLost as e:
                _, st = s.after_lost(e)
                return _deny_permission(f"Warden: {st.answer}; denied", interrupt=st.state == "aborted")
        res = self.ledger.wait_for_resolution(hid, timeout=self.cfg.permission_wait_s)
        with self.locked():
            s = self.session()
            if res is None:  # nobody answered: denied, and the question closed as such
                try:
                    plan = self.ledger.plan_resolve(hid, option="deny",
                                                    answer=f"no answer within {self.cfg.permission_wait_s:.0f}s")
                    self.ledger.apply(plan, operator=s.worker)
                    res = {"status": "resolved", "option": "deny", "answer": None, "timeout": True}
                except WardenError:
                    res = self.ledger.wait_for_resolution(hid, timeout=0) or {"status": "open"}
            s.permission_done()
            if res.get("status") == "resolved" and res.get("option") == "allow":
                return _allow_permission()
            if res.get("status") == "resolved":
                said = "nobody answered in time" if res.get("timeout") else "the operator denied it"
                answer = _text(res.get("answer"), 500) if res.get("answer") and not res.get("timeout") else ""
                return _deny_permission(f"Warden: {said}" + (f": {answer}" if answer else ""))
            aborted = self.ledger.task(s.task).status == "aborted"
            return _deny_permission("Warden: the question was withdrawn (" + ("the task was aborted" if aborted
                                    else "the turn was rewound") + ")", interrupt=aborted)

    def notification(self, s: ClaudeSession) -> HookAnswer:
        kind = NOTICES.get(str(self.p.get("notification_type")))
        message = _text(self.p.get("message"), 500) or "Claude Code needs you"
        if kind is None:
            if s.claim is not None:
                self._note(s.claim, f"notification: {message}")
            return HookAnswer()
        s.ensure_task(str(self.p.get("cwd") or ""))
        s.notice(kind, f"{message} (at the Claude Code terminal)")
        return HookAnswer()

    def stop(self, s: ClaudeSession) -> HookAnswer:
        if s.claim is None:
            return HookAnswer()
        claim = s.claim
        output = {"last_message": _text(self.p.get("last_assistant_message")), "turn": s.turn,
                  "session": self.sid}
        try:
            self.ledger.commit(claim, output=output)
        except LeaseLost as e:
            again, st = s.after_lost(e)
            if st.state == "rewound" and again is not None:
                return HookAnswer({"decision": "block", "reason": f"The operator rewound this turn in Warden: "
                                                                 f"{st.reason}. Continue with this in mind."})
            if again is not None:  # taken back after an expiry or a resume: commit it now
                self.ledger.commit(again, output=output)
            else:
                return HookAnswer(message=f"warden hook claude: the turn was not committed: {st.answer}")
        s.claim = None
        s.save()
        return HookAnswer()

    def session_end(self, s: ClaudeSession) -> HookAnswer:
        s.close_notice("the session ended")
        if s.claim is not None:
            try:
                self.ledger.fail(s.claim, error=f"the session ended mid-turn ({_text(self.p.get('reason'), 80)})",
                                 failure_class="transient", retryable=False)
            except LeaseLost:
                pass
        s.drop()
        return HookAnswer()


def handle(ledger: Ledger, store: SessionStore, cfg: HookConfig, payload: JsonObject, *,
           sleep: Callable[[float], None] = time.sleep) -> HookAnswer:
    """Handle one parsed event (see the module's table)."""
    return _Hook(ledger, store, cfg, payload, sleep).run()


def run_hook(open_ledger: Callable[[], Ledger], store: SessionStore, cfg: HookConfig, raw: bytes) -> HookAnswer:
    """Parse, open the ledger, handle: whatever fails, the answer is the safe default for the event."""
    payload, event, problem = parse(raw)
    if payload is None:
        return safe_default(event, problem or "unreadable input")
    try:
        with open_ledger() as ledger:
            return handle(ledger, store, cfg, payload)
    except LedgerUnavailable as e:
        return safe_default(event, f"the ledger is unavailable: {e}")
    except (WardenError, NotFound, OSError) as e:
        return safe_default(event, str(e).splitlines()[0] if str(e) else type(e).__name__)

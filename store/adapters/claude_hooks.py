"""``warden hook claude`` and ``warden hook codex``: one hook event in (JSON on stdin), the answer
the client honours out (store/adapters/hook_answers.py says which, as measured). How a session maps
onto the ledger is store/adapters/hook_session.py; docs/agents.md has the settings and the table
of what each control does per event.

=====================  ========================================  =================================
event                  in the ledger                             answer
=====================  ========================================  =================================
SessionStart           the task; the wait for the first prompt   context: it is supervised
UserPromptSubmit       the wait ends; a turn titled by the       parked / aborted / over budget:
                       prompt is claimed; the prompt as a note   the prompt is refused
PreToolUse             the call remembered; a heartbeat (the     parked or over the hard budget
                       lease, the tokens the transcript shows)   gate: the call waits (then stops
                                                                 the agent); aborted: stops it;
                                                                 rewound: denied with the reason
PermissionRequest      a question of its own (a ``permission``   the operator's allow / deny; deny
                       handoff): every request its own           when nobody answers in time
PostToolUse[Failure]   one observation: the call and its output  as PreToolUse, after the call;
PermissionDenied       (failed / denied: the error)              the operator's note on an allow
Notification           a notice: someone is needed at the        nothing
                       terminal (an alert in the console)
Stop                   the turn committed (last message, tokens) rewound: go on with the reason
SessionEnd             the wait ends, a turn still running fails nothing
=====================  ========================================  =================================

Everything in a payload is untrusted: read from at most ``PAYLOAD_CAP`` bytes, strings bounded,
stored as text (the console escapes it). A payload that cannot be read gets one escaped line on
stderr and the safe default: when its event can be read, a PermissionRequest or a PreToolUse is
denied and any other event exits 1; when not even the event can be read, exit 2 (a blocking
error, which denies what can be denied and only shows the line for the others).
"""

from __future__ import annotations

import json
import os
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Callable, Iterator

from store.errors import LeaseLost, LedgerUnavailable, NotFound, Refused, WardenError
from store.facade import Ledger
from store.jsontypes import JsonMapping, JsonObject
from store.judges import budget
from store.views import Claim
from store.adapters import permission_rules, questions
from store.adapters.hook_answers import Dialect, HookAnswer, dialect
from store.adapters.hook_session import HookSession, call_digest
from store.adapters.hook_transcript import read_new
from store.adapters.sessions import SessionStore
from store.adapters.steering import Steer, clean, stall_advice, steer
from store.adapters.streams import summarize

__all__ = ["EVENTS", "HookAnswer", "HookConfig", "PAYLOAD_CAP", "handle", "parse", "run_hook", "safe_default"]

PAYLOAD_CAP = 4 * 1024 * 1024  # bytes of stdin read (a Write tool's content can be large)
TEXT_CAP = 4000  # characters of a prompt, a message, a tool's input or output kept
TOOL_EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure", "PermissionDenied")
EVENTS = ("SessionStart", "UserPromptSubmit", *TOOL_EVENTS, "Notification", "Stop", "SessionEnd")
NOTICES = {"permission_prompt": "permission", "idle_prompt": "direction"}
AFTER = ("PostToolUse", "PostToolUseFailure", "PermissionDenied")


@dataclass(frozen=True)
class HookConfig:
    task: str | None = None  # a task shared by sessions; default: one task per session
    lease_s: float = 900.0
    permission_wait_s: float = 540.0  # under Claude Code's default hook timeout (600 s)
    park_wait_s: float = 540.0
    poll_s: float = 1.0  # how often a waiting call looks at the ledger (reads only)
    client: str = "claude"  # claude | codex
    interactive: bool = True  # Claude Code's CLAUDE_CODE_ENTRYPOINT is "cli" (else claude -p)


def safe_default(event: str | None, why: str, client: str = "claude") -> HookAnswer:
    """What to answer when the hook cannot do its work: never an allow."""
    line = f"warden hook {client}: {why}"
    d = dialect(client)
    if event == "PermissionRequest":
        return HookAnswer(d.permission(False, f"Warden could not ask the operator ({why}); denied by default").output,
                          message=line)
    if event == "PreToolUse":
        return HookAnswer(d.deny_tool(f"Warden could not check this tool call ({why}); denied by default").output,
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
    if event in TOOL_EVENTS and not isinstance(payload.get("tool_name"), str):
        return None, event, "tool_name is missing or not a string"
    return payload, event, None


def _text(value: object, cap: int = TEXT_CAP) -> str:
    return clean(value if isinstance(value, str) else summarize(value, cap), cap)


def _tool_call(p: JsonMapping) -> str:
    return f"{_text(p.get('tool_name'), 80)}({summarize(p.get('tool_input'), TEXT_CAP)})"


def tool_output(p: JsonMapping) -> str:
    """The call's result as text, the way a person reads it: a command's output, what a write or
    an edit changed, what was read; a failure's error; a refusal's reason."""
    event = p.get("hook_event_name")
    if event == "PostToolUseFailure":
        return "failed: " + _text(p.get("error"))
    if event == "PermissionDenied":
        return "denied: " + _text(p.get("reason") or "the client refused it")
    r = p.get("tool_response")
    if isinstance(r, str):
        return _text(r)
    if not isinstance(r, dict):
        return _text(r)
    if "stdout" in r or "stderr" in r:  # Bash
        out = "\n".join(str(r.get(k) or "") for k in ("stdout", "stderr") if r.get(k))
        return _text(out + ("\n[interrupted]" if r.get("interrupted") else "")) or "(no output)"
    file = r.get("file")
    if isinstance(file, dict) and isinstance(file.get("content"), str):  # Read
        return _text(file["content"])
    patch = r.get("structuredPatch")
    path = _text(r.get("filePath"), 300)
    if isinstance(patch, list) and patch:  # Edit (and Write over an existing file)
        lines = [str(line) for hunk in patch if isinstance(hunk, dict) for line in hunk.get("lines") or []]
        return _text(f"edited {path}:\n" + "\n".join(lines))
    if isinstance(r.get("content"), str):  # Write
        n = r["content"].count("\n") + (0 if r["content"].endswith("\n") else 1)
        return f"{'created' if r.get('type') == 'create' else 'wrote'} {path} ({n} lines)"
    return _text(r)


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
        self.say = dialect(cfg.client, interactive=cfg.interactive)
        self.name = "Claude Code" if cfg.client == "claude" else "Codex"
        self.result: str | None = None  # after a call: its output as the observation's result
        self.stall = ""  # after a call: the heartbeat judged the step looping (steering.stall_advice)
        self.holding = False  # inside the session's lock
        self.terminated = False  # SIGTERM came while the lock was held

    def session(self) -> HookSession:
        s = HookSession(self.ledger, self.store, self.sid, task=self.cfg.task, lease_s=self.cfg.lease_s,
                        client=self.cfg.client)
        s.ensure_task(str(self.p.get("cwd") or ""))
        return s

    @contextmanager
    def locked(self) -> Iterator[int]:
        """The session's lock, for one read-modify-write of its file and the ledger."""
        with self.store.hold(f"{self.cfg.client}-lock\0{self.ledger.target or self.ledger.display}\0{self.sid}") as fd:
            self.holding = True
            try:
                yield fd
            finally:
                self.holding = False
        if self.terminated:  # the client ended this hook while it held the lock
            self._terminate()

    # ------------------------------------------------------------------ dispatch
    def run(self) -> HookAnswer:
        if self.event == "PermissionRequest":
            return self.permission()
        if self.event in ("PreToolUse", *AFTER):
            return self.tool()
        with self.locked():
            s = self.session()
            s.sweep()
            if self.event == "SessionStart":
                return self.session_start(s)
            if self.event == "UserPromptSubmit":
                return self.prompt(s)
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

    def _read(self, s: HookSession) -> tuple[int, dict[str, str]]:
        """New tokens in the transcript (added to what no turn took yet), and the results of calls
        still waiting for theirs."""
        path = self.p.get("transcript_path")
        if not isinstance(path, str):
            return 0, {}
        t = s.transcript
        same = t.get("path") == path
        offset = t.get("offset") if same and isinstance(t.get("offset"), int) else 0
        counted = t.get("counted") if same and isinstance(t.get("counted"), dict) else {}
        r = read_new(path, int(offset), dict(counted), want=set(s.calls))  # type: ignore[arg-type]
        s.transcript = {"path": path, "offset": r.offset, "counted": r.counted}
        tokens = r.tokens + s.unbilled
        s.unbilled = 0
        return tokens, r.results

    # ------------------------------------------------------------------ events
    def session_start(self, s: HookSession) -> HookAnswer:
        s.ensure_waiting()
        context = (f"This {self.name} session is supervised by Warden as task {s.task}: an operator may park, "
                   "rewind or abort it, and answers permission requests.")
        why = s.why_not() if s.claim is None else None
        if why is not None and why.state in ("parked", "aborted"):
            context += f" The task is {why.state} now" + (f": {why.reason}" if why.reason else "") + "."
        return self.say.session_context(context)

    def prompt(self, s: HookSession) -> HookAnswer:
        s.close_notice("the session went on")
        tokens, _ = self._read(s)
        s.unbilled += tokens
        prompt = _text(self.p.get("prompt"))
        claim, why = s.start_turn(_text(prompt, 200))
        if claim is None:
            assert why is not None
            if why.state in ("parked", "aborted"):
                word = "Parked" if why.state == "parked" else "Aborted"
                return self.say.refuse_prompt(f"{word} by the operator in Warden"
                                              + (f": {why.reason}" if why.reason else "") + "; the prompt was not sent.")
            return self.say.refuse_prompt(f"Warden: {why.reason}; the prompt was not sent.")
        self._note(claim, f"prompt: {prompt}")
        if why is not None and why.state == "rewound":  # the turn before was rewound after it ended
            return self.say.context("UserPromptSubmit", f"The operator rewound the previous turn in Warden: "
                                                        f"{why.reason}. Take it into account in this one.")
        return HookAnswer()

    def tool(self) -> HookAnswer:
        pre = self.event == "PreToolUse"
        call = _tool_call(self.p)
        call_id = self.p.get("tool_use_id") if isinstance(self.p.get("tool_use_id"), str) else None
        deadline = time.monotonic() + self.cfg.park_wait_s
        beat_every = max(self.cfg.lease_s / 3, self.cfg.poll_s)
        first, next_beat, context = True, 0.0, ""
        while True:
            with self.locked():
                s = self.session()
                if first:
                    context = self._tool_first(s, pre, call, call_id)
                claim, why = s.ensure_turn(call[:200])
                if claim is not None:
                    if first or time.monotonic() >= next_beat:  # a wait writes only to keep the lease
                        why = self._beat(s, claim, first and not pre, call, context)
                        next_beat = time.monotonic() + beat_every
                    else:
                        why = self._look(s, claim)
                    first = False
                if why is None or why.state == "blocked":
                    context = "\n\n".join(x for x in (context, self.stall) if x)
                    return self.say.context(self.event, context) if context else HookAnswer()
            if why.state in ("parked", "budget") and time.monotonic() < deadline:
                self.sleep(self.cfg.poll_s)  # the call waits (the agent stands still) until resumed
                continue
            return self._steered(why, pre)

    def _tool_first(self, s: HookSession, pre: bool, call: str, call_id: str | None) -> str:
        """The first look at a tool event: questions settled, tokens and refusals read, the call
        remembered (before it) or closed (after it). Returns the context for the agent."""
        s.sweep()
        tokens, results = self._read(s)
        s.unbilled += tokens
        self._refusals(s, results, keep=call_id)
        tool, tool_input = self.p.get("tool_name"), self.p.get("tool_input")
        if pre:
            if call_id:
                s.call_seen(call_id, str(tool), tool_input, call)
            s.save()
            return ""
        how = f"answered at the {self.name} terminal"
        option = "deny" if self.event == "PermissionDenied" else "allow"
        at_terminal = s.settle_call(call_id, str(tool), tool_input, how, option)
        self.result = tool_output(self.p) + (f"\n[permission {how}]" if at_terminal else "")
        if call_id:
            s.calls.pop(call_id, None)
        digest = call_digest(tool, tool_input)
        note = (s.notes.pop(call_id, None) if call_id else None) or s.notes.pop(digest, None)
        s.save()
        if note and self.event == "PostToolUse":
            return f"The operator allowed this call in Warden and said: {_text(note.get('answer'), 1000)}"
        return ""

    def _refusals(self, s: HookSession, results: dict[str, str], keep: str | None = None) -> None:
        """Calls the client refused itself (``claude -p`` without permission, Codex's policy): the
        transcript holds their result, no hook fired for it. Recorded as the call and its refusal."""
        claim = s.claim
        for cid, text in results.items():
            if cid == keep or cid not in s.calls:
                continue
            c = s.calls.pop(cid)
            if claim is not None:
                try:
                    self.ledger.heartbeat(claim, action=str(c.get("call"))[:TEXT_CAP],
                                          result="refused: " + _text(text))
                except LeaseLost:
                    pass

    def _beat(self, s: HookSession, claim: Claim, said: bool, call: str, context: str) -> Steer | None:
        """The heartbeat of a tool event: the lease, the tokens; after the call, the call and its
        output as the one observation of it."""
        tokens, s.unbilled = s.unbilled, 0
        try:
            p = self.ledger.heartbeat(claim, tokens=tokens, action=call if said else None,
                                      result=self.result if said else None)
        except LeaseLost as e:
            s.unbilled += tokens
            again, st = s.after_lost(e)
            if again is None or st.state == "rewound":
                s.save()
                return st
            return self._beat(s, again, said, call, context)
        s.save()
        if p.parked:
            return Steer("parked", self.ledger.task(s.task).park_reason or "")
        if said:  # after the call: looping or bringing nothing new is said beside its output
            self.stall = stall_advice(p) or ""
        return self._gate(s, p.gate)

    def _look(self, s: HookSession, claim: Claim) -> Steer | None:
        """While a call waits: what the operator did, read without writing."""
        st = steer(self.ledger, claim)
        if st.state == "running":
            t = self.ledger.task(s.task)
            return self._gate(s, budget.gate(budget.usage_ratio(t.tokens_used, t.token_cap, t.wall_used_s,
                                                                t.wall_cap_s), t.soft_ratio))
        if st.state in ("rewound", "lost", "aborted"):
            _, st = s.after_lost()
        return None if st.state == "running" else st

    def _gate(self, s: HookSession, gate: str) -> Steer | None:
        """The task's budget gate: soft → a notice for the operator (once); hard → the next calls
        wait as when parked, with a question the operator may answer to let it go on."""
        b = s.budget
        if gate == "soft" and not b.get("soft"):
            b["soft"] = s.ask(kind="direction", title="budget: past its soft gate", options=[
                {"id": "seen", "label": "Seen", "consequence": "it goes on; park it or raise its budget to stop it"}],
                question=f"{self.name} session {s.task} is past its soft budget gate (its token budget is "
                         f"{self._used(s)}); it goes on.", recommendation="seen",
                context={"via": f"{self.cfg.client} hooks", "gate": gate,
                         "stuck": f"past its soft budget gate ({self._used(s)}); not stuck: it goes on",
                         "why": "a notice: the session goes on either way; park it or raise its budget to stop it"})
            s.save()
        if gate not in ("hard", "stop"):
            return None
        hid = b.get("hard")
        if isinstance(hid, str):
            try:
                h = self.ledger.handoff(hid)
            except NotFound:
                h = None
            if h is not None and h.status == "resolved":
                if h.resolution_option == "go_on" and gate == "hard":
                    return None
                if h.resolution_option == "stop":
                    return Steer("aborted", "stopped at its budget's hard gate")
        else:
            b["hard"] = s.ask(kind="confirm", title="budget: at its hard gate", options=[
                {"id": "go_on", "label": "Let it go on", "consequence": "its tool calls run again (up to the stop "
                                                                        "gate, 120 % of the budget)"},
                {"id": "stop", "label": "Stop it", "consequence": f"{self.name} is stopped at its next tool call"}],
                question=f"{self.name} session {s.task} reached its budget's hard gate ({self._used(s)}): its next "
                         "tool call waits.",
                context={"via": f"{self.cfg.client} hooks", "gate": gate,
                         "stuck": f"at its budget's hard gate ({self._used(s)}): its next tool call waits",
                         "no_recommendation": "whether the work is worth more than its budget is the operator's "
                                              "call; the hooks do not know"})
            s.save()
        return Steer("budget", f"the task is over its budget ({self._used(s)})")

    def _used(self, s: HookSession) -> str:
        t = self.ledger.task(s.task)
        return f"{t.tokens_used:,} of {t.token_cap:,} tokens" if t.token_cap else f"{t.wall_used_s:.0f} s"

    def _steered(self, st: Steer, pre: bool) -> HookAnswer:
        if st.state == "rewound":
            reason = (f"The operator rewound this turn in Warden: {st.reason}. Do not repeat what was rejected; "
                      "start the step again with this in mind.")
            return self.say.deny_tool(reason) if pre else self.say.block_after_tool(self.event, reason)
        if st.state in ("parked", "aborted", "budget"):
            word = {"parked": "Parked by the operator in Warden", "aborted": "Aborted by the operator in Warden",
                    "budget": "Stopped by Warden"}[st.state]
            stop = word + (f": {st.reason}" if st.reason else "")
            return self.say.stop_before_tool(stop) if pre else self.say.stop_after_tool(self.event, stop)
        return HookAnswer(message=f"warden hook {self.cfg.client}: not recorded: {st.reason}")  # lost

    def permission(self) -> HookAnswer:
        """Ask the operator; the client ending the hook (SIGTERM: its own dialog was answered "No" or
        cancelled at the terminal) settles the question as refused there, so it never stays open for
        nobody. The handler is in place before anything is asked; it does its writes on a connection
        of its own (the wait may be in the middle of a read on this one) and then ends the process."""
        def ended(signum: int, _frame: FrameType | None) -> None:
            if self.holding:  # finish the step under the session's lock first
                self.terminated = True
                return
            self._terminate()
        try:
            old = signal.signal(signal.SIGTERM, ended)
        except ValueError:  # not the main thread (tests): no signal to take
            return self._permission()
        try:
            return self._permission()
        finally:
            signal.signal(signal.SIGTERM, old)

    def _terminate(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            target = self.ledger.target
            if target:
                with Ledger.open(target, application_name="warden-hook") as ledger:
                    hook = _Hook(ledger, self.store, self.cfg, self.p, self.sleep)
                    with hook.locked():
                        s = hook.session()
                        how = f"answered at the {self.name} terminal: refused or cancelled there"
                        for key, ask in list(s.asks.items()):
                            if ask.get("pid") != os.getpid():
                                continue
                            hid = ask.get("handoff") or next((h.id for h in ledger.handoffs(task_id=s.task)
                                                              if h.node == key), None)
                            if isinstance(hid, str):
                                questions.settle(ledger, hid, option="deny", answer=how, by=s.worker)
                                ask["handoff"] = hid
                            ask["pid"] = None
                        s.sweep(force=True)
        finally:
            os._exit(143)

    def _permission(self) -> HookAnswer:
        tool = _text(self.p.get("tool_name"), 80)
        tool_input = self.p.get("tool_input")
        with self.locked():
            s = self.session()
            s.sweep()
            claim, why = s.ensure_turn(f"{tool}: permission")
            if claim is None:
                assert why is not None
                return self.say.permission(False, f"Warden: the task is {why.state}" + (f" ({why.reason})" if why.reason
                                                                                       else "") + "; denied",
                                           interrupt=why.state == "aborted")
            shown = summarize(tool_input, TEXT_CAP)
            options = [{"id": "allow", "label": f"Allow {tool}", "consequence": f"{self.name} runs it with this input"},
                       {"id": "deny", "label": "Deny", "consequence": f"{self.name} is told it may not, and goes on"}]
            context: JsonObject = {"tool": tool, "input": shown, "cwd": _text(self.p.get("cwd"), 500),
                                   "session": self.sid, "permission_mode": _text(self.p.get("permission_mode"), 40),
                                   "stuck": f"{self.name} asks permission to use {tool} with: {shown[:500]}",
                                   "no_recommendation": "the agent's own permission request: Warden does not judge "
                                                        "the call; the tool and its input are below"}
            if self.p.get("permission_suggestions"):
                context["suggestions"] = summarize(self.p.get("permission_suggestions"), 1000)
            permission_rules.offer(options, context, self.p, client=self.cfg.client)  # "always allow", an edit's diff
            call_id = s.call_for(str(self.p.get("tool_name")), tool_input)
            try:
                hid = s.ask(kind="permission", title=f"{tool}: permission", options=options, context=context,
                            question=f"Allow {self.name} to use {tool}?\n{shown}", call=call_id,
                            digest=call_digest(self.p.get("tool_name"), tool_input), pid=os.getpid())
            except (LeaseLost, Refused) as e:
                return self.say.permission(False, f"Warden: {e}; denied", interrupt=s.why_not().state == "aborted")
        res = self.ledger.wait_for_resolution(hid, timeout=self.cfg.permission_wait_s)
        with self.locked():
            s = self.session()
            if res is None:  # nobody answered: denied, and the question closed as such
                answer = f"no answer within {self.cfg.permission_wait_s:.0f}s"
                questions.settle(self.ledger, hid, option="deny", answer=answer, by=s.worker)
                res = self.ledger.wait_for_resolution(hid, timeout=0) or {"status": "open"}
                res["timeout"] = True
            status, option = res.get("status"), res.get("option")
            s.close_ask(hid, {"decision": option if status == "resolved" else status, "answer": res.get("answer"),
                              "by": res.get("by")})
            if status == "resolved" and (option == "allow" or permission_rules.is_rule(option)):
                if res.get("answer") and res.get("by") != s.worker:
                    s.notes[call_id or call_digest(self.p.get("tool_name"), tool_input)] = {"answer": res["answer"]}
                    s.save()
                return self.say.permission(True, rules=permission_rules.granted(option, context))
            if status == "resolved":
                said = "nobody answered in time" if res.get("timeout") else "the operator denied it"
                answer = _text(res.get("answer"), 500) if res.get("answer") and not res.get("timeout") else ""
                return self.say.permission(False, f"Warden: {said}" + (f": {answer}" if answer else ""))
            aborted = self.ledger.task(s.task).status == "aborted"
            return self.say.permission(False, "Warden: the question was withdrawn (" + (
                "the task was aborted" if aborted else "the turn was rewound") + ")", interrupt=aborted)

    def notification(self, s: HookSession) -> HookAnswer:
        kind = NOTICES.get(str(self.p.get("notification_type")))
        message = _text(self.p.get("message"), 500) or f"{self.name} needs you"
        if kind is None:
            if s.claim is not None:
                self._note(s.claim, f"notification: {message}")
            return HookAnswer()
        s.open_notice(kind, f"{message} (at the {self.name} terminal)")
        return HookAnswer()

    def stop(self, s: HookSession) -> HookAnswer:
        tokens, results = self._read(s)
        s.unbilled += tokens
        self._refusals(s, results)
        if s.claim is None:
            s.ensure_waiting()
            return HookAnswer()
        output: JsonObject = {"last_message": _text(self.p.get("last_assistant_message")), "turn": s.turn,
                              "session": self.sid}
        tokens, s.unbilled = s.unbilled, 0
        st = s.end_turn(output, tokens=tokens)
        if st is not None and st.state == "rewound" and s.claim is not None:
            return self.say.go_on(f"The operator rewound this turn in Warden: {st.reason}. Continue with this in mind.")
        if st is not None and st.state not in ("aborted", "parked"):
            return HookAnswer(message=f"warden hook {self.cfg.client}: the turn was not committed: {st.answer}")
        return HookAnswer()

    def session_end(self, s: HookSession) -> HookAnswer:
        s.withdraw_all("withdrawn: the session ended")
        s.end_session(_text(self.p.get("reason"), 80))
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
        return safe_default(event, problem or "unreadable input", cfg.client)
    try:
        with open_ledger() as ledger:
            return handle(ledger, store, cfg, payload)
    except LedgerUnavailable as e:
        return safe_default(event, f"the ledger is unavailable: {e}", cfg.client)
    except (WardenError, NotFound, OSError) as e:
        return safe_default(event, str(e).splitlines()[0] if str(e) else type(e).__name__, cfg.client)


__all__ += ["Dialect", "tool_output"]

"""What a hook prints, per client: the answers Claude Code and Codex honour, as measured with the
real binaries (docs/agents.md, "What each control does"; tests/clients/).

Claude Code 2.1.197:

* ``PreToolUse``: ``deny`` keeps the call from running but Claude goes on (``continue: false`` is
  ignored beside a deny, and alone it lets the call run first). What stops it without running the
  call: headless (``claude -p``) ``permissionDecision: "defer"`` with ``continue: false``;
  interactive ``"ask"`` with ``continue: false``, which opens the permission flow, where the
  ``PermissionRequest`` hook's ``deny`` with ``interrupt: true`` ends the turn.
* ``PostToolUse`` (and ``PostToolUseFailure``): ``continue: false`` stops Claude after the call.
* ``UserPromptSubmit``: ``continue: false`` refuses the prompt before any model call.
* ``Stop``: ``decision: "block"`` makes Claude go on with the reason.

Codex 0.171.0 validates every answer strictly and drops one it does not take whole:

* ``PreToolUse``: ``deny`` keeps the call from running, Codex goes on; ``continue`` makes the
  answer invalid (the call then runs), so it is never sent.
* ``PostToolUse``: ``continue: false`` only replaces the output the model sees; nothing stops Codex
  here, so the operator's word goes as ``additionalContext`` beside the real output.
* ``PermissionRequest``: ``allow`` / ``deny`` with a message (``interrupt`` is not taken).
* ``UserPromptSubmit``: ``continue: false`` ends the turn before any model call.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.jsontypes import JsonArray, JsonObject
from store.text import safe_line

__all__ = ["HookAnswer", "Dialect", "dialect"]


@dataclass(frozen=True)
class HookAnswer:
    """What the hook prints (one JSON object or nothing), its exit status and one line for stderr."""

    output: JsonObject | None = None
    exit_code: int = 0
    message: str | None = None

    def __post_init__(self) -> None:  # one escaped line, whatever went into it (a payload's own text)
        if self.message is not None:
            object.__setattr__(self, "message", safe_line(self.message, limit=500))


def _specific(event: str, **fields: object) -> JsonObject:
    return {"hookSpecificOutput": {"hookEventName": event, **fields}}


@dataclass(frozen=True)
class Dialect:
    """The answers of one client (``claude`` or ``codex``)."""

    client: str
    interactive: bool = True  # Claude Code: CLAUDE_CODE_ENTRYPOINT "cli" (else claude -p / an SDK)

    def deny_tool(self, reason: str) -> HookAnswer:
        return HookAnswer(_specific("PreToolUse", permissionDecision="deny", permissionDecisionReason=reason))

    def stop_before_tool(self, reason: str) -> HookAnswer:
        """Stop the agent without running the call (abort, a park or a budget wait run out)."""
        if self.client != "claude":
            return self.deny_tool(reason + " Stop now: make no more tool calls.")
        if self.interactive:
            return HookAnswer({"continue": False, "stopReason": reason,
                               **_specific("PreToolUse", permissionDecision="ask", permissionDecisionReason=reason)})
        return HookAnswer({"continue": False, "stopReason": reason, **_specific("PreToolUse", permissionDecision="defer")})

    def stop_after_tool(self, event: str, reason: str) -> HookAnswer:
        if self.client != "claude":
            return self.context(event, reason + " Stop now: make no more tool calls.")
        return HookAnswer({"continue": False, "stopReason": reason})

    def block_after_tool(self, event: str, reason: str) -> HookAnswer:
        if self.client != "claude":
            return self.context(event, reason)
        return HookAnswer({"decision": "block", "reason": reason})

    def context(self, event: str, text: str) -> HookAnswer:
        return HookAnswer(_specific(event, additionalContext=text))

    def permission(self, allow: bool, message: str = "", *, interrupt: bool = False,
                   rules: JsonArray | None = None) -> HookAnswer:
        decision: JsonObject = {"behavior": "allow" if allow else "deny"}
        if allow and rules and self.client == "claude":  # "always allow": the rule Claude Code suggested
            decision["updatedPermissions"] = rules
        if not allow:
            decision["message"] = message
            if interrupt and self.client == "claude":
                decision["interrupt"] = True
        return HookAnswer(_specific("PermissionRequest", decision=decision))

    def refuse_prompt(self, reason: str) -> HookAnswer:
        return HookAnswer({"continue": False, "stopReason": reason})

    def go_on(self, reason: str) -> HookAnswer:
        """At Stop: the agent continues with ``reason`` (a rewind)."""
        return HookAnswer({"decision": "block", "reason": reason})

    def session_context(self, text: str) -> HookAnswer:
        return HookAnswer(_specific("SessionStart", additionalContext=text))


def dialect(client: str, *, interactive: bool = True) -> Dialect:
    return Dialect(client, interactive)

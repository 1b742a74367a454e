"""``warden mcp``: the ledger as a Model Context Protocol server over stdio (the ``mcp`` extra).

Built on the official MCP Python SDK (``mcp`` 2.x, ``mcp.server.mcpserver.MCPServer``). The tools
are :class:`store.adapters.agent_session.AgentSession`'s, one to one; their answers are JSON
objects (the tool's structured content, and its text). Resources: ``warden://task/constraints``
(the task's must-keep rules, JSON list) and ``warden://claim/inputs`` (the held claim's inputs:
the task inputs, dependencies' outputs, rejection reasons, the last resolution).

An MCP client (Claude Code, Codex, any agent) configures it as a stdio server::

    {"mcpServers": {"warden": {"command": "warden",
                               "args": ["mcp", "--ledger", "/srv/ledger.db", "--task", "fix-42",
                                        "--worker", "claude-fix-42"]}}}
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer

from store.jsontypes import JsonArray, JsonObject
from store.adapters.agent_session import AgentSession
from store.adapters.mcp_wire import AnsweringServer

__all__ = ["build_server", "serve"]

INSTRUCTIONS = (
    "Warden supervises this work: a person watches it in an operator console. Call claim_next "
    "to get your step (its inputs, the operator's rejection reasons), heartbeat as you go "
    "(action: what you did, result: what it gave), ask_human when a decision is not yours, "
    "commit(output) when the step is done or fail(error) when it cannot be. Log an external "
    "side effect with intend_effect before making it and confirm_effect after. When an answer "
    "says parked, stop after saving your state; aborted, stop and commit nothing; rewound, start "
    "the step again with the reason given; a heartbeat answered with stall, change course."
)


def build_server(session: AgentSession) -> MCPServer[object]:
    """An MCPServer whose tools and resources are ``session``'s."""
    server: MCPServer[object] = AnsweringServer("warden", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(description="Claim the next ready step of a task (created with one node when it does not "
                             "exist). Answers status claimed (with the step's inputs), none, parked or aborted.")
    def claim_next(task: str | None = None, kinds: list[str] | None = None) -> JsonObject:
        return session.claim_next(task, kinds)

    @server.tool(description="Report progress (a fraction 0-1), what you did (action) and what it gave (result), "
                             "tokens spent since the last report, or a declared wait (waiting_on, wait_s). "
                             "Answers ok (with stall, stall_evidence and advice when Warden judges the step "
                             "looping or bringing nothing new: change course), or parked / aborted / rewound: "
                             "<reason>.")
    def heartbeat(progress: float | None = None, observation: str | None = None, action: str | None = None,
                  result: str | None = None, waiting_on: str | None = None, wait_s: float | None = None,
                  tokens: int = 0) -> JsonObject:
        return session.heartbeat(progress, observation, action, result, waiting_on, wait_s, tokens)

    @server.tool(description="Record the step's result (any JSON value). Safe to repeat: a commit already made "
                             "is answered committed with already: true.")
    def commit(output: object) -> JsonObject:
        return session.commit(output)

    @server.tool(description="Record that the step failed. failure_class: transient, idempotent_write, "
                             "irreversible_write, conclusion or spec; retryable: whether trying again may help.")
    def fail(error: str, failure_class: str = "transient", retryable: bool | None = None) -> JsonObject:
        return session.fail(error, failure_class, retryable)

    @server.tool(description="Before an external side effect (a PR, an email, a deploy): log it by a stable key. "
                             "Answers confirmed when it already happened: then do not make it again. When the "
                             "step's work is irreversible (a payment, a deletion) a person confirms it first from "
                             "payload (its details: what, to whom, how much) and why: answers intended once they "
                             "said proceed, declined (do not make the call) or pending with a handoff to wait on.")
    def intend_effect(key: str, payload: object = None, why: str | None = None) -> JsonObject:
        return session.intend_effect(key, payload, why)

    @server.tool(description="After the external side effect happened: confirm it with its external id.")
    def confirm_effect(key: str, external_id: str | None = None) -> JsonObject:
        return session.confirm_effect(key, external_id)

    @server.tool(description="Ask a person (kind: confirm, direction, exception, acceptance; default direction). "
                             "Hand over what they decide from: done (what you did so far), stuck (where you are "
                             "stuck), options [{id, label, consequence}] each with its consequence, and "
                             "recommendation (an option id) with why, or no_recommendation (why you have none). "
                             "A missing part is refused. Waits up to about 50 s; then answers pending with the "
                             "handoff id: call wait_for_human(handoff) to keep waiting.")
    def ask_human(question: str, done: str | None = None, stuck: str | None = None,
                  options: JsonArray | None = None, recommendation: str | None = None, why: str | None = None,
                  no_recommendation: str | None = None, kind: str | None = None) -> JsonObject:
        return session.ask_human(question, options, kind, done=done, stuck=stuck, recommendation=recommendation,
                                 why=why, no_recommendation=no_recommendation)

    @server.tool(description="Keep waiting for the answer to a question asked with ask_human.")
    def wait_for_human(handoff: str) -> JsonObject:
        return session.wait_for_human(handoff)

    @server.tool(description="What the task leaves behind so far: best result, unfinished steps, budget, "
                             "open questions, unconfirmed effects; and this session's claim.")
    def report() -> JsonObject:
        return session.report()

    @server.resource("warden://task/constraints", name="constraints", mime_type="application/json",
                     description="The task's constraints: rules every step must keep.")
    def constraints() -> str:
        return json.dumps(session.constraints(), ensure_ascii=False)

    @server.resource("warden://claim/inputs", name="inputs", mime_type="application/json",
                     description="The claimed step's inputs: task inputs, dependencies' outputs, rejections, "
                                 "the last answer to a question.")
    def inputs() -> str:
        return json.dumps(session.inputs(), ensure_ascii=False, default=str)

    return server


def serve(session: AgentSession) -> None:
    """Serve ``session`` over stdio until the client goes away; then stop holding the lease."""
    try:
        build_server(session).run("stdio")
    finally:
        session.close()

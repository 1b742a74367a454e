"""A scripted model on 127.0.0.1 for the real Claude Code and Codex CLIs.

It speaks the two wire protocols the clients call: the Anthropic Messages API with streaming
server-sent events (``POST /v1/messages``, what Claude Code calls at ``ANTHROPIC_BASE_URL``) and
the OpenAI Responses API with streaming events (``POST /v1/responses``, what Codex calls through a
``model_provider`` whose ``base_url`` points here and ``wire_api = "responses"``).

A test gives a script: one :class:`Reply` per model call of the agent's loop, in order — tool
calls (Bash, Write, Edit, Read for Claude; ``exec_command`` for Codex), text, an HTTP error, a
reply held back until the test releases it. A request that carries no tools (Claude Code's side
calls: a title, a summary) is answered with a short text and does not consume the script; every
request is recorded (:attr:`ModelServer.requests`) so a test can read what reached the model: a
tool's result, a hook's reason, the operator's answer. A call past the end of the script is
answered with :data:`SCRIPT_DONE` text, so a client never hangs on it.

The event shapes follow the public API references (Anthropic "Streaming messages"; OpenAI
"Streaming responses"): ``message_start`` … ``content_block_start/delta/stop`` … ``message_delta``
(stop reason, output tokens) ``message_stop``; ``response.created`` … ``response.output_item.added``
/ ``.done`` … ``response.completed`` (usage).
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

SCRIPT_DONE = "(the scripted model has nothing more to say)"
BODY_CAP = 64 * 1024 * 1024


@dataclass(frozen=True)
class Call:
    """One tool call the model makes: ``name`` and ``input`` as the client's tool takes them."""

    name: str
    input: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class Usage:
    input: int = 100
    output: int = 20
    cache_read: int = 0
    cache_write: int = 0


@dataclass
class Reply:
    """One model response: text and/or tool calls (several at once are parallel calls), its usage;
    or an HTTP ``error`` (status, message) instead. ``hold`` keeps the response back until
    :meth:`release` (a model still thinking)."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    usage: Usage = field(default_factory=Usage)
    error: tuple[int, str] | None = None
    hold: bool = False
    released: threading.Event = field(default_factory=threading.Event)
    # given again (the script does not move on) while this holds for the next request: a model that
    # waits for something (Claude Code's WaitForMcpServers until a server is connected)
    again_while: Callable[["Request"], bool] | None = None

    def release(self) -> None:
        self.released.set()


# ---------------------------------------------------------------------- tool calls by name
def bash(command: str, description: str = "", timeout_ms: int | None = None) -> Call:
    args: dict[str, Any] = {"command": command, "description": description or command[:40]}
    if timeout_ms is not None:
        args["timeout"] = timeout_ms
    return Call("Bash", args)


def write(path: str, content: str) -> Call:
    return Call("Write", {"file_path": path, "content": content})


def edit(path: str, old: str, new: str) -> Call:
    return Call("Edit", {"file_path": path, "old_string": old, "new_string": new})


def read(path: str) -> Call:
    return Call("Read", {"file_path": path})


def wait_for_mcp(server: str) -> Reply:
    """Claude Code connects MCP servers in the background: a model that needs one calls its
    ``WaitForMcpServers`` tool, again while the answer says it is still connecting."""
    return Reply(calls=(Call("WaitForMcpServers", {"servers": [server]}),),
                 again_while=lambda r: any("ready: false" in t for t in r.tool_results()[-1:]))


def shell(command: str, justification: str | None = None, escalate: bool = False) -> Call:
    """Codex's ``exec_command`` (its unified exec tool): ``escalate`` asks to run outside the
    sandbox, which needs an approval (a PermissionRequest)."""
    args: dict[str, Any] = {"cmd": command, "yield_time_ms": 30000}
    if escalate:
        args["sandbox_permissions"] = "require_escalated"
        args["justification"] = justification or f"run {command[:40]}"
    return Call("exec_command", args)


@dataclass(frozen=True)
class Request:
    """One request as it reached the server."""

    api: str  # "anthropic" | "openai"
    path: str
    body: dict[str, Any]
    scripted: bool  # consumed a scripted reply

    def tool_results(self) -> list[str]:
        """The tool results this request carries back to the model (as text), in order."""
        out: list[str] = []
        if self.api == "anthropic":
            for m in self.body.get("messages") or []:
                content = m.get("content")
                if m.get("role") != "user" or not isinstance(content, list):
                    continue
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        out.append(_text_of(block.get("content")))
        else:
            for item in self.body.get("input") or []:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    out.append(_text_of(item.get("output")))
        return out

    def text(self) -> str:
        """Everything the request says, as one string (for "did X reach the model")."""
        return json.dumps(self.body, ensure_ascii=False)


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c.get("text") if isinstance(c, dict) else c) for c in content)
    if isinstance(content, dict):
        return _text_of(content.get("content") or content.get("text") or "")
    return "" if content is None else str(content)


class ModelServer:
    """The scripted model (see the module's docstring). Use as a context manager."""

    def __init__(self, script: list[Reply] | None = None) -> None:
        self.script: list[Reply] = list(script or [])
        self.requests: list[Request] = []
        self.position = 0  # the next reply of the script
        self.lock = threading.Condition()
        self.ids = itertools.count(1)
        self.closing = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "ModelServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closing.set()
        for r in self.script:
            r.release()
        self.httpd.shutdown()
        self.httpd.server_close()

    def add(self, *replies: Reply) -> None:
        with self.lock:
            self.script.extend(replies)

    def scripted(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.scripted]

    def wait_requests(self, n: int, timeout: float = 60.0) -> list[Request]:
        """Wait until ``n`` scripted requests arrived (a condition, not a sleep)."""
        with self.lock:
            ok = self.lock.wait_for(lambda: len([r for r in self.requests if r.scripted]) >= n, timeout)
            got = [r for r in self.requests if r.scripted]
        if not ok:
            raise AssertionError(f"the model got {len(got)} of {n} scripted requests within {timeout:.0f}s")
        return got

    # ------------------------------------------------------------------ the script
    def _next(self, api: str, path: str, body: dict[str, Any]) -> Reply:
        main = bool(body.get("tools"))
        request = Request(api, path, body, main)
        with self.lock:
            reply = None
            if main:
                last = self.script[self.position - 1] if 0 < self.position <= len(self.script) else None
                if last is not None and last.again_while is not None and last.again_while(request):
                    reply = last
                elif self.position < len(self.script):
                    reply = self.script[self.position]
                    self.position += 1
                else:
                    reply = Reply(text=SCRIPT_DONE)
            self.requests.append(request)
            self.lock.notify_all()
        if reply is None:
            return Reply(text="Scripted side answer.", usage=Usage(10, 5))
        if reply.hold:
            while not reply.released.wait(0.2):
                if self.closing.is_set():
                    break
        return reply

    def _call_id(self, call: Call, prefix: str) -> str:
        return call.id or f"{prefix}{next(self.ids):06d}"

    # ------------------------------------------------------------------ Anthropic Messages
    def anthropic_events(self, body: dict[str, Any], reply: Reply) -> list[tuple[str, dict[str, Any]]]:
        model = str(body.get("model") or "claude-scripted")
        msg_id = f"msg_scripted{next(self.ids):06d}"
        u = reply.usage
        start_usage = {"input_tokens": u.input, "output_tokens": 1, "cache_read_input_tokens": u.cache_read,
                       "cache_creation_input_tokens": u.cache_write}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": {
                "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": start_usage}}),
        ]
        index = 0
        if reply.text:
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                    "content_block": {"type": "text", "text": ""}}))
            for chunk in _chunks(reply.text, 400):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                        "delta": {"type": "text_delta", "text": chunk}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        for call in reply.calls:
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": self._call_id(call, "toolu_scripted"), "name": call.name, "input": {}}}))
            for chunk in _chunks(json.dumps(call.input), 800):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                        "delta": {"type": "input_json_delta", "partial_json": chunk}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        events.append(("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": "tool_use" if reply.calls else "end_turn",
                                                   "stop_sequence": None},
                                         "usage": {"output_tokens": u.output}}))
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    # ------------------------------------------------------------------ OpenAI Responses
    def openai_events(self, body: dict[str, Any], reply: Reply) -> list[tuple[str, dict[str, Any]]]:
        rid = f"resp_scripted{next(self.ids):06d}"
        model = str(body.get("model") or "gpt-scripted")
        base = {"id": rid, "object": "response", "model": model, "status": "in_progress", "output": []}
        events: list[tuple[str, dict[str, Any]]] = [("response.created", {"type": "response.created",
                                                                          "response": base})]
        output: list[dict[str, Any]] = []
        if reply.text:
            item_id = f"msg_scripted{next(self.ids):06d}"
            added = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
            events.append(("response.output_item.added", {"type": "response.output_item.added",
                                                           "output_index": len(output), "item": added}))
            for chunk in _chunks(reply.text, 400):
                events.append(("response.output_text.delta", {"type": "response.output_text.delta",
                                                               "item_id": item_id, "output_index": len(output),
                                                               "content_index": 0, "delta": chunk}))
            done = {**added, "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}
            events.append(("response.output_item.done", {"type": "response.output_item.done",
                                                          "output_index": len(output), "item": done}))
            output.append(done)
        for call in reply.calls:
            item = {"type": "function_call", "id": f"fc_scripted{next(self.ids):06d}", "status": "completed",
                    "call_id": self._call_id(call, "call_scripted"), "name": call.name,
                    "arguments": json.dumps(call.input)}
            events.append(("response.output_item.added", {"type": "response.output_item.added",
                                                           "output_index": len(output),
                                                           "item": {**item, "arguments": "", "status": "in_progress"}}))
            events.append(("response.output_item.done", {"type": "response.output_item.done",
                                                          "output_index": len(output), "item": item}))
            output.append(item)
        u = reply.usage
        usage = {"input_tokens": u.input + u.cache_read, "input_tokens_details": {"cached_tokens": u.cache_read},
                 "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": u.input + u.cache_read + u.output}
        events.append(("response.completed", {"type": "response.completed",
                                               "response": {**base, "status": "completed", "output": output,
                                                            "usage": usage}}))
        return events

    # ------------------------------------------------------------------ HTTP
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _send(self, status: int, data: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # a client's reachability probe
                self._send(200, b"{}")

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(min(n, BODY_CAP))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                path = self.path.split("?", 1)[0]
                if not isinstance(body, dict) or not (path.endswith("/messages") or path.endswith("/responses")):
                    # count_tokens and anything else: not a model call
                    self._send(404, json.dumps({"type": "error", "error": {
                        "type": "not_found_error", "message": f"the scripted model serves no {path}"}}).encode())
                    return
                api = "anthropic" if path.endswith("/messages") else "openai"
                reply = server._next(api, path, body)
                if reply.error is not None:
                    status, message = reply.error
                    err = ({"type": "error", "error": {"type": "api_error", "message": message}} if api == "anthropic"
                           else {"error": {"type": "server_error", "message": message}})
                    self._send(status, json.dumps(err).encode())
                    return
                if not body.get("stream"):
                    self._send(200, json.dumps(_whole(api, server, body, reply)).encode())
                    return
                events = server.anthropic_events(body, reply) if api == "anthropic" else server.openai_events(body, reply)
                data = "".join(f"event: {name}\ndata: {json.dumps(ev)}\n\n" for name, ev in events).encode()
                self._send(200, data, "text/event-stream")

        return Handler


def _whole(api: str, server: ModelServer, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A non-streaming answer: the message the events would have built."""
    if api == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        for c in reply.calls:
            content.append({"type": "tool_use", "id": server._call_id(c, "toolu_scripted"), "name": c.name,
                            "input": c.input})
        return {"id": f"msg_scripted{next(server.ids):06d}", "type": "message", "role": "assistant",
                "model": body.get("model"), "content": content, "stop_sequence": None,
                "stop_reason": "tool_use" if reply.calls else "end_turn",
                "usage": {"input_tokens": reply.usage.input, "output_tokens": reply.usage.output}}
    events = server.openai_events(body, reply)
    return events[-1][1]["response"]


def _chunks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


__all__ = ["Call", "ModelServer", "Reply", "Request", "SCRIPT_DONE", "Usage", "bash", "edit", "read", "shell",
           "wait_for_mcp", "write"]

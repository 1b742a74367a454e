"""``warden otel receive``: GenAI spans from an agent already instrumented, as a task and its nodes.

An OTLP/HTTP receiver (``POST /v1/traces``, protobuf or JSON, gzip allowed) that turns the spans
of an agent nobody changed into ledger writes through the public API, so stall signals, estimates
and budget gates work on it:

* a trace is a task (``otel-`` and the trace id's first 16 hex digits, origin ``otel``);
* an agent span (``invoke_agent``; OpenInference ``AGENT``) is a node of kind ``agent``, claimed as
  soon as anything of it is seen — its children arrive while it runs, its own span only when it
  ends — and committed (or failed, with the span's error) when its span arrives;
* a tool call (``execute_tool``; OpenInference ``TOOL``) under an agent is an observation of that
  agent's node: the tool and its arguments as the action, its result as the result; a model call
  (``chat``, ``generate_content``, …; OpenInference ``LLM``) adds its tokens the same way; a tool
  call with no agent above it is a node of kind ``tool`` of its own;
* a Logfire pending span (``logfire.span_type = "pending_span"``) starts its real span's node.

Only watching is possible: nothing here can stop the agent, so parking such a task needs one of the
controlling integrations (``warden run``, ``warden hook``, the Python API). Bounded per request
(``MAX_BODY`` bytes on the wire, ``MAX_INFLATED`` after gzip); agent text is stored as text (the
console shows it literally) and cut at ``MAX_TEXT``.
"""

from __future__ import annotations

import gzip
import hmac
import json
import re
import threading
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from email.message import Message
from io import BufferedIOBase
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from store.adapters.otel.intake_state import IntakeState
from store.errors import LeaseLost, WardenError
from store.jsontypes import JsonObject, JsonValue
from store.facade import Ledger
from store.views import Claim

MAX_BODY = 4 * 1024 * 1024
MAX_INFLATED = 16 * 1024 * 1024
MAX_TEXT = 2000
LEASE_S = 6 * 3600.0  # spans come when work ends: a long step is silence, not a lost lease
WORKER = "otel"

_AGENT = {"invoke_agent", "create_agent"}
_TOOL = {"execute_tool"}
_MODEL = {"chat", "generate_content", "text_completion", "embeddings"}
_KEY = re.compile(r"[^A-Za-z0-9._:@+-]+")


class BadRequest(WardenError):
    pass


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    attrs: JsonObject
    error: str | None  # the span's status message when its status is ERROR


# ---------------------------------------------------------------------- decoding
def _pb_value(v: AnyValue) -> JsonValue:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_pb_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which) if which else None


def decode_protobuf(body: bytes) -> list[Span]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except Exception as e:  # protobuf's DecodeError (and RuntimeWarning-free variants of it): bad bytes
        raise BadRequest(f"not an OTLP protobuf trace request: {e}") from None
    return [Span(s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex() or None, s.name,
                 {kv.key: _pb_value(kv.value) for kv in s.attributes},
                 s.status.message or "error" if s.status.code == 2 else None)
            for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _json_value(v: object) -> JsonValue:
    if not isinstance(v, dict):
        return None
    for key, conv in (("stringValue", str), ("boolValue", bool), ("intValue", int), ("doubleValue", float)):
        if key in v:
            try:
                return conv(v[key])
            except (TypeError, ValueError):
                return None
    if "arrayValue" in v:
        return [_json_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in v:
        return {str(kv.get("key")): _json_value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values") or []}
    return None


def decode_json(body: bytes) -> list[Span]:
    """OTLP/JSON: ids in hex, attribute values wrapped by type (``stringValue``, ``intValue`` as a string …)."""
    try:
        doc = json.loads(body)
        out = []
        for rs in doc.get("resourceSpans") or []:
            for ss in rs.get("scopeSpans") or []:
                for s in ss.get("spans") or []:
                    attrs = {str(kv.get("key")): _json_value(kv.get("value")) for kv in s.get("attributes") or []}
                    status = s.get("status") or {}
                    bad = status.get("code") in (2, "STATUS_CODE_ERROR")
                    out.append(Span(str(s["traceId"]).lower(), str(s["spanId"]).lower(),
                                    str(s.get("parentSpanId") or "").lower() or None, str(s.get("name") or ""), attrs,
                                    str(status.get("message") or "error") if bad else None))
        return out
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise BadRequest(f"not an OTLP/JSON trace request: {e!r}") from None


# ---------------------------------------------------------------------- spans → the ledger
def operation(s: Span) -> str:
    op = s.attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op:
        return op
    kind = str(s.attrs.get("openinference.span.kind") or "").upper()
    return {"AGENT": "invoke_agent", "TOOL": "execute_tool", "LLM": "chat"}.get(kind, "")


def _pending(s: Span) -> bool:
    return s.attrs.get("logfire.span_type") == "pending_span"


def _text(x: object) -> str:
    s = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, default=str)
    s = s.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
    return s if len(s) <= MAX_TEXT else s[: MAX_TEXT - 1] + "…"


def _tokens(a: JsonObject) -> int:
    def n(key: str) -> int:
        v = a.get(key)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else 0
    total = n("gen_ai.usage.input_tokens") + n("gen_ai.usage.output_tokens")
    return total or n("llm.token_count.total") or (n("llm.token_count.prompt") + n("llm.token_count.completion"))


def tool_action(s: Span) -> tuple[str, str | None]:
    a = s.attrs
    name = a.get("gen_ai.tool.name") or a.get("tool.name") or s.name
    args = a.get("gen_ai.tool.call.arguments", a.get("tool.parameters", a.get("input.value")))
    result = a.get("gen_ai.tool.call.result", a.get("output.value"))
    action = f"{name}({_text(args) if args is not None else ''})"
    return _text(action), None if result is None else _text(result)


class Intake:
    """Spans → ledger writes, one request at a time (``take`` holds a lock). Its claims, span owners
    and spans written are kept in ``state`` (store/adapters/otel/intake_state.py): given a file, a
    restarted receiver goes on with the same nodes."""

    def __init__(self, ledger: Ledger, state: IntakeState | None = None) -> None:
        self.ledger = ledger
        self.state = state if state is not None else IntakeState()
        self.claims = self.state.claims  # (task, node) → the claim the receiver writes through
        self.agent_of = self.state.owners  # span id → (task, the agent node it belongs to)
        self.lock = threading.Lock()

    def take(self, spans: list[Span]) -> int:
        """One request's spans: the agents' nodes first (what the rest hangs on), then the others,
        parents before children, then the agents that ended (their observations are in by then)."""
        with self.lock:
            spans = self._new(spans)
            by_id = {s.span_id: s for s in spans}
            ended = [s for s in spans if operation(s) in _AGENT and not _pending(s)]
            for s in ended:
                self._agent(self._task(s), s.span_id, s, ended=False)

            def depth(s: Span) -> int:
                d, p = 0, s.parent_id
                while p in by_id and d < len(by_id):
                    d, p = d + 1, by_id[p].parent_id
                return d

            done = {id(s) for s in ended}
            try:
                for s in sorted((s for s in spans if id(s) not in done), key=depth):
                    self._one(s)
                    self._taken(s)
                for s in ended:
                    self._agent(self._task(s), s.span_id, s, ended=True)
                    self._taken(s)
            finally:
                self.state.sync()
            return len(spans)

    def _new(self, spans: list[Span]) -> list[Span]:
        """Spans not taken before: an exporter sends a batch again when our answer was lost, and a
        tool call seen twice would read as the agent repeating itself (the last ``intake_state.SEEN`` spans kept)."""
        return [s for s in spans if (s.trace_id, s.span_id, _pending(s)) not in self.state.seen]

    def _taken(self, s: Span) -> None:
        """Remembered once its writes are done, span by span: a request the ledger refused half-way
        is taken from where it stopped when it comes again."""
        self.state.taken((s.trace_id, s.span_id, _pending(s)))

    def _task(self, s: Span) -> str:
        task = f"otel-{s.trace_id[:16]}"  # 64 of the trace id's random bits: unique enough, and it fits a line
        name = s.attrs.get("gen_ai.agent.name") or (s.name if operation(s) in _AGENT else f"trace {s.trace_id[:8]}")
        self.ledger.create_task(task, title=_text(name)[:200],
                                workflow="otel", exist_ok=True, origin="otel")
        return task

    def _node(self, task: str, key: str, kind: str, title: str) -> Claim | None:
        c = self.claims.get((task, key))
        if c is not None:
            return c
        self.ledger.add_node(task, key, kind=kind, title=title)
        c = self.ledger.claim(task, WORKER, LEASE_S, key=key)
        if c is not None:
            self.state.claimed((task, key), c)
        return c

    def _one(self, s: Span) -> None:
        op = operation(s)
        task = self._task(s)
        if _pending(s):  # Logfire: the real span (its parent) has started
            if op in _AGENT:
                self._agent(task, s.parent_id or s.span_id, s, ended=False)
            return
        owner = self.agent_of.get(s.parent_id) if s.parent_id else None
        if owner is None and s.parent_id and op in _TOOL | _MODEL:
            # its agent's span has not come yet (it comes when the agent ends): start its node now
            owner = self._agent(task, s.parent_id, None, ended=False)
        if owner is not None:
            self.state.own(s.span_id, owner)  # what runs under it belongs to it too
        if op in _TOOL:
            action, result = tool_action(s)
            if owner is not None:
                self._observe(owner, action, result, _tokens(s.attrs), s.error)
            else:
                self._alone(task, s, action, result)
        elif op in _MODEL and owner is not None:
            model = s.attrs.get("gen_ai.request.model") or s.attrs.get("llm.model_name") or ""
            self._observe(owner, _text(f"{op} {model}".strip()), None, _tokens(s.attrs), s.error)

    def _agent(self, task: str, span_id: str, s: Span | None, *, ended: bool) -> tuple[str, str]:
        key = f"agent-{span_id[:16]}"
        title = _text(s.attrs.get("gen_ai.agent.name") or s.name) if s is not None else ""
        claim = self._node(task, key, "agent", title)
        self.state.own(span_id, (task, key))
        if ended and claim is not None and s is not None:
            tokens = _tokens(s.attrs)
            try:
                if s.error is not None:
                    self.ledger.fail(claim, error=_text(s.error), retryable=False, tokens=tokens)
                else:
                    out = s.attrs.get("output.value")
                    self.ledger.commit(claim, output={"agent": title, **({"output": _text(out)} if out else {})},
                                       tokens=tokens, summary=f"{title} ended")
            except LeaseLost:
                pass  # ended already (a receiver killed before it noted the end), or taken from us
            finally:
                self.state.ended((task, key))
        return task, key

    def _observe(self, owner: tuple[str, str], action: str, result: str | None, tokens: int, error: str | None) -> None:
        claim = self.claims.get(owner)
        if claim is None:
            return  # its agent has ended (or is not ours to write): nothing to add to
        try:
            self.ledger.heartbeat(claim, action=action, result=result if error is None else _text(f"error: {error}"),
                                  tokens=tokens)
        except LeaseLost:  # the node ended meanwhile (an operator, or an end noted by no receiver)
            self.state.ended(owner)

    def _alone(self, task: str, s: Span, action: str, result: str | None) -> None:
        key = _KEY.sub("-", f"tool-{s.attrs.get('gen_ai.tool.name') or s.name}")[:40] + f"-{s.span_id[:16]}"
        claim = self._node(task, key, "tool", _text(s.name))
        if claim is None:
            return
        self.ledger.heartbeat(claim, action=action, result=result, tokens=_tokens(s.attrs))
        try:
            if s.error is not None:
                self.ledger.fail(claim, error=_text(s.error), retryable=False)
            else:
                self.ledger.commit(claim, output=result)
        except LeaseLost:
            pass  # ended already, or taken from us: nothing more to write
        finally:
            self.state.ended((task, key))


# ---------------------------------------------------------------------- the HTTP side
def read_body(headers: Message, rfile: BufferedIOBase) -> bytes:
    try:
        length = int(headers.get("Content-Length") or "")
    except ValueError:
        raise BadRequest("a request needs a Content-Length") from None
    if length < 0 or length > MAX_BODY:
        raise TooLarge(f"a request is at most {MAX_BODY} bytes")
    body = rfile.read(length)
    if (headers.get("Content-Encoding") or "").lower() == "gzip":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            body = d.decompress(body, MAX_INFLATED)
        except (zlib.error, gzip.BadGzipFile) as e:
            raise BadRequest(f"bad gzip: {e}") from None
        if d.unconsumed_tail:
            raise TooLarge(f"a request is at most {MAX_INFLATED} bytes once inflated")
    return bytes(body)


class TooLarge(BadRequest):
    pass


def make_server(intake: Intake, host: str, port: int, token: str | None) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            if self.path.split("?", 1)[0] != "/v1/traces":
                return self._answer(404, "only POST /v1/traces (OTLP/HTTP traces)")
            if token is not None:
                given = self.headers.get("Authorization") or ""
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    return self._answer(401, "a bearer token is needed")
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if kind not in ("application/x-protobuf", "application/json"):
                return self._answer(415, "Content-Type must be application/x-protobuf or application/json")
            try:
                body = read_body(self.headers, self.rfile)
                spans = decode_json(body) if kind == "application/json" else decode_protobuf(body)
                intake.take(spans)
            except TooLarge as e:
                return self._answer(413, str(e))
            except BadRequest as e:
                return self._answer(400, str(e))
            except WardenError as e:
                return self._answer(503, f"the ledger refused: {e}")
            if kind == "application/json":
                return self._answer(200, None, b"{}", kind)
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
            self._answer(200, None, ExportTraceServiceResponse().SerializeToString(), kind)

        def _answer(self, status: int, message: str | None, body: bytes = b"", kind: str = "text/plain") -> None:
            if message is not None:
                body = message.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return ThreadingHTTPServer((host, port), Handler)


__all__ = ["Intake", "Span", "decode_json", "decode_protobuf", "make_server", "operation", "MAX_BODY"]

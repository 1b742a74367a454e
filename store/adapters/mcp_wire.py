"""``warden mcp``'s stdio wire: every message a client sends gets an answer.

The MCP SDK's stdio transport (``mcp.server.stdio``) parses each line with pydantic's JSON reader
and drops a line that reader refuses (it only logs it at debug level), so the client waits forever
for that id: a request whose arguments hold a lone surrogate escape (``"\\ud800"``: valid JSON,
refused by that reader), one nested deeper than it recurses (about 200 levels), a line that is not
UTF-8 or not JSON, a batch array, an id that is neither a string nor an integer. Its writer ends
the server when an answer cannot be encoded as UTF-8 (a lone surrogate in an error message). This
transport reads and writes the same newline-delimited JSON-RPC, on the same descriptors, and:

- reads a line the SDK's reader refuses with Python's own JSON reader, which keeps lone
  surrogates and huge integers: the request reaches the tool, and the ledger refuses the value
  with its one line (store/validate.py);
- answers what is still unreadable for the id found in it — a tool error for ``tools/call``, a
  JSON-RPC error for any other method, id ``null`` when no id can be found — with the reason in
  one escaped line;
- bounds a message at :data:`MESSAGE_MAX` bytes (the rest of a longer line is read and dropped,
  never kept) and its nesting at :data:`DEPTH_MAX`;
- writes every answer as UTF-8 JSON: a lone surrogate in one is written as its escape text.

While it serves, descriptor 0 reads the null device and descriptor 1 writes to stderr (as the SDK's
transport does), so nothing the process prints can break the wire.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import BinaryIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedResourceError
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    InputRequiredResult,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCResponse,
    TextContent,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from pydantic.networks import AnyUrl

from store.errors import WardenError
from store.jsontypes import JsonObject
from store.text import safe_line
from store.validate import JSON_MAX_DEPTH, show

__all__ = ["DEPTH_MAX", "MESSAGE_MAX", "AnsweringServer", "decode", "encode", "one_line", "stdio_wire"]

MESSAGE_MAX = 4 * 1024 * 1024  # bytes of one message (a commit's output is at most 64 KiB)
DEPTH_MAX = 400  # nesting read at all (the ledger keeps JSON values at most JSON_MAX_DEPTH deep)
LINE_MAX = 1000  # characters of a refusal's one line (then …)
_CHUNK = 1 << 16

# JSON tokens: a string (possibly cut short at the end), a bracket or punctuation, a bare word.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]]')
_SURROGATE = re.compile("[\ud800-\udfff]")


def one_line(text: object) -> str:
    """``text`` as one escaped line of at most :data:`LINE_MAX` characters."""
    return safe_line(text, limit=LINE_MAX)


@dataclass(frozen=True)
class Line:
    """One line read from the client: ``data`` holds at most :data:`MESSAGE_MAX` of its ``size`` bytes."""

    data: bytes
    size: int


def read_line(f: BinaryIO) -> Line | None:
    """The next line (None at end of input), the part beyond :data:`MESSAGE_MAX` read and dropped."""
    data = f.readline(MESSAGE_MAX + 1)
    if not data:
        return None
    size = len(data)
    if size <= MESSAGE_MAX or data.endswith(b"\n"):
        return Line(data, size)
    while True:
        rest = f.readline(_CHUNK)
        size += len(rest)
        if not rest or rest.endswith(b"\n"):
            return Line(data[:MESSAGE_MAX], size)


# ---------------------------------------------------------------------- reading a message
def _depth(text: str, limit: int) -> int:
    """How deep ``text`` nests (brackets outside strings), counted up to ``limit + 1``."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()[0]
        if c in "{[":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif c in "}]":
            depth -= 1
    return deepest


_NOTHING = object()


def _scalar(token: str) -> object:
    try:
        return json.loads(token)
    except (ValueError, RecursionError):
        return _NOTHING


def _envelope(text: str) -> dict[str, object]:
    """The top-level ``id`` and ``method`` and the ``params.name`` of a message that cannot be read
    whole (cut short, too deep, not JSON further on): read token by token, never recursing."""
    found: dict[str, object] = {}
    stack: list[tuple[str, object]] = []  # (bracket, the key it is the value of)
    key: object = _NOTHING
    value_next = False
    for m in _TOKENS.finditer(text):
        tok = m.group()
        c = tok[0]
        if c in "{[":
            stack.append((c, key if value_next else _NOTHING))
            key, value_next = _NOTHING, False
        elif c in "}]":
            if stack:
                stack.pop()
            key, value_next = _NOTHING, False
            if not stack:
                break
        elif c == ":":
            value_next = key is not _NOTHING
        elif c == ",":
            key, value_next = _NOTHING, False
        elif value_next:
            value = _scalar(tok)
            if value is not _NOTHING:
                if len(stack) == 1 and key in ("id", "method"):
                    found.setdefault(str(key), value)
                elif len(stack) == 2 and stack[1] == ("{", "params") and key == "name":
                    found.setdefault("name", value)
            key, value_next = _NOTHING, False
        elif stack and stack[-1][0] == "{" and c == '"':
            key = _scalar(tok)
        if "id" in found and "method" in found and (found["method"] != "tools/call" or "name" in found):
            break
    return found


def _request_id(value: object) -> int | str | None:
    """``value`` when it can be an MCP request id (a string or an integer), else None."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _refusal(found: dict[str, object], reason: str, code: int) -> JSONRPCMessage:
    """The answer to a message that cannot be served, for the id found in it: a tool error for a
    ``tools/call`` (what a model reads), else a JSON-RPC error (id null when none was found)."""
    rid = _request_id(found.get("id"))
    if rid is not None and found.get("method") == "tools/call":
        name = found.get("name")
        text = one_line(f"Error executing tool {name if isinstance(name, str) else '?'}: {reason}")
        result = CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return JSONRPCResponse(jsonrpc="2.0", id=rid,
                               result=result.model_dump(by_alias=True, mode="json", exclude_unset=True))
    return JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(code=code, message=one_line(reason)))


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


def _first_problem(e: ValidationError) -> str:
    errors = e.errors(include_url=False)
    if not errors:
        return "not a JSON-RPC 2.0 message"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where + ': ' if where else ''}{first.get('msg', 'invalid')}"


def _bad_id(obj: JsonObject) -> JSONRPCMessage:
    return _refusal({}, f"the id must be a string or an integer (got {safe_line(repr(obj['id']), limit=60)})",
                    INVALID_REQUEST)


def _read(text: str) -> tuple[JSONRPCMessage | None, list[JSONRPCMessage]]:
    """A line the SDK's reader refused, read with Python's: the message, or the answers to give."""
    if _depth(text, DEPTH_MAX) > DEPTH_MAX:
        return None, [_refusal(_envelope(text), f"the message is nested more than {DEPTH_MAX} deep (the ledger "
                                                f"keeps JSON values at most {JSON_MAX_DEPTH} deep)", PARSE_ERROR)]
    try:
        obj = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        return None, [_refusal(_envelope(text), f"the message is not JSON ({e})", PARSE_ERROR)]
    if isinstance(obj, list):
        why = "a batch (a JSON array of messages) is not part of MCP: send one message a line"
        answers = [_refusal({"id": m.get("id"), "method": m.get("method"),
                             "name": (m.get("params") or {}).get("name") if isinstance(m.get("params"), dict) else None},
                            why, INVALID_REQUEST)
                   for m in obj if isinstance(m, dict) and _request_id(m.get("id")) is not None]
        return None, answers or [_refusal({}, why, INVALID_REQUEST)]
    if not isinstance(obj, dict):
        return None, [_refusal({}, "a JSON-RPC message is a JSON object", INVALID_REQUEST)]
    if isinstance(obj.get("id"), str) and _SURROGATE.search(obj["id"]):  # no answer could carry it back
        return None, [_refusal({}, "the id is not valid Unicode text (a lone surrogate)", INVALID_REQUEST)]
    try:
        msg = jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except ValidationError as e:
        params = obj.get("params")
        found = {"id": obj.get("id"), "method": obj.get("method"),
                 "name": params.get("name") if isinstance(params, dict) else None}
        return None, [_refusal(found, f"not a JSON-RPC 2.0 message: {_first_problem(e)}", INVALID_REQUEST)]
    if isinstance(msg, JSONRPCNotification) and "id" in obj:
        return None, [_bad_id(obj)]
    return msg, []


def decode(line: Line) -> tuple[JSONRPCMessage | None, list[JSONRPCMessage]]:
    """The message a line carries (None when there is none to serve) and the answers to give now."""
    raw = line.data.rstrip(b"\r\n")
    if not raw.strip():
        return None, []
    if line.size > MESSAGE_MAX:
        found = _envelope(raw.decode("utf-8", "replace"))
        return None, [_refusal(found, f"the message is {line.size} bytes, over the {MESSAGE_MAX} a message may be",
                               INVALID_REQUEST)]
    try:
        msg = jsonrpc_message_adapter.validate_json(raw, by_name=False)
    except ValidationError:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            found = _envelope(raw.decode("utf-8", "replace"))
            return None, [_refusal(found, f"the message is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                                          f"{e.start})", PARSE_ERROR)]
        return _read(text)
    if isinstance(msg, JSONRPCNotification):  # a request whose id is not a string or an integer reads as one
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and "id" in obj:
            return None, [_bad_id(obj)]
    return msg, []


# ---------------------------------------------------------------------- writing an answer
def _scrub(value: object) -> object:
    """``value`` with every lone surrogate in its strings written as its escape text (``\\ud800``)."""
    if isinstance(value, str):
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    return value


def _one_line_refusal(message: JSONRPCMessage) -> JSONRPCMessage:
    """Whatever raised it (the SDK's own ``Unknown resource: <uri>`` too), a refusal written is one
    escaped line: a JSON-RPC error's message, a tool error's text."""
    if isinstance(message, JSONRPCError):
        line = one_line(message.error.message)
        if line != message.error.message:
            return message.model_copy(update={"error": message.error.model_copy(update={"message": line})})
    elif isinstance(message, JSONRPCResponse) and isinstance(message.result, dict) and message.result.get("isError"):
        content = message.result.get("content")
        if isinstance(content, list) and any(isinstance(c, dict) and isinstance(c.get("text"), str)
                                             and one_line(c["text"]) != c["text"] for c in content):
            fixed = [{**c, "text": one_line(c["text"])} if isinstance(c, dict) and isinstance(c.get("text"), str)
                     else c for c in content]
            return message.model_copy(update={"result": {**message.result, "content": fixed}})
    return message


def encode(message: JSONRPCMessage) -> bytes:
    """One line of UTF-8 JSON for ``message``, whatever text it holds."""
    message = _one_line_refusal(message)
    try:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
    except Exception:  # a lone surrogate (pydantic cannot encode it), or a value it does not know
        try:
            data = message.model_dump(by_alias=True, exclude_unset=True)
            text = json.dumps(_scrub(data), ensure_ascii=False, default=lambda v: safe_line(v, limit=200))
        except Exception as e:
            rid = _request_id(getattr(message, "id", None))
            fallback = JSONRPCError(jsonrpc="2.0", id=rid, error=ErrorData(
                code=-32603, message=one_line(f"the answer could not be written as JSON ({type(e).__name__})")))
            text = fallback.model_dump_json(by_alias=True, exclude_unset=True)
    return text.encode("utf-8") + b"\n"


# ---------------------------------------------------------------------- the transport
def _claim_std() -> tuple[BinaryIO, BinaryIO, Callable[[], None]]:
    """The wire on private copies of descriptors 0 and 1; 0 then reads the null device and 1 writes
    to stderr until the returned function puts them back."""
    sys.stdout.flush()
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)

    def restore() -> None:
        sys.stdout.flush()
        os.dup2(wire_in.fileno(), 0)
        os.dup2(wire_out.fileno(), 1)

    return wire_in, wire_out, restore


def _write(out: BinaryIO, data: bytes) -> None:
    out.write(data)
    out.flush()


@asynccontextmanager
async def stdio_wire(wire_in: BinaryIO | None = None, wire_out: BinaryIO | None = None
                     ) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                                              MemoryObjectSendStream[SessionMessage]]]:
    """The (read, write) streams a low-level MCP server runs on, served over stdin/stdout (or the
    binary files given)."""
    restore: Callable[[], None] | None = None
    if wire_in is None or wire_out is None:
        wire_in, wire_out, restore = _claim_std()
    source, sink = wire_in, wire_out
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    answers = write_send.clone()

    async def reader() -> None:
        async with read_send, answers:
            while True:
                line = await anyio.to_thread.run_sync(read_line, source, abandon_on_cancel=True)
                if line is None:
                    return
                msg, replies = decode(line)
                for reply in replies:
                    await answers.send(SessionMessage(reply))
                if msg is not None:
                    await read_send.send(SessionMessage(msg))

    async def writer() -> None:
        broken = False
        async with write_recv:
            async for sm in write_recv:
                if broken:
                    continue  # the client is gone: the server winds down at the end of input
                try:
                    await anyio.to_thread.run_sync(_write, sink, encode(sm.message))
                except OSError:
                    broken = True

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            yield read_recv, write_send
    finally:
        if restore is not None:
            restore()


# ---------------------------------------------------------------------- the server
def _validation_line(e: ValidationError) -> str:
    """A pydantic refusal of a tool's arguments as one line: the first field, why, what it got."""
    errors = e.errors(include_url=False)
    if not errors:
        return "its arguments do not match the tool's schema"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "arguments"
    got = f" (got {show(first['input'])})" if "input" in first and first.get("type") != "missing" else ""
    more = f"; and {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{got}{more}"


class AnsweringServer(MCPServer[object]):
    """An MCPServer whose every refusal keeps its reason, served on :func:`stdio_wire`.

    The SDK shows a client only the text of a ``ToolError``; anything else a tool raises becomes
    ``Error executing tool NAME`` and a traceback on stderr. Here a ledger refusal (``WardenError``)
    and an argument the tool's schema refuses (pydantic) are tool errors carrying their one line;
    any other exception is left to the SDK (a crash: its text stays on the server)."""

    async def call_tool(self, name: str, arguments: JsonObject,
                        context: Context[object, object] | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            cause = e.__cause__
            if isinstance(cause, WardenError):
                why = str(cause).removeprefix(f"{name}: ")  # the ledger's call may be named as the tool is
                raise ToolError(one_line(f"Error executing tool {name}: {why}")) from None
            if isinstance(cause, ValidationError):
                raise ToolError(one_line(f"Error executing tool {name}: {_validation_line(cause)}")) from cause
            if type(e) is ToolError:
                raise ToolError(one_line(str(e))) from cause
            raise

    async def read_resource(self, uri: AnyUrl | str, context: Context[object, object] | None = None,
                            ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        try:
            return await super().read_resource(uri, context)
        except UnexpectedResourceError as e:
            if isinstance(e.__cause__, WardenError):
                raise ResourceError(one_line(f"Error reading resource {uri}: {e.__cause__}")) from None
            raise

    async def run_stdio_async(self) -> None:
        async with stdio_wire() as (read_stream, write_stream):
            low = self._lowlevel_server  # the SDK's own run_stdio_async does this with its transport
            await low.run(read_stream, write_stream, low.create_initialization_options())

"""Agents' JSON event streams read as steps: ``warden run --json-stream claude|codex``.

Each stdout line of the command is one JSON object (JSON Lines); a line that is not is kept as a
plain output line. A parser turns the events into :class:`Step` values — what the agent did and
what it learned (an *action* and its *result*), the tokens it spent, the money it reports, its
progress and its last words — and never raises on what it is given: the stream is untrusted.

Claude Code, ``claude -p --output-format stream-json --verbose`` (the event shapes of
https://code.claude.com/docs/en/headless and the Agent SDK's ``SDKMessage`` reference):

* ``assistant`` — ``message.content`` blocks: ``tool_use`` (``id``, ``name``, ``input``) opens an
  action, ``text`` is what the agent said; ``message.usage`` counts once per ``message.id``
  (the stream repeats a message's usage on each of its content blocks);
* ``user`` — ``tool_result`` blocks (``tool_use_id``, ``content`` string or text blocks,
  ``is_error``) close the action of that id;
* ``result`` — the end: ``result`` text, ``is_error``, ``total_cost_usd`` and the session's
  ``usage`` (cumulative: what the per-message counts missed is added here).

Codex, ``codex exec --json`` (``ThreadEvent`` in openai/codex ``codex-rs/exec/src/exec_events.rs``):

* ``item.started`` / ``item.completed`` with ``item.type`` ``command_execution`` (``command``,
  ``aggregated_output``, ``exit_code``, ``status``), ``mcp_tool_call`` (``server``, ``tool``,
  ``arguments``, ``result``, ``error``), ``file_change`` (``changes``: ``path``, ``kind``),
  ``web_search`` (``query``), ``agent_message`` (``text``), ``todo_list`` (``items`` with
  ``completed``: the progress), ``error`` (``message``); ``reasoning`` is left out;
* ``turn.completed`` — ``usage`` (``input_tokens``, ``cached_input_tokens`` — part of the input —,
  ``output_tokens``); ``turn.failed`` / ``error`` — a failure's message.

Tokens are every token the model processed: Claude's ``input_tokens`` (uncached) +
``cache_creation_input_tokens`` + ``cache_read_input_tokens`` + ``output_tokens``; Codex's
``input_tokens`` (cached ones included) + ``output_tokens``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Mapping

from store.errors import Refused
from store.jsontypes import JsonArray, JsonMapping

__all__ = ["FORMATS", "StreamParser", "Step", "parser_for", "summarize"]

FORMATS = ("claude", "codex")
SUMMARY_CAP = 400  # characters of an action's or result's summary
PENDING_CAP = 1000  # actions waiting for their result (a stream that never closes them is bounded)


@dataclass(frozen=True)
class Step:
    """One thing the stream said. ``action``/``result``: a finished (or closed) action and what it
    gave; ``text``: what the agent said; ``tokens``: spent since the previous step; ``cost_usd``:
    the agent's own cumulative figure; ``units``: (done, total) progress; ``final``: the agent's
    last answer; ``failed``: a failure it reported; ``line``: a plain output line (not JSON)."""

    action: str | None = None
    result: str | None = None
    text: str | None = None
    tokens: int = 0
    cost_usd: float | None = None
    units: tuple[float, float] | None = None
    final: str | None = None
    failed: str | None = None
    line: str | None = None


def summarize(value: object, cap: int = SUMMARY_CAP) -> str:
    """A JSON value as one short line: a string as it is, anything else as compact JSON."""
    if isinstance(value, str):
        s = value
    else:
        try:
            s = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
        except (TypeError, ValueError, RecursionError):
            s = f"[{type(value).__name__} not shown]"
    s = " ".join(s.split())
    return s if len(s) <= cap else s[: cap - 1] + "…"


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        return 0
    return int(min(value, 10**12))


def _dict(value: object) -> JsonMapping:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> JsonArray:
    return value if isinstance(value, list) else []


@dataclass
class StreamParser:
    """A parser of one format; :meth:`feed` one line, get its steps."""

    fmt: str
    pending: dict[str, str] = field(default_factory=dict)  # action id → its summary
    seen_messages: set[str] = field(default_factory=set)
    tokens_counted: int = 0

    def feed(self, line: str) -> list[Step]:
        text = line.strip()
        if not text.startswith("{"):
            return [Step(line=line)] if text else []
        try:
            event = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
            return [Step(line=line)]
        if not isinstance(event, Mapping):
            return [Step(line=line)]
        handler: Callable[[JsonMapping], list[Step]] = self._claude if self.fmt == "claude" else self._codex
        try:
            return handler(event)
        except (TypeError, ValueError, AttributeError, RecursionError):  # a shape nobody documented
            return [Step(line=summarize(event))]

    # ------------------------------------------------------------------ helpers
    def _open(self, ident: object, summary: str) -> None:
        if len(self.pending) >= PENDING_CAP:
            self.pending.pop(next(iter(self.pending)))
        self.pending[str(ident)] = summary

    def _close(self, ident: object, fallback: str) -> str:
        return self.pending.pop(str(ident), fallback)

    def _count(self, tokens: int) -> int:
        self.tokens_counted += tokens
        return tokens

    # ------------------------------------------------------------------ Claude Code
    def _claude(self, e: JsonMapping) -> list[Step]:
        kind = e.get("type")
        msg = _dict(e.get("message"))
        out: list[Step] = []
        if kind == "assistant":
            mid = msg.get("id")
            usage = _dict(msg.get("usage"))
            tokens = 0
            if usage and (not isinstance(mid, str) or mid not in self.seen_messages):
                if isinstance(mid, str):
                    self.seen_messages.add(mid)
                tokens = self._count(_claude_tokens(usage))
            for block in _list(msg.get("content")):
                b = _dict(block)
                if b.get("type") == "tool_use":
                    self._open(b.get("id"), f"{summarize(b.get('name'), 80)}({summarize(b.get('input'))})")
                elif b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"].strip():
                    out.append(Step(text=summarize(b["text"], 2000)))
            if tokens:
                out.append(Step(tokens=tokens))
        elif kind == "user":
            for block in _list(msg.get("content")):
                b = _dict(block)
                if b.get("type") != "tool_result":
                    continue
                action = self._close(b.get("tool_use_id"), "a tool call")
                result = _tool_result_text(b.get("content"))
                if b.get("is_error") is True:
                    result = "error: " + result
                out.append(Step(action=action, result=summarize(result)))
        elif kind == "result":
            usage = _dict(e.get("usage"))
            total = _claude_tokens(usage) if usage else 0
            extra = max(0, total - self.tokens_counted)
            self._count(extra)
            cost = e.get("total_cost_usd")
            final = e.get("result") if isinstance(e.get("result"), str) else None
            failed = None
            if e.get("is_error") is True or str(e.get("subtype", "success")) != "success":
                failed = summarize(final or e.get("subtype") or "the session ended in error")
            out.append(Step(tokens=extra, cost_usd=float(cost) if isinstance(cost, (int, float))
                            and not isinstance(cost, bool) and cost == cost and cost >= 0 else None,
                            final=summarize(final, 4000) if final else None, failed=failed))
        elif kind == "system" and e.get("subtype") == "init":
            out.append(Step(text=f"session {summarize(e.get('session_id'), 80)} started "
                                 f"(model {summarize(e.get('model'), 80)})"))
        return out

    # ------------------------------------------------------------------ Codex
    def _codex(self, e: JsonMapping) -> list[Step]:
        kind = e.get("type")
        if kind in ("item.started", "item.updated", "item.completed"):
            return self._codex_item(str(kind), _dict(e.get("item")))
        if kind == "turn.completed":
            usage = _dict(e.get("usage"))
            tokens = _int(usage.get("input_tokens")) + _int(usage.get("output_tokens"))
            return [Step(tokens=self._count(tokens))] if tokens else []
        if kind in ("turn.failed", "error"):
            err = _dict(e.get("error")) if kind == "turn.failed" else e
            return [Step(failed=summarize(err.get("message") or kind))]
        if kind == "thread.started":
            return [Step(text=f"thread {summarize(e.get('thread_id'), 80)} started")]
        return []

    def _codex_item(self, kind: str, item: JsonMapping) -> list[Step]:
        itype = item.get("type")
        ident = item.get("id")
        done = kind == "item.completed"
        if itype == "command_execution":
            action = f"run: {summarize(item.get('command'))}"
            if not done:
                self._open(ident, action)
                return []
            code = item.get("exit_code")
            out = summarize(item.get("aggregated_output") or "")
            return [Step(action=self._close(ident, action),
                         result=f"exit {code if isinstance(code, int) else '?'} "
                                f"({summarize(item.get('status'), 20)}): {out}")]
        if itype == "mcp_tool_call":
            action = f"{summarize(item.get('server'), 80)}.{summarize(item.get('tool'), 80)}" \
                     f"({summarize(item.get('arguments'))})"
            if not done:
                self._open(ident, action)
                return []
            err = _dict(item.get("error")).get("message")
            result = f"error: {summarize(err)}" if err else summarize(_dict(item.get("result")).get("content"))
            return [Step(action=self._close(ident, action), result=result)]
        if not done:
            return []
        if itype == "file_change":
            changes = ", ".join(f"{summarize(_dict(c).get('kind'), 10)} {summarize(_dict(c).get('path'), 200)}"
                                for c in _list(item.get("changes")))
            return [Step(action="edit files", result=f"{summarize(changes)} ({summarize(item.get('status'), 20)})")]
        if itype == "web_search":
            return [Step(action=f"search: {summarize(item.get('query'))}", result="searched")]
        if itype == "agent_message" and isinstance(item.get("text"), str):
            return [Step(text=summarize(item["text"], 2000), final=summarize(item["text"], 4000))]
        if itype == "todo_list":
            items = [_dict(i) for i in _list(item.get("items"))]
            if items:
                done_n = sum(1 for i in items if i.get("completed") is True)
                return [Step(units=(float(done_n), float(len(items))))]
        if itype == "error":
            return [Step(text=f"error: {summarize(item.get('message'))}")]
        return []


def _claude_tokens(usage: JsonMapping) -> int:
    return (_int(usage.get("input_tokens")) + _int(usage.get("cache_creation_input_tokens"))
            + _int(usage.get("cache_read_input_tokens")) + _int(usage.get("output_tokens")))


def _tool_result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in _list(content):
        b = _dict(block)
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            parts.append(b["text"])
        elif b:
            parts.append(f"[{summarize(b.get('type'), 20)}]")
    return "\n".join(parts)


def parser_for(fmt: str) -> StreamParser:
    if fmt not in FORMATS:
        raise Refused(f"unknown stream format {fmt!r}: one of {', '.join(FORMATS)}")
    return StreamParser(fmt)

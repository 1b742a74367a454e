"""What a hook-driven session spent and what its refused calls were told, read from the client's
own transcript (the ``transcript_path`` every hook payload names).

* **Claude Code** writes one JSON line per message (``~/.claude/projects/…/<session>.jsonl``):
  ``assistant`` lines carry ``message.usage`` (``input_tokens``, ``cache_creation_input_tokens``,
  ``cache_read_input_tokens``, ``output_tokens``), several lines of one message share its
  ``message.id``; ``user`` lines carry ``tool_result`` blocks (``tool_use_id``, ``content``).
* **Codex** writes a rollout (``~/.codex/sessions/…/rollout-….jsonl``): ``event_msg`` lines of
  type ``token_count`` carry the session's running ``total_token_usage``; ``response_item`` lines
  of type ``function_call_output`` carry a call's output (``call_id``).

Tokens are every token processed — cached input included, each message counted once — as
``warden run --json-stream`` counts them. The transcript carries no cost: budgets act on tokens.

The path comes from the agent's payload, so it is untrusted: it must be absolute, its last
component is opened without following a link, only a regular file is read (never a FIFO or a
device: ``O_NONBLOCK`` and a ``fstat`` check), and each reading takes at most :data:`READ_CAP`
bytes from where the previous one stopped (the offset is kept in the session file): a hook never
reads the same line twice and never reads without bound.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field

from store.jsontypes import JsonObject

__all__ = ["READ_CAP", "Reading", "read_new"]

READ_CAP = 8 * 1024 * 1024  # bytes read from a transcript by one hook
LINE_CAP = 2 * 1024 * 1024  # a longer line (a huge tool result) is skipped whole
RESULT_CAP = 4000  # characters of a tool result kept
COUNTED_KEEP = 256  # message ids remembered (their tokens are counted once)


@dataclass
class Reading:
    """What was new in the transcript: ``tokens`` since the last reading, ``results`` for the
    tool calls asked about, where to read from next time, what was counted, and why nothing was
    read (``problem``)."""

    tokens: int = 0
    results: dict[str, str] = field(default_factory=dict)
    offset: int = 0
    counted: dict[str, int] = field(default_factory=dict)
    problem: str | None = None


def _open(path: str) -> tuple[int | None, str | None]:
    if not path or not os.path.isabs(path) or "\0" in path:
        return None, "the transcript path is not an absolute path"
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        return None, f"cannot open the transcript ({e.strerror or e})"
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None, "the transcript is not a regular file"
    return fd, None


def read_new(path: str, offset: int, counted: dict[str, int], want: set[str] | frozenset[str] = frozenset()) -> Reading:
    """Read what the transcript gained since ``offset``: new tokens (``counted`` holds the tokens
    already counted per message, and ``"_total"`` for a running total), and the results of the
    calls in ``want`` found there."""
    out = Reading(offset=offset, counted=dict(counted))
    fd, problem = _open(path)
    if fd is None:
        out.problem = problem
        return out
    try:
        size = os.fstat(fd).st_size
        if size < offset:  # rewritten: read it again (what was counted stays counted)
            offset = 0
        os.lseek(fd, offset, os.SEEK_SET)
        data = os.read(fd, min(READ_CAP, max(0, size - offset)))
    except OSError as e:
        out.problem = f"cannot read the transcript ({e.strerror or e})"
        return out
    finally:
        os.close(fd)
    end = data.rfind(b"\n")
    if end < 0:
        # no whole line yet; a line longer than a reading is skipped rather than read for ever
        out.offset = offset + len(data) if len(data) >= READ_CAP else offset
        return out
    out.offset = offset + end + 1
    for raw in data[:end].split(b"\n"):
        if not raw.strip() or len(raw) > LINE_CAP:
            continue
        try:
            line = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(line, dict):
            _take(line, out, want)
    if len(out.counted) > COUNTED_KEEP:  # the oldest messages will not be written again
        keep = list(out.counted.items())[-COUNTED_KEEP:]
        out.counted = dict(keep)
        if "_total" in counted and "_total" not in out.counted:
            out.counted["_total"] = counted["_total"]
    return out


def _num(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def _take(line: JsonObject, out: Reading, want: set[str] | frozenset[str]) -> None:
    kind = line.get("type")
    payload = line.get("payload")
    message = line.get("message")
    if kind == "assistant" and isinstance(message, dict):  # Claude Code
        usage = message.get("usage")
        mid = message.get("id")
        if isinstance(usage, dict) and isinstance(mid, str):
            total = sum(_num(usage.get(k)) for k in ("input_tokens", "cache_creation_input_tokens",
                                                     "cache_read_input_tokens", "output_tokens"))
            seen = out.counted.get(mid, 0)
            if total > seen:
                out.tokens += total - seen
                out.counted[mid] = total
    elif kind == "user" and isinstance(message, dict) and want:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id") in want:
                out.results[str(block["tool_use_id"])] = _flat(block.get("content"))
    elif kind == "event_msg" and isinstance(payload, dict) and payload.get("type") == "token_count":  # Codex
        info = payload.get("info")
        usage = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(usage, dict):
            total = _num(usage.get("total_tokens")) or (_num(usage.get("input_tokens"))
                                                         + _num(usage.get("output_tokens")))
            seen = out.counted.get("_total", 0)
            if total > seen:
                out.tokens += total - seen
                out.counted["_total"] = total
    elif kind == "response_item" and isinstance(payload, dict) and want:
        if payload.get("type") == "function_call_output" and payload.get("call_id") in want:
            out.results[str(payload["call_id"])] = _flat(payload.get("output"))


def _flat(content: object) -> str:
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(_flat(c.get("text") if isinstance(c, dict) else c) for c in content)
    elif isinstance(content, dict):
        text = _flat(content.get("content") or content.get("text") or "")
    else:
        text = "" if content is None else str(content)
    return text[:RESULT_CAP]

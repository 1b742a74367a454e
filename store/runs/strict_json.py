"""Strict JSON for files an agent wrote: UTF-8 only, no duplicate keys, no NaN/Infinity, bounded
nesting, and what parses writes back as valid JSON. Problems are returned, never raised."""

from __future__ import annotations

import json
import re
from typing import NoReturn

from store.jsontypes import JsonObject, JsonValue

JSON_CAP = 1024 * 1024
"""Largest JSON file read (bytes). A bigger one is reported, never parsed."""

MAX_JSON_DEPTH = 64
"""Deepest JSON nesting accepted (arrays + objects)."""


class _JsonProblem(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    out: JsonObject = {}
    for key, value in pairs:
        if key in out:
            raise _JsonProblem(f"duplicate key {json.dumps(key)[:60]}")
        out[key] = value
    return out


def _no_constants(name: str) -> NoReturn:
    raise _JsonProblem(f"{name} is not JSON")


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def _nesting_depth(text: str) -> int:
    """Deepest bracket nesting outside string literals (computed without recursion)."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(_STRINGS.sub('""', text)):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def parse_json(data: bytes) -> tuple[JsonValue, str | None]:
    """Parse strict JSON. Returns ``(value, None)`` or ``(None, problem)``; never raises."""
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 (byte {e.start})"
    if text.startswith("\ufeff"):
        return None, "malformed JSON: starts with a byte-order mark"
    if _nesting_depth(text) > MAX_JSON_DEPTH:
        return None, f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants
        )
    except _JsonProblem as e:
        return None, f"malformed JSON: {e}"
    except json.JSONDecodeError as e:
        return None, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}"
    except (ValueError, RecursionError) as e:  # e.g. an integer of too many digits
        return None, f"malformed JSON: {str(e).splitlines()[0][:120]}"
    try:  # what parsed must write back as finite, valid UTF-8 JSON
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # (a ValueError too: test it first)
        return None, "malformed JSON: a lone surrogate escape (not valid Unicode)"
    except ValueError:
        return None, "malformed JSON: a number out of range (overflows to infinity)"
    return value, None

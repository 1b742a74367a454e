"""Checks of values that come from outside — agents, operators, scripts — before anything is written.

Each check raises :class:`~store.errors.InvalidValue` (a :class:`~store.errors.Refused`) with one
line that names the argument and says what is allowed, or returns the value. They never raise a
plain ``TypeError`` / ``ValueError`` / ``OverflowError``, and they run before any transaction, so a
refused call writes nothing. ``store/checked.py`` applies them to every argument of the
public ``Ledger`` API; ``Budget`` and ``NodeSpec`` check themselves when built.

The rules (docs/security.md lists them too):

- **ids** are matched whole (``re.fullmatch``; a trailing newline never passes): a task id is
  1-64 of ``A-Z a-z 0-9 . _ -``; a node key 1-200 of those and ``: / @ +``; a handoff id is
  decimal digits. Ids are checked strictly where a thing is *created*; a lookup only needs a
  string (an unknown one is ``NotFound``), so a ledger written by an older, laxer Warden stays
  usable.
- **names** (worker, actor, operator, node kind, effect key, handoff option id) are one line of
  1-200 characters (a kind: 1-64): no line break and no NUL. Other control characters are stored
  as given and always shown escaped (``store/text.py``).
- **text** (titles, questions, labels, errors, notes, observations, answers, reasons...) is any
  string that can be stored: no lone surrogate, and no NUL on PostgreSQL (it cannot store one).
- **numbers** are real numbers (not bools), finite, and inside a documented range.
- **JSON values** (inputs, outputs, preconditions, context, payloads) are ``None``, bools,
  64-bit integers, finite floats, strings, lists/tuples and dicts with string keys, nested at
  most :data:`JSON_MAX_DEPTH` deep.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping, Sized
from typing import TypeVar

from store.errors import InvalidValue
from store.text import safe_line

TASK_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
NODE_KEY_RE = re.compile(r"[A-Za-z0-9._:/@+-]{1,200}")
HANDOFF_ID_RE = re.compile(r"[0-9]{1,18}")
ORIGIN_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
# Line breaks in every sense Python's str.splitlines knows, and NUL.
_NOT_IN_NAMES = re.compile("[\x00\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
T = TypeVar("T")  # a value returned as it came, once checked
_SURROGATE = re.compile("[\ud800-\udfff]")

NAME_MAX = 200
KIND_MAX = 64
INT64_MAX = 2**63 - 1
JSON_MAX_DEPTH = 64

# Ranges (inclusive unless said): every one is documented in docs/security.md.
# A lease or a delay ends at a time an ISO string can show (now + 10^11 s is before year 9999):
# nothing shorter is nonsense enough to refuse (tests hold a lease "forever" with 10^9).
LEASE_S_MAX = 1e11  # a lease, lease_s > 0
DELAY_S_MAX = 1e11  # retry_after_s, timeouts, >= 0
WAIT_S_MAX = 7 * 24 * 3600.0  # a declared wait (heartbeat wait_s), > 0: longer is a park, not a wait
DURATION_S_MAX = 1e11  # estimates and wall-clock budgets
TOKENS_MAX = 10**15  # tokens in one report, a budget, an estimate
UNITS_MAX = 1e15  # units_done / units_total
COUNT_MAX = 1_000_000  # max_claims, max_repairs, limits
CONDITIONS_MAX = 100  # wake conditions of one park
CONDITION_MAX = 4200  # characters of one wake condition (a file: path up to PATH_MAX and its prefix)
TIME_MAX = 253402300799.0  # 9999-12-31T23:59:59Z, the last time an ISO string can show
TIME_MIN = -62135596800.0  # 0001-01-01T00:00:00Z, the first (an ISO time of year 1 with an offset east of UTC is earlier)


def show(value: object, limit: int = 60) -> str:
    """A short, safe picture of a refused value for the one-line message."""
    if isinstance(value, str):
        return safe_line(repr(value if len(value) <= limit else value[:limit] + "…"))
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**40:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    if value is None or isinstance(value, (bool, int, float)):
        text = repr(value)
        return safe_line(text if len(text) <= limit else text[:limit] + "…")
    size = ""
    if isinstance(value, Sized):
        try:
            size = f" of {len(value)}"
        except Exception:
            pass
    return f"a {safe_line(type(value).__name__)}{size}"


def refuse(arg: str, problem: str, value: object = ..., *, where: str = "") -> InvalidValue:
    """The error for argument ``arg``: ``"where: arg problem (got value)"``."""
    got = "" if value is ... else f" (got {show(value)})"
    return InvalidValue(f"{_at(where)}{arg} {problem}{got}", arg)


def _at(where: str) -> str:
    return f"{where}: " if where else ""


# ---------------------------------------------------------------------- strings
def _string(arg: str, value: object, where: str) -> str:
    if not isinstance(value, str):
        raise refuse(arg, "must be a string", value, where=where)
    if _SURROGATE.search(value):
        raise refuse(arg, "contains a lone surrogate (not valid Unicode text)", value, where=where)
    return value


def task_id(arg: str, value: object, where: str = "") -> str:
    """A new task's id: 1-64 of ``A-Z a-z 0-9 . _ -``, matched whole."""
    if not isinstance(value, str) or not TASK_ID_RE.fullmatch(value):
        raise InvalidValue(f"{_at(where)}invalid task id {show(value)} ({arg}): use 1-64 of A-Z a-z 0-9 . _ -", arg)
    return value


def node_key(arg: str, value: object, where: str = "") -> str:
    """A new node's key: 1-200 of ``A-Z a-z 0-9 . _ - : / @ +``, matched whole."""
    if not isinstance(value, str) or not NODE_KEY_RE.fullmatch(value):
        raise InvalidValue(f"{_at(where)}invalid node key {show(value)} ({arg}): use 1-200 of A-Z a-z 0-9 . _ - : / @ +",
                           arg)
    return value


def handoff_id(arg: str, value: object, where: str = "") -> str:
    """A handoff id: decimal digits (or an int); returned as the canonical string."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 < int(value) <= INT64_MAX:
        return str(int(value))
    if isinstance(value, str) and HANDOFF_ID_RE.fullmatch(value):
        return str(int(value))
    raise refuse(arg, "is not a handoff id (a number such as 12)", value, where=where)


def origin(arg: str, value: object, where: str = "") -> str | None:
    """Which integration made a task (``python``, ``langgraph``, ``mcp``, ``run``, ``claude``, or a
    new one's name): None, or 1-32 of ``a-z 0-9 _ -`` starting with a letter."""
    if value is None:
        return None
    if not isinstance(value, str) or not ORIGIN_RE.fullmatch(value):
        raise refuse(arg, "must be an integration's name: 1-32 of a-z 0-9 _ - starting with a letter", value,
                     where=where)
    return value


def lookup(arg: str, value: object, where: str = "", *, optional: bool = False) -> str | None:
    """The id or key of something that should exist: any non-empty string (unknown → NotFound)."""
    if value is None and optional:
        return None
    s = _string(arg, value, where)
    if not s or len(s) > 1000 or "\x00" in s:
        raise refuse(arg, "must be a non-empty id of at most 1000 characters, without NUL", value, where=where)
    return s


def name(arg: str, value: object, where: str = "", *, limit: int = NAME_MAX, empty: bool = False,
         optional: bool = False) -> str | None:
    """A name (worker, actor, operator, kind, effect key, option id): one line, 1-``limit`` chars."""
    if value is None and optional:
        return None
    s = _string(arg, value, where)
    if not s.strip() and not (empty and s == ""):
        raise refuse(arg, "must not be empty", value, where=where)
    if len(s) > limit:
        raise refuse(arg, f"is longer than {limit} characters", value, where=where)
    if _NOT_IN_NAMES.search(s):
        raise refuse(arg, "must be one line (no line break or NUL character)", value, where=where)
    return s


def text(arg: str, value: object, where: str = "", *, optional: bool = False, nonblank: bool = False,
         nul: bool = True) -> str | None:
    """Free text: any storable string (``nul=False``: no NUL, for PostgreSQL)."""
    if value is None and optional:
        return None
    s = _string(arg, value, where)
    if nonblank and not s.strip():
        raise refuse(arg, "must not be empty", value, where=where)
    if not nul and "\x00" in s:
        raise refuse(arg, "contains a NUL character, which PostgreSQL cannot store", value, where=where)
    return s


def strings(arg: str, value: object, where: str = "", *, each: Callable[[str, object, str], object] | None = None, optional: bool = True) -> tuple[str, ...]:
    """A list or tuple of strings (a bare string is refused: it is not a list of them)."""
    if value is None and optional:
        return ()
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise refuse(arg, "must be a list of strings", value, where=where)
    out = tuple(value)
    for i, item in enumerate(out):
        if each is not None:
            each(f"{arg}[{i}]", item, where)
        else:
            _string(f"{arg}[{i}]", item, where)
    return out


def one_of(arg: str, value: object, allowed: Iterable[str], where: str = "", *, optional: bool = False,
           what: str = "") -> str | None:
    """One of ``allowed``: ``"unknown <what> 'x' (arg): one of a, b"``."""
    if value is None and optional:
        return None
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        what = what or arg.replace("_", " ")
        raise InvalidValue(f"{_at(where)}unknown {what} {show(value)} ({arg}): one of {', '.join(allowed)}", arg)
    return value


# ---------------------------------------------------------------------- numbers and flags
def number(arg: str, value: object, where: str = "", *, lo: float = 0.0, hi: float, lo_open: bool = False,
           optional: bool = True, integer: bool = False) -> float | int | None:
    """A finite real number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); ``integer``: whole."""
    if value is None and optional:
        return None
    kind = "a whole number" if integer else "a number"
    low = f"above {_fmt(lo)}" if lo_open else f"at least {_fmt(lo)}"
    rule = f"must be {kind} {low} and at most {_fmt(hi)}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise refuse(arg, rule, value, where=where)
    if isinstance(value, numbers.Integral):
        n = int(value)
        if not (lo < n if lo_open else lo <= n) or n > hi:
            raise refuse(arg, rule, value, where=where)
        return n
    try:
        f = float(value)
    except (OverflowError, ValueError, TypeError):
        raise refuse(arg, rule, value, where=where) from None
    if not math.isfinite(f) or not (lo < f if lo_open else lo <= f) or f > hi:
        raise refuse(arg, rule, value, where=where)
    if integer:
        if not f.is_integer():
            raise refuse(arg, rule, value, where=where)
        return int(f)
    return f


def _fmt(x: float) -> str:
    if float(x).is_integer():
        n = int(x)
        exp = len(str(n)) - 1
        return f"10^{exp}" if n >= 10**6 and n == 10**exp else str(n)
    return repr(float(x))


def flag(arg: str, value: object, where: str = "", *, optional: bool = False) -> bool | None:
    """A bool (0 and 1 are accepted as False and True)."""
    if value is None and optional:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and int(value) in (0, 1):
        return bool(value)
    raise refuse(arg, "must be True or False", value, where=where)


# ---------------------------------------------------------------------- JSON
def json_value(arg: str, value: T, where: str = "") -> T:
    """Refuse what cannot be stored as canonical JSON and read back the same (see the module doc)."""
    _json(arg, value, where, 0)
    return value


def json_object(arg: str, value: T, where: str = "", *, optional: bool = True) -> T:
    """A dict with string keys and JSON values (None → {})."""
    if value is None and optional:
        return value
    if not isinstance(value, Mapping):
        raise refuse(arg, "must be a dict with string keys", value, where=where)
    _json(arg, dict(value), where, 0)
    return value


def _json(path: str, v: object, where: str, depth: int) -> None:
    if depth > JSON_MAX_DEPTH:
        raise refuse(path, f"is nested more than {JSON_MAX_DEPTH} deep (or contains itself)", where=where)
    if v is None or isinstance(v, bool):
        return
    if isinstance(v, str):
        if _SURROGATE.search(v):
            raise refuse(path, "contains a lone surrogate (not valid Unicode text)", v, where=where)
        return
    if isinstance(v, numbers.Integral):
        if not -INT64_MAX - 1 <= int(v) <= INT64_MAX:
            raise refuse(path, "is outside the 64-bit integer range JSON readers agree on", v, where=where)
        return
    if isinstance(v, float):
        if not math.isfinite(v):
            raise refuse(path, "must be a finite number (JSON has no NaN or infinity)", v, where=where)
        return
    if isinstance(v, (list, tuple)):
        for i, item in enumerate(v):
            _json(f"{path}[{i}]", item, where, depth + 1)
        return
    if isinstance(v, dict):
        for k, item in v.items():
            if not isinstance(k, str):
                raise refuse(path, f"has a key that is not a string: {show(k)}", where=where)
            if _SURROGATE.search(k):
                raise refuse(path, "has a key with a lone surrogate (not valid Unicode text)", k, where=where)
            _json(f"{path}[{safe_line(repr(k[:40]))}]", item, where, depth + 1)
        return
    raise refuse(path, "is not a JSON value (use None, bool, int, float, str, list or dict)", v, where=where)

"""A store refusal never quotes a value raw.

A refusal used to quote what it refused as it came (``wake condition at:2h\\u202e`` carried a real
RIGHT-TO-LEFT OVERRIDE to the terminal, reversing the rest of the line). Now ``WardenError`` makes
its one line safe once (``store.text.safe_line``), whatever the raising code put in it, and the CLI
line goes through it again. Each unsafe character below (bidi overrides and isolates, marks,
zero-width, a line separator, C0/C1 controls, an ESC sequence, a tag character, a lone surrogate)
is put at the start, the middle and the end of a value in every refusal path that quotes one; the
message must hold no unsafe character and must show the escape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from store import Ledger, WardenError
from store.errors import InvalidValue, LeaseLost, NotFound, Refused
from store.text import escape_char, is_unsafe

ROOT = str(Path(__file__).resolve().parents[2])

UNSAFE = ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c", "\u200b", "\ufeff", "\u2028", "\u2029",
          "\x1b", "\x9b", "\x07", "\x00", "\r", "\t", "\U000e0041", "\ud800", "\x7f"]
PLACES = ("start", "middle", "end")


def placed(ch: str, where: str, base: str = "2hx") -> str:
    return {"start": ch + base, "middle": base[:1] + ch + base[1:], "end": base + ch}[where]


def assert_safe(message: str, ch: str, where: str = "middle") -> None:
    bad = [c for c in message if is_unsafe(c) or c in "\n\t"]
    assert not bad, f"raw {bad!r} in {message!r}"
    if ch.isspace() and where != "middle":
        return  # a value's surrounding white space is stripped before it is read: not quoted at all
    assert escape_char(ch) in message or ch in "\x00\r" and "line" in message, message


@pytest.fixture(scope="module")
def led(tmp_path_factory) -> Ledger:
    path = str(tmp_path_factory.mktemp("refusals") / "l.db")
    led = Ledger.open(path)
    led.create_task("t")
    led.add_node("t", "a", kind="work")
    yield led
    led.close()


# Each path: (a call that refuses the value v, the exception class expected).
PATHS: dict[str, tuple[Callable[[Ledger, str], object], type[WardenError]]] = {
    "until": (lambda led, v: led.plan_park("t", reason="r", until=v), Refused),
    "wake at:": (lambda led, v: led.plan_park("t", reason="r", wake_on=f"at:{v}"), Refused),
    "wake kind": (lambda led, v: led.plan_park("t", reason="r", wake_on=f"soon{v}"), Refused),
    "wake node:": (lambda led, v: led.plan_park("t", reason="r", wake_on=f"node:{v}"), Refused),
    "wake handoff:": (lambda led, v: led.plan_park("t", reason="r", wake_on=f"handoff:{v}"), Refused),
    "task lookup": (lambda led, v: led.task(f"t{v}"), NotFound),
    "node lookup": (lambda led, v: led.plan_rewind("t", f"a{v}", reason="r"), NotFound),
    "claim a task": (lambda led, v: led.claim(f"t{v}", "w", lease_s=5), NotFound),
    "new task id": (lambda led, v: led.create_task(f"t{v}"), InvalidValue),
    "new node key": (lambda led, v: led.add_node("t", f"b{v}", kind="work"), InvalidValue),
    "handoff id": (lambda led, v: led.plan_resolve(f"1{v}", option="yes"), NotFound),
    "postgres url": (lambda led, v: Ledger.open(f"postgresql://host:5x{v}/db"), WardenError),
    "missing file": (lambda led, v: Ledger.open(f"/nonexistent-dir/l{v}.db", create=False), WardenError),
}


@pytest.mark.parametrize("where", PLACES)
@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_refusal_quotes_the_value_escaped(led, path, where):
    call, expected = PATHS[path]
    for ch in UNSAFE:
        v = placed(ch, where)
        with pytest.raises(WardenError) as e:
            call(led, v)
        assert isinstance(e.value, (expected, InvalidValue)), (path, e.value)  # (NUL: refused before the lookup)
        for text in (str(e.value), e.value.message, e.value.args[0]):
            assert_safe(text, ch, where)


@pytest.mark.parametrize("ch", UNSAFE)
def test_the_error_type_itself_escapes_whatever_it_is_given(ch):
    for cls in (WardenError, Refused, NotFound, InvalidValue, LeaseLost):
        e = cls(f"refused {ch}x{ch}\nsecond line") if cls is not InvalidValue else cls(f"refused {ch}", "arg")
        assert_safe(str(e), ch)
        assert str(e) == str(cls(str(e)) if cls is not InvalidValue else cls(str(e), "arg"))  # escaping twice changes nothing


def test_a_value_with_backslashes_is_not_mangled():
    e = Refused(r"path C:\x1b\dir and \u202e typed by hand")
    assert str(e) == r"path C:\x1b\dir and \u202e typed by hand"


CLI_CASES = [
    (["park", "t", "--until", "2h\u202eevil", "--reason", "r", "--yes"], "\\u202e"),
    (["park", "t", "--until", "\u2066soon", "--reason", "r", "--yes"], "\\u2066"),
    (["park", "t", "--until", "2h\x1b]0;pwned\x07", "--reason", "r", "--yes"], "\\x1b"),
    (["park", "t", "--wake-on", "at:2h\u202e", "--reason", "r", "--yes"], "\\u202e"),
    (["graph", "t\u202e"], "\\u202e"),
    (["resume", "t\u200f", "--reason", "r", "--yes"], "\\u200f"),
    (["rewind", "t", "a\u061c", "--reason", "r", "--yes"], "\\u061c"),
]


def test_cli_refusal_lines_are_escaped(tmp_path):
    path = str(tmp_path / "l.db")
    with Ledger.open(path) as led:
        led.create_task("t")
        led.add_node("t", "a", kind="work")
    env = {**os.environ, "PYTHONPATH": ROOT, "WARDEN_LEDGER": path}
    for i, (argv, escape) in enumerate(CLI_CASES):
        for as_json in (False, True) if i < 2 else (False,):  # (each is a process: CI time)
            r = subprocess.run([sys.executable, "-m", "console", *argv, *(["--json"] if as_json else [])],
                               capture_output=True, timeout=120, cwd=str(tmp_path), env=env)
            assert r.returncode != 0, (argv, r)
            out = (r.stdout if as_json else r.stderr).decode("utf-8")
            if as_json and not out.strip():  # a usage error is one line on stderr even with --json
                out = r.stderr.decode("utf-8")
            assert "Traceback" not in out and len(out.strip().splitlines()) == 1, (argv, out)
            shown = json.loads(out)["error"]["message"] if as_json and out.lstrip().startswith("{") else out
            assert not [c for c in shown.strip() if is_unsafe(c)], (argv, shown)
            assert escape in (shown if not as_json else out), (argv, shown)

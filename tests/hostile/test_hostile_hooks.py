"""``warden hook claude`` under hostile payloads, for every event it handles.

Table-driven: :data:`PAYLOADS` holds one valid payload per event in ``claude_hooks.EVENTS`` (a new
event is one line there; the test fails until it has one). From each, payloads are generated per
run from fixed seeds — every field replaced by a wrong type, a lone surrogate, unsafe characters,
huge or deeply nested values, fields missing — and raw bytes that are not a payload at all. Each
asserts: an answer within :data:`ANSWER_S`; its stderr line one clear line; its stdout nothing or
one JSON object; a permission never allowed without the operator; a payload that cannot be read
changes nothing; what is kept is bounded. A few go through the real ``warden hook claude``
process (stdin closed, a 5 MB payload, invalid UTF-8, 100,000 levels deep) for the exit status and
the process's memory."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from store import Ledger
from store.adapters import claude_hooks
from store.adapters.claude_hooks import PAYLOAD_CAP, TEXT_CAP, HookAnswer, HookConfig, run_hook
from store.adapters.sessions import SessionStore
from tests.hostile.hostile_support import assert_one_clear_line, hostile_text
from tests.support.waiting import stretch

ROOT = Path(__file__).resolve().parents[2]
SEEDS = (3, 41)
ANSWER_S = 30.0  # the bound on one event's answer (the waits are configured to 0.05 s)
RSS_MAX_MB = 300.0

BASE = {"transcript_path": "/home/ana/.claude/projects/x.jsonl", "cwd": "/work/repo", "permission_mode": "default"}
PAYLOADS: dict[str, dict[str, Any]] = {
    "SessionStart": {"source": "startup"},
    "UserPromptSubmit": {"prompt": "fix the parser"},
    "PreToolUse": {"tool_name": "Bash", "tool_input": {"command": "pytest -q"}, "tool_use_id": "toolu_1"},
    "PermissionRequest": {"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}},
    "PostToolUse": {"tool_name": "Bash", "tool_input": {"command": "pytest -q"}, "tool_response": {"stdout": "ok"}},
    "PostToolUseFailure": {"tool_name": "Bash", "tool_input": {"command": "pytest -q"}, "error": "Exit code 1"},
    "PermissionDenied": {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}, "reason": "auto mode"},
    "Notification": {"message": "Claude needs your permission", "notification_type": "permission_prompt"},
    "Stop": {"last_assistant_message": "done", "stop_hook_active": False},
    "SessionEnd": {"reason": "exit"},
}
CFG = HookConfig(lease_s=3600, permission_wait_s=0.05, park_wait_s=0.05, poll_s=0.01)

UNSAFE = ["\x00", "\x1b[2J", "\x1b]52;c;cHduZWQ=\x07", "\x9b", "\u202e", "\u200b", "\ufeff", "\u2028", "\n", "\r"]
WRONG = [None, True, 0, -1, 1.5, 10**40, "", [], ["x"], {}, {"a": {"b": []}}]


def deep(n: int) -> str:
    return "[" * n + "]" * n


def payload_bytes(event: str, session: str, changes: dict[str, Any] | None = None, drop: str | None = None,
                  raw_field: tuple[str, str] | None = None) -> bytes:
    p = {**BASE, **PAYLOADS[event], "session_id": session, "hook_event_name": event, **(changes or {})}
    if drop is not None:
        p.pop(drop, None)
    text = json.dumps(p)
    if raw_field is not None:  # a value written as JSON text (a lone surrogate escape, deep nesting)
        name, raw = raw_field
        text = text[:-1] + f', "{name}": {raw}}}'
    return text.encode()


def values(rng: random.Random) -> list[Any]:
    """A sample (by the seed) of every class: wrong types, unsafe characters, huge, nested."""
    every = (list(WRONG) + [f"a{c}b" for c in UNSAFE] + [hostile_text(rng) for _ in range(2)]
             + ["x" * (TEXT_CAP * 3), {"command": hostile_text(rng, size=40)}, [hostile_text(rng)] * 30])
    return rng.sample(every, 7)


RAW = ['"a\\ud800b"', '"\\udfff"', deep(50), deep(5000), "NaN", "1e400"]
JUNK = [b"", b" ", b"null", b"[]", b'"SessionStart"', b"{", b"\xff\xfe{}", b"\xef\xbb\xbf{}", b"{}" * 10,
        b'{"hook_event_name": "PreToolUse"', b"[" * 100_000, b'{"hook_event_name": ' + b"[" * 100_000]


class Runner:
    def __init__(self, tmp_path: Path) -> None:
        self.path = str(tmp_path / "ledger.db")
        self.store = SessionStore(str(tmp_path / "sessions"))
        self.opened = 0

    def open(self) -> Ledger:
        self.opened += 1
        return Ledger.open(self.path)

    def fingerprint(self) -> Any:
        if not os.path.exists(self.path):
            return None
        with Ledger.open(self.path, read_only=True) as led:
            return led.last_event_id()

    def run(self, event: str | None, raw: bytes) -> HookAnswer:
        unreadable = claude_hooks.parse(raw)[0] is None
        before = self.fingerprint() if unreadable else None
        t0 = time.monotonic()
        answer = run_hook(self.open, self.store, CFG, raw)
        assert time.monotonic() - t0 < stretch(ANSWER_S), (event, raw[:120])
        assert answer.exit_code in (0, 1, 2), answer
        if answer.message is not None:
            assert_one_clear_line(answer.message)
        if answer.output is not None:
            line = json.dumps(answer.output, ensure_ascii=True)
            assert "\n" not in line and isinstance(json.loads(line), dict)
        hso = (answer.output or {}).get("hookSpecificOutput") or {}
        # never allowed without the operator: a denial, or exit 2 (Claude Code's blocking error,
        # which denies) when the event itself could not be read
        if hso.get("hookEventName") == "PermissionRequest":
            assert hso["decision"]["behavior"] == "deny", answer
        elif event == "PermissionRequest" and unreadable:
            assert answer.exit_code == 2 and answer.output is None, answer
        if hso.get("hookEventName") == "PreToolUse":
            assert hso.get("permissionDecision") in (None, "deny"), answer
        elif event == "PreToolUse" and unreadable:
            assert answer.exit_code == 2 and answer.output is None, answer
        if unreadable:
            assert answer.message and self.fingerprint() == before, (event, raw[:120])
        return answer


def test_every_event_has_its_line_in_the_table() -> None:
    assert set(PAYLOADS) == set(claude_hooks.EVENTS), "a new hook event: add its valid payload to PAYLOADS"


@pytest.mark.parametrize("seed", SEEDS)
def test_hostile_payloads_of_every_event_are_answered_safely(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    r = Runner(tmp_path)
    cases = 0
    for event in claude_hooks.EVENTS:
        session = f"s-{seed}-{event}"
        r.run(event, payload_bytes("SessionStart", session))  # a session to work in
        fields = sorted({*PAYLOADS[event], "session_id", "cwd", "hook_event_name", "transcript_path"})
        for field in fields:
            r.run(event, payload_bytes(event, session, drop=field))
            for v in values(rng):
                r.run(event, payload_bytes(event, session, {field: v}))
                cases += 1
            for raw in rng.sample(RAW, 2):
                r.run(event, payload_bytes(event, session, drop=field, raw_field=(field, raw)))
                cases += 1
        for junk in rng.sample(JUNK, 3):
            r.run(None, junk)
        r.run(event, payload_bytes(event, session, {"tool_input": {"x": "y" * (PAYLOAD_CAP + 10)}}))
    assert cases > 250, cases
    # what was kept is bounded: no observation, note or output longer than the hook's caps
    with Ledger.open(r.path, read_only=True) as led:
        for t in led.tasks():
            for n in led.graph(t.task_id).nodes:
                for o in led.observations(t.task_id, n.key, limit=1000):
                    for text in (o.text, getattr(o, "action", None), getattr(o, "result", None)):
                        assert text is None or len(text) <= 2 * TEXT_CAP + 200, (t.task_id, n.key, len(text))
                if n.output is not None:
                    assert len(json.dumps(n.output)) <= 4 * TEXT_CAP, (t.task_id, n.key)


PROCESS_CASES = [
    ("stdin closed", None, 2),
    # past the cap, or not UTF-8: the event cannot be read, exit 2 (a blocking error: the call is denied)
    ("5 MB", b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", "tool_input": "'
     + b"x" * (5 * 1024 * 1024) + b'"}', 2),
    ("invalid UTF-8", b'{"hook_event_name": "PermissionRequest", "session_id": "s\xff", "tool_name": "B"}', 2),
    ("100,000 deep", b"[" * 100_000, 2),
    ("NUL and escapes", json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s2", "cwd": "/x",
                                    "prompt": "\x00\x1b]52;c;QQ==\x07\u202e"}).encode(), None),
]


MEASURE = """
import os, sys
fd = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.close(fd)
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
os.write(fd, str(usage.ru_maxrss).encode())
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


@pytest.mark.parametrize("name,data,code", PROCESS_CASES, ids=[c[0] for c in PROCESS_CASES])
def test_the_hook_process_answers_hostile_input_in_one_line(tmp_path: Path, name: str, data: bytes | None,
                                                           code: int | None) -> None:
    args = [sys.executable, "-m", "console", "hook", "claude", "--ledger", str(tmp_path / "l.db"), "--sessions",
            str(tmp_path / "s"), "--permission-wait", "1", "--park-wait", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    peak_r, peak_w = os.pipe()
    # the hook's own peak, reaped by a small parent (RUSAGE_CHILDREN here would be the largest of
    # every process this test worker ever waited for, a real CLI's included)
    measured = [sys.executable, "-c", MEASURE, str(peak_w)]
    try:
        if data is None:
            argv = [*measured, "sh", "-c", 'exec 0<&- && exec "$@"', "sh", *args]
            done = subprocess.run(argv, capture_output=True, env=env, timeout=300, pass_fds=(peak_w,))
        else:
            done = subprocess.run([*measured, *args], input=data, capture_output=True, env=env, timeout=300,
                                  pass_fds=(peak_w,))
    finally:
        os.close(peak_w)
    with os.fdopen(peak_r, "rb") as f:
        peak_kb = int(f.read() or b"0")
    if code is not None:
        assert done.returncode == code, (done.returncode, done.stderr[-500:])
    else:
        assert done.returncode in (0, 1, 2)
    err = done.stderr.decode()
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err[-2000:]
    if err:
        assert_one_clear_line(err.rstrip("\n"))
    out = done.stdout.decode("ascii")
    assert out == "" or (out.endswith("\n") and out.count("\n") == 1 and isinstance(json.loads(out), dict))
    if code == 2:
        assert out == "" and "allow" not in out
    peak_mb = peak_kb / 1024
    assert peak_mb < RSS_MAX_MB, f"a hook process peaked at {peak_mb:.0f} MB"

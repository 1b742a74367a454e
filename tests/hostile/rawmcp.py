"""A raw JSON-RPC client for ``warden mcp`` over stdio: bytes in, every answer out, no SDK.

The SDK's own client (tests/store/test_mcp_server.py) cannot send what a hostile or broken client
sends — a lone surrogate escape, invalid UTF-8, a batch, an id of the wrong type, a line of 5 MB —
and it would drop an answer it cannot parse. This one writes the bytes given and keeps every line
the server writes, each parsed by Python's JSON reader and checked to be one strict JSON object
(no lone surrogate even as an escape, UTF-8)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.waiting import Deadline

ROOT = Path(__file__).resolve().parents[2]
SURROGATE = re.compile("[\ud800-\udfff]")
ANSWER_S = 60.0  # the bound on any one answer, idle seconds (generous: the point is that one comes at all)


def strict(line: bytes) -> Any:
    """``line`` as JSON that any client can read: UTF-8, one object, no lone surrogate anywhere."""
    text = line.decode("utf-8")  # raises on invalid UTF-8
    value = json.loads(text)
    assert isinstance(value, dict), text[:200]

    def walk(v: Any) -> None:
        if isinstance(v, str):
            assert not SURROGATE.search(v), f"a lone surrogate in an answer: {text[:200]!r}"
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return value


class RawMcp:
    """One ``warden mcp`` process, driven line by line."""

    def __init__(self, ledger: str, sessions: Path, *extra: str, stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self._err = open(stderr_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "console", "mcp", "--ledger", ledger, "--sessions", str(sessions), *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, cwd=str(sessions.parent),
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.answers: dict[Any, dict[str, Any]] = {}
        self.unaddressed: list[dict[str, Any]] = []  # answers with id null
        self.bad_lines: list[bytes] = []
        self.cond = threading.Condition()
        self.next_id = 1000
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = strict(line)
            except (AssertionError, ValueError):
                with self.cond:
                    self.bad_lines.append(line)
                    self.cond.notify_all()
                continue
            with self.cond:
                if msg.get("id") is None:
                    self.unaddressed.append(msg)
                else:
                    key = json.dumps(msg["id"])
                    assert key not in self.answers, f"two answers for id {key[:80]}"
                    self.answers[key] = msg
                self.cond.notify_all()

    # ------------------------------------------------------------------ sending
    def send_bytes(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def fresh_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def request(self, method: str, params: Any = None, *, rid: Any = None) -> Any:
        rid = self.fresh_id() if rid is None else rid
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send_bytes(json.dumps(msg).encode())
        return rid

    def notify(self, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send_bytes(json.dumps(msg).encode())

    # ------------------------------------------------------------------ answers
    def wait(self, rid: Any, timeout: float = ANSWER_S) -> dict[str, Any]:
        key = json.dumps(rid)
        deadline = Deadline(timeout)
        with self.cond:
            while key not in self.answers:
                assert not self.bad_lines, f"an answer that is not strict JSON: {self.bad_lines[-1][:300]!r}"
                left = deadline.left()
                assert left > 0 and self.proc.poll() is None, (
                    f"no answer for id {key[:80]} within {timeout:g} idle s (server {'alive' if self.proc.poll() is None else 'gone'})")
                self.cond.wait(min(left, 1.0))
            return self.answers.pop(key)

    def wait_unaddressed(self, count: int, timeout: float = ANSWER_S) -> list[dict[str, Any]]:
        deadline = Deadline(timeout)
        with self.cond:
            while len(self.unaddressed) < count:
                left = deadline.left()
                assert left > 0 and self.proc.poll() is None, f"no id-null answer within {timeout:g} idle s"
                self.cond.wait(min(left, 1.0))
            got, self.unaddressed = self.unaddressed[:count], self.unaddressed[count:]
            return got

    def initialize(self) -> dict[str, Any]:
        rid = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                          "clientInfo": {"name": "rawmcp", "version": "1"}})
        got = self.wait(rid)
        self.notify("notifications/initialized")
        return got

    def call(self, tool: str, arguments: Any = None, *, rid: Any = None, timeout: float = ANSWER_S) -> dict[str, Any]:
        """A tools/call's result: ``{"content": [...], "isError": bool, ...}`` (a JSON-RPC error is
        returned as ``{"error": ...}``)."""
        params: dict[str, Any] = {"name": tool}
        if arguments is not None:
            params["arguments"] = arguments
        got = self.wait(self.request("tools/call", params, rid=rid), timeout)
        return got["result"] if "result" in got else {"error": got["error"]}

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        r = self.call(tool, arguments)
        assert "result" not in r and not r.get("isError") and "error" not in r, r
        return json.loads(r["content"][0]["text"])

    # ------------------------------------------------------------------ the process
    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmHWM")

    def stderr(self) -> str:
        if not self._err.closed:
            self._err.flush()
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> int:
        try:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                self.proc.stdin.close()
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise
        finally:
            self.reader.join(10)
            self._err.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._err.close()

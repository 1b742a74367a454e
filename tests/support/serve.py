"""A real `warden serve` process for tests: started on a free port, its output followed, stopped.

Synchronisation is on the server's own lines (the URL, "session N started … (pid P, …)"), read
with a deadline; never on sleeps.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from tests.support.waiting import Deadline

ROOT = Path(__file__).resolve().parents[2]
URL = re.compile(r"(http://[^/\s]+)/\?token=(\S+)")
SESSION = re.compile(r"session (\d+) started for (\S+) \(pid (\d+), ([^)]+)\)")


@dataclass
class Served:
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    origin: str = ""
    token: str = ""
    cond: threading.Condition = field(default_factory=threading.Condition)
    _reading: bool = True

    @property
    def port(self) -> int:
        return int(self.origin.rsplit(":", 1)[1])

    @property
    def url(self) -> str:
        return f"{self.origin}/?token={self.token}"

    @property
    def cookie(self) -> str:
        return f"warden_serve_{self.port}"

    @property
    def ws_url(self) -> str:
        return self.origin.replace("http://", "ws://") + "/ws"

    def wait_line(self, pattern: str | re.Pattern[str], timeout: float = 60.0, start: int = 0) -> re.Match[str]:
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = Deadline(timeout)
        with self.cond:
            while True:
                for line in self.lines[start:]:
                    if m := rx.search(line):
                        return m
                left = deadline.left()
                if left <= 0 or self.proc.poll() is not None and not self._reading:
                    raise AssertionError(f"no line matching {rx.pattern!r} in:\n" + "".join(self.lines))
                self.cond.wait(min(left, 0.5))

    def sessions(self) -> list[tuple[int, str, int, str]]:
        with self.cond:
            return [(int(m[1]), m[2], int(m[3]), m[4]) for line in self.lines if (m := SESSION.search(line))]

    def _follow(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self._reading = False
            self.cond.notify_all()


def serve_argv(ledger: Path | str, *args: str) -> list[str]:
    return [sys.executable, "-m", "console", "serve", "--ledger", str(ledger), "--runs",
            str(Path(ledger).parent / "runs"), "--port", "0", *args]


@contextmanager
def serving(ledger: Path | str, *args: str, token: str | None = None,
            env: dict[str, str] | None = None) -> Iterator[Served]:
    """Run `warden serve` on ``ledger``; yield once it printed its URL; stop it (SIGTERM) after."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen(serve_argv(ledger, *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=str(Path(ledger).parent), env=full_env)
    served = Served(proc)
    reader = threading.Thread(target=served._follow, daemon=True)
    reader.start()
    try:
        m = served.wait_line(URL)
        served.origin = m[1]
        served.token = token if token is not None else m[2]
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader.join(10)


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode("utf-8", "replace").split("=", 1) for item in raw if b"=" in item)

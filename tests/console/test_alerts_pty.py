"""A real pty: `warden console --on-alert CMD` rings the bell exactly once when an agent opens a
handoff, and the hook gets the alert as one JSON object on stdin. Synchronised on what the console
paints and on the hook's file, never on sleeps."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shlex
import signal
import struct
import sys
import termios
from pathlib import Path
from typing import Callable

import pytest

from tests.support.console_app import build_ledger
from store import Ledger
from tests.support.waiting import Deadline
from tests.support.asks import ask

ROOT = Path(__file__).resolve().parents[2]
OSC = re.compile(rb"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")  # a terminal's OSC sequence (may end in BEL)


def bells(out: bytes) -> int:
    """BEL bytes that are a bell, not the end of an OSC sequence."""
    return OSC.sub(b"", out).count(b"\x07")


class Pty:
    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], size: tuple[int, int] = (80, 24)) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # child: the console, exactly as an operator starts it
            # Ctrl-C's default back: a suite started in the background by a shell without job
            # control (``… &`` in a script) ignores SIGINT, and the console would inherit that.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, "-m", "console", *argv], env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        self.out = bytearray()

    def pump_until(self, pred: Callable[[], bool], what: str) -> None:
        """Read until ``pred`` holds; each wait's safety net is 60 idle seconds, stretched by the
        machine's load (tests/support/waiting.py), not a budget for the whole test."""
        deadline = Deadline(60)
        while not pred():
            assert not deadline.expired(), f"timed out waiting for {what}; got {bytes(self.out[-600:])!r}"
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                self.out.extend(chunk)

    def alive(self) -> bool:
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def close(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        os.close(self.fd)


def _env() -> dict[str, str]:
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="80", LINES="24", PYTHONPATH=str(ROOT))
    env.pop("NO_COLOR", None)
    env.pop("WARDEN_ASCII", None)
    return env


@pytest.mark.slow
def test_a_handoff_rings_once_and_runs_the_hook(tmp_path: Path) -> None:
    build_ledger(tmp_path / "ledger.db")
    got = tmp_path / "alert.json"
    hook = tmp_path / "hook.py"
    hook.write_text("import sys\n"
                    f"data = sys.stdin.read()\nopen({str(got) + '.part'!r}, 'w').write(data)\n"
                    f"import os; os.replace({str(got) + '.part'!r}, {str(got)!r})\n")
    cmd = shlex.join([sys.executable, str(hook)])
    term = Pty(["console", "--ledger", "ledger.db", "--on-alert", cmd], tmp_path, _env())
    try:
        # The task list is painted: the console has loaded, its startup state is the baseline
        # (report-001's open handoff rang nothing).
        term.pump_until(lambda: b"idle-002" in term.out, "the task list")
        term.pump_until(lambda: b"(?)" in term.out or b"(low)" in term.out or b"(med)" in term.out,
                        "the first analysis (P80s on the task list)")
        assert bells(bytes(term.out)) == 0
        # An agent asks a human.
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            c = ledger.claim("report-001", worker="zed", key="figures", lease_s=600)
            assert c is not None
            ask(ledger, c, kind="confirm", question="Publish the figures as they are?",
                                 options=[{"id": "yes", "label": "Yes", "consequence": "published"}],
                                 recommendation="yes")
        term.pump_until(got.exists, "the hook's file")
        alert = json.loads(got.read_text())
        assert alert["kind"] == "handoff" and alert["task"] == "report-001" and alert["node"] == "figures"
        assert alert["severity"] == "alarm" and alert["signal"] is None and alert["handoff"]
        assert "Publish the figures as they are?" in alert["summary"] and alert["at"].endswith("Z")
        # The notification names the task and node, and the header counts it.
        term.pump_until(lambda: b"report-001/figures" in term.out, "the notification")
        term.pump_until(lambda: b"1 new alert" in term.out, "the header's count")
        os.write(term.fd, b"q")
        term.pump_until(lambda: not term.alive(), "the console to quit")
        assert bells(bytes(term.out)) == 1, "exactly one bell for one handoff"
    finally:
        term.close()


@pytest.mark.slow
def test_no_bell_rings_nothing(tmp_path: Path) -> None:
    build_ledger(tmp_path / "ledger.db")
    term = Pty(["console", "--ledger", "ledger.db", "--no-bell"], tmp_path, _env())
    try:
        term.pump_until(lambda: b"idle-002" in term.out, "the task list")
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            c = ledger.claim("report-001", worker="zed", key="figures", lease_s=600)
            assert c is not None
            ask(ledger, c, kind="confirm", question="Publish?", options=[{"id": "yes", "label": "Yes",
                                                                                   "consequence": "published"}])
        term.pump_until(lambda: b"report-001/figures" in term.out, "the notification")
        os.write(term.fd, b"q")
        term.pump_until(lambda: not term.alive(), "the console to quit")
        assert bells(bytes(term.out)) == 0
    finally:
        term.close()


@pytest.mark.slow
def test_term_dumb_gets_lines_not_a_full_screen(tmp_path: Path) -> None:
    build_ledger(tmp_path / "ledger.db")
    env = dict(_env(), TERM="dumb")
    term = Pty(["console", "--ledger", "ledger.db"], tmp_path, env)
    try:
        term.pump_until(lambda: b"idle-002" in term.out, "the status table")
        assert b"cannot show the full-screen console" in term.out
        assert b"\x1b[?1049h" not in term.out, "the alternate screen on TERM=dumb"
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            c = ledger.claim("report-001", worker="zed", key="figures", lease_s=600)
            assert c is not None
            ask(ledger, c, kind="confirm", question="Publish?", options=[{"id": "yes", "label": "Yes",
                                                                                   "consequence": "published"}])
        term.pump_until(lambda: b"ALERT" in term.out and b"report-001/figures" in term.out, "the alert line")
        assert bells(bytes(term.out)) == 1
        assert b"handoff.opened" in term.out
        os.write(term.fd, b"\x03")  # Ctrl+C
        term.pump_until(lambda: not term.alive(), "the line mode to stop")
    finally:
        term.close()

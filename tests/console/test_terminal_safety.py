"""A real pty: hostile agent text is on screen and none of its control bytes reach the terminal."""

from __future__ import annotations

import os
import pty
import select
import sys
from pathlib import Path

import pytest

from tests.support.console_app import build_ledger
from tests.support.waiting import Deadline

ROOT = Path(__file__).resolve().parents[2]


def _run_console(tmp_path: Path, keys: list[tuple[bytes, bytes]], want: bytes) -> bytes:
    """Run `warden console` in a pty (80×24), type ``keys`` once ``want`` was painted; return every byte."""
    build_ledger(tmp_path / "ledger.db")
    pid, fd = pty.fork()
    if pid == 0:  # child: the console, exactly as an operator starts it
        os.chdir(tmp_path)
        env = dict(os.environ, TERM="xterm-256color", COLUMNS="80", LINES="24")
        env.pop("NO_COLOR", None)
        os.execve(sys.executable, [sys.executable, "-m", "console", "console", "--ledger", "ledger.db"], env)
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    out = bytearray()

    def pump_until(pred) -> None:
        # Each wait's safety net is 60 idle seconds stretched by the machine's load
        # (tests/support/waiting.py). A key is sent once: sent again while the first is still on its
        # way (a loaded machine), a j would move the cursor twice and the enter open another task.
        deadline = Deadline(60)
        while not pred():
            assert not deadline.expired(), f"timed out; got {bytes(out[-400:])!r}"
            r, _, _ = select.select([fd], [], [], 0.5)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                out.extend(chunk)

    try:
        pump_until(lambda: want in out)
        for k, then in keys:
            mark = len(out)
            os.write(fd, k)
            pump_until(lambda: then in out[mark:])
        pump_until(lambda: b"\\x1b]52;c;" in out)
        os.write(fd, b"q")
        pump_until(lambda: False if _alive(pid) else True)
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.close(fd)
    return bytes(out)


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


@pytest.mark.slow
def test_hostile_text_never_reaches_the_terminal(tmp_path):
    # Open the hostile task's node: its title, kind, worker, observation and note are all hostile.
    out = _run_console(tmp_path, [(b"j", b"evil-task"), (b"\r", b"task evil-task"), (b"\r", b"Lease")], b"evil-task")
    # it is on screen, as visible escapes
    for shown in (b"\\x1b]52;c;", b"\\u202e", b"\\x9b31m", b"\\x1b[31m", b"[@click=app.quit]", b"[link="):
        assert shown in out, shown
    # none of the dangerous sequences were emitted
    assert b"\x1b]52" not in out, "OSC 52 (clipboard write) reached the terminal"
    assert b"\x1b]8;;https://evil" not in out, "agent OSC 8 link reached the terminal"
    assert b"\x1b]0;pwned" not in out, "title escape reached the terminal"
    assert b"\x1b[2J" not in out, "agent CSI 2J reached the terminal (Textual itself never sends it)"
    assert b"\x9b" not in out and "\u202e".encode() not in out
    assert b"\x1b]8;" not in out, "an OSC 8 link reached the terminal"

"""A real pty: hostile agent text is on screen and none of its control bytes reach the terminal."""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from pathlib import Path

import pytest

from conftest import build_ledger

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
    deadline = time.monotonic() + 120

    def pump_until(pred, resend: bytes | None = None) -> None:
        quiet_since = time.monotonic()
        while not pred():
            assert time.monotonic() < deadline, f"timed out; got {bytes(out[-400:])!r}"
            if resend is not None and time.monotonic() - quiet_since > 8:
                # What the key shows never came: it was not taken (the app was still starting up on
                # a loaded machine). A key that is taken shows it at once, so sending it again is safe.
                os.write(fd, resend)
                quiet_since = time.monotonic()
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
            pump_until(lambda: then in out[mark:], resend=k)
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

"""The shipped ``warden console`` in a real terminal: a pseudo-terminal this process reads as fast
as the console writes (each chunk stamped on the monotonic clock when it is read) and feeds to a
terminal emulator (pyte), so "on screen" means the emulated screen shows it — what an operator's
terminal would show once it has drawn the bytes. Used by tests/bench/bench_console.py (``--part
terminal``) and the pty tests of keys typed in bursts (tests/console/test_keys_pty.py).

Nothing here is a sleep used as synchronisation: every wait is for a condition on the screen,
with a deadline; sleeps only pace the writes (quiet before and after an isolated commit).
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Callable

import pyte

from tests.support.waiting import Deadline

ROOT = Path(__file__).resolve().parents[2]

Predicate = Callable[[pyte.Screen], bool]


class Terminal:
    """A process on a pty of ``cols``×``rows``; its output drawn on a pyte screen."""

    def __init__(self, argv: list[str], cols: int = 100, rows: int = 30, env: dict | None = None,
                 cwd: str | os.PathLike[str] | None = None, clean_env: bool = False) -> None:
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        base = {} if clean_env else dict(os.environ)  # clean_env: only ``env`` (a client under test)
        full_env = {**base, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows),
                    "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=full_env,
                                     start_new_session=True, cwd=cwd or ROOT)
        os.close(slave)
        self.master = master
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.chunks = 0
        self.bytes = 0
        self.waiters: list[tuple[Predicate, list[float]]] = []
        # Called with (screen, read time) after every chunk, under the lock (bench_fleet.py records
        # every row it shows this way); keep them cheap: they run on the reading thread.
        self.observers: list[Callable[[pyte.Screen, float], None]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:
                return
            if not data:
                return
            t = time.monotonic()
            with self.lock:
                self.stream.feed(data)
                self.chunks += 1
                self.bytes += len(data)
                for pred, out in self.waiters:
                    if not out and pred(self.screen):
                        out.append(t)
                for observe in self.observers:
                    observe(self.screen, t)
                self.changed.notify_all()

    def when(self, pred: Predicate) -> list[float]:
        """Start watching for ``pred``: the returned list gets the read time of the first chunk after
        which it held (checked now too)."""
        out: list[float] = []
        with self.lock:
            if pred(self.screen):
                out.append(time.monotonic())
            self.waiters.append((pred, out))
        return out

    def wait(self, out: list[float], timeout: float, what: str = "") -> float | None:
        """The read time at which ``out``'s predicate held; None after ``timeout`` idle seconds (a
        safety net stretched by the machine's load: tests/support/waiting.py)."""
        deadline = Deadline(timeout)
        with self.lock:
            while not out:
                left = deadline.left()
                if left <= 0:
                    self.waiters = [w for w in self.waiters if w[1] is not out]
                    return None
                self.changed.wait(min(left, 1.0))  # (a second at most: the load is looked at again)
            self.waiters = [w for w in self.waiters if w[1] is not out]
            return out[0]

    def wait_for(self, pred: Predicate, timeout: float, what: str = "") -> float:
        t = self.wait(self.when(pred), timeout)
        if t is None:
            raise RuntimeError(f"the terminal never showed {what or pred}:\n" + "\n".join(self.lines()))
        return t

    def press(self, key: bytes) -> float:
        t = time.monotonic()
        os.write(self.master, key)
        return t

    def lines(self) -> list[str]:
        with self.lock:
            return list(self.screen.display)

    def cursor_row(self) -> int | None:
        with self.lock:
            return highlighted_row(self.screen)

    def children(self) -> list[int]:
        """The console's child processes (its analysis worker)."""
        return process_children(self.proc.pid)

    def cpu_seconds(self, *, own: bool = False) -> float:
        """The console's CPU time, its analysis worker's included (``own``: the console alone)."""
        return process_cpu_seconds(self.proc.pid, own=own)

    def rss_mb(self, *, own: bool = False) -> float:
        """The console's resident memory, its analysis worker's included (``own``: the console alone)."""
        return process_rss_mb(self.proc.pid, own=own)

    def close(self) -> None:
        try:
            os.write(self.master, b"q")
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass


def process_children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def process_cpu_seconds(pid: int, *, own: bool = False) -> float:
    """A process's CPU time (user + system): with its children's (live ones, and those it reaped),
    unless ``own``."""
    def stat(p: int, reaped: bool) -> int:
        try:
            with open(f"/proc/{p}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0
        return int(parts[11]) + int(parts[12]) + (int(parts[13]) + int(parts[14]) if reaped else 0)

    ticks = stat(pid, not own) + (0 if own else sum(stat(c, True) for c in process_children(pid)))
    return ticks / os.sysconf("SC_CLK_TCK")


def process_rss_mb(pid: int, *, own: bool = False) -> float:
    def rss(p: int) -> float:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    return rss(pid) + (0.0 if own else sum(rss(c) for c in process_children(pid)))


def highlighted_row(screen: pyte.Screen) -> int | None:
    """The row drawn in reverse video across its first columns (the list's cursor)."""
    for y in range(screen.lines):
        row = screen.buffer[y]
        if all(row[x].reverse for x in range(2, 12)):
            return y
    return None


def shows(*words: str) -> Predicate:
    """Some line of the screen holds every word."""
    def pred(screen: pyte.Screen) -> bool:
        return any(all(w in line for w in words) for line in screen.display)
    return pred


def console_argv(ledger: str) -> list[str]:
    """``warden console`` exactly as shipped, from this tree."""
    return [sys.executable, "-m", "console", "console", "--ledger", ledger, "--runs", os.path.dirname(ledger)]


__all__ = ["Terminal", "console_argv", "highlighted_row", "process_children", "process_cpu_seconds", "process_rss_mb",
           "shows"]

"""A supervised command as ``warden run`` holds it: its own process group, stdin never attached,
its output read line by line from a thread, and the signals an operator's action turns into.

* started with ``start_new_session=True``: the command leads a new session and process group, so
  one signal reaches it and everything it started (a shell's children, a build's workers);
* stdin is ``/dev/null`` (Codex waits for more input on an open stdin; nothing may read the
  operator's terminal);
* stdout and stderr are one pipe, read in chunks by a thread: each chunk goes to ``sink`` (the
  run's log, the terminal) and each complete line to :attr:`lines`; a line longer than
  ``LINE_READ_CAP`` bytes is cut there (the rest of it is dropped, and says so);
* :meth:`pause` / :meth:`resume` send ``SIGSTOP`` / ``SIGCONT`` to the group; :meth:`end` sends
  ``SIGTERM`` (with ``SIGCONT``, so a stopped group can act on it), waits ``grace_s`` for the whole
  group to go, then ``SIGKILL``s what is left.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from typing import Callable, Mapping, Sequence

__all__ = ["Child", "LINE_READ_CAP", "group_alive", "split_lines"]

LINE_READ_CAP = 64 * 1024  # bytes of one output line kept
READ_CHUNK = 64 * 1024


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still alive. Zombies do not count (their parent
    may never reap them once it has ended): on Linux ``/proc`` is read, elsewhere a zombie counts."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        entries = []
    if not entries:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False


class Child:
    """One run of the command (see the module's docstring)."""

    def __init__(self, argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str],
                 sink: Callable[[bytes], None]) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = dict(env)
        self.sink = sink
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pgid = 0
        self.stopped = False
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def start(self) -> "Child":
        """Start the command. ``OSError`` (not found, not executable) is the caller's to report."""
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                     close_fds=True)
        self.pgid = self.proc.pid
        self._reader = threading.Thread(target=self._read, name=f"run-output-{self.pgid}", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        partial = b""
        cut = False
        try:
            while True:
                try:
                    chunk = os.read(fd, READ_CHUNK)
                except OSError:
                    break
                if not chunk:
                    break
                try:
                    self.sink(chunk)
                except Exception:  # the log or the terminal failing must not stop the reading
                    pass
                whole, partial, cut = split_lines(partial, chunk, cut)
                for line in whole:
                    self.lines.put(line)
            if partial and not cut:
                self.lines.put(partial[:LINE_READ_CAP])
        finally:
            self.lines.put(None)  # end of output
            self.proc.stdout.close()

    # ------------------------------------------------------------------ state
    def poll(self) -> int | None:
        """The exit status once the command (the group's leader) has ended: its code, or
        ``-signal`` when a signal ended it."""
        return None if self.proc is None else self.proc.poll()

    def output_done(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the reader to reach the end of the output."""
        if self._reader is None:
            return True
        self._reader.join(timeout)
        return not self._reader.is_alive()

    # ------------------------------------------------------------------ signals
    def _signal(self, sig: int) -> None:
        if self.pgid:
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                pass

    def pause(self) -> None:
        """SIGSTOP the whole group (the operator parked the work)."""
        self._signal(signal.SIGSTOP)
        self.stopped = True

    def resume(self) -> None:
        """SIGCONT the whole group."""
        self._signal(signal.SIGCONT)
        self.stopped = False

    def end(self, grace_s: float, *, clock: Callable[[], float] = time.monotonic,
            meanwhile: Callable[[], None] | None = None, every_s: float = 1.0) -> int | None:
        """SIGTERM the group (and SIGCONT it, so stopped processes can act on the TERM), wait up to
        ``grace_s`` for every process of it to end, SIGKILL what is left; reap the leader.
        ``meanwhile`` is called every ``every_s`` of the wait (to keep a lease). Returns the
        leader's exit status."""
        if self.proc is None:
            return None
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)
        self.stopped = False
        deadline = clock() + max(0.0, grace_s)
        next_call = clock() + every_s
        while clock() < deadline:
            if meanwhile is not None and clock() >= next_call:
                meanwhile()
                next_call = clock() + every_s
            self.proc.poll()
            if self.proc.returncode is not None and not group_alive(self.pgid):
                break
            time.sleep(0.05)  # polling the group's end (a process group cannot be waited on)
        self._signal(signal.SIGKILL)
        try:
            return self.proc.wait(timeout=max(5.0, grace_s))
        except subprocess.TimeoutExpired:  # unkillable (uninterruptible sleep): leave it
            return None

    def reap_group(self, grace_s: float) -> None:
        """After the leader ended on its own: end what it left running in its group."""
        if self.pgid and group_alive(self.pgid):
            self.end(grace_s)


def split_lines(partial: bytes, chunk: bytes, cut: bool) -> tuple[list[bytes], bytes, bool]:
    """One read's worth of output: the whole lines it ends (each at most ``LINE_READ_CAP`` bytes,
    a longer one cut there and ending in " [line cut]"), the partial line it leaves, and whether
    that partial line was already cut (the rest of it is dropped up to its newline).

    A line is cut once whatever the reads' boundaries: when the read that takes it past the cap
    also brings its newline, and when its newline comes reads later."""
    parts = (partial + chunk).split(b"\n")
    partial = parts.pop()
    lines: list[bytes] = []
    for line in parts:
        if cut:  # the rest of a line already cut
            cut = False
            continue
        lines.append(line[:LINE_READ_CAP] + b" [line cut]" if len(line) > LINE_READ_CAP else line)
    if cut:  # no newline yet: this chunk is all the rest of the line already cut
        partial = b""
    elif len(partial) > LINE_READ_CAP:
        lines.append(partial[:LINE_READ_CAP] + b" [line cut]")
        partial, cut = b"", True
    return lines, partial, cut

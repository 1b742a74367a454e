"""A supervised command as ``warden run`` holds it: started by a keeper, contained, its output read
within bounds, and the stops an operator's action turns into.

* The command is started by a keeper process (store/adapters/keeper.py), which ends it and
  everything it started when the supervisor dies; it runs in a cgroup of its own where the
  machine offers one, and in the keeper's subreaped tree either way (store/adapters/proctree.py):
  every process it started is found, whatever session or group it moved to.
* It leads a new session and process group; stdin is ``/dev/null`` (Codex waits for more input
  on an open stdin; nothing may read the operator's terminal).
* stdout and stderr are one pipe, read in chunks by a thread: each chunk goes to ``sink`` (the
  run's log, the terminal) and each complete line to :attr:`lines`, a bounded queue: a line
  longer than ``line_cap`` bytes is cut there (the rest of it is dropped, and says so), and the
  lines the supervisor has not taken yet are at most ``QUEUE_LINES`` lines and ``QUEUE_BYTES``
  bytes: past them the oldest are counted and dropped, never kept, so a flood costs
  neither memory nor time after it ends.
* :meth:`pause` stops every process (the cgroup frozen, or ``SIGSTOP`` to each) once no write of
  theirs to the ledger is under way (store/storage/stopguard.py); :meth:`resume` continues them;
  :meth:`end` sends ``SIGTERM`` (with ``SIGCONT``) to every process, waits ``grace_s``, then
  ``SIGKILL``s what is left.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Callable, Mapping, Sequence

from store.jsontypes import JsonObject
from store.storage import stopguard
from store.views import Claim
from store.adapters import keeper as _keeper
from store.adapters.proctree import CONTAINMENT_ENV, Cgroup, Tree, boot_id, is_alive, start_time

__all__ = ["Child", "LINE_READ_CAP", "Lines", "QUEUE_BYTES", "QUEUE_LINES", "split_lines"]

LINE_READ_CAP = 64 * 1024  # bytes of one output line kept (a JSON stream's events: STREAM_EVENT_CAP)
READ_CHUNK = 64 * 1024
QUEUE_LINES = 5000  # lines read but not yet taken by the supervisor
QUEUE_BYTES = 8 * 1024 * 1024
STOP_WAIT_S = 10.0  # longest wait for the command's ledger writes under way before a stop
UNSTICK_S = 0.1  # how often a process stopped by someone else inside a ledger write is looked for


class Lines:
    """The output lines read but not taken yet, bounded (see the module's docstring)."""

    def __init__(self, max_lines: int = QUEUE_LINES, max_bytes: int = QUEUE_BYTES) -> None:
        self._q: deque[bytes | None] = deque()
        self._bytes = 0
        self._cv = threading.Condition()
        self.max_lines, self.max_bytes = max_lines, max_bytes
        self.dropped = 0  # lines dropped since the last take_dropped()

    def put(self, lines: list[bytes | None]) -> None:
        """Queue ``lines``; past the bounds the oldest queued lines make room (counted in
        :attr:`dropped`): the newest output is what tells where a command is."""
        with self._cv:
            for line in lines:
                self._q.append(line)
                self._bytes += len(line) if line is not None else 0
                while len(self._q) > self.max_lines or self._bytes > self.max_bytes:
                    old = self._q.popleft()
                    if old is None:  # never the end of the output
                        self._q.appendleft(old)
                        break
                    self._bytes -= len(old)
                    self.dropped += 1
            self._cv.notify()

    def get(self, timeout: float | None = None) -> bytes | None:
        """The next line (None: the output ended); ``queue.Empty`` when none came in ``timeout``."""
        with self._cv:
            if not self._q and not self._cv.wait_for(lambda: bool(self._q), timeout):
                raise queue.Empty
            line = self._q.popleft()
            self._bytes -= len(line) if line is not None else 0
            return line

    def get_nowait(self) -> bytes | None:
        return self.get(0)

    def take_dropped(self) -> int:
        with self._cv:
            n, self.dropped = self.dropped, 0
            return n

    def __len__(self) -> int:
        return len(self._q)


class Child:
    """One run of the command (see the module's docstring)."""

    def __init__(self, argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str],
                 sink: Callable[[bytes], None], line_cap: int = LINE_READ_CAP, grace_s: float = 10.0,
                 run_dir: str | None = None, ledger: str | None = None, containment: str | None = None) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.sink = sink
        self.line_cap = line_cap
        self.grace_s = grace_s
        self.run_dir = run_dir
        self.ledger = ledger
        self.containment = containment if containment is not None else os.environ.get(CONTAINMENT_ENV)
        self.marker = secrets.token_hex(8)
        self.guard = stopguard.StopGuard()
        self.env = dict(env)
        self.env[stopguard.ENV] = self.guard.env_value(env.get(stopguard.ENV))
        self.env["WARDEN_RUN_MARK"] = self.marker
        self.lines = Lines()
        self.keeper: subprocess.Popen[bytes] | None = None
        self.tree: Tree | None = None
        self.pid = 0
        self.start_time: int | None = None
        self.stopped = False
        self.code: int | None = None
        self.keeper_lost = False
        self._exited = threading.Event()
        self._closed = threading.Event()
        self._stops = threading.RLock()  # pause, resume and unstick one at a time
        self._reader: threading.Thread | None = None

    # ------------------------------------------------------------------ starting
    def start(self) -> "Child":
        """Start the command. ``OSError`` (not found, not executable) is the caller's to report."""
        name = f"{os.getpid()}.{self.marker}"
        cg = None if self.containment == "tree" else Cgroup.make(name, self.containment or None)
        r, w = os.pipe()
        try:
            self.keeper = subprocess.Popen([sys.executable, "-I", _keeper.PATH], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, pass_fds=(w,), start_new_session=True,
                                           close_fds=True)
        except OSError:
            os.close(r)
            os.close(w)
            if cg is not None:
                cg.remove()
            raise
        os.close(w)
        spec = {"argv": self.argv, "cwd": self.cwd, "env": self.env, "out_fd": w, "grace_s": self.grace_s,
                "cgroup": {"path": cg.path, "version": cg.version} if cg is not None else None,
                "run_dir": self.run_dir, "ledger": self.ledger, "supervisor": os.getpid()}
        self._tell(spec)
        first = self._status_line()
        if first is None or "pid" not in first:
            os.close(r)
            self._close_keeper()
            if cg is not None:
                cg.remove()
            self.guard.close()
            if first is None:
                raise OSError(0, "the keeper process did not start")
            raise OSError(int(first.get("errno") or 0), str(first.get("message") or "cannot start"))
        self.pid = int(first["pid"])
        self.start_time = first.get("start")
        self.tree = Tree(self.keeper.pid, cg if first.get("containment") != "tree" else None)
        if cg is not None and self.tree.cgroup is None:
            cg.remove()
        self._reader = threading.Thread(target=self._read, args=(r,), name=f"run-output-{self.pid}", daemon=True)
        self._reader.start()
        threading.Thread(target=self._statuses, name=f"run-keeper-{self.pid}", daemon=True).start()
        threading.Thread(target=self._unsticking, name=f"run-unstick-{self.pid}", daemon=True).start()
        return self

    @property
    def containment_used(self) -> str:
        return self.tree.containment if self.tree is not None else "none"

    def identity(self) -> JsonObject:
        """Who the command is, for a later run on this host to check it has gone."""
        return {"boot_id": boot_id(), "pid": self.pid, "start": self.start_time,
                "keeper": self.keeper.pid if self.keeper is not None else None,
                "keeper_start": _start(self.keeper.pid) if self.keeper is not None else None,
                "cgroup": self.tree.cgroup.path if self.tree is not None and self.tree.cgroup is not None else None,
                "cgroup_version": self.tree.cgroup.version if self.tree is not None and self.tree.cgroup else None,
                "marker": self.marker}

    def _tell(self, msg: Mapping[str, object]) -> None:
        assert self.keeper is not None and self.keeper.stdin is not None
        try:
            self.keeper.stdin.write((json.dumps(msg) + "\n").encode())
            self.keeper.stdin.flush()
        except (OSError, ValueError):
            pass

    def tell_claim(self, claim: Claim) -> None:
        """Hand the keeper the current claim: it fails the node with it if we die."""
        self._tell({"claim": {"task_id": claim.task_id, "node_key": claim.node_key, "kind": claim.kind,
                              "worker": claim.worker, "token": claim.token, "attempt": claim.attempt,
                              "lease_until": claim.lease_until, "lease_s": claim.lease_s}})

    def _status_line(self) -> JsonObject | None:
        assert self.keeper is not None and self.keeper.stdout is not None
        line = self.keeper.stdout.readline()
        try:
            msg = json.loads(line) if line else None
        except ValueError:
            return None
        return msg if isinstance(msg, dict) else None

    def _statuses(self) -> None:
        while True:
            msg = self._status_line()
            if msg is None:
                break
            if "exit" in msg:
                self.code = int(msg["exit"])
                self._exited.set()
        if self.code is None:  # the keeper died (kill -9): the command is ours to watch now
            self.keeper_lost = True

    # ------------------------------------------------------------------ output
    def _read(self, fd: int) -> None:
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
                whole, partial, cut = split_lines(partial, chunk, cut, self.line_cap)
                self.lines.put(list(whole))
            if partial and not cut:
                self.lines.put([partial[: self.line_cap]])
        finally:
            self.lines.put([None])  # end of output
            os.close(fd)

    # ------------------------------------------------------------------ state
    def poll(self) -> int | None:
        """The exit status once the command (the first process) has ended: its code, or
        ``-signal`` when a signal ended it."""
        if self.code is None and self.keeper_lost and not is_alive(self.pid, self.start_time):
            self.code = -signal.SIGKILL  # its keeper was killed: its status is lost with it
        return self.code

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            self._exited.wait(0.05)
        return self.code

    def output_done(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the reader to reach the end of the output."""
        if self._reader is None:
            return True
        self._reader.join(timeout)
        return not self._reader.is_alive()

    # ------------------------------------------------------------------ stops
    def pause(self) -> bool:
        """Stop every process of the command (the operator parked the work), once none of them is
        inside a ledger write. False when something of it could not be stopped."""
        if self.tree is None:
            return True
        tree = self.tree
        with self._stops, self.guard.exclusive(STOP_WAIT_S, meanwhile=self._continue_stopped):
            ok = tree.freeze()
            self.stopped = True
        return ok

    def resume(self) -> None:
        """Continue every process."""
        with self._stops:
            if self.tree is not None:
                self.tree.thaw()
            self.stopped = False

    def _continue_stopped(self) -> None:
        """While a stop waits for the writes under way: a writer someone else stopped is let on."""
        if self.tree is not None:
            for pid in self.tree.stopped_by_others():
                try:
                    os.kill(pid, signal.SIGCONT)
                except OSError:
                    pass

    def unstick(self) -> list[int]:
        """Processes of the command stopped by someone else (``kill -STOP``, not a park) while a
        write of theirs is under way: continued until the write is done, then stopped again.
        Returns their pids (empty when there was nothing to do). Called every ``UNSTICK_S`` by a
        thread of its own: the supervisor's own writes may be what waits for that lock."""
        with self._stops:
            if self.tree is None or self.stopped or not self.guard.writing_now():
                return []
            stopped = self.tree.stopped_by_others()
            if not stopped:
                return []
            with self.guard.exclusive(STOP_WAIT_S, meanwhile=self._continue_stopped):
                for pid in stopped:
                    try:
                        os.kill(pid, signal.SIGSTOP)
                    except OSError:
                        pass
            return stopped

    def _unsticking(self) -> None:
        while not self._closed.wait(UNSTICK_S):
            try:
                self.unstick()
            except OSError:  # /proc or the guard went away as the command ended
                pass

    def end(self, grace_s: float, *, meanwhile: Callable[[], None] | None = None,
            every_s: float = 1.0) -> int | None:
        """End every process (see the module's docstring); the first process's exit status."""
        if self.tree is None:
            return None
        self.tree.end(grace_s, meanwhile=meanwhile, every_s=every_s)
        self.stopped = False
        return self.wait(5.0)

    def reap_group(self, grace_s: float) -> None:
        """After the command ended on its own: end what it left running, wherever it went."""
        if self.tree is not None and self.tree.alive():
            self.end(grace_s)

    def close(self) -> None:
        """Say goodbye to the keeper (it ends what might be left) and clean up."""
        self._closed.set()
        with self._stops:
            pass  # an unstick under way has finished
        self._tell({"bye": True})
        self._close_keeper()
        if self.tree is not None:
            self.tree.close()
        self.guard.close()

    def _close_keeper(self) -> None:
        if self.keeper is None:
            return
        for f in (self.keeper.stdin,):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        try:
            self.keeper.wait(max(5.0, self.grace_s + 5.0))
        except subprocess.TimeoutExpired:
            pass


def _start(pid: int) -> int | None:
    return start_time(pid)


def split_lines(partial: bytes, chunk: bytes, cut: bool, cap: int = LINE_READ_CAP) -> tuple[list[bytes], bytes, bool]:
    """One read's worth of output: the whole lines it ends (each at most ``cap`` bytes, a longer
    one cut there and ending in " [line cut]"), the partial line it leaves, and whether that
    partial line was already cut (the rest of it is dropped up to its newline).

    A line is cut once whatever the reads' boundaries: when the read that takes it past the cap
    also brings its newline, and when its newline comes reads later."""
    parts = (partial + chunk).split(b"\n")
    partial = parts.pop()
    lines: list[bytes] = []
    for line in parts:
        if cut:  # the rest of a line already cut
            cut = False
            continue
        lines.append(line[:cap] + b" [line cut]" if len(line) > cap else line)
    if cut:  # no newline yet: this chunk is all the rest of the line already cut
        partial = b""
    elif len(partial) > cap:
        lines.append(partial[:cap] + b" [line cut]")
        partial, cut = b"", True
    return lines, partial, cut

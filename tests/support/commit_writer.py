"""An agent process that writes one change per command, for tests and benchmarks of the live path.

    python tests/support/commit_writer.py TARGET TASK      # or argv from command(target, task, ...)

Reads commands from stdin, one per line, and answers each with the journal id of the event it
wrote (``ok <id> <node key> <monotonic time the write returned>``), or ``none`` when there was nothing
to do:

* ``add`` — a new node in the task;
* ``claim`` — claim a ready node (a ``node.claimed`` event);
* ``beat`` — heartbeat the oldest claim, with an observation;
* ``commit`` — commit the oldest claim;
* ``note`` — a decision note on the oldest claim.

Nothing is written except on a command, so the caller decides exactly when each commit happens and
that nothing follows it. ``command(..., slow_fsync_ms=N)`` runs it under ``strace`` with every
``fsync``/``fdatasync`` delayed by N ms: a slow disk, so the commit becomes visible N ms after its
last write to the WAL (the case that a reader woken by file events alone misses). Use
:func:`strace_can_delay` first.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def strace_can_delay() -> bool:
    """strace is installed and may trace a child here (containers may forbid ptrace)."""
    if shutil.which("strace") is None:
        return False
    probe = "import os, tempfile; f = tempfile.TemporaryFile(); os.fsync(f.fileno())"
    r = subprocess.run(["strace", "-f", "-o", "/dev/null", "-e", "trace=fsync",
                        "-e", "inject=fsync:delay_exit=1000", sys.executable, "-c", probe], capture_output=True)
    return r.returncode == 0


def command(target: str, task: str, *, slow_fsync_ms: float = 0) -> list[str]:
    """The argv that starts a writer (under strace when ``slow_fsync_ms``)."""
    argv = [sys.executable, os.path.abspath(__file__), target, task]
    if slow_fsync_ms:
        argv = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync,fdatasync",
                "-e", f"inject=fsync,fdatasync:delay_exit={int(slow_fsync_ms * 1000)}"] + argv
    return argv


class Writer:
    """The writer as an asyncio subprocess: ``await w.start()``, ``await w.send("claim")`` →
    ``(event id, node key, monotonic time)`` or None, ``await w.close()``."""

    def __init__(self, target: str, task: str, *, slow_fsync_ms: float = 0) -> None:
        self.argv = command(str(target), task, slow_fsync_ms=slow_fsync_ms)
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> "Writer":
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT)
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        assert line.strip() == b"ready", line
        return self

    async def send(self, cmd: str) -> tuple[int, str, float] | None:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(cmd.encode() + b"\n")
        await self.proc.stdin.drain()
        line = (await asyncio.wait_for(self.proc.stdout.readline(), 60)).decode().split()
        # "none": nothing to write (no claim to beat); anything else (EOF: the writer died) fails
        # here, never reads as a skipped write, which would leave the test nothing to check
        assert line and line[0] in ("ok", "none"), f"the writer failed on {cmd!r}: {line!r}"
        if line[0] == "none":
            return None
        return int(line[1]), line[2], float(line[3])

    async def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()


def main(argv: list[str]) -> None:
    sys.path.insert(0, ROOT)
    from store import Ledger

    target, task = argv[0], argv[1]
    ledger = Ledger.open(target, create=False)
    claims = []
    n = 0
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if not cmd:
            continue
        n += 1
        wrote = True
        key = f"w{os.getpid()}-{n}"
        if cmd == "add":
            ledger.add_node(task, key, kind="tool")
        elif cmd == "claim":
            c = ledger.claim(task, worker="writer", lease_s=3600)
            wrote = c is not None
            if c is not None:
                claims.append(c)
                key = c.node_key
        elif cmd in ("beat", "commit", "note") and claims:
            c = claims[0]
            key = c.node_key
            if cmd == "beat":
                ledger.heartbeat(c, units_done=n, units_total=10 ** 6, observation=f"line {n}")
            elif cmd == "note":
                ledger.note(c, f"note {n}")
            else:
                ledger.commit(c, output={"n": n})
                claims.pop(0)
        else:
            wrote = False
        done = time.monotonic()
        print(f"ok {ledger.last_event_id()} {key} {done}" if wrote else "none", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

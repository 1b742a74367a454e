"""The console's analysis worker: the process that computes estimates and signals.

    python -m console.analysis_worker --parent PID      # started by the console (console/analysis_client.py)

The console's figures are pure Python (a Monte Carlo a task, distributions, signal rules). Computed
on the console's own interpreter they held it while a frame was due; in this process they cannot.
It speaks frames on its standard input and output — a 4-byte big-endian length, then a pickle —
with the console that started it, and only with it:

* in: first ``("open", {"target", "connect_timeout_s"})`` (the ledger is named here,
  never on the command line, where a PostgreSQL URL's password would show in ``ps``), then
  ``("run", RunRequest)`` and ``("drop",)`` (no graph open: its analysis is freed);
* out: ``("ready", pid)`` once the ledger is named, ``("result", RunResult, stats)`` for each run,
  in order (``stats``: its memory, ``rss_mb``; the graph it follows, ``following``; how many graphs
  it has read whole, ``graph_builds``; ``leaving``: it leaves after this result, its memory grown past
  ``--rss-max-mb`` — the console sends it nothing more and starts a fresh one).

It opens the ledger read-only, with its own connection (``warden-analysis`` on PostgreSQL: the
console's two and this one), and follows the journal itself at the start of each run
(``console.analysis.Analyst``): nothing but the request crosses the pipe. It never outlives the
console: standard input at its end (the console exited, or was killed) ends it, and so does the
console's pid changing from under it (checked twice a second, also during a run; on Linux the
kernel also sends it SIGKILL when the console dies).
"""

from __future__ import annotations

import argparse
import os
import pickle
import signal
import struct
import sys
import threading
import time
import traceback
from typing import IO, Any

HEADER = struct.Struct(">I")
FRAME_MAX = 256 * 1024 * 1024  # a frame longer than this is not ours: the stream is broken
RSS_MAX_MB = 768  # the worker leaves after a run that left it above this (the console starts another)
PARENT_CHECK_S = 0.5
# The worker's CPU priority below the console's (nice): on a busy machine the UI's frames, keys and
# journal reads get the CPU first, the figures after them; on an idle one it has a core to itself.
NICE = 5
APPLICATION_NAME = "warden-analysis"


def encode(message: object) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame's message; None at the end of the stream."""
    head = _read_exactly(stream, HEADER.size)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    if n > FRAME_MAX:
        raise ValueError(f"a frame of {n} bytes")
    body = _read_exactly(stream, n)
    if body is None:
        return None
    return pickle.loads(body)


def _read_exactly(stream: IO[bytes], n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = stream.read(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def rss_mb() -> float:
    """This process's resident memory (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _die_with(parent: int) -> None:
    """Never outlive the console: SIGKILL from the kernel when it dies (Linux), and a thread that
    looks at the parent's pid (everywhere; also while a run holds this interpreter)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(0)

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_S)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def serve(inp: IO[bytes], out: IO[bytes], *, rss_max_mb: float = RSS_MAX_MB) -> int:
    """The worker's loop (see the module's docstring); returns its exit status."""
    from store.storage.db import CONNECT_TIMEOUT_S
    from store.errors import WardenError
    from store.reading.feed import Feed

    from .analysis import Analyst, RunRequest, RunResult

    def send(message: object) -> None:
        out.write(encode(message))
        out.flush()

    first = read_frame(inp)
    if first is None:
        return 0
    tag, opts = first
    assert tag == "open", tag
    feed = Feed(opts["target"], read_only=True, application_name=APPLICATION_NAME,
                connect_timeout_s=float(opts.get("connect_timeout_s") or CONNECT_TIMEOUT_S))
    analyst = Analyst(feed)
    send(("ready", os.getpid()))
    try:
        while True:
            message = read_frame(inp)
            if message is None:
                return 0
            if message[0] == "drop":
                analyst.graph.drop()
                continue
            req: RunRequest = message[1]
            try:
                result = analyst.run(req)
            except WardenError as e:
                result = RunResult(req.kind, req.parts, error=str(e))
            except Exception as e:  # noqa: BLE001 - any failure is the run's, reported; the worker goes on
                traceback.print_exc(file=sys.stderr)
                sys.stderr.flush()
                result = RunResult(req.kind, req.parts, error=f"{type(e).__name__}: {e}")
            used = rss_mb()
            leaving = bool(rss_max_mb and used > rss_max_mb)
            send(("result", result, {"rss_mb": round(used, 1), "following": analyst.graph.task_id,
                                     "graph_builds": analyst.graph.builds, "leaving": leaving}))
            if leaving:
                return 0
    finally:
        feed.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m console.analysis_worker")
    ap.add_argument("--parent", type=int, required=True, help="the console's pid: this process ends with it")
    ap.add_argument("--rss-max-mb", type=float, default=RSS_MAX_MB)
    a = ap.parse_args(argv)
    _die_with(a.parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the console's to handle
    try:
        os.nice(NICE)
    except (OSError, AttributeError):
        pass
    # Frames go out on a private copy of the standard output; anything printed goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        return serve(sys.stdin.buffer, out, rss_max_mb=a.rss_max_mb)
    except BrokenPipeError:
        return 0  # the console went away while a result was on its way
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())

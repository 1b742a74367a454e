"""The console's side of its analysis worker (``console/analysis_worker.py``).

:class:`AnalysisWorker` starts the worker process with the console (:meth:`~AnalysisWorker.serve`,
a coroutine on the app's event loop: no thread), sends it one run at a time
(:meth:`~AnalysisWorker.run`, from ``console/analysis_runs.py``) and hands each result to the app
(``deliver``) as it arrives. The worker's life:

* it ends with the console: :meth:`serve` ends it when the app stops, and the worker ends itself
  when the console is gone however it went (its standard input at an end, its parent's pid);
* if it dies (killed, crashed) the run under way is given up (``deliver`` gets it back with
  ``lost``), the operator is told once (``report``: what ended it and its last words), and a new
  one starts — at once, then after 1, 2, 5, 10, 30 s while it keeps dying young;
* a run that takes more than ``run_timeout_s`` (a worker stopped, or starved) is given up the same
  way: the worker is killed and started again;
* it leaves on its own after a run that left its memory above ``rss_max_mb`` and a new one starts
  (the next run reads the open graph again): nobody is told, nothing is lost.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

from store.jsontypes import JsonObject

from .analysis import RunRequest, RunResult
from .analysis_worker import FRAME_MAX, HEADER, RSS_MAX_MB, encode
from .text import safe_line

RUN_TIMEOUT_S = 120.0  # a run not answered in this long: the worker is killed and started again
RESTART_DELAYS_S = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0)  # after each death in a row
LIVED_S = 60.0  # a worker that lived this long before it died starts the delays again
STDERR_TAIL = 4096  # bytes of the worker's last words kept
STOP_WAIT_S = 1.0  # on close: how long the worker has to leave before it is killed


def worker_command(parent: int, rss_max_mb: float = RSS_MAX_MB) -> tuple[list[str], dict[str, str]]:
    """The worker's argv and environment: this interpreter, the same ``console`` package."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    argv = [sys.executable or "python3", "-m", "console.analysis_worker", "--parent", str(parent),
            "--rss-max-mb", f"{rss_max_mb:g}"]
    return argv, env


def how_it_ended(returncode: int | None) -> str:
    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        try:
            return f"it was killed ({signal.Signals(-returncode).name})"
        except ValueError:
            return f"it was killed (signal {-returncode})"
    return f"it exited with status {returncode}"


class AnalysisWorker:
    """The worker process, seen from the console (see the module's docstring). Used on the app's
    event loop only."""

    def __init__(self, target: str, *, deliver: Callable[[RunRequest, RunResult], object],
                 report: Callable[[str], object], connect_timeout_s: float | None = None,
                 run_timeout_s: float = RUN_TIMEOUT_S, rss_max_mb: float = RSS_MAX_MB,
                 command: Callable[[int], tuple[list[str], dict[str, str]]] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.target = target
        self.deliver = deliver
        self.report = report
        self.connect_timeout_s = connect_timeout_s
        self.run_timeout_s = run_timeout_s
        self.rss_max_mb = rss_max_mb
        self.command = command or (lambda parent: worker_command(parent, rss_max_mb))
        self.monotonic = monotonic
        self.last_seconds: dict[str, float] = {}  # each kind of run's last wall time, in the worker
        self.in_flight: RunRequest | None = None
        self.following: str | None = None  # the graph whose analysis the worker was asked to keep
        self.pid: int | None = None  # the worker's, once it said it is ready
        self.stats: JsonObject = {}  # what it said of itself after its last run (analysis_worker.py)
        self.starts = 0
        self.deaths = 0  # deaths and runs given up (each reported)
        self.stderr_tail = b""
        self._proc: asyncio.subprocess.Process | None = None
        self._queue: list[tuple[bytes, bool]] = []  # (frame, a run?) for the next worker (none yet, or this one leaves)
        self._leaving = False  # the worker said it leaves after its last result
        self._run_sent = False  # the run in flight went to the worker there is now
        self._sent_at = 0.0
        self._kick = asyncio.Event()
        self._closed = False

    # ------------------------------------------------------------------ the app's side
    @property
    def busy(self) -> bool:
        return self.in_flight is not None

    def run(self, req: RunRequest) -> None:
        """Send one run (one at a time: the scheduler never starts one while another is out)."""
        if self.in_flight is not None:
            raise RuntimeError("an analysis run is already under way")
        self.in_flight = req
        if req.graph is None:
            self.following = None
        elif req.parts != frozenset({"nodes"}) and req.graph.loaded:
            self.following = req.graph.task_id
        self._send(encode(("run", req)), run=True)
        self._kick.set()

    def drop_graph(self) -> None:
        """No graph is open any more: the worker frees its analysis."""
        if self.following is not None:
            self.following = None
            self._send(encode(("drop",)))

    def _send(self, frame: bytes, *, run: bool = False) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.returncode is not None or self._leaving:
            self._queue.append((frame, run))
            return
        if run:
            self._run_sent = True
            self._sent_at = self.monotonic()
        try:
            proc.stdin.write(frame)
        except (BrokenPipeError, ConnectionResetError, RuntimeError):
            pass  # it is dying: serve() sees it end and gives the run back

    # ------------------------------------------------------------------ its life
    async def serve(self) -> None:
        """Start the worker, read its answers, start it again when it dies; until cancelled or
        :meth:`close` (the app stopping)."""
        delays = 0
        try:
            while not self._closed:
                started = self.monotonic()
                try:
                    await self._spawn()
                except OSError as e:
                    self.report(f"estimates and signals are off: the analysis worker could not start: {e}")
                    return
                why = await self._pump()
                proc, self._proc = self._proc, None
                assert proc is not None
                try:
                    await asyncio.wait_for(proc.wait(), STOP_WAIT_S * 5)
                except asyncio.TimeoutError:
                    self._kill(proc)
                    await proc.wait()
                self.pid = None
                self.following = None
                self._leaving = False
                self._queue = [(f, run) for f, run in self._queue if run]  # (a drop: the new one follows nothing)
                lost = self.in_flight if self._run_sent else None  # (a run still queued goes to the next one)
                if lost is not None:
                    self.in_flight = None
                if why == "bye" or self._closed:
                    if lost is not None:
                        self.deliver(lost, RunResult(lost.kind, lost.parts, error="the analysis worker left", lost=True))
                    continue
                self.deaths += 1
                last = _last_line(self.stderr_tail)
                said = f" ({safe_line(last, limit=200)})" if last else ""
                ended = why if why != "ended" else how_it_ended(proc.returncode)
                self.report(f"estimates and signals: the analysis worker stopped — {ended}{said}; starting it again")
                if lost is not None:
                    self.deliver(lost, RunResult(lost.kind, lost.parts, error="the analysis worker stopped", lost=True))
                if self.monotonic() - started >= LIVED_S:
                    delays = 0
                delay = RESTART_DELAYS_S[min(delays, len(RESTART_DELAYS_S) - 1)]
                delays += 1
                if delay:
                    await asyncio.sleep(delay)
        finally:
            await self._stop()

    async def close(self) -> None:
        self._closed = True
        await self._stop()

    async def _spawn(self) -> None:
        argv, env = self.command(os.getpid())
        self.stderr_tail = b""
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE, env=env)
        self._proc = proc
        self.starts += 1
        assert proc.stdin is not None
        proc.stdin.write(encode(("open", {"target": self.target, "connect_timeout_s": self.connect_timeout_s})))
        queued, self._queue = self._queue, []
        for frame, run in queued:
            self._send(frame, run=run)

    async def _pump(self) -> str:
        """Read the worker's answers until it ends (``ended``), leaves (``bye``) or a run is not
        answered in time (then it is killed)."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        errs = asyncio.ensure_future(self._read_stderr(proc.stderr))
        read = asyncio.ensure_future(_read_message(proc.stdout))
        try:
            while True:
                timeout = None
                if self.in_flight is not None:
                    timeout = max(0.0, self._sent_at + self.run_timeout_s - self.monotonic())
                self._kick.clear()
                kick = asyncio.ensure_future(self._kick.wait())
                try:
                    done, _ = await asyncio.wait({read, kick}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    kick.cancel()
                if read not in done:
                    if not done:  # the run under way was not answered in time
                        self._kill(proc)
                        return f"a run took more than {self.run_timeout_s:g} s"
                    continue  # a run was sent: its deadline counts from now
                try:
                    message = read.result()
                except (asyncio.IncompleteReadError, ConnectionResetError, ValueError):
                    message = None
                if message is None:
                    return "bye" if self._leaving else "ended"
                self._took(message)
                read = asyncio.ensure_future(_read_message(proc.stdout))
        finally:
            read.cancel()
            try:
                await asyncio.wait_for(errs, STOP_WAIT_S)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass

    def _took(self, message: tuple[Any, ...]) -> None:
        if message[0] == "ready":
            self.pid = int(message[1])
        elif message[0] == "result":
            result: RunResult = message[1]
            self.stats = dict(message[2])
            self._leaving = bool(self.stats.get("leaving"))
            req, self.in_flight = self.in_flight, None
            self._run_sent = False
            if req is None:
                return
            if result.error is None:
                self.last_seconds[result.kind] = result.took_s
            self.deliver(req, result)

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        while True:
            chunk = await stream.read(4096)
            if not chunk:
                return
            self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL:]

    def _kill(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass

    async def _stop(self) -> None:
        """End the worker: its input closed (it leaves after the run under way), killed if it has
        not left within ``STOP_WAIT_S``; its pipes closed."""
        self._closed = True
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.returncode is None:
                if proc.stdin is not None:
                    proc.stdin.close()
                await asyncio.wait_for(proc.wait(), STOP_WAIT_S)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self._kill(proc)
        except Exception:  # noqa: BLE001 - a pipe already broken: the kill makes sure
            self._kill(proc)
        try:  # reaped here, while the loop that watches it still runs
            await asyncio.wait_for(proc.wait(), STOP_WAIT_S)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass
        finally:
            # (asyncio's Process has no close(): its transport does — it kills a process still
            # there and closes the pipes, which would otherwise be closed by a loop already gone)
            transport = getattr(proc, "_transport", None)
            if transport is not None:
                transport.close()


async def _read_message(stream: asyncio.StreamReader) -> Any:
    """The next frame's message; None at the end of the stream."""
    import pickle

    try:
        head = await stream.readexactly(HEADER.size)
    except asyncio.IncompleteReadError:
        return None
    (n,) = HEADER.unpack(head)
    if n > FRAME_MAX:
        raise ValueError(f"a frame of {n} bytes")
    body = await stream.readexactly(n)
    return pickle.loads(body)


def _last_line(raw: bytes) -> str:
    lines = [ln for ln in raw.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


__all__ = ["AnalysisWorker", "LIVED_S", "RESTART_DELAYS_S", "RUN_TIMEOUT_S", "how_it_ended", "worker_command"]

"""``warden demo``: simulated agents in worker processes on a throw-away ledger, and the console.

1. A fresh directory (a temp dir unless ``--dir``) gets ``ledger.db`` — finished history (so the
   estimates have samples) and three live tasks — and ``runs/`` with three interrupted runs, its
   project inputs beside it (so ``warden recover RUN`` works from that directory with defaults).
2. Six worker processes (``python -m console.demo.worker``) play the agents through the public agent
   API only. A supervisor thread restarts a worker that crashed on purpose (the report verifier),
   under a new name; its node is reclaimed once its lease expires.
3. The console opens on the ledger and the runs. On quit the workers are told to stop (a stop
   file), then terminated and, if need be, killed: no process is left behind. A worker also exits
   by itself when its parent is gone.

``with_console=False`` (the hidden ``--no-console``) runs the workers headless until every live
task has ended or SIGINT, printing what happened — handy for tests and measuring.

The runner and the agents (``agent``, ``simulation``, ``layout``, ``world``, ``worker`` beside it)
talk to the store through its public API only; the agents import nothing else from the console.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

from store import Ledger

from .layout import DemoPaths, create_demo
from .world import CRASH_EXIT, LIVE_TASKS, ROSTER

STOP_GRACE_S = 3.0
"""How long workers get to stop on their own before they are terminated."""

MAX_RESTARTS = 3
"""How often one worker is restarted after an unplanned death (the planned crash always is)."""


class WorkerPool:
    """The demo's worker processes, supervised: a crashed worker is restarted under a new name."""

    def __init__(self, paths: DemoPaths, *, speed: float, seed: int, log_dir: Path) -> None:
        self.paths = paths
        self.speed = speed
        self.seed = seed
        self.log_dir = log_dir
        self.stop_file = paths.root / "STOP"
        self.procs: dict[str, tuple[subprocess.Popen, str]] = {}
        self.crashes: list[str] = []
        self._restarts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _spawn(self, name: str, role: str) -> None:
        log = open(self.log_dir / f"{name}.log", "ab")
        cmd = [sys.executable, "-m", "console.demo.worker", "--ledger", str(self.paths.ledger), "--worker", name,
               "--role", role, "--speed", repr(self.speed), "--seed", str(self.seed),
               "--stop-file", str(self.stop_file), "--parent-pid", str(os.getpid())]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the directory holding store/ and console/
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        # A session of their own: the terminal's ^C / ^Z reach the demo, which stops them in order.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, close_fds=True)
        log.close()
        self.procs[name] = (proc, role)

    def start(self) -> "WorkerPool":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.stop_file.unlink()
        except FileNotFoundError:
            pass
        with self._lock:
            for name, role in ROSTER:
                self._spawn(name, role)
        self._thread = threading.Thread(target=self._supervise, name="demo-supervisor", daemon=True)
        self._thread.start()
        return self

    def _supervise(self) -> None:
        while not self._stopping.wait(0.25):  # a supervisor's poll, not synchronisation
            with self._lock:
                for name, (proc, role) in list(self.procs.items()):
                    rc = proc.poll()
                    if rc is None or self._stopping.is_set():
                        continue
                    del self.procs[name]
                    base = name.split("-")[0]
                    k = self._restarts.get(base, 1) + 1
                    if rc == CRASH_EXIT or (rc != 0 and k <= MAX_RESTARTS + 1):
                        # the planned crash, or an unplanned death (see logs/NAME.log): restart it
                        self.crashes.append(name if rc == CRASH_EXIT else f"{name} (exit {rc})")
                        self._restarts[base] = k
                        self._spawn(f"{base}-{k}", role)

    def pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p, _ in self.procs.values()]

    def stop(self) -> None:
        """Ask every worker to stop, then terminate, then kill; reap them all."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        self.stop_file.write_text("stop\n")
        procs = [p for p, _ in self.procs.values()]
        deadline = time.monotonic() + STOP_GRACE_S
        for p in procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()


def _wait_headless(paths: DemoPaths, out: TextIO, stop: threading.Event) -> int:
    """Follow the live tasks until every one has ended (or ``stop``); print each ending."""
    seen: dict[str, str] = {}
    handoffs: set[str] = set()
    with Ledger.open(paths.ledger, create=False) as ledger:
        while not stop.is_set():
            for t in ledger.tasks():
                if t.task_id not in LIVE_TASKS:
                    continue
                if seen.get(t.task_id) != t.status:
                    seen[t.task_id] = t.status
                    print(f"{t.task_id}: {t.status} ({t.done}/{t.total} nodes, {t.tokens_used} tokens)", file=out,
                          flush=True)
            for h in ledger.handoffs():
                if h.id not in handoffs:
                    handoffs.add(h.id)
                    print(f"handoff {h.id} open on {h.task_id}/{h.node}: {h.question} "
                          f"(warden resolve {h.id} --option ID --ledger {paths.ledger})", file=out, flush=True)
            if all(seen.get(t) in ("completed", "failed", "aborted") for t in LIVE_TASKS):
                return 0
            stop.wait(0.5)  # a human-facing follow loop, not synchronisation
    return 130


def run_demo(
    *,
    directory: str | None = None,
    speed: float = 1.0,
    seed: int = 7,
    operator: str | None = None,
    with_console: bool = True,
    out: TextIO | None = None,
    console: Callable[..., int] | None = None,
    bell: bool = True,
    on_alert: list[str] | None = None,
) -> int:
    """Build the demo, start the workers, open the console (or follow headless); stop everything."""
    out = out or sys.stdout
    if speed <= 0:
        print("warden: --speed must be positive", file=sys.stderr)
        return 2
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="warden-demo-"))
    print(f"building the demo in {root} …", file=out, flush=True)
    paths = create_demo(root, seed=seed)
    pool = WorkerPool(paths, speed=speed, seed=seed, log_dir=paths.root / "logs")
    rc = 0
    stop = threading.Event()
    previous = None
    if not with_console and threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        pool.start()
        print(f"{len(ROSTER)} simulated agents started (speed {speed:g}, seed {seed}); logs in {paths.root / 'logs'}",
              file=out, flush=True)
        if with_console:
            if console is None:
                from ..app import run_console as console
            assert console is not None
            rc = console(ledger=str(paths.ledger), runs=str(paths.runs), read_only=False, operator=operator,
                         project=str(paths.root), records=None, bell=bell, on_alert=on_alert)
        else:
            rc = _wait_headless(paths, out, stop)
    finally:
        pool.stop()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if pool.crashes:
            print(f"workers that crashed on purpose and were restarted: {', '.join(pool.crashes)}", file=out)
        print(f"the demo ledger is {paths.ledger}", file=out)
        print(f"reopen it with:   {paths.reopen}", file=out)
        print(f"recover a run:    cd {paths.root} && warden recover review-export-07", file=out, flush=True)
    return int(rc or 0)


__all__ = ["run_demo", "WorkerPool"]

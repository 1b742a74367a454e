"""One demo agent as a worker process: ``python -m console.demo.worker --ledger X --worker w1 ...``.

The driver sleeps ``seconds / speed`` of real time between the agent's steps (the simulated agent
"working"), stops when the stop file appears or its parent dies, and ``os._exit``\\ s with
``CRASH_EXIT`` on a simulated crash (``warden demo``'s supervisor restarts it). It imports the
store's public API and this package only: an agent process, not a console.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Sequence

from store import Ledger

from .agent import DemoAgent
from .world import CRASH_EXIT, LEASE_S, ROLES, TICK_S


def _set_parent_death_signal() -> None:
    """Linux: ask the kernel to SIGTERM us when the parent dies (belt and braces with getppid)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def worker_main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m console.demo.worker", description="one simulated demo agent")
    p.add_argument("--ledger", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--role", default="any", choices=sorted(ROLES))
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--stop-file", required=True, help="stop when this file exists")
    p.add_argument("--parent-pid", type=int, default=None, help="stop when this process is gone")
    args = p.parse_args(argv)
    speed = max(0.01, args.speed)
    parent = args.parent_pid or os.getppid()
    _set_parent_death_signal()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))

    def log(line: str) -> None:
        sys.stdout.write(f"{time.strftime('%H:%M:%S')} {args.worker}: {line}\n")
        sys.stdout.flush()

    def should_stop() -> bool:
        return os.path.exists(args.stop_file) or os.getppid() != parent

    if should_stop():
        return 0
    ledger = Ledger.open(args.ledger, create=False)
    # Leases and heartbeats are real time in a live ledger: scale them, keep a floor for slow disks.
    agent = DemoAgent(ledger, args.worker, args.role, tick_s=TICK_S, lease_s=max(LEASE_S / speed, 2.0),
                      speed=speed, seed=args.seed, log=log, crash=lambda: os._exit(CRASH_EXIT))
    log(f"started (role {args.role}, speed {speed:g})")
    gen = agent.loop()
    try:
        for wait in gen:
            end = time.monotonic() + max(0.0, float(wait)) / speed
            while True:  # the simulated agent "working"; not synchronisation
                if should_stop():
                    log("stopping")
                    return 0
                left = end - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(left, 0.1))
    finally:
        ledger.close()
    return 0


__all__ = ["worker_main"]


if __name__ == "__main__":
    sys.exit(worker_main())

"""An agent process that works a ledger at a given pace, through the store's agent API — the busy
agents an operator's park, abort, narrow and rewind must go through (tests/bench/bench_control.py,
tests/console/test_control_pty.py).

    python tests/support/step_agent.py LEDGER WORKER STOPFILE [--rate 10] [--task T] [--seed 1]

Until STOPFILE exists: claims a node (of ``--task``, else of any task), heartbeats it 1 to 3 times
and commits it, one write — a *step* — every ``1/rate`` seconds (±20 %: the pace only spreads the
writes, nothing synchronises on it). A parked heartbeat makes it finish its step and commit, as
a well-behaved agent does; a lost lease (parked with ``--now``, aborted, rewound, narrowed away)
drops the node and claims the next. Nothing to claim: it waits one step and asks again. Prints
``ready`` once its ledger is open, and at the end one JSON line: its steps, claims, commits, lost
leases.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def command(ledger: str, worker: str, stop: str, *, rate: float = 10.0, task: str | None = None,
            seed: int = 1) -> list[str]:
    out = [sys.executable, os.path.abspath(__file__), ledger, worker, stop, "--rate", str(rate), "--seed", str(seed)]
    return out + (["--task", task] if task else [])


def main(argv: list[str]) -> None:
    sys.path.insert(0, ROOT)
    from store import LeaseLost, Ledger
    from store.errors import LedgerUnavailable

    ap = argparse.ArgumentParser()
    ap.add_argument("ledger")
    ap.add_argument("worker")
    ap.add_argument("stop")
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--task")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    led = Ledger.open(args.ledger, create=False)
    print("ready", flush=True)
    counts = {"steps": 0, "claims": 0, "commits": 0, "lost": 0, "busy": 0}

    def pace() -> None:
        time.sleep(rng.uniform(0.8, 1.2) / args.rate)

    while not os.path.exists(args.stop):
        pace()
        try:
            claim = led.claim(args.task, args.worker, lease_s=60)
        except LedgerUnavailable:  # a lock held past the busy timeout: the next step tries again
            counts["busy"] += 1
            continue
        counts["steps"] += 1
        if claim is None:
            continue
        counts["claims"] += 1
        try:
            for part in range(rng.randint(1, 3)):
                pace()
                pulse = led.heartbeat(claim, units_done=part + 1, units_total=4,
                                      observation=f"{claim.node_key}: part {part + 1} of 4 at step {counts['steps']}")
                counts["steps"] += 1
                if pulse.parked:
                    break  # parked: finish this step (commit) and claim nothing more
            pace()
            led.commit(claim, output={"by": args.worker, "node": claim.node_key})
            counts["steps"] += 1
            counts["commits"] += 1
        except LeaseLost:
            counts["lost"] += 1
        except LedgerUnavailable:
            counts["busy"] += 1
    led.close()
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

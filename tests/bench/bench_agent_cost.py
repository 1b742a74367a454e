"""One agent's cost per write: CPU and wall time of claim, three heartbeats with an
observation and commit — the fleet benchmark's node — on a fleet-shaped ledger, and the statements
a write sends.

    python tests/bench/bench_agent_cost.py                           # SQLite in a temporary directory
    python tests/bench/bench_agent_cost.py postgresql://…/empty_db   # an empty PostgreSQL database
    python tests/bench/bench_agent_cost.py --profile                 # and a cProfile of 100 nodes
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from store import Ledger
    from tests.support import fleet

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", nargs="?", help="a ledger URL or path (empty); default: SQLite in a temp dir")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    target = a.target or os.path.join(tempfile.mkdtemp(prefix="bench-agent-"), "ledger.db")
    fleet.build(target, 20, 29)
    led = Ledger.open(target, create=False)
    rng = random.Random(1)
    ids = fleet.task_ids(20)
    statements = [0]
    db = led.db
    real = db.execute_sql

    def counted(*args, **kw):
        statements[0] += 1
        return real(*args, **kw)

    db.execute_sql = counted

    by_kind = {"claim": 0, "heartbeat": 0, "commit": 0}

    def kind(name: str, fn, *args, **kw):
        before = statements[0]
        out = fn(*args, **kw)
        by_kind[name] += statements[0] - before
        return out

    def cycle(n: int) -> int:
        writes = 0
        for i in range(n):
            c = kind("claim", led.claim, ids[i % len(ids)], "bench", lease_s=60.0)
            if c is None:
                continue
            for b in range(fleet.HEARTBEATS):
                kind("heartbeat", led.heartbeat, c, units_done=b + 1, units_total=fleet.HEARTBEATS + 1, tokens=40,
                     observation=f"{c.node_key}: step {b + 1} of {fleet.HEARTBEATS + 1}, "
                                 f"{rng.randint(0, 10 ** 6)} rows checked")
            kind("commit", led.commit, c, output={"rows": 1}, tokens=120)
            writes += 2 + fleet.HEARTBEATS
        return writes

    cycle(20)
    statements[0] = 0
    by_kind.update(claim=0, heartbeat=0, commit=0)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    w = cycle(a.nodes)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    nodes = w / (2 + fleet.HEARTBEATS)
    print(f"{led.backend if hasattr(led, 'backend') else ''} {w} writes: {1000 * cpu / w:.2f} ms CPU and "
          f"{1000 * wall / w:.2f} ms wall a write, {statements[0] / w:.1f} statements a write "
          f"(claim {by_kind['claim'] / nodes:.1f}, heartbeat {by_kind['heartbeat'] / nodes / fleet.HEARTBEATS:.1f}, "
          f"commit {by_kind['commit'] / nodes:.1f}; BEGIN and COMMIT not counted)")
    if a.profile:
        prof = cProfile.Profile()
        prof.enable()
        cycle(a.nodes)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()

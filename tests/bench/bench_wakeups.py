"""What following a write stream costs the console's loop before any read.

    python tests/bench/bench_wakeups.py                 # 60 and 200 writes/s, unspaced and spaced (1/30 s)
    python tests/bench/bench_wakeups.py --rates 200 --spacings 0

A SQLite ledger in a temporary directory; a writer process claims and commits (two writes a node)
paced to the rate for ``--seconds``; this process iterates ``Feed.wakeups()`` (inotify and the
commit probe, store/storage/watch.py) on its asyncio loop, reading nothing, and reports the wake-ups by
reason and the loop thread's CPU time (``time.thread_time``: the inotify reads, the probe's
``PRAGMA data_version`` checks, the timers and the loop's own turns).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

WRITER = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
from store import Ledger
led = Ledger.open(sys.argv[1])
end = time.monotonic() + float(sys.argv[4]); nxt = time.monotonic(); n = 0
while time.monotonic() < end:
    c = led.claim("t", "w", lease_s=60)
    led.commit(c)
    n += 2
    nxt += 2 / float(sys.argv[3])
    time.sleep(max(0.0, nxt - time.monotonic()))  # pacing the load generator
print(n)
"""


async def follow(path: str, rate: float, spacing: float, seconds: float) -> dict:
    from store.reading.feed import Feed

    feed = Feed(path, read_only=True, spacing_s=spacing)
    reasons: collections.Counter[str] = collections.Counter()

    async def consume() -> None:
        async for r in feed.wakeups():
            reasons[r] += 1

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.5)  # the watch is set
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, path, str(ROOT), str(rate),
                                                str(seconds), stdout=subprocess.PIPE)
    c0 = time.thread_time()
    out, _ = await proc.communicate()
    cpu = time.thread_time() - c0
    task.cancel()
    return {"rate": rate, "spacing_s": spacing, "writes": int(out.decode().split()[-1]), "wake_ups": dict(reasons),
            "loop_cpu_pct": round(100 * cpu / seconds, 1)}


def main() -> None:
    from store import Ledger, NodeSpec

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")], default=[60.0, 200.0])
    ap.add_argument("--spacings", type=lambda s: [float(x) for x in s.split(",")], default=[0.0, 1 / 30])
    ap.add_argument("--seconds", type=float, default=5.0)
    a = ap.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for spacing in a.spacings:
        for rate in a.rates:
            with tempfile.TemporaryDirectory(prefix="bench-wakeups-") as d:
                path = os.path.join(d, "ledger.db")
                with Ledger.open(path, create=True) as led:
                    led.create_task("t", title="stream")
                    led.add_nodes("t", [NodeSpec(key=f"n{i}") for i in range(int(rate * a.seconds))])
                print(asyncio.run(follow(path, rate, spacing, a.seconds)))


if __name__ == "__main__":
    main()

"""Ledger throughput and claim latency on SQLite (synchronous=FULL, WAL).

Run: python tests/bench/bench_ledger.py [--commits N] [--procs 4]

1. Atomic step commits per second from one process: each iteration is claim → commit (two write
   transactions, each fsynced); we report commits/s counting the commit transactions, and
   claim+commit pairs/s.
2. Claim latency with 4 competing processes draining one task: per-claim wall time, p50/p95/p99.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import Ledger, NodeSpec  # noqa: E402


def commits_per_second(path: str, n: int) -> dict:
    led = Ledger.open(path)
    led.create_task("bench")
    led.add_nodes("bench", [NodeSpec(f"n{i}", kind="k") for i in range(n)])
    claims = []
    t0 = time.perf_counter()
    for _ in range(n):
        claims.append(led.claim("bench", "w", lease_s=600))
    t_claim = time.perf_counter() - t0
    t0 = time.perf_counter()
    for c in claims:
        led.commit(c, output={"ok": True}, tokens=10)
    t_commit = time.perf_counter() - t0
    led.close()
    return {"steps": n, "commits_per_s": round(n / t_commit), "claims_per_s": round(n / t_claim),
            "claim_plus_commit_per_s": round(n / (t_claim + t_commit))}


def group_commits_per_second(path: str, n: int, group: int) -> dict:
    """commit_many: `group` steps per write transaction (one fsync), each step fenced and atomic."""
    led = Ledger.open(path)
    led.create_task("bench")
    led.add_nodes("bench", [NodeSpec(f"n{i}", kind="k") for i in range(n)])
    claims = [led.claim("bench", "w", lease_s=600) for _ in range(n)]
    t0 = time.perf_counter()
    for i in range(0, n, group):
        res = led.commit_many([(c, {"output": {"ok": True}, "tokens": 10}) for c in claims[i:i + group]])
        assert all(isinstance(r, int) for r in res)
    t = time.perf_counter() - t0
    led.close()
    return {"steps": n, "group": group, "commits_per_s": round(n / t)}


def fsyncs_per_second(directory: str, n: int = 300) -> int:
    """The disk's own limit: write + fsync of one 4 KiB page."""
    p = os.path.join(directory, "fsync.probe")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT)
    t0 = time.perf_counter()
    for _ in range(n):
        os.pwrite(fd, b"x" * 4096, 0)
        os.fsync(fd)
    t = time.perf_counter() - t0
    os.close(fd)
    return round(n / t)


def _drain(path: str, worker: str, q) -> None:
    led = Ledger.open(path, create=False)
    lat = []
    while True:
        t0 = time.perf_counter()
        c = led.claim("race", worker, lease_s=600)
        lat.append(time.perf_counter() - t0)
        if c is None:
            break
        led.commit(c, output=None)
    q.put(lat)


def claim_latency(path: str, nodes: int, procs: int) -> dict:
    led = Ledger.open(path)
    led.create_task("race")
    led.add_nodes("race", [NodeSpec(f"n{i}") for i in range(nodes)])
    led.close()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_drain, args=(path, f"w{i}", q)) for i in range(procs)]
    t0 = time.perf_counter()
    for p in ps:
        p.start()
    lats = [x for _ in ps for x in q.get()]
    for p in ps:
        p.join()
    wall = time.perf_counter() - t0
    lats.sort()
    q_ = lambda f: round(lats[min(len(lats) - 1, int(f * len(lats)))] * 1000, 2)  # noqa: E731
    return {"processes": procs, "nodes": nodes, "claims": len(lats), "p50_ms": q_(0.5), "p95_ms": q_(0.95),
            "p99_ms": q_(0.99), "mean_ms": round(statistics.mean(lats) * 1000, 2),
            "throughput_steps_per_s": round(nodes / wall)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=3000)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--dir", default=None, help="where the ledger lives (default: the system temp dir)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        print(json.dumps({"fsync_per_s": fsyncs_per_second(d)}))
        print(json.dumps({"commit": commits_per_second(os.path.join(d, "a.db"), a.commits)}))
        for g in (8, 32):
            print(json.dumps({"group_commit": group_commits_per_second(os.path.join(d, f"g{g}.db"), a.commits, g)}))
        print(json.dumps({"claim_latency": claim_latency(os.path.join(d, "b.db"), a.nodes, a.procs)}))


if __name__ == "__main__":
    main()

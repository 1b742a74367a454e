"""What the task's mind costs a claim: ``Claim.inputs["memory"]`` is read inside every
claim's transaction — the task's requirements, the rejected paths of the node and all its
ancestors (a recursive query), the conclusions of its dependencies, the confirmed memories of its
kind and workflow.

Run: python tests/bench/bench_mind.py [--nodes 2000] [--claims 300] [--backend sqlite|URL]

Two tasks of ``--nodes`` nodes each, on one ledger:

* ``plain`` — no requirements, nothing concluded (the cost every agent pays now);
* ``mind``  — 8 requirements, every node serving one; a chain (each node depends on the one before,
  so the last claims have thousands of ancestors), a rejected path on every 10th node and two
  conclusions on every node, 40 confirmed memories in its workflow.

Each task's first half is claimed and committed (writing the entries), then ``--claims`` claims of
the second half are timed (claim only, each followed by an untimed commit). Reported: p50/p95/max
per claim, the size of the memory block handed out, and (``recall_only``) the memory read alone for
the last node (the deepest: every other node is its ancestor), without the claim's write.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import Ledger, NodeSpec  # noqa: E402
from store.storage import sql  # noqa: E402
from store.storage.db import read_tx  # noqa: E402
from store.mind.recall import memory_inputs  # noqa: E402


def build(led: Ledger, task: str, n: int, mind: bool) -> None:
    reqs = [{"id": f"r{i}", "text": f"requirement {i}: " + "x" * 200} for i in range(8)] if mind else None
    led.create_task(task, workflow="bench-" + task, requirements=reqs, drift_after=8, alignment_every=0)
    specs = []
    for i in range(n):
        deps = (f"n{i - 1}",) if (mind and i) else ()
        specs.append(NodeSpec(f"n{i}", kind="k", deps=deps, serves=(f"r{i % 8}",) if mind else ()))
    led.add_nodes(task, specs)


def run_first_half(led: Ledger, task: str, n: int, mind: bool) -> None:
    for i in range(n // 2):
        c = led.claim(task, "w", lease_s=600, key=f"n{i}")
        assert c is not None
        if mind:
            led.conclude(c, f"finding {i}a " + "y" * 300, source=f"file{i}.py")
            led.conclude(c, f"finding {i}b", source="cmd")
            if i % 10 == 0:
                led.conclude(c, f"path {i}", kind="rejected", reason="z" * 200, source="tests")
            if i == 0:
                for m in range(40):
                    led.propose_memory(c, f"memory {m} " + "m" * 100, scope="workflow", source="tests")
        led.commit(c, output={"i": i})
    if mind:
        for m in led.memories(status="pending"):
            led.apply(led.plan_memory(m.id, decision="confirm", reason="bench"), operator="bench")


def time_claims(led: Ledger, task: str, n: int, count: int) -> dict[str, float]:
    times = []
    size = 0
    for i in range(n // 2, min(n, n // 2 + count)):
        t0 = time.perf_counter()
        c = led.claim(task, "w", lease_s=600, key=f"n{i}")
        times.append(time.perf_counter() - t0)
        assert c is not None
        size = len(json.dumps(c.inputs["memory"]))
        led.commit(c, output={"i": i})
    times.sort()
    return {"p50_ms": round(statistics.median(times) * 1000, 2),
            "p95_ms": round(times[int(len(times) * 0.95) - 1] * 1000, 2),
            "max_ms": round(times[-1] * 1000, 2), "memory_bytes": size, "claims": len(times)}


def time_recall(led: Ledger, task: str, key: str, rounds: int = 50) -> dict[str, float]:
    """The memory read alone (no write, no fsync): what it adds inside a claim's transaction."""
    times = []
    for _ in range(rounds):
        with read_tx(led.db):
            t0 = time.perf_counter()
            t = led.task_record(task)
            n = led.node_record(task, key)
            deps = [i for (i,) in sql.fetch_all(led.db, "SELECT src_id FROM edge WHERE dst_id = ?", [n.id])]
            memory_inputs(led, t, n, deps)
            times.append(time.perf_counter() - t0)
    times.sort()
    return {"p50_ms": round(statistics.median(times) * 1000, 2), "max_ms": round(times[-1] * 1000, 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=2000)
    p.add_argument("--claims", type=int, default=300)
    p.add_argument("--backend", default="sqlite", help="sqlite, or a postgresql:// URL (a scratch database)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "ledger.db") if args.backend == "sqlite" else args.backend
        with Ledger.open(target) as led:
            out = {"nodes": args.nodes, "backend": "sqlite" if args.backend == "sqlite" else "postgresql",
                   "load": os.getloadavg()[0]}
            for task, mind in (("plain", False), ("mind", True)):
                build(led, task, args.nodes, mind)
                run_first_half(led, task, args.nodes, mind)
                out[task] = time_claims(led, task, args.nodes, args.claims)
                out[task]["recall_only"] = time_recall(led, task, f"n{args.nodes - 1}")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

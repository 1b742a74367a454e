"""Operator-action plan and apply times on a large task (SQLite, WAL, synchronous=FULL).

Run: python tests/bench/bench_actions.py [--nodes 100000] [--modules 10] [--repeat 5] [--keep DIR]

The task has ``--nodes`` nodes in ``--modules`` modules of equal size (10 × 10,000 by default).
Inside a module node j depends on nodes (j-1)//2 and (j-2)//2 (a binary tree with diamonds); the
module's root carries the precondition ``{"module": "mK"}``; every node is succeeded. Measured:

1. plan_rewind of module 3's root: the root and its 10,000-node downstream closure → pending.
2. plan_narrow --set module=[every module but m3]: m3's root → abandoned, the other 9,999 → pending.
3. plan_narrow as 2 when *every* node names the module (100,000 preconditions to read).
4. plan_abort of the whole task (100,000 nodes) — for scale, no target.
5. apply of 1 and 2 (each on a fresh copy of the ledger).

Plans are timed from the call to the returned Plan (median of ``--repeat``; the minimum and the
median process CPU time are reported too, since on a shared machine the wall time mostly measures
other processes); apply from the call to the committed (fsynced) transaction.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import Ledger, NodeSpec  # noqa: E402


def build(path: str, nodes: int, modules: int, every_node_names_module: bool) -> None:
    led = Ledger.open(path)
    led.create_task("big", preconditions={"module": [f"m{m}" for m in range(modules)]})
    per = nodes // modules
    specs = []
    for m in range(modules):
        for j in range(per):
            deps = sorted({f"m{m}.{(j - 1) // 2}", f"m{m}.{max(0, (j - 2) // 2)}"}) if j else []
            pre = {"module": f"m{m}"} if (j == 0 or every_node_names_module) else None
            specs.append(NodeSpec(f"m{m}.{j}", kind="step", deps=tuple(deps), preconditions=pre))
    led.add_nodes("big", specs)
    led.db.execute_sql("UPDATE node SET status = 'succeeded', version = version + 1, attempt = 1, "
                       "claim_count = 1, output = '{}' WHERE task_id = 'big'")
    led.close()


MINS: dict[str, float] = {}
CPU: dict[str, float] = {}


def timed(fn, repeat: int, name: str = "") -> tuple[float, object]:
    """Median of ``repeat`` runs (the minimum is kept in MINS: on a shared machine it is the
    figure least disturbed by other processes)."""
    times, cpu, out = [], [], None
    for _ in range(repeat):
        c = time.process_time()
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    if name:
        MINS[name] = round(min(times) * 1000, 1)
        CPU[name] = round(statistics.median(cpu) * 1000, 1)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--modules", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", metavar="DIR", help="keep (and reuse) the built ledgers here")
    args = ap.parse_args()
    d = args.keep or tempfile.mkdtemp(prefix="warden-bench-actions-")
    os.makedirs(d, exist_ok=True)
    roots = {}
    for every in (False, True):
        p = os.path.join(d, f"big-{args.nodes}-{args.modules}-{'all' if every else 'roots'}.db")
        if not os.path.exists(p):
            t = time.perf_counter()
            build(p, args.nodes, args.modules, every)
            print(f"built {p} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        roots[every] = p
    others = [f"m{m}" for m in range(args.modules) if m != 3]
    res: dict[str, object] = {"nodes": args.nodes, "modules": args.modules, "repeat": args.repeat}

    led = Ledger.open(roots[False], create=False)
    t, plan = timed(lambda: led.plan_rewind("big", "m3.0", reason="bench"), args.repeat, "plan_rewind")
    res["plan_rewind_ms"] = round(t * 1000, 1)
    res["rewind_reset"] = len(plan.reset)
    t, plan = timed(lambda: led.plan_narrow("big", set={"module": others}, reason="bench"), args.repeat,
                    "plan_narrow")
    res["plan_narrow_ms"] = round(t * 1000, 1)
    res["narrow_abandoned"], res["narrow_reset"], res["narrow_kept"] = (
        len(plan.abandoned), len(plan.reset), len(plan.kept))
    t, plan = timed(lambda: led.plan_abort("big", reason="bench"), args.repeat)
    res["plan_abort_100k_ms"] = round(t * 1000, 1)
    t, plan = timed(lambda: json.dumps(led.plan_rewind("big", "m3.0", reason="bench").to_json()), 1)
    res["plan_rewind_plus_json_ms"] = round(t * 1000, 1)
    led.close()

    led = Ledger.open(roots[True], create=False)
    t, plan = timed(lambda: led.plan_narrow("big", set={"module": others}, reason="bench"), args.repeat)
    res["plan_narrow_every_node_names_module_ms"] = round(t * 1000, 1)
    res["narrow_every_abandoned"] = len(plan.abandoned)
    led.close()

    for name, make in (("rewind", lambda led: led.plan_rewind("big", "m3.0", reason="bench")),
                       ("narrow", lambda led: led.plan_narrow("big", set={"module": others}, reason="bench"))):
        times, cpus = [], []
        for _ in range(max(1, args.repeat // 2)):
            copy = os.path.join(d, "apply.db")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(copy + suffix):
                    os.unlink(copy + suffix)
            shutil.copy(roots[False], copy)
            led = Ledger.open(copy, create=False)
            plan = make(led)
            c = time.process_time()
            t = time.perf_counter()
            done = led.apply(plan, operator="bench")
            times.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            assert done.applied
            led.close()
        res[f"apply_{name}_ms"] = round(statistics.median(times) * 1000, 1)
        MINS[f"apply_{name}"] = round(min(times) * 1000, 1)
        CPU[f"apply_{name}"] = round(statistics.median(cpus) * 1000, 1)
    res["min_ms"] = MINS
    res["cpu_ms_median"] = CPU  # process CPU time: what the wall time would be without contention
    res["loadavg_1m"] = os.getloadavg()[0]
    print(json.dumps(res, indent=2))
    if not args.keep:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

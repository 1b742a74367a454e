"""Benchmarks for estimates and signals (not collected by pytest; run explicitly):

    python tests/bench/bench_estimates.py                 # everything (about 5-10 minutes here)
    python tests/bench/bench_estimates.py --skip-sim      # only the cost figures
    python tests/bench/bench_estimates.py --sim-tasks 60 --seeds 1 2 3

1. ``warden status`` on a 100,000-node task (``--nodes``): ``report.status_json`` warm (median of 7
   calls in one process), the detector alone (``signals_for_task``, every signal of the task: median
   of 7, wall and CPU) and a cold ``warden status --json`` process (wall clock, median of 3). The task is
   built with ``add_nodes`` (one transaction); 30 % of it is then marked succeeded with known
   durations by one SQL UPDATE (a fixture shortcut: 30,000 real commits would take minutes) and
   8 nodes are claimed and heartbeat with observations through the agent API.
2. The incremental path (``store.reading.analysis.TaskAnalysis``) on the same task: its one-off load, then
   the cost of one journal event — a heartbeat (the agent's call, novelty judged as it is written;
   then applying its payload) and a commit (one node re-read) —
   followed by the task's estimate and signals.
3. Calibration on the simulator (``tests.support.sim``): P80 coverage at 25 / 50 / 75 % progress, stall
   recall within 5 observations, precision and false alarms, over several seeds.
4. ``--observe``: the write lock held by one heartbeat whose observation has 1,000,000 distinct lines
   (and 50 MB on one line): the time inside ``write_tx`` (timed around the shipped code path), the
   whole call, and the seen-line rows written.
5. ``--workloads``: the evaluation families of ``tests/support/stalls.py`` (stalls and loops),
   ``tests/support/reports.py`` and ``rhythm.py`` (action/result reports, reworded
   loops, progress in numbers, long cycles, heartbeat rhythms, parks during a wait) and
   ``tests/support/durations.py`` with more trials than CI runs — the tables in docs/estimates.md.
   ``--parts expected --only bimodal``: the duration checks replayed without a ledger, each with
   its chance of holding beside whether it held (a late figure rests on a few draws).
   ``--parts speeds``: the labels on tasks like their history, 2-4× slower and twice as fast, per
   stage (docs/estimates.md "A task's own speed").

    python tests/bench/bench_estimates.py --skip-cost --skip-sim --observe --workloads
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from store import Ledger, ManualClock, NodeSpec  # noqa: E402
from store.reading import cli_json as report  # noqa: E402
from store.reading.analysis import TaskAnalysis  # noqa: E402
from tests.support.sim import SimConfig, run_simulation  # noqa: E402

T0 = 1_800_000_000.0


def build_big(path: str, n: int) -> ManualClock:
    clock = ManualClock(T0)
    with Ledger.open(path, clock=clock) as led:
        led.create_task("big", title="a 100k-node task")
        specs = []
        for i in range(n):  # 1,000 independent chains of 100 nodes
            deps = (f"n{i - 1}",) if i % 100 else ()
            specs.append(NodeSpec(f"n{i}", kind=f"k{i % 5}", deps=deps, est_wall_s=30))
        t = time.perf_counter()
        led.add_nodes("big", specs)
        print(f"  built {n:,} nodes in {time.perf_counter() - t:.1f}s", flush=True)
        done = int(n * 0.3)
        led.db.execute_sql(
            "UPDATE node SET status='succeeded', claimed_at=?+id, finished_at=?+id+20+(id%7)*3, started_at=?+id "
            "WHERE task_id='big' AND position <= ?", (T0 - 10 * n, T0 - 10 * n, T0 - 10 * n, done))
        clock.advance(1)
        claims = [led.claim("big", f"w{i}", lease_s=120) for i in range(8)]
        for k in range(6):
            clock.advance(10)
            for i, c in enumerate(claims):
                led.heartbeat(c, units_done=k, units_total=10, tokens=300,
                              observation=f"step {k} of worker {i}" if i else "same thing again")
    return clock


def bench_status(path: str, clock: ManualClock) -> dict:
    with Ledger.open(path, clock=clock, create=False) as led:
        times, cpu = [], []
        for _ in range(7):
            t, c = time.perf_counter(), time.process_time()
            data = report.status_json(led)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)  # CPU time: what the call costs on an idle machine
        # the detector alone: every signal of the task (stall, loop, stale, overdue …), as the
        # console's analysis and `warden status` read it after a heartbeat
        from store.reading import signals as S

        sig_t, sig_cpu = [], []
        for _ in range(7):
            task = led.task("big")
            t, c = time.perf_counter(), time.process_time()
            S.signals_for_task(led, task)
            sig_t.append(time.perf_counter() - t)
            sig_cpu.append(time.process_time() - c)
    env = dict(os.environ, PYTHONPATH=ROOT)
    cold = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "console", "status", "--json", "--ledger", path], check=True,
                       capture_output=True, env=env)
        cold.append(time.perf_counter() - t)
    task = data["tasks"][0]
    return {"status_json_warm_ms": round(statistics.median(times) * 1000, 1),
            "status_json_warm_max_ms": round(max(times) * 1000, 1),
            "status_json_cpu_ms": round(statistics.median(cpu) * 1000, 1),
            "signals_for_task_ms": round(statistics.median(sig_t) * 1000, 1),
            "signals_for_task_cpu_ms": round(statistics.median(sig_cpu) * 1000, 1),
            "load_average": round(os.getloadavg()[0], 1),
            "warden_status_cold_process_ms": round(statistics.median(cold) * 1000, 1),
            "eta": task["eta"], "signals": [s["kind"] for s in task["signals"]]}


def bench_incremental(path: str, clock: ManualClock) -> dict:
    with Ledger.open(path, clock=clock, create=False) as led:
        t = time.perf_counter()
        an = TaskAnalysis(led, "big")
        load = time.perf_counter() - t
        running = sorted(an._running_set)
        claims = {}
        # fresh claims of our own to produce events (the fixture's claims are in another process scope)
        for i in range(2):
            c = led.claim("big", f"bench{i}", lease_s=120)
            claims[c.node_key] = c
        cursor = an.cursor
        for ev in led.events(cursor, task_id="big"):
            an.apply_event(ev, led.nodes("big", [ev.node]) if ev.node else [])
            cursor = ev.id
        beat_apply, beat_fig, commit_apply, commit_fig, beat_write = [], [], [], [], []
        for k in range(20):
            clock.advance(5)
            key, c = next(iter(claims.items()))
            t = time.perf_counter()
            led.heartbeat(c, units_done=k % 10, units_total=10, tokens=100, observation=f"line {k}")
            beat_write.append(time.perf_counter() - t)  # the agent's call: novelty judged as it is written
            (ev,) = led.events(cursor, task_id="big")
            cursor = ev.id
            t = time.perf_counter()
            an.apply_event(ev, [])
            beat_apply.append(time.perf_counter() - t)
            t = time.perf_counter()
            an.task_estimate()
            an.signals()
            beat_fig.append(time.perf_counter() - t)
        for k in range(10):
            clock.advance(5)
            c = led.claim("big", "bench-c", lease_s=120)
            clock.advance(20)
            led.commit(c, output={})
            for ev in led.events(cursor, task_id="big"):
                cursor = ev.id
                t = time.perf_counter()
                changed = led.nodes("big", [ev.node]) if ev.node and ev.kind != "node.heartbeat" else []
                an.apply_event(ev, changed)
                dt = time.perf_counter() - t
                if ev.kind == "node.committed":
                    commit_apply.append(dt)
            t = time.perf_counter()
            an.task_estimate()
            an.signals()
            commit_fig.append(time.perf_counter() - t)
        ms = lambda xs: round(statistics.median(xs) * 1000, 3)  # noqa: E731
        return {"analysis_load_s": round(load, 2), "running_nodes": len(running) + 2,
                "heartbeat_write_ms": ms(beat_write), "heartbeat_apply_ms": ms(beat_apply), "heartbeat_task_estimate_and_signals_ms": ms(beat_fig),
                "commit_apply_with_node_reread_ms": ms(commit_apply),
                "commit_task_estimate_and_signals_ms": ms(commit_fig),
                "task_eta": an.task_estimate().to_json()}


def bench_sim(tasks: int, seeds: list[int]) -> dict:
    out = {}
    pooled = {"checks": [], "loops": [], "healthy": []}
    for seed in seeds:
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            r = run_simulation(os.path.join(d, "sim.db"), SimConfig(seed=seed, tasks=tasks))
            s = r.summary()
            s["cpu_wall_s"] = round(time.perf_counter() - t, 1)
            out[f"seed {seed}"] = s
            print(f"  seed {seed}: {json.dumps(s)}", flush=True)
            pooled["checks"] += [dict(c, task=f"{seed}/{c['task']}") for c in r.checks]
            pooled["loops"] += r.loops
            pooled["healthy"] += r.healthy
    from tests.support.sim import SimReport

    allr = SimReport(checks=pooled["checks"], loops=pooled["loops"], healthy=pooled["healthy"])
    out["pooled"] = allr.summary()
    return out


def letters(i: int) -> str:
    """A word for a number (digits would be normalised away: they are volatile)."""
    out = ""
    while True:
        i, r = divmod(i, 26)
        out += chr(97 + r)
        if not i:
            return out


def bench_observe() -> dict:
    import contextlib

    import store.ledger.fenced as fenced
    from store.judges import novelty

    held: list[float] = []
    real = fenced.write_tx

    @contextlib.contextmanager
    def timed_tx(db):  # the shipped write_tx, with a stopwatch around the lock it holds
        with real(db):
            t = time.perf_counter()
            try:
                yield
            finally:
                held.append(time.perf_counter() - t)

    out = {}
    with tempfile.TemporaryDirectory() as d:
        clock = ManualClock(T0)
        with Ledger.open(os.path.join(d, "o.db"), clock=clock) as led:
            led.create_task("o")
            led.add_nodes("o", [NodeSpec("a")])
            c = led.claim("o", "w", lease_s=600)
            fenced.write_tx = timed_tx
            try:
                for name, text in (
                        ("1M distinct lines", "\n".join(f"distinct line {letters(i)}" for i in range(1_000_000))),
                        ("50 MB on one line", "z" * 50_000_000),
                        ("1,000 distinct lines", "\n".join(f"output {letters(i * 7919)}" for i in range(1000)))):
                    held.clear()
                    clock.advance(1)
                    t = time.perf_counter()
                    led.heartbeat(c, observation=text)
                    total = time.perf_counter() - t
                    rows = led.db.execute_sql("SELECT COUNT(*) FROM seen_line").fetchone()[0]
                    out[name] = {"write_lock_ms": round(held[0] * 1000, 1), "heartbeat_ms": round(total * 1000, 1),
                                 "seen_line_rows_total": rows}
            finally:
                fenced.write_tx = real
    out["caps"] = {"max_lines": novelty.MAX_LINES, "max_line_chars": novelty.MAX_LINE_CHARS,
                   "max_comparisons": novelty.MAX_COMPARISONS}
    return out


def bench_workloads(stall_trials: int, duration_trials: int, seed: int,
                    parts: tuple[str, ...] = ("stalls", "reports", "rhythms", "durations"), only: str = "") -> dict:
    from tests.support import durations as D
    from tests.support import reports as R
    from tests.support import rhythm as RH
    from tests.support import stalls as S

    out: dict = {}
    for part, fams in (("stalls", None), ("reports", R.families())):  # the stall families, then the report families
        if part not in parts:
            continue
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            rep = S.run_stalls(os.path.join(d, "s.db"), trials=stall_trials, seed=seed, fams=fams)
            out[part] = {"rows": rep.table(), "recall": round(rep.recall(), 3),
                         "false_alarm_rate": round(rep.false_alarm_rate(), 4), "wall_s": round(time.perf_counter() - t)}
        print("\n| family | trials | alarmed by its deadline | first alarm (median / max) | false alarms | alarm kinds |")
        print("|---|---|---|---|---|---|")
        for r in out[part]["rows"]:
            first = f"{r['first_alarm_median']} / {r['first_alarm_max']}" if r["first_alarm_median"] else "–"
            within = f"{r['alarmed_within_5']}/{r['trials']} (≤ {r['within']})" if r["loop"] else "–"
            print(f"| {r['family']} | {r['trials']} | {within} | {first} | {r['false_alarms']} | "
                  f"{', '.join(r['alarm_kinds']) or '–'} |", flush=True)
        print(f"recall {out[part]['recall']}, false alarms {out[part]['false_alarm_rate']}")
    if "rhythms" in parts:
        out["rhythms"] = _rhythms(RH, stall_trials, seed)
    if "durations" in parts:
        out["durations"] = _durations(D, duration_trials, seed, only)
    if "speeds" in parts:
        out["speeds"] = _speeds(D, duration_trials, seed)
    if "expected" in parts:
        out["expected"] = _expected(D, duration_trials, seed, only)
    return out


def _by_label(checks: list[dict], stage: float) -> dict:
    """The checks at ``stage`` by label: ``[count, held, summed chance]``."""
    by: dict = {}
    for c in checks:
        if c["stage"] == stage:
            got = by.setdefault(c["label"], [0, 0, 0.0])
            got[0] += 1
            got[1] += c["held"]
            got[2] += c["chance"]
    return by


def _expected(durations: Any, trials: int, seed: int, only: str = "") -> dict:
    """The duration workloads' checks without a ledger, each with its chance of holding (over 200
    fresh draws of its pending nodes) beside whether it held: `label held % / chance % (checks)`."""
    cells: dict = {}
    print("\n| workload | " + " | ".join(f"{int(s * 100)} %" for s in durations.STAGES) + " |")
    print("|---|" + "---|" * len(durations.STAGES))
    for name, make in durations.WORKLOADS.items():
        if only and only not in name:
            continue
        checks = durations.expected_coverage(make, trials=trials, seed=seed)
        row = []
        for st in durations.STAGES:
            by = cells[f"{name} @ {st}"] = _by_label(checks, st)
            row.append(" ".join(f"{lab} {100 * h // n} % / {100 * ch / n:.0f} % ({n})" for lab, (n, h, ch) in
                                sorted(by.items(), key=lambda kv: ("none", "low", "medium", "high").index(kv[0]))))
        print(f"| {name} | " + " | ".join(row) + " |", flush=True)
    return cells


def _speeds(durations: Any, trials: int, seed: int) -> dict:
    """Labels on tasks like their history, 2-4× slower and twice as fast (``durations.speed``):
    per stage, each label's mean chance of holding (over 60 fresh draws of the pending nodes),
    how often it held, and its count — `label chance % / held % (checks)`."""
    stages = (0.10, 0.25, 0.50, 0.75)
    cells: dict = {}
    print("\n| task | " + " | ".join(f"{int(s * 100)} %" for s in stages) + " | `high` given |")
    print("|---|" + "---|" * (len(stages) + 1))
    for name, factor in durations.SPEEDS.items():
        checks = durations.expected_coverage(durations.speed(factor), trials=trials, seed=seed, draws=60,
                                             stages=stages)
        row = []
        for st in stages:
            by = cells[f"{name} @ {st}"] = _by_label(checks, st)
            row.append(" · ".join(f"{lab} {100 * ch / n:.0f} / {100 * h / n:.0f} % ({n})" for lab, (n, h, ch) in
                                  sorted(by.items(), key=lambda kv: ("high", "medium", "low", "none").index(kv[0]))))
        high = sum(c["label"] == "high" for c in checks)
        print(f"| {name} | " + " | ".join(row) + f" | {high}/{len(checks)} |", flush=True)
    return cells


def _rhythms(rhythm: Any, trials: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        beats, parks = rhythm.run_rhythms(os.path.join(d, "r.db"), trials=trials, seed=seed)
    print("\n| rhythm | trials | false stale/orphaned | hangs warned before the lease ends |")
    print("|---|---|---|---|")
    rows: dict = {}
    for o in beats:
        row = rows.setdefault(o.name, [0, 0, 0, 0])
        if o.hang:
            row[2] += 1
            row[3] += o.stale_at is not None and (o.lease_left or 0) > 0
        else:
            row[0] += 1
        row[1] += bool(o.false)
    for name, (n, false, hangs, warned) in rows.items():
        print(f"| {name} | {n} + {hangs} hangs | {false} | {warned}/{hangs} |", flush=True)
    for name in sorted({p.name for p in parks}):
        ps = [p for p in parks if p.name == name]
        print(f"| {name} | {len(ps)} | {sum(bool(p.false) for p in ps)} (orphaned / overdue / stale / loop) | – |")
    return {"rows": rows, "parks_false": sum(bool(p.false) for p in parks), "parks": len(parks)}


def _durations(durations: Any, trials: int, seed: int, only: str = "") -> dict:
    cells: dict = {}
    print("\n| workload | " + " | ".join(f"{int(s * 100)} %" for s in durations.STAGES) + " | medium/high (held); high (held) |")
    print("|---|" + "---|" * (len(durations.STAGES) + 1))
    for name, make in durations.WORKLOADS.items():
        if only and only not in name:
            continue
        with tempfile.TemporaryDirectory() as d:
            rep2 = durations.run_workload(make, trials=trials, seed=seed, path=os.path.join(d, "d.db"))
        row = []
        for st in durations.STAGES:
            xs = [c for c in rep2.checks if c["stage"] == st and c["p80_s"] is not None]
            by: dict = {}
            for c in xs:
                got = by.setdefault(c["label"], [0, 0])
                got[0] += 1
                got[1] += c["actual_s"] <= c["p80_s"]
            cells[f"{name} @ {st}"] = by
            row.append(" ".join(f"{lab} {100 * h // n} % ({n})" for lab, (n, h) in
                                sorted(by.items(), key=lambda kv: ("none", "low", "medium", "high").index(kv[0]))))
        sure = [c for c in rep2.checks if c["p80_s"] is not None and c["label"] in ("medium", "high")]
        high = [c for c in sure if c["label"] == "high"]
        held = lambda xs: f"{100 * sum(c['actual_s'] <= c['p80_s'] for c in xs) // len(xs)} %" if xs else "–"  # noqa: E731
        print(f"| {name} | " + " | ".join(row) + f" | {len(sure)}/{len(rep2.checks)} held {held(sure)};"
              f" high {len(high)} held {held(high)} |", flush=True)
        cells[f"{name} @ committed"] = {"checks": len(rep2.checks), "medium_high": len(sure), "high": len(high)}
    return cells


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--sim-tasks", type=int, default=60)
    ap.add_argument("--seeds", type=int, nargs="*", default=[1, 2, 3])
    ap.add_argument("--skip-sim", action="store_true")
    ap.add_argument("--skip-cost", action="store_true")
    ap.add_argument("--observe", action="store_true", help="the write lock of a huge observation")
    ap.add_argument("--workloads", action="store_true", help="the evaluation families (docs/estimates.md)")
    ap.add_argument("--parts", default="stalls,reports,rhythms,durations",
                    help="which --workloads families: stalls, reports, rhythms, durations; "
                         "also 'expected' (not by default): the duration checks without a ledger, with each one's "
                         "chance of holding; 'speeds': labels on tasks faster, like or 2-4x slower than their "
                         "history")
    ap.add_argument("--only", default="", help="--workloads: only the duration workloads whose name contains this")
    ap.add_argument("--stall-trials", type=int, default=20)
    ap.add_argument("--duration-trials", type=int, default=40)
    ap.add_argument("--db", help="keep the 100k-node ledger here and reuse it on the next run (the "
                                 "incremental bench adds a few claims to it)")
    a = ap.parse_args()
    results: dict = {}
    if not a.skip_cost:
        with tempfile.TemporaryDirectory() as d:
            path = a.db or os.path.join(d, "big.db")
            if a.db and os.path.exists(a.db):
                clock = ManualClock(T0 + 61)  # the fixture's last heartbeat
                print(f"reusing {a.db}", flush=True)
            else:
                print(f"building a {a.nodes:,}-node task …", flush=True)
                clock = build_big(path, a.nodes)
            results["status"] = bench_status(path, clock)
            print("  status:", json.dumps(results["status"]), flush=True)
            results["incremental"] = bench_incremental(path, clock)
            print("  incremental:", json.dumps(results["incremental"]), flush=True)
    if not a.skip_sim:
        print(f"simulating {a.sim_tasks} tasks × seeds {a.seeds} …", flush=True)
        results["calibration"] = bench_sim(a.sim_tasks, a.seeds)
    if a.observe:
        results["observe"] = bench_observe()
        print("  observe:", json.dumps(results["observe"]), flush=True)
    if a.workloads:
        results["workloads"] = bench_workloads(a.stall_trials, a.duration_trials, a.seeds[0],
                                               tuple(a.parts.split(",")), a.only)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""Console benchmark: commit→painted latency, UI work per change, first frame, RSS, idle CPU,
against two baselines (a reader polling every 1 s, a DataTable view).

    python tests/bench/bench_console.py --nodes 100000 --events 1000000 --seconds 20

A ledger of one big task (N nodes in a chain of layers) plus M filler journal events is built with
bulk inserts in a child process; the console runs headless (Textual's run_test, 100×30) with that
task's graph open; a writer process claims and heartbeats nodes at --rate changes/s (one
transaction each, on the system clock). Latency = the time the changed row's repaint completed
(call_after_refresh after the delta was applied) minus the event's ``at`` (stamped inside the
writer's transaction, before its commit: so the figure includes the commit itself).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def build(path: Path, nodes: int, events: int) -> None:
    """The ledger, fast: the schema from ``Ledger.open`` (then closed), rows by raw ``executemany``
    in one transaction with ``synchronous=OFF`` for the build only (the console and the writer
    open it afterwards with the store's own pragmas)."""
    from store import Ledger

    Ledger.open(path).close()
    t0 = time.time()
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA synchronous=OFF")
    cols = {r[1] for r in con.execute("PRAGMA table_info(event)")}
    assert {"at", "task_id", "node", "layer", "kind", "actor", "summary", "payload"} <= cols, cols
    width = max(1000, nodes // 10)  # a wide first layer: plenty of ready nodes to claim
    con.execute("BEGIN")
    con.execute(
        "INSERT INTO task (task_id, title, workflow, workflow_version, status, inputs, constraints, preconditions,"
        " soft_ratio, tokens_used, max_claims, max_repairs, repair_count, claim_count, revision, created_at,"
        " updated_at) VALUES ('big', 'benchmark', '', '', 'active', '{}', '[]', '{}', 0.7, 0, 5, 3, 0, 0, 1, ?, ?)",
        (t0, t0))
    con.executemany(
        "INSERT INTO node (id, task_id, key, position, kind, title, status, preconditions, attempt, retryable,"
        " always_admit, tokens_used, wall_used_s, claim_count, rejections, version)"
        " VALUES (?, 'big', ?, ?, 'tool', '', 'pending', '{}', 0, 1, 0, 0, 0.0, 0, '[]', 1)",
        ((i + 1, f"n{i:06d}", i) for i in range(nodes)))
    con.executemany("INSERT INTO edge (task_id, src_id, dst_id) VALUES ('big', ?, ?)",
                    ((i - width + 1, i + 1) for i in range(width, nodes)))
    row = ("big", "n000000", "execution", "node.heartbeat", "filler", "filler", "{}")
    con.executemany("INSERT INTO event (at, task_id, node, layer, kind, actor, summary, payload)"
                    " VALUES (?,?,?,?,?,?,?,?)", ((t0,) + row for _ in range(events)))
    con.execute("COMMIT")
    con.execute("PRAGMA synchronous=NORMAL")
    con.close()


def writer(path: str, rate: float, seconds: float, ready: str) -> None:
    from store import Ledger

    ledger = Ledger.open(path, create=False)
    Path(ready).write_text("go")
    claims = []
    interval = 1.0 / rate
    end = time.monotonic() + seconds
    nxt = time.monotonic()
    n = 0
    while time.monotonic() < end:
        c = ledger.claim("big", worker="bench", lease_s=600) if (n % 2 == 0 or not claims) else None
        if c is not None:
            claims.append(c)
        else:
            ledger.heartbeat(claims[n % len(claims)], units_done=n, units_total=10 ** 9, observation=f"line {n}")
        n += 1  # every iteration wrote exactly one event
        nxt += interval
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing the load generator, not synchronisation
    print(n)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


async def bench_console(path: Path, rate: float, seconds: float) -> dict:
    from console.app import WardenApp

    app = WardenApp(str(path), "runs", analysis=False)
    latencies: list[float] = []
    marks: dict[str, float] = {}
    t_start = time.perf_counter()
    app.load_probe = lambda: marks.setdefault("first_frame", time.perf_counter() - t_start)

    def painted(events):
        now = time.time()
        for e in events:
            if e.task_id == "big" and e.actor == "bench":
                latencies.append(now - e.at)

    async with app.run_test(size=(100, 30)) as pilot:
        while "first_frame" not in marks:
            await pilot.pause(0.01)
        load_first = os.getloadavg()[0]
        t_graph = time.perf_counter()
        app.open_graph("big")
        # plain sleeps: pilot.pause() waits for the whole screen to go idle, which is not what
        # the operator sees; the probe is the first page's paint (call_after_refresh)
        app.graph_probe = lambda: marks.setdefault("graph_first_rows_s", time.perf_counter() - t_graph)
        while "graph_first_rows_s" not in marks:
            await asyncio.sleep(0.005)
        while not app.graph_model.complete:
            await asyncio.sleep(0.01)
        marks["graph_complete_s"] = time.perf_counter() - t_graph
        marks["graph_pages"] = app.graph_pages_applied
        app.paint_probe = painted
        app.apply_seconds = 0.0
        app.applied_changes = 0
        ready = Path(tempfile.mkdtemp()) / "ready"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--writer", str(path), "--rate", str(rate), "--seconds", str(seconds),
            "--ready", str(ready), stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        written = int(out.decode().strip() or 0)
        deadline = time.monotonic() + 10
        while len(latencies) < written and time.monotonic() < deadline:
            await pilot.pause(0.05)
        ui_ms = app.apply_seconds / max(1, app.applied_changes) * 1000
        load_run = os.getloadavg()[0]
        # idle CPU: nothing changes for 10 s (after a second to let the last refreshes finish)
        await pilot.pause(1.0)
        c0, w0 = time.process_time(), time.monotonic()
        await pilot.pause(10.0)
        idle = (time.process_time() - c0) / (time.monotonic() - w0) * 100
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"written": written, "painted": len(latencies), "p50_ms": pct(latencies, .5) * 1000,
            "p95_ms": pct(latencies, .95) * 1000, "p99_ms": pct(latencies, .99) * 1000, "max_ms": max(latencies) * 1000,
            "ui_ms_per_change": ui_ms, "first_frame_s": marks["first_frame"],
            "graph_first_rows_s": marks["graph_first_rows_s"], "graph_complete_s": marks["graph_complete_s"],
            "graph_pages": marks["graph_pages"], "rss_mb": rss, "idle_cpu_pct": idle,
            "load1_at_graph_open": load_first, "load1_after_writes": load_run, "load1_end": os.getloadavg()[0]}


def bench_polling(path: Path, rate: float, seconds: float) -> dict:
    """Baseline 1: a reader that polls the journal every second."""
    from store import Ledger

    ledger = Ledger.open(path, create=False, read_only=True)
    cursor = ledger.last_event_id()
    ready = Path(tempfile.mkdtemp()) / "ready"
    proc = subprocess.Popen([sys.executable, __file__, "--writer", str(path), "--rate", str(rate), "--seconds",
                             str(seconds), "--ready", str(ready)], stdout=subprocess.PIPE)
    lat = []
    while proc.poll() is None or True:
        time.sleep(1.0)  # the baseline's own poll interval
        for e in ledger.events(cursor, limit=100000):
            cursor = e.id
            if e.actor == "bench":
                lat.append(time.time() - e.at)
        if proc.poll() is not None:
            break
    return {"p50_ms": pct(lat, .5) * 1000, "p95_ms": pct(lat, .95) * 1000, "n": len(lat)}


async def bench_datatable(rows: int, changes: int = 10) -> dict:
    """Baseline 2: the same rows in a DataTable; time per cell update (UI thread)."""
    from textual.app import App
    from textual.widgets import DataTable

    class T(App):
        def compose(self):
            yield DataTable()

    app = T()
    async with app.run_test(size=(100, 30)) as pilot:
        t = app.query_one(DataTable)
        cols = t.add_columns("NODE", "STATUS", "LEASE")
        t0 = time.perf_counter()
        t.add_rows([(f"n{i:06d}", "○ pending", "—") for i in range(rows)])
        await pilot.pause()
        fill = time.perf_counter() - t0
        keys = list(t.rows)[:changes]
        t0 = time.perf_counter()
        for k in keys:
            t.update_cell(k, cols[1], "▶ running", update_width=True)
            await pilot.pause()
        per = (time.perf_counter() - t0) / changes * 1000
    return {"fill_s": fill, "ms_per_update": per}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100000)
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--writer")
    ap.add_argument("--ready")
    ap.add_argument("--part", default="all")
    ap.add_argument("--small", type=int, default=10000,
                    help="also run the console part on a ledger this size (UI ms per change vs size); 0: skip")
    a = ap.parse_args()
    if a.writer:
        writer(a.writer, a.rate, a.seconds, a.ready)
        return
    def built(nodes: int, events: int) -> tuple[Path, float]:
        path = Path(tempfile.mkdtemp(prefix="warden-bench-")) / "ledger.db"
        t0 = time.time()
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                        f"from tests.bench.bench_console import build; from pathlib import Path; "
                        f"build(Path({str(path)!r}), {nodes}, {events})"], check=True, cwd=ROOT)
        return path, time.time() - t0

    path, build_s = built(a.nodes, a.events)
    result = {"nodes": a.nodes, "events": a.events, "rate": a.rate, "seconds": a.seconds,
              "build_s": build_s, "cpus": os.cpu_count(), "load1_start": os.getloadavg()[0]}
    if a.part in ("all", "console"):
        result["console"] = asyncio.run(bench_console(path, a.rate, a.seconds))
    if a.part in ("all", "poll"):
        result["poll_1s"] = bench_polling(path, a.rate, min(a.seconds, 10))
    if a.part in ("all", "datatable"):
        result["datatable"] = asyncio.run(bench_datatable(a.nodes))
        result["datatable"]["load1_end"] = os.getloadavg()[0]
    if a.small and a.part in ("all", "console"):
        small, _ = built(a.small, a.small * 10)
        result[f"console_{a.small}"] = asyncio.run(bench_console(small, a.rate, a.seconds))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

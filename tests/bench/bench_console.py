"""Console benchmark: what an operator of the shipped ``warden console`` sees, on a big ledger.

    python tests/bench/bench_console.py            # the full run (100k nodes, 1M events; ~10 min)
    python tests/bench/bench_console.py --quick    # the method on a 10k-node ledger (~3 min)

One command, one JSON report (and a table) with, side by side:

* **headless** — the app exactly as ``warden console`` builds it (``console.app.console_app``:
  same class, estimates and signals on, same workers), run headless by Textual (``run_test``,
  100×30) with the big task's graph open. "On screen" = the refresh after the delta was applied
  completed (``call_after_refresh``); the terminal's own drawing is not included.
* **terminal** — the shipped command (``python -m console console --ledger …``) on a pseudo-terminal
  of 100×30 that this process reads as fast as it is written, drawn by a terminal emulator (pyte):
  "on screen" = the emulated screen shows it (tests/support/console_terminal.py).

Scenarios, in both: commits with nothing written ≥ 1 s before and after (*isolated*: a node claimed,
then committed, alternately, so its row is on screen); commits 6 s apart (*spaced*); in the terminal,
commits at a steady 10/s for 30 s (*steady*: each watched on the graph's done count — commit → screen,
and the longest time the count stood still while commits went on); a writer committing 100 changes/s (claims and heartbeats with observations, one
transaction each) while keys (j/k) are pressed every 150 ms (*load*: commit → screen for every
change, key → frame); RSS after the load; idle CPU after it (thousands of nodes then hold live
leases); the longest stall of the UI loop (a 10 ms ticker's worst lateness, headless). Baselines
in the same run: a reader polling the journal every 1 s; a DataTable with the same rows.

Commit → screen is measured from the moment the writer's ``commit`` returned (the commit is
durable and visible then; ``time.monotonic`` is one clock for all processes on Linux) to the
moment it is on screen. The ledger is built by raw inserts (``build``), then copied per part.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

KEY_EVERY_S = 0.15
DONE_RE = re.compile(r"\b(\d+)/\d+\b")


def build(path: Path, nodes: int, events: int) -> None:
    """The ledger, fast: the schema from ``Ledger.open`` (then closed), rows by raw ``executemany``
    in one transaction with ``synchronous=OFF`` for the build only (the console and the writer
    open it afterwards with the store's own pragmas)."""
    from store import Ledger

    with Ledger.open(path) as ledger:  # the schema, and the task row through the API (every column)
        ledger.create_task("big", title="benchmark")
    t0 = time.time()
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA synchronous=OFF")
    cols = {r[1] for r in con.execute("PRAGMA table_info(event)")}
    assert {"at", "task_id", "node", "layer", "kind", "actor", "summary", "payload"} <= cols, cols
    width = max(1000, nodes // 10)  # a wide first layer: plenty of ready nodes to claim
    con.execute("BEGIN")
    # node columns this build does not name but the schema requires (added by later schema
    # versions without a default): zero / empty
    named = {"id", "task_id", "key", "position", "kind", "title", "status", "preconditions", "attempt", "retryable",
             "always_admit", "tokens_used", "wall_used_s", "claim_count", "rejections", "version"}
    extra = [(r[1], "''" if "CHAR" in r[2].upper() or "TEXT" in r[2].upper() else "0")
             for r in con.execute("PRAGMA table_info(node)") if r[3] and r[4] is None and r[1] not in named]
    ex_cols = "".join(", " + c for c, _ in extra)
    ex_vals = "".join(", " + v for _, v in extra)
    con.executemany(
        "INSERT INTO node (id, task_id, key, position, kind, title, status, preconditions, attempt, retryable,"
        f" always_admit, tokens_used, wall_used_s, claim_count, rejections, version{ex_cols})"
        f" VALUES (?, 'big', ?, ?, 'tool', '', 'pending', '{{}}', 0, 1, 0, 0, 0.0, 0, '[]', 1{ex_vals})",
        ((i + 1, f"n{i:06d}", i) for i in range(nodes)))
    con.executemany("INSERT INTO edge (task_id, src_id, dst_id) VALUES ('big', ?, ?)",
                    ((i - width + 1, i + 1) for i in range(width, nodes)))
    row = ("big", "n000000", "execution", "node.heartbeat", "filler", "filler", "{}")
    con.executemany("INSERT INTO event (at, task_id, node, layer, kind, actor, summary, payload)"
                    " VALUES (?,?,?,?,?,?,?,?)", ((t0,) + row for _ in range(events)))
    con.execute("COMMIT")
    con.execute("PRAGMA synchronous=NORMAL")
    con.close()


def load_writer(path: str, rate: float, seconds: float, out: str) -> None:
    """The background agents: ``rate`` changes/s for ``seconds`` (claims and heartbeats with an
    observation, one transaction each); writes ``[[event id, monotonic time it returned], ...]`` to
    ``out`` at the end."""
    from store import Ledger

    ledger = Ledger.open(path, create=False)
    print("ready", flush=True)
    claims = []
    done: list[tuple[int, float]] = []
    interval = 1.0 / rate
    end = time.monotonic() + seconds
    nxt = time.monotonic()
    n = 0
    while time.monotonic() < end:
        c = ledger.claim("big", worker="bench", lease_s=3600) if (n % 2 == 0 or not claims) else None
        if c is not None:
            claims.append(c)
        else:
            ledger.heartbeat(claims[n % len(claims)], units_done=n, units_total=10 ** 9, observation=f"line {n}")
        done.append((ledger.last_event_id(), time.monotonic()))
        n += 1
        nxt += interval
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing the load generator, not synchronisation
    Path(out).write_text(json.dumps(done))


class LoadWriter:
    """``load_writer`` in a child process; ``await start()``, ``await finish()`` → its writes."""

    def __init__(self, path: Path, rate: float, seconds: float) -> None:
        self.out = Path(tempfile.mkdtemp(prefix="warden-writes-")) / "writes.json"
        self.argv = [sys.executable, __file__, "--load-writer", str(path), "--rate", str(rate),
                     "--seconds", str(seconds), "--writes-to", str(self.out)]
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> "LoadWriter":
        self.proc = await asyncio.create_subprocess_exec(*self.argv, stdout=asyncio.subprocess.PIPE, cwd=ROOT)
        assert self.proc.stdout is not None
        assert (await self.proc.stdout.readline()).strip() == b"ready"
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def finish(self) -> dict[int, float]:
        assert self.proc is not None
        await self.proc.wait()
        writes = json.loads(self.out.read_text())
        shutil.rmtree(self.out.parent, ignore_errors=True)
        return {int(i): float(t) for i, t in writes}


# ---------------------------------------------------------------------- figures
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def summary(ms: list[float], written: int | None = None) -> dict:
    out = {"n": len(ms), "p50_ms": round(pct(ms, .5), 1), "p95_ms": round(pct(ms, .95), 1),
           "p99_ms": round(pct(ms, .99), 1), "max_ms": round(max(ms), 1) if ms else None}
    if written is not None:
        out["written"] = written
        out["never_shown"] = written - len(ms)
    return out


def rss_now_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def worker_cpu(app) -> float:
    """The CPU seconds of the app's analysis worker (a process of its own), 0 when it has none."""
    from tests.support.console_terminal import process_cpu_seconds

    pid = getattr(app.analyst, "pid", None)
    return process_cpu_seconds(pid, own=True) if pid else 0.0


def worker_rss(app) -> float:
    from tests.support.console_terminal import process_rss_mb

    pid = getattr(app.analyst, "pid", None)
    return process_rss_mb(pid, own=True) if pid else 0.0


def load1() -> float:
    return round(os.getloadavg()[0], 2)


class StallSampler:
    """Diagnostics (``--stall-trace``): every 10 ms, if the UI thread has been in the same Python
    frame for more than 50 ms, sample what it and the other threads run; plus every garbage
    collection's duration. Tells what a stall of the event loop is made of."""

    def __init__(self, ui_thread: int) -> None:
        self.ui = ui_thread
        self.samples: dict[str, int] = {}
        self.gc: list[tuple[int, float]] = []
        self._gc_t0 = 0.0
        self._stop = threading.Event()

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        else:
            self.gc.append((info.get("generation", -1), (time.perf_counter() - self._gc_t0) * 1000))

    def start(self) -> "StallSampler":
        import gc
        import traceback

        gc.callbacks.append(self._gc)

        def run() -> None:
            last, since = None, time.monotonic()
            while not self._stop.wait(0.01):
                frames = sys._current_frames()
                f = frames.get(self.ui)
                here = (id(f), f.f_lineno) if f is not None else None
                if here != last:
                    last, since = here, time.monotonic()
                    continue
                if time.monotonic() - since < 0.05:
                    continue
                ui = "".join(traceback.format_stack(f, limit=6)[-4:]) if f is not None else "?"
                others = [traceback.format_stack(fr, limit=3)[-1].strip().splitlines()[0]
                          for tid, fr in frames.items() if tid not in (self.ui, threading.get_ident())]
                key = ui + "  other threads: " + " | ".join(sorted(set(others)))
                self.samples[key] = self.samples.get(key, 0) + 1

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> dict:
        import gc

        self._stop.set()
        self.thread.join()
        gc.callbacks.remove(self._gc)
        top = sorted(self.samples.items(), key=lambda kv: -kv[1])[:6]
        slow_gc = sorted(self.gc, key=lambda g: -g[1])[:5]
        return {"gc_count": len(self.gc), "gc_slowest_ms": [(g, round(ms, 1)) for g, ms in slow_gc],
                "stalled_in (10 ms samples)": [{"samples": n, "where": k} for k, n in top]}


# ---------------------------------------------------------------------- headless
async def bench_headless(path: Path, a: argparse.Namespace) -> dict:
    from console.app import console_app
    from tests.support.commit_writer import Writer
    from tests.support.console_probes import ConsoleProbes

    app = console_app(ledger=str(path), runs=str(path.parent / "runs"))
    from tests.support.follower_log import FollowerLog  # noqa: PLC0415

    follower_log = FollowerLog(app)  # which wake-up delivered each read
    probes = ConsoleProbes(app)  # test-side instruments (tests/support/console_probes.py)
    painted = probes.painted
    marks: dict[str, float] = {}
    out: dict = {"estimates": app.analysis_enabled, "load1_start": load1()}
    async with app.run_test(size=(100, 30)):
        while probes.first_frame is None:
            await asyncio.sleep(0.01)
        marks["first_frame_s"] = probes.first_frame
        app.open_graph("big")
        screen = app.screen
        probes.watch_graph(screen)
        t_graph = time.monotonic()
        while not screen.settled():
            await asyncio.sleep(0.01)
        marks["graph_complete_s"] = time.monotonic() - t_graph
        while probes.graph_first_rows is None:
            await asyncio.sleep(0.01)
        marks["graph_first_rows_s"] = probes.graph_first_rows
        out.update({k: round(v, 3) for k, v in marks.items()})
        await asyncio.sleep(1.0)

        async def isolated(n: int, quiet_s: float) -> list[float]:
            writer = await Writer(str(path), "big").start()
            lat = []
            try:
                for i in range(n):
                    await asyncio.sleep(quiet_s)  # nothing written for quiet_s before (and after) each
                    wrote = await writer.send("claim" if i % 2 == 0 else "commit")
                    if wrote is None:
                        continue
                    eid, _key, done = wrote
                    deadline = time.monotonic() + max(10.0, app.feed.fallback_poll_s + 2)
                    while eid not in painted and time.monotonic() < deadline:
                        await asyncio.sleep(0.002)
                    if eid in painted:
                        lat.append((painted[eid] - done) * 1000)
            finally:
                await writer.close()
            return lat

        before = dict(follower_log.deliveries)
        lat = await isolated(a.isolated, 1.2)
        out["isolated"] = summary(lat, a.isolated) | {"load1": load1()}
        lat = await isolated(a.spaced, 6.0)
        out["spaced_6s"] = summary(lat, a.spaced) | {"load1": load1()}
        out["delivered_by"] = {k: v - before.get(k, 0) for k, v in follower_log.deliveries.items()}

        # load: 100 changes/s, keys every KEY_EVERY_S, a 10 ms ticker measuring the loop's stalls
        screen = app.screen
        key_times: list[float] = []
        key_lat: list[float] = []
        screen.watch(screen.row_list, "cursor",
                     lambda *_: app.call_after_refresh(lambda: key_times.append(time.monotonic())), init=False)
        lateness: list[float] = []
        ticking = True

        async def ticker() -> None:
            nxt = time.monotonic()
            while ticking:
                nxt += 0.01
                await asyncio.sleep(max(0.0, nxt - time.monotonic()))
                lateness.append(time.monotonic() - nxt)
                nxt = max(nxt, time.monotonic())

        tick_task = asyncio.ensure_future(ticker())
        sampler = StallSampler(threading.get_ident()).start() if a.stall_trace else None
        painted.clear()
        load = await LoadWriter(path, a.rate, a.seconds).start()
        n = 0
        while load.running():
            n += 1
            t0 = time.monotonic()
            got = len(key_times)
            app.simulate_key("j" if n % 2 else "k")
            while len(key_times) == got and time.monotonic() - t0 < 5:
                await asyncio.sleep(0.001)
            if len(key_times) > got:
                key_lat.append((key_times[got] - t0) * 1000)
            await asyncio.sleep(max(0.0, KEY_EVERY_S - (time.monotonic() - t0)))
        writes = await load.finish()
        deadline = time.monotonic() + 10
        while not set(writes) <= set(painted) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        ticking = False
        await tick_task
        if sampler is not None:
            out["stall_trace"] = sampler.stop()
        lat = [(painted[i] - t) * 1000 for i, t in writes.items() if i in painted]
        out["load"] = {"rate": a.rate, "seconds": a.seconds, "commit_to_screen": summary(lat, len(writes)),
                       "key_to_frame": summary(key_lat), "loop_stall_max_ms": round(max(lateness) * 1000, 1),
                       "loop_stall_p99_ms": round(pct(lateness, .99) * 1000, 1),
                       "ui_ms_per_change": round(probes.apply_seconds / max(1, probes.applied_changes) * 1000, 3),
                       "load1": load1()}
        out["rss_mb_after_load"] = round(rss_now_mb() + worker_rss(app), 1)
        g = screen.model
        out["live_leases"] = sum(1 for nd in g.nodes if nd.status == "running") if g is not None else 0
        # idle: after the last change's analysis and refreshes have run
        deadline = time.monotonic() + 60
        while (app.follower.analysis_dirty or app.analysis.busy) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(2.0)
        c0, w0 = time.process_time() + worker_cpu(app), time.monotonic()
        await asyncio.sleep(a.idle)
        out["idle_cpu_pct"] = round((time.process_time() + worker_cpu(app) - c0) / (time.monotonic() - w0) * 100, 2)
        out["rss_mb_end"] = round(rss_now_mb() + worker_rss(app), 1)
        out["worker_rss_mb_end"] = round(worker_rss(app), 1)
        out["rss_mb_peak"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        out["load1_end"] = load1()
    return out


# ---------------------------------------------------------------------- through a terminal
def bench_terminal(path: Path, a: argparse.Namespace) -> dict:
    from tests.support.console_terminal import Terminal, console_argv, highlighted_row, shows
    from tests.support.commit_writer import Writer

    out: dict = {"load1_start": load1()}
    term = Terminal(console_argv(str(path)), 100, 30)
    loop = asyncio.new_event_loop()
    try:
        t0 = time.monotonic()
        out["first_frame_s"] = round(term.wait_for(shows("big", "benchmark"), 60, "the task list") - t0, 3)
        t0 = term.press(b"\r")
        out["graph_first_rows_s"] = round(term.wait_for(shows("n000000"), 60, "the graph") - t0, 3)
        term.wait_for(lambda s: not any("loading" in line for line in s.display), 300, "the whole graph")
        out["graph_complete_s"] = round(time.monotonic() - t0, 3)
        time.sleep(1.0)

        def isolated(n: int, quiet_s: float) -> tuple[list[float], int]:
            writer = loop.run_until_complete(Writer(str(path), "big").start())
            lat, written = [], 0
            try:
                for i in range(n):
                    time.sleep(quiet_s)  # nothing written for quiet_s before (and after) each
                    # claim a node, then commit it: the rows stay near the top, on screen
                    cmd, word = ("claim", "running") if i % 2 == 0 else ("commit", "succeeded")
                    wrote = loop.run_until_complete(writer.send(cmd))
                    if wrote is None:
                        continue
                    written += 1
                    _eid, key, done = wrote
                    seen = term.wait(term.when(shows(key, word)), 10)
                    if seen is not None:
                        lat.append((seen - done) * 1000)
            finally:
                loop.run_until_complete(writer.close())
            return lat, written

        lat, written = isolated(a.isolated, 1.2)
        out["isolated"] = summary(lat, written) | {"load1": load1(), "samples_ms": [round(x, 1) for x in lat]}
        lat, written = isolated(a.spaced, 6.0)
        out["spaced_6s"] = summary(lat, written) | {"load1": load1()}

        out["steady"] = steady(term, loop, path, a.steady_rate, a.steady_seconds) | {"load1": load1()}

        load = loop.run_until_complete(LoadWriter(path, a.rate, a.seconds).start())
        cpu0, wall0 = term.cpu_seconds(), time.monotonic()
        key_lat = []
        n = 0
        while load.running():
            n += 1
            before = term.cursor_row()
            w = term.when(lambda s, b=before: highlighted_row(s) not in (b, None))
            t0 = term.press(b"j" if n % 2 else b"k")
            seen = term.wait(w, 5)
            if seen is not None:
                key_lat.append((seen - t0) * 1000)
            time.sleep(max(0.0, KEY_EVERY_S - (time.monotonic() - t0)))
            loop.run_until_complete(asyncio.sleep(0))  # let the writer's pipe be read
        loop.run_until_complete(load.finish())
        out["load"] = {"rate": a.rate, "seconds": a.seconds, "key_to_frame": summary(key_lat), "load1": load1()}
        if term.proc.poll() is None:  # the console's own CPU while it followed the load
            out["load"]["console_cpu_pct"] = round((term.cpu_seconds() - cpu0) / (time.monotonic() - wall0) * 100, 1)
        if term.proc.poll() is not None:  # the console died: say so, with what its screen showed
            out["console_exited"] = {"rc": term.proc.returncode, "screen": term.lines()}
            return out
        out["rss_mb_after_load"] = round(term.rss_mb(), 1)
        # idle: after the last change's analysis has run — a full run comes at most every 10 × its
        # own duration (console/analysis_runs.py), a few seconds at 100k nodes, so the one that
        # covers the load's last changes can start half a minute after them
        time.sleep(a.idle_after)
        c0, w0 = term.cpu_seconds(), time.monotonic()
        time.sleep(a.idle)
        out["idle_cpu_pct"] = round((term.cpu_seconds() - c0) / (time.monotonic() - w0) * 100, 2)
        out["rss_mb_end"] = round(term.rss_mb(), 1)  # the console and its analysis worker
        out["rss_mb_end_console_alone"] = round(term.rss_mb(own=True), 1)
        out["terminal_bytes"] = term.bytes
        out["load1_end"] = load1()
    finally:
        term.close()
        loop.close()
    return out


def done_count(screen) -> int | None:
    """The done count of the graph's summary line ("big  active  123/100000 …"), or None."""
    for line in screen.display[:4]:
        m = DONE_RE.search(line)
        if m and "big" in line:
            return int(m.group(1))
    return None


def steady(term, loop, path: Path, rate: float, seconds: float) -> dict:
    """Commits at a steady ``rate`` a second (nodes claimed beforehand, then quiet for 2 s), each
    watched on the graph's summary line (its done count): commit → screen for every one, and the
    gaps between successive screen changes of that count while the commits go on (an operator
    watching the count sees it move every 1/rate s; a gap is how long it stood still)."""
    from tests.support.commit_writer import Writer

    n = int(rate * seconds)
    writer = loop.run_until_complete(Writer(str(path), "big").start())
    try:
        for _ in range(n):
            loop.run_until_complete(writer.send("claim"))
        time.sleep(2.0)  # quiet: the claims' own refreshes are over before the first commit
        with term.lock:
            base = done_count(term.screen)
        if base is None:
            raise RuntimeError("the graph's summary shows no done count:\n" + "\n".join(term.lines()))
        watched: list[tuple[float, list[float]]] = []
        interval, nxt = 1.0 / rate, time.monotonic()
        for k in range(1, n + 1):
            seen = term.when(lambda s, want=base + k: (done_count(s) or 0) >= want)
            wrote = loop.run_until_complete(writer.send("commit"))
            if wrote is not None:
                watched.append((wrote[2], seen))
            nxt += interval
            time.sleep(max(0.0, nxt - time.monotonic()))  # pacing the writes, not synchronisation
        end = time.monotonic() + 10
        for _, seen in watched:
            term.wait(seen, max(0.0, end - time.monotonic()))
    finally:
        loop.run_until_complete(writer.close())
    lat = [(seen[0] - done) * 1000 for done, seen in watched if seen]
    shown = sorted({seen[0] for _, seen in watched if seen})
    gaps = [(b - a) * 1000 for a, b in zip(shown, shown[1:])]
    return {"rate": rate, "seconds": seconds, "commit_to_screen": summary(lat, len(watched)),
            "screen_changes": len(shown), "gap_max_ms": round(max(gaps), 1) if gaps else None,
            "gaps_over_300ms": sum(g > 300 for g in gaps)}


# ---------------------------------------------------------------------- baselines
def bench_polling(path: Path, rate: float, seconds: float) -> dict:
    """Baseline 1: a reader that polls the journal every second (commit returned → read)."""
    from store import Ledger

    async def run() -> dict:
        ledger = Ledger.open(path, create=False, read_only=True)
        cursor = ledger.last_event_id()
        seen: dict[int, float] = {}
        load = await LoadWriter(path, rate, seconds).start()
        while True:
            stop = not load.running()
            await asyncio.sleep(1.0)  # the baseline's own poll interval
            t = time.monotonic()
            for e in ledger.events(cursor, limit=1_000_000):
                cursor = e.id
                seen[e.id] = t
            if stop:
                break
        writes = await load.finish()
        ledger.close()
        return summary([(seen[i] - t) * 1000 for i, t in writes.items() if i in seen], len(writes))

    return asyncio.run(run())


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
    return {"rows": rows, "fill_s": round(fill, 2), "ms_per_update": round(per, 1)}


# ---------------------------------------------------------------------- the run
def table(r: dict) -> str:
    """The headline figures, headless and through the terminal side by side."""
    h, t = r.get("headless", {}), r.get("terminal", {})

    def lat(d: dict, *path: str) -> str:
        for p in path:
            d = d.get(p, {}) if isinstance(d, dict) else {}
        if not d:
            return "—"
        miss = f", {d['never_shown']} of {d['written']} never shown" if d.get("never_shown") else ""
        return f"{d['p50_ms']} / {d['p95_ms']} ms (max {d['max_ms']}){miss}"

    rows = [
        ("isolated commit → screen, p50 / p95", lat(h, "isolated"), lat(t, "isolated")),
        ("commits 6 s apart → screen", lat(h, "spaced_6s"), lat(t, "spaced_6s")),
        (f"commit → screen under {r['rate']:g}/s", lat(h, "load", "commit_to_screen"), "—"),
        (f"steady {t.get('steady', {}).get('rate', '?')}/s: commit → screen", "—", lat(t, "steady", "commit_to_screen")),
        ("steady: longest gap between screen changes", "—",
         f"{t.get('steady', {}).get('gap_max_ms', '—')} ms ({t.get('steady', {}).get('gaps_over_300ms', '—')} over 300 ms)"),
        ("key → frame under load", lat(h, "load", "key_to_frame"), lat(t, "load", "key_to_frame")),
        ("longest UI-loop stall under load", f"{h.get('load', {}).get('loop_stall_max_ms', '—')} ms", "—"),
        ("RSS after the load / end (MB)", f"{h.get('rss_mb_after_load')} / {h.get('rss_mb_end')}",
         f"{t.get('rss_mb_after_load', '—')} / {t.get('rss_mb_end', '—')}"),
        (f"idle CPU ({h.get('live_leases', '?')} live leases)", f"{h.get('idle_cpu_pct')} %",
         f"{t.get('idle_cpu_pct', '—')} %"),
        ("first frame / graph first rows / graph complete (s)",
         f"{h.get('first_frame_s')} / {h.get('graph_first_rows_s')} / {h.get('graph_complete_s')}",
         f"{t.get('first_frame_s', '—')} / {t.get('graph_first_rows_s', '—')} / {t.get('graph_complete_s', '—')}"),
    ]
    if "poll_1s" in r:
        rows.append(("baseline: poll every 1 s", lat(r, "poll_1s"), ""))
    if "datatable" in r:
        d = r["datatable"]
        rows.append((f"baseline: DataTable {d['rows']} rows, per update", f"{d['ms_per_update']} ms (fill {d['fill_s']} s)", ""))
    w = max(len(x[0]) for x in rows)
    lines = [f"{'':{w}}  {'headless':40}  terminal (pty + pyte)"]
    lines += [f"{a:{w}}  {b:40}  {c}" for a, b, c in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10k nodes, fewer commits, 15 s of load: the method, fast")
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--events", type=int)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--seconds", type=float, help="seconds of load (default 60; --quick 15)")
    ap.add_argument("--isolated", type=int, help="isolated commits (default 20; --quick 6)")
    ap.add_argument("--spaced", type=int, help="commits 6 s apart (default 8; --quick 3)")
    ap.add_argument("--steady-rate", type=float, default=10.0, help="commits/s of the steady scenario (terminal)")
    ap.add_argument("--steady-seconds", type=float, help="seconds of the steady scenario (default 30; --quick 10)")
    ap.add_argument("--idle-after", type=float, default=45.0,
                    help="seconds between the load's end and the idle CPU measurement (default 45)")
    ap.add_argument("--idle", type=float, help="seconds of idle CPU measurement (default 20; --quick 10)")
    ap.add_argument("--part", action="append", choices=("headless", "terminal", "poll", "datatable"),
                    help="run only these parts (repeatable; default: all)")
    ap.add_argument("--ledger", help="reuse a ledger built by an earlier run (it is copied, never changed)")
    ap.add_argument("--out", help="also write the JSON report here")
    ap.add_argument("--stall-trace", action="store_true", help="sample what the UI thread runs when it stalls")
    ap.add_argument("--load-writer", help=argparse.SUPPRESS)
    ap.add_argument("--writes-to", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.load_writer:
        load_writer(a.load_writer, a.rate, a.seconds, a.writes_to)
        return
    q = a.quick
    a.nodes = a.nodes or (10_000 if q else 100_000)
    a.events = a.events or (100_000 if q else 1_000_000)
    a.seconds = a.seconds or (15.0 if q else 60.0)
    a.isolated = a.isolated or (6 if q else 20)
    a.spaced = a.spaced or (3 if q else 8)
    a.idle = a.idle or (10.0 if q else 20.0)
    a.steady_seconds = a.steady_seconds or (10.0 if q else 30.0)
    parts = a.part or ["headless", "terminal", "poll", "datatable"]
    work = Path(tempfile.mkdtemp(prefix="warden-bench-"))
    result: dict = {"nodes": a.nodes, "events": a.events, "rate": a.rate, "load_seconds": a.seconds,
                    "cpus": os.cpu_count(), "load1_start": load1(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    if a.ledger:
        master = Path(a.ledger)
    else:
        master = work / "master.db"
        t0 = time.time()
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                        f"from tests.bench.bench_console import build; from pathlib import Path; "
                        f"build(Path({str(master)!r}), {a.nodes}, {a.events})"], check=True, cwd=ROOT)
        result["build_s"] = round(time.time() - t0, 1)

    def fresh(name: str) -> Path:
        d = work / name
        d.mkdir()
        shutil.copyfile(master, d / "ledger.db")
        return d / "ledger.db"

    try:
        if "headless" in parts:
            result["headless"] = asyncio.run(bench_headless(fresh("headless"), a))
        if "terminal" in parts:
            try:
                import pyte  # noqa: F401
            except ImportError:
                result["terminal"] = {"skipped": "needs pyte: pip install pyte (or 'warden[bench]')"}
            else:
                result["terminal"] = bench_terminal(fresh("terminal"), a)
        if "poll" in parts:
            result["poll_1s"] = bench_polling(fresh("poll"), a.rate, min(a.seconds, 10))
        if "datatable" in parts:
            result["datatable"] = asyncio.run(bench_datatable(a.nodes))
    finally:
        result["load1_end"] = load1()
        if not a.ledger:
            print(f"(the ledger is kept for --ledger: {master})", file=sys.stderr)
        for d in work.iterdir():
            if d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
    text = json.dumps(result, indent=2)
    if a.out:
        Path(a.out).write_text(text)
    print(text)
    print(table(result))


if __name__ == "__main__":
    main()

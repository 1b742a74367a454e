"""The task list at fleet size: the UI thread's work per change with 5,000 tasks.

    python tests/bench/bench_tasklist.py                      # 5,000 tasks, 4 agents, 60 writes/s, 3 × 20 s
    python tests/bench/bench_tasklist.py --tasks 50           # the same changes on a small list (flat?)

What runs: a SQLite ledger of ``--tasks`` tasks of 2–6 nodes (tests/support/fleet.py ``build``), ``--agents``
agent processes claiming, heartbeating and committing at ``--rate`` writes a second in all, and the
shipped console app (``console_app``, estimates and signals on) headless at 120×50 on the task list,
in three phases of ``--seconds`` each: creation order; urgency order (``s``); urgency order with a
filter (``/t0``, about a fifth of the tasks). What is measured, on the UI thread only, in CPU time
of that thread (``time.thread_time``: the reads in worker threads, the agents and the GIL waits are
not UI work):

* per delta applied (the ``LedgerChanged`` message, ``WardenApp.apply_pending``: the hub's models, the task list's rows, order,
  filter and summary, the screen's repaint bookkeeping and summary line): p50/p95/max;
* per analysis result applied (the ``AnalysisReady`` message, ``WardenApp.analysis_ready``): p50/p95/max;
* the lines drawn (``RowList.render_line`` and the summary/info lines' ``render``), in all;
* "per change": (every delta + every analysis result + every line drawn) / deltas — the UI work
  a delta costs, drawing included; "per write": the same over the journal events those deltas
  brought (a delta carries every write its read found; the app applies at most 30 a second);
* the UI thread's whole CPU time in the phase (Textual's compositor and frames included), in % of
  a core and per write. Goal: under 1 ms of UI work per change.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import fleet  # noqa: E402
from tests.support.follower_log import FollowerLog  # noqa: E402


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def ms(values: list[float]) -> dict:
    return {"n": len(values), "p50_ms": round(pct(values, .5) * 1000, 3), "p95_ms": round(pct(values, .95) * 1000, 3),
            "max_ms": round(max(values) * 1000, 3) if values else None}


class Meter:
    """Thread CPU time of the wrapped UI-thread calls, by name."""

    def __init__(self) -> None:
        self.calls: dict[str, list[float]] = {}
        self.on = False
        self.prof: cProfile.Profile | None = None  # --profile: the measured handlers only

    def wrap(self, cls: type, name: str, label: str) -> None:
        real = getattr(cls, name)
        meter = self

        def timed(self, *a, **kw):
            if not meter.on:
                return real(self, *a, **kw)
            t0 = time.thread_time()
            try:
                return real(self, *a, **kw)
            finally:
                meter.calls.setdefault(label, []).append(time.thread_time() - t0)

        setattr(cls, name, timed)

    def wrap_messages(self, cls: type, labels: dict[type, str]) -> None:
        """The app's message handling (``@on`` handlers are registered, not looked up: wrap the
        dispatch), by message type. The handlers measured are synchronous: no other work runs
        inside the await."""
        real = cls._on_message
        meter = self

        async def timed(self, message):
            label = labels.get(type(message))
            if not meter.on or label is None:
                return await real(self, message)
            if meter.prof is not None:
                meter.prof.enable()
            t0 = time.thread_time()
            try:
                return await real(self, message)
            finally:
                meter.calls.setdefault(label, []).append(time.thread_time() - t0)
                if meter.prof is not None:
                    meter.prof.disable()

        cls._on_message = timed

    def take(self) -> dict[str, list[float]]:
        calls, self.calls = self.calls, {}
        return calls


async def run(path: str, a: argparse.Namespace) -> dict:
    from console.app import WardenApp, console_app
    from console.messages import AnalysisReady
    from console.widgets import InfoLine, RowList

    from console.follow import LedgerFollower

    meter = Meter()
    meter.wrap_messages(WardenApp, {AnalysisReady: "analysis"})
    meter.wrap(WardenApp, "apply_pending", "delta")  # held bursts are applied from a timer, not the message
    events = [0]
    take = LedgerFollower.take_pending

    def counted(self):
        p = take(self)
        if meter.on:
            events[0] += len(p.events)
        return p

    LedgerFollower.take_pending = counted
    meter.wrap(RowList, "render_line", "line")
    meter.wrap(InfoLine, "render", "info")
    app = console_app(ledger=path)
    follower_log = FollowerLog(app)  # the journal reads it does
    phases = {}
    prof = meter.prof = cProfile.Profile() if a.profile else None
    async with app.run_test(headless=True, size=(120, 50)) as pilot:
        t0 = time.monotonic()
        while not app.settled():
            await pilot.pause(0.05)
        first = time.monotonic() - t0
        argvs = [fleet.command(path, i, tasks=a.tasks, rate=a.rate / a.agents, until_wall=0,
                               out=os.path.join(os.path.dirname(path), f"agent{i}.json"), claim="sticky")
                 for i in range(a.agents)]
        procs = await asyncio.to_thread(fleet.start, argvs, a.seconds * 3 + 5)
        try:
            await pilot.pause(2.0)  # the agents' first claims
            for phase, keys in (("created", ()), ("urgency", ("s",)), ("urgency, /t0", ("slash", "t", "0", "enter"))):
                for k in keys:
                    await pilot.press(k)
                meter.take()
                events[0] = 0
                meter.on = True
                cpu0, wall0, ui0 = time.process_time(), time.monotonic(), time.thread_time()
                await pilot.pause(a.seconds)
                ui = time.thread_time() - ui0  # this thread runs the app: all of the UI's work, Textual's included
                meter.on = False
                calls = meter.take()
                deltas = calls.get("delta", [])
                total = sum(sum(v) for v in calls.values())
                phases[phase] = {
                    "deltas": ms(deltas), "analysis": ms(calls.get("analysis", [])),
                    "lines_drawn": len(calls.get("line", [])), "lines_ms": round(sum(calls.get("line", [])) * 1000, 1),
                    "info_lines_ms": round(sum(calls.get("info", [])) * 1000, 1),
                    "ui_ms_per_change": round(total * 1000 / max(1, len(deltas)), 3),
                    "writes": events[0],
                    "ui_ms_per_write": round(total * 1000 / max(1, events[0]), 3),
                    "ui_thread_cpu_pct": round(100 * ui / a.seconds, 1),
                    "ui_thread_ms_per_write": round(ui * 1000 / max(1, events[0]), 3),
                    "process_cpu_pct": round(100 * (time.process_time() - cpu0) / (time.monotonic() - wall0), 1),
                    "shown": app.tasks_model.row_count(), "summary": app.tasks_model.summary_text(),
                    "journal_reads": follower_log.reads, "cursor": app.follower.cursor,
                }
                if "urgency" in phase:
                    phases[phase]["first_rows"] = first_rows(app)
        finally:
            for p in procs:
                p.wait(timeout=a.seconds * 3 + 60)
    if prof is not None:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(30)
    return {"first_frame_s": round(first, 2), "phases": phases}


def first_rows(app) -> dict:
    """The first rows after ``s``: drawn on screen as the model orders them, in urgency order —
    no finished task above an unfinished one, and, among rows with the same alarms, the most open
    handoffs first (the order's first two criteria, read from the rows' views, not the model's key)."""
    from console.model import FINISHED_TASK

    model = app.tasks_model
    rows = [model.row_at(i) for i in range(min(20, model.row_count()))]
    ids = [r.view.task_id for r in rows]
    problems = []
    if model.order != "urgency":
        problems.append(f"order is {model.order!r}")
    done = [r.view.status in FINISHED_TASK for r in rows]
    if any(d and not later for d, later in zip(done, done[1:])):
        problems.append("a finished task above an unfinished one")
    for a, b in zip(rows, rows[1:]):
        if (not (a.view.status in FINISHED_TASK or b.view.status in FINISHED_TASK) and a.alarms == b.alarms
                and a.view.handoffs_open < b.view.handoffs_open):
            problems.append(f"{a.view.task_id} ({a.view.handoffs_open} open) above {b.view.task_id} "
                            f"({b.view.handoffs_open} open)")
            break
    screen = app.export_screenshot()
    drawn = [i for i in ids if i in screen]
    if ids and (not drawn or drawn[0] != ids[0]):
        problems.append(f"the first row drawn is not {ids[0]}")
    return {"ids": ids[:5], "ok": not problems, "problems": problems}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=5000)
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--rate", type=float, default=60.0, help="writes a second, all agents")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds per phase")
    ap.add_argument("--out", help="also write the JSON report here")
    ap.add_argument("--profile", action="store_true", help="cProfile the measured handlers (to stderr)")
    a = ap.parse_args()
    uptime0 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-tasklist-") as work:
        path = os.path.join(work, "ledger.db")
        t0 = time.monotonic()
        fleet.build(path, a.tasks, 29, sizes=(2, 6))
        built = time.monotonic() - t0
        report = asyncio.run(run(path, a))
    report.update(tasks=a.tasks, agents=a.agents, rate=a.rate, seconds=a.seconds, build_s=round(built, 1),
                  uptime_before=uptime0,
                  uptime_after=subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    text = json.dumps(report, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    wrong = {k: v["first_rows"]["problems"] for k, v in report["phases"].items()
             if "first_rows" in v and not v["first_rows"]["ok"]}
    if wrong:
        sys.exit(f"bench_tasklist: the first rows are not in urgency order: {wrong}")


if __name__ == "__main__":
    main()

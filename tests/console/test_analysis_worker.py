"""The console's analysis worker: a process of its own (console/analysis_worker.py), driven from the
app's event loop (console/analysis_client.py). Its figures are the store's; its life follows the
console's: killed, it is reported and started again; stopped or starved, the run is given up after
its deadline while the screen stays live; the console killed, it goes too; grown past its memory
bound, it is replaced without a word. Every wait is for a condition, with a deadline."""

from __future__ import annotations

import asyncio
import inspect
import os
import pkgutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import store
from console.analysis import GraphRequest, RunRequest, RunResult
from console.analysis_client import AnalysisWorker
from store import Ledger, ManualClock
from store.estimation import estimates
from store.reading import signals
from store.reading.analysis import TaskAnalysis
from store.reading.cli_json import signal_json

from tests.support.console_app import NOW, make_app, settle, wait_for
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Client:
    """An AnalysisWorker on a loop of its own (no app): what it delivers and reports, in order."""

    def __init__(self, target: Path, **kw) -> None:
        self.results: list[tuple[RunRequest, RunResult]] = []
        self.reports: list[str] = []
        self.worker = AnalysisWorker(str(target), deliver=lambda req, res: self.results.append((req, res)),
                                     report=self.reports.append, **kw)

    async def __aenter__(self) -> "Client":
        self.task = asyncio.ensure_future(self.worker.serve())
        await self.until(lambda: self.worker.pid is not None, "the worker ready")
        return self

    async def __aexit__(self, *exc) -> None:
        await self.worker.close()
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass

    async def until(self, cond, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.01)

    async def run(self, req: RunRequest, timeout: float = 60.0) -> RunResult:
        n = len(self.results)
        self.worker.run(req)
        await self.until(lambda: len(self.results) > n, f"the {req.kind} run", timeout)
        return self.results[-1][1]


def everything(task_ids, graph: str, window) -> RunRequest:
    return RunRequest(NOW, GraphRequest(graph, tuple(window)), tuple(task_ids), kind="full")


async def test_the_workers_figures_are_the_store_functions_figures(ledger_path):
    with Ledger.open(ledger_path, create=False, clock=ManualClock(NOW)) as ledger:
        ids = [t.task_id for t in ledger.tasks()]
        window = list(ledger.graph_pages("report-001"))[0].nodes
    async with Client(ledger_path) as c:
        loading = await c.run(RunRequest(NOW, GraphRequest("report-001", tuple(window), loaded=False),
                                         ("report-001",), kind="full"))
        assert c.worker.stats["graph_builds"] == 0  # the console is still loading it: not read twice at once
        got = await c.run(everything(ids, "report-001", window))
        assert c.worker.stats["graph_builds"] == 1 and c.worker.stats["following"] == "report-001"
    assert got.error is None and got.kind == "full" and loading.error is None
    # the same figures, from the ledger, while it loads (its rows' figures: the unfinished ones')
    assert loading.graph[1] == got.graph[1] and loading.graph[3] == got.graph[3]
    assert loading.graph[2] and all(got.graph[2][k] == e for k, e in loading.graph[2].items())
    with Ledger.open(ledger_path, create=False, read_only=True, clock=ManualClock(NOW)) as ledger:
        for tid in ids:
            if tid == "report-001":
                continue
            task = ledger.task(tid)
            want_eta = estimates.estimate_task(ledger, task, now=NOW).to_json()
            want_sigs = [signal_json(s) for s in signals.signals_for_task(ledger, task, now=NOW)]
            assert got.tasks[tid] == (want_eta, want_sigs), tid
        an = TaskAnalysis(ledger, "report-001")
        est = an.estimate(NOW)
        graph_id, eta, node_etas, sigs = got.graph
        assert graph_id == "report-001"
        assert eta == est.task.to_json() == estimates.estimate_task(ledger, ledger.task("report-001"), now=NOW).to_json()
        assert sigs == [signal_json(s) for s in an.signals(NOW)]
        assert sigs == [signal_json(s) for s in signals.signals_for_graph(ledger, ledger.graph("report-001"), now=NOW)]
        for n in window:
            if n.key in est.nodes:
                assert node_etas[n.key] == est.nodes[n.key].to_json(), n.key
        assert got.tasks["report-001"] == (eta, sigs)
        assert any(s["kind"] == "handoff_waiting" for s in sigs)  # the fixed ledger's signals are there


async def test_a_killed_worker_is_reported_and_started_again_and_its_run_given_back(ledger_path):
    async with Client(ledger_path) as c:
        first = c.worker.pid
        ok = await c.run(RunRequest(NOW, None, ("idle-002",), kind="signals", parts=frozenset({"signals"})))
        assert ok.error is None
        os.kill(first, signal.SIGSTOP)  # a run that cannot finish: it is under way when the kill comes
        c.worker.run(RunRequest(NOW, None, ("report-001",), kind="full"))
        os.kill(first, signal.SIGKILL)
        await c.until(lambda: c.results and c.results[-1][0].task_ids == ("report-001",), "the run given back")
        lost = c.results[-1][1]
        assert lost.lost and lost.error and lost.kind == "full"
        await c.until(lambda: c.worker.pid not in (None, first), "a new worker")
        assert len(c.reports) == 1 and "SIGKILL" in c.reports[0] and "starting it again" in c.reports[0]
        assert c.worker.deaths == 1 and c.worker.starts == 2 and not alive(first)
        again = await c.run(RunRequest(NOW, None, ("report-001",), kind="full"))
        assert again.error is None and again.tasks["report-001"][0]["p80_s"] is not None


async def test_a_worker_that_crashes_says_why(ledger_path, tmp_path):
    """Its last words (a traceback's last line) come with the report."""
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nsys.stdin.buffer.read(4)\nraise SystemExit('the worker could not go on')\n")

    def command(parent: int) -> tuple[list[str], dict[str, str]]:
        return [sys.executable, str(crash)], dict(os.environ)

    c = Client(ledger_path, command=command)
    task = asyncio.ensure_future(c.worker.serve())
    try:
        await c.until(lambda: c.reports, "the report")
        assert "the worker could not go on" in c.reports[0] and "status 1" in c.reports[0]
        await c.until(lambda: c.worker.starts >= 2, "a second start")  # (at once the first time)
        await asyncio.sleep(0.3)
        assert c.worker.starts == 2 or len(c.reports) == c.worker.starts  # each death reported once, spaced
    finally:
        await c.worker.close()
        task.cancel()


async def test_a_stopped_worker_is_given_up_after_the_deadline_and_replaced(ledger_path):
    async with Client(ledger_path, run_timeout_s=1.5) as c:
        first = c.worker.pid
        os.kill(first, signal.SIGSTOP)
        t0 = time.monotonic()
        res = await c.run(RunRequest(NOW, None, ("report-001",), kind="full"), timeout=60)
        assert res.lost and time.monotonic() - t0 >= 1.5
        assert "more than 1.5 s" in c.reports[-1]
        await c.until(lambda: c.worker.pid not in (None, first), "a new worker")
        assert not alive(first)
        assert (await c.run(RunRequest(NOW, None, ("report-001",), kind="full"))).error is None


async def test_a_worker_past_its_memory_bound_is_replaced_silently(ledger_path):
    async with Client(ledger_path, rss_max_mb=1) as c:  # every run leaves it above 1 MB
        for _ in range(3):
            res = await c.run(RunRequest(NOW, None, ("report-001",), kind="full"))
            assert res.error is None and res.tasks["report-001"][0]["p80_s"] is not None
        await c.until(lambda: c.worker.starts >= 3, "the replacements")
        assert c.reports == [] and c.worker.deaths == 0


async def test_a_slow_worker_never_holds_up_the_screen(fixed_dir):
    """While the worker is stopped, agent writes still reach the task list and keys still move the
    cursor; the run is given up at its deadline and the next one has figures again."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        usual = app.analyst.run_timeout_s
        app.analyst.run_timeout_s = 3.0
        said: list[str] = []
        report = app.analyst.report

        def heard(text: str) -> None:
            # The stopped run's notice; the new worker's runs get the usual deadline back (3 s is
            # short for a first run on a loaded machine).
            said.append(text)
            app.analyst.run_timeout_s = usual
            report(text)

        app.analyst.report = heard
        first = app.analyst.pid
        os.kill(first, signal.SIGSTOP)
        app.analysis.run_analysis()
        assert app.analysis.busy
        with Ledger.open("ledger.db", clock=ManualClock(NOW)) as ledger:
            ledger.create_task("late-004", title="written while the worker is stopped")
        tasks = app.tasks_model
        await wait_for(pilot, lambda: "late-004" in tasks.index, what="the write on screen")
        assert app.analysis.busy and app.analyst.pid == first  # the run still out, the screen moved on
        await pilot.press("j")
        await wait_for(pilot, lambda: not app.analysis.busy, what="the run given up")
        await wait_for(pilot, lambda: app.analyst.pid not in (None, first), what="a new worker")
        assert len(said) == 1 and "more than 3 s" in said[0], said
        app.analysis.run_analysis()
        await wait_for(pilot, lambda: "late-004" in app.analysis.eta_at and not app.analysis.busy, what="the next run")
        assert not alive(first)


def test_the_console_killed_takes_its_worker_with_it(ledger_path):
    from tests.support.console_terminal import Terminal, console_argv, process_children, shows

    term = Terminal(console_argv(str(ledger_path)), 100, 30)
    try:
        term.wait_for(shows("report-001"), 60, "the task list")
        wait_until(lambda: process_children(term.proc.pid), "the analysis worker", 60)
        (worker,) = process_children(term.proc.pid)
        assert alive(worker)
        os.kill(term.proc.pid, signal.SIGKILL)
        term.proc.wait(10)
        wait_until(lambda: not alive(worker), "the worker to end with the console", 10)
    finally:
        term.close()


def test_a_worker_ends_with_its_console_even_when_its_input_stays_open():
    """A console that dies while another process still holds the worker's input open (so no end of
    input comes): the worker ends all the same (the kernel's signal on Linux; its parent's pid)."""
    r, w = os.pipe()
    code = ("import os, subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-m', 'console.analysis_worker', '--parent', str(os.getpid())],"
            f" stdin={r}, stdout=subprocess.DEVNULL)\n"
            "print(p.pid, flush=True)\n")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, pass_fds=(r,),
                             env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
        pid = int(out.stdout.split()[0])
        wait_until(lambda: not alive(pid), "the orphaned worker to end", 10)
    finally:
        os.close(r)
        os.close(w)


def test_no_store_function_takes_a_scheduling_parameter():
    """The store's functions compute; when they run is their caller's business (no ``pause=``)."""
    found = []
    for mod in pkgutil.walk_packages(store.__path__, "store."):
        m = __import__(mod.name, fromlist=["_"])
        for name, obj in vars(m).items():
            targets = [obj] if inspect.isfunction(obj) else []
            if inspect.isclass(obj) and obj.__module__ == m.__name__:
                targets += [f for f in vars(obj).values() if inspect.isfunction(f)]
            for f in targets:
                if f.__module__ != m.__name__:
                    continue
                try:
                    params = inspect.signature(f).parameters
                except (TypeError, ValueError):
                    continue
                if {"pause", "turn", "yield_to"} & set(params):
                    found.append(f"{m.__name__}.{f.__qualname__}")
    assert found == []
    assert not (ROOT / "console" / "liveturn.py").exists()
    app_source = (ROOT / "console" / "app.py").read_text()
    assert "setswitchinterval" not in app_source and "gc.freeze" not in (ROOT / "console" / "analysis.py").read_text()


@pytest.mark.parametrize("read_only", [True, False])
async def test_figures_reach_a_console_read_only_or_not(fixed_dir, read_only):
    app = make_app(read_only=read_only)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        tasks = app.tasks_model
        row = tasks.rows[tasks.index["report-001"]]
        assert row.eta["p80_s"] is not None and any(s["kind"] == "handoff_waiting" for s in row.signals)
        assert app.analyst.stats.get("rss_mb", 0) > 0 and app.analyst.deaths == 0

"""Fleet benchmark: many agent processes on one ledger, the shipped ``warden console`` watching.

    python tests/bench/bench_fleet.py --backend postgres        # 20 agents, 500 tasks, 200 writes/s, 5 min
    python tests/bench/bench_fleet.py --backend sqlite
    python tests/bench/bench_fleet.py --backend postgres --duration 60 --tasks 100 --agents 8   # a short run
    python tests/bench/bench_fleet.py --ledgers 2 --tasks 5000 --min-nodes 5 --max-nodes 20   # two ledgers, one console

One command, one JSON report and a table. What runs:

* the ledger: ``--tasks`` tasks of 20–200 nodes (layered DAGs, a token budget each), built through
  the API (tests/support/fleet.py); PostgreSQL in a private throw-away cluster
  (tests/support/pgcluster.py: loopback, ``fsync=off`` like CI) or, with ``--pg-url``, a fresh
  database created on that server (and dropped); SQLite in a temporary directory on this disk
  (WAL, ``synchronous=FULL``);
* ``--agents`` agent processes claiming, heartbeating (with observations) and committing, one
  transaction per write, paced to ``--rate`` writes a second in all (claims + heartbeats + commits
  + failures + handoffs; 5 writes per node);
* the console exactly as shipped (``python -m console console --ledger …``: estimates and signals
  on) on a pseudo-terminal of ``--cols``×``--rows`` drawn by pyte (tests/support/console_terminal.py),
  opened on the task list for the first part of the run, then (``/`` the task's id, enter, enter) on
  a busy task's graph — an active task with the most nodes left, to which ``--busy-agents`` agents
  then go first — while ``j``/``k`` is pressed every 150 ms in both.

Reported side by side for the two views: commit → screen p50/p95/max (how each write is matched to
the screen: tests/bench/fleet_screen.py), measurable / missed, key → frame, the console's CPU and
RSS; the CPU each part took in each view (% of one core: the agents, the server, the console, this
benchmark's own pyte and matching, and the whole machine); for the run: first frame, PostgreSQL connections held (``pg_stat_activity`` of the ledger's
database, by ``application_name``: agents ``warden-agent``, console ``warden-console`` and its
analysis worker ``warden-analysis``; sampled
every 0.5 s, the maximum), writes/s and node commits/s the ledger sustained (journal events in the
window), claim call p50/p95/max and the longest wait of an agent for a claim, and ``uptime``
before and after.

``--ledgers N``: N ledgers of ``--tasks`` tasks each (N SQLite files, or N databases on the server),
``--agents`` and ``--rate`` shared out evenly among them (the rate is the fleet's in all), one
console opening them all (``warden console --ledger L0 --ledger L1 …``, the names from a contexts
file); every ledger's commits are matched to its rows (``L1  t0042 …``), and reported pooled and by
ledger; the busy graph is L0's (``l`` shows L0 only, then the filter). Connections are sampled per
database.

``--claim any`` (the ledger hands out the oldest task with work): the tasks on the list's first
screen (creation order; with several ledgers, their rows alternate) are built big enough to take
the whole run's commits (``--head-nodes auto``, the default; ``head`` in the report), so every
ledger's commits land on rows the console shows, as ``sticky`` claims over 500 tasks of 20–200
nodes do with one ledger. Without it, 5,000 tasks of 5–12 nodes left the rows on screen done within
seconds and the task list measured almost nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import fleet  # noqa: E402
from tests.bench.fleet_screen import LEDGER_TASK_ROW, TASK_ROW, ScreenLog, match_counts, match_nodes  # noqa: E402
from tests.support.console_terminal import process_cpu_seconds  # noqa: E402

KEY_EVERY_S = 0.15
WRITES_PER_NODE = 2 + fleet.HEARTBEATS  # a claim, the heartbeats, a commit


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": round(pct(ms, .5), 1), "p95_ms": round(pct(ms, .95), 1),
            "p99_ms": round(pct(ms, .99), 1), "max_ms": round(max(ms), 1) if ms else None}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


# ---------------------------------------------------------------------- the ledger's server
class Backend:
    """Where the ledger lives; ``connections()`` counts PostgreSQL backends by application_name."""

    def __init__(self, a: argparse.Namespace, work: Path) -> None:
        self.kind = a.backend
        self.cluster = None
        self.admin_url: str | None = None
        self.dbname: str | None = None
        self._conn = None
        n = max(1, getattr(a, "ledgers", 1))
        self.dbnames: list[str] = []
        if self.kind == "sqlite":
            self.target = str(work / "ledger.db")
            self.targets = [self.target] if n == 1 else [str(work / f"ledger-{i}.db") for i in range(n)]
            self.target = self.targets[0]
            return
        if a.pg_url:
            import psycopg

            self.admin_url = a.pg_url
            self.dbname = "warden_fleet_" + uuid.uuid4().hex[:10]
            with psycopg.connect(a.pg_url, autocommit=True) as c:
                c.execute(f'CREATE DATABASE "{self.dbname}"')
            base = a.pg_url.split("?", 1)[0].rsplit("/", 1)[0]
            self.target = f"{base}/{self.dbname}"
        else:
            from tests.support import pgcluster

            why = pgcluster.available()
            if why:
                raise SystemExit(f"bench_fleet: no private PostgreSQL cluster ({why}); pass --pg-url")
            self.cluster = pgcluster.Cluster().start(durable=a.pg_durable)
            self.target = self.cluster.url
            self.dbname = "postgres"
        self.targets = [self.target]
        self.dbnames = [self.dbname or "postgres"]
        if n > 1:  # more databases on the same server, one a ledger
            import psycopg

            admin = self.admin_url or self.target
            base = self.target.split("?", 1)[0].rsplit("/", 1)[0]
            with psycopg.connect(admin, autocommit=True) as c:
                for i in range(1, n):
                    name = f"{self.dbname}_l{i}" if self.admin_url else f"fleet_l{i}"
                    c.execute(f'CREATE DATABASE "{name}"')
                    self.dbnames.append(name)
                    self.targets.append(f"{base}/{name}")

    def connections(self) -> dict[str, int]:
        if self.kind == "sqlite":
            return {}
        import psycopg

        if self._conn is None:
            self._conn = psycopg.connect(self.target, autocommit=True, application_name="bench-sampler")
        rows = self._conn.execute(
            "SELECT datname, application_name, count(*) FROM pg_stat_activity WHERE datname = ANY(%s) "
            "AND pid <> pg_backend_pid() GROUP BY 1, 2", (self.dbnames,)).fetchall()
        out: dict[str, int] = {}
        for db, n, c in rows:  # by application_name, all databases; with several, by ledger too
            out[str(n)] = out.get(str(n), 0) + int(c)
            if len(self.dbnames) > 1:
                out[f"L{self.dbnames.index(db)}:{n}"] = int(c)
        return out

    def server_stats(self) -> dict[str, int]:
        if self.kind == "sqlite":
            return {}
        self.connections()  # (opens the sampler's connection)
        row = self._conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
        return {"xact_commit": int(row[0])}

    def table_sizes(self) -> dict[str, dict[str, int]]:
        """Every table: rows and bytes on disk (its indexes and TOAST included)."""
        out: dict[str, dict[str, int]] = {}
        if self.kind == "sqlite":
            import sqlite3

            con = sqlite3.connect(self.target)
            try:
                owner = dict(con.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')"))
                for name, size in con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
                    t = owner.get(name, name)
                    out.setdefault(t, {"rows": 0, "bytes": 0})["bytes"] += int(size)
                for t in list(out):
                    if t.startswith("sqlite_"):
                        del out[t]
                        continue
                    out[t]["rows"] = int(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0])
            finally:
                con.close()
            return out
        self.connections()
        tables = [r[0] for r in self._conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname = current_schema()").fetchall()]
        for t in tables:
            size = self._conn.execute("SELECT pg_total_relation_size(%s::regclass)", (t,)).fetchone()[0]
            rows = self._conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
            out[t] = {"rows": int(rows), "bytes": int(size)}
        return out

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self.cluster is not None:
            self.cluster.stop()
        if self.dbname and self.admin_url:
            import psycopg

            with psycopg.connect(self.admin_url, autocommit=True) as c:
                for name in self.dbnames or [self.dbname]:
                    c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Sampler(threading.Thread):
    """Connections every 0.5 s: the maximum per application_name, and what was seen when."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(daemon=True)
        self.backend = backend
        self.max: dict[str, int] = {}
        self.by_phase: dict[str, dict[str, int]] = {}
        self.phase = "start"
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            try:
                seen = self.backend.connections()
            except Exception as e:  # the sampler's own trouble is reported, never fatal
                self.max["sampler_error"] = 1
                self.error = str(e)
                continue
            # the console's own and its analysis worker's, at the same instant
            seen = {**seen, "console+analysis": seen.get("warden-console", 0) + seen.get("warden-analysis", 0),
                    **{f"L{i}:console+analysis": seen.get(f"L{i}:warden-console", 0) + seen.get(f"L{i}:warden-analysis", 0)
                       for i in range(len(self.backend.dbnames)) if len(self.backend.dbnames) > 1}}
            for name, n in seen.items():
                self.max[name] = max(self.max.get(name, 0), n)
                ph = self.by_phase.setdefault(self.phase, {})
                ph[name] = max(ph.get(name, 0), n)


class CpuMeter:
    """CPU time by part of the run (% of one core over a window): the agents, the server (the
    private cluster's processes; with ``--pg-url``, every ``postgres`` process), the console, this
    benchmark (pyte and the matching), and the whole machine (busy share of every core, x cores)."""

    HZ = os.sysconf("SC_CLK_TCK")

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.agents: list[int] = []
        self.console: int | None = None

    @classmethod
    def _ticks(cls, pid: int) -> tuple[int, int]:
        """(its CPU ticks, its parent)."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            return int(parts[11]) + int(parts[12]), int(parts[1])
        except (OSError, ValueError, IndexError):
            return 0, 0

    def _server(self) -> dict[int, int]:
        """CPU ticks by server process (per process: one that exits between two samples must not
        take its ticks out of the sum, which made the server's share negative)."""
        if self.backend.kind != "postgres":
            return {}
        master = None
        if self.backend.cluster is not None:
            try:
                with open(os.path.join(self.backend.cluster.data, "postmaster.pid")) as f:
                    master = int(f.readline())
            except (OSError, ValueError):
                master = None
        ticks_by_pid = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            pid = int(d)
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() != "postgres":
                        continue
            except OSError:
                continue
            ticks, parent = self._ticks(pid)
            if master is None or pid == master or parent == master:
                ticks_by_pid[pid] = ticks
        return ticks_by_pid

    def snap(self) -> dict:
        with open("/proc/stat") as f:
            cpu = [int(x) for x in f.readline().split()[1:]]
        busy = sum(cpu) - cpu[3] - (cpu[4] if len(cpu) > 4 else 0)  # all but idle and iowait
        return {"t": time.monotonic(), "agents": sum(self._ticks(p)[0] for p in self.agents),
                "server": self._server(),
                # the console with its analysis worker (a child process)
                "console": process_cpu_seconds(self.console) * self.HZ if self.console else 0,
                "benchmark": sum(os.times()[:2]) * self.HZ, "machine": busy}

    def since(self, a: dict) -> dict[str, float]:
        """% of a core by part since the snapshot ``a``. A server process that exited meanwhile
        counts nothing (its last ticks are lost: an undercount, never a negative share)."""
        b = self.snap()
        dt = b["t"] - a["t"]
        was = a["server"]
        used = {**{k: b[k] - a[k] for k in b if k not in ("t", "server")},
                "server": sum(max(0, t - was.get(pid, 0)) for pid, t in b["server"].items())}
        return {k: round(100 * used[k] / self.HZ / dt, 1) for k in ("agents", "server", "console", "benchmark", "machine")}


# ---------------------------------------------------------------------- the agents
def start_agents(a: argparse.Namespace, target: str, work: Path, seconds: float, *, ledger: int = 0,
                 of: int = 1) -> list:
    """Ledger ``ledger``'s share of the agents (of ``of`` ledgers): ``--agents`` / ``of`` of them at
    ``--rate`` / ``of`` writes a second in all."""
    agents = max(1, a.agents // of)
    tag = "" if of == 1 else f"L{ledger}-"
    control = work / ("control.json" if ledger == 0 else f"control-{ledger}.json")
    outs = [work / f"agent-{tag}{i:02d}.json" for i in range(agents)]
    argvs = [fleet.command(target, i, tasks=a.tasks, rate=a.rate / of / agents, until_wall=0, out=str(o),
                           claim=a.claim, control=str(control), seed=a.seed + ledger) for i, o in enumerate(outs)]
    return list(zip(fleet.start(argvs, seconds), outs))


def finish_agents(procs: list) -> list[dict]:
    got = []
    for p, out in procs:
        p.wait()
        if out.exists():
            got.append(json.loads(out.read_text()))
    return got


# ---------------------------------------------------------------------- the console
def keys_for(term, until: float, lat: list[float], stop: threading.Event | None = None) -> None:
    """j/k every KEY_EVERY_S until ``until``; key → frame (the cursor drawn on its new row)."""
    from tests.support.console_terminal import highlighted_row

    n = 0
    while time.monotonic() < until and term.proc.poll() is None:
        n += 1
        before = term.cursor_row()
        w = term.when(lambda s, b=before: highlighted_row(s) not in (b, None))
        t0 = term.press(b"j" if n % 2 else b"k")
        seen = term.wait(w, 5)
        if seen is not None:
            lat.append((seen - t0) * 1000)
        time.sleep(max(0.0, KEY_EVERY_S - (time.monotonic() - t0)))  # pacing the keys


def busiest_open_task(target: str, sizes: dict[str, int]) -> str:
    """An active task with the most nodes not started (its graph will be busy from now on)."""
    from store import Ledger

    with Ledger.open(target, create=False, read_only=True, application_name="warden-cli") as ledger:
        views = ledger.tasks()
    active = [t for t in views if t.status == "active"]
    return max(active, key=lambda t: (t.counts.get("pending", 0), t.task_id)).task_id


def journal(target: str) -> list:
    from store import Ledger

    out = []
    with Ledger.open(target, create=False, read_only=True, application_name="warden-cli") as ledger:
        cursor = 0
        while True:
            batch = ledger.events(cursor, limit=5000)
            if not batch:
                return out
            out.extend(batch)
            cursor = batch[-1].id


LIST_CHROME = 5  # the task list's lines that are not task rows (header, summary, footer…)


def head_tasks(a: argparse.Namespace) -> tuple[int, int]:
    """(k, size): the first k tasks of every ledger — the rows the task list shows, in creation
    order, each ledger's share of them — built with ``size`` nodes, enough for the whole run's
    commits with a fifth to spare. ``--claim any`` takes the oldest tasks with work first: with
    small tasks the agents would finish the rows on screen within seconds and work on rows
    nobody sees for the rest of the run. (0, 0) with ``--claim sticky`` or ``--head-nodes 0``."""
    if (a.head_nodes == "auto" and a.claim != "any") or a.head_nodes == "0":
        return 0, 0
    k = -(-max(1, a.rows - LIST_CHROME) // a.ledgers)
    if a.head_nodes != "auto":
        return k, int(a.head_nodes)
    commits = a.rate / a.ledgers / WRITES_PER_NODE * (a.ramp + a.duration + 30.0) * 1.2
    return k, min(1000, max(a.max_nodes, -(-int(commits) // k)))


def run(a: argparse.Namespace) -> dict:
    from tests.support.console_terminal import Terminal, shows

    work = Path(tempfile.mkdtemp(prefix="warden-fleet-"))
    n = a.ledgers
    result: dict = {"backend": a.backend, "ledgers": n, "agents": a.agents, "tasks": a.tasks, "rate": a.rate,
                    "duration_s": a.duration, "claim": a.claim, "cpus": os.cpu_count(),
                    "started": time.strftime("%Y-%m-%d %H:%M:%S"), "uptime_start": uptime()}
    backend = Backend(a, work)
    sampler = Sampler(backend)
    term = None
    procs: list = []
    try:
        t0 = time.monotonic()
        sizes = {}
        head = head_tasks(a)
        result["head"] = {"tasks": head[0], "nodes": head[1]}
        for i, target in enumerate(backend.targets):
            built = fleet.build(target, a.tasks, a.seed + i, (a.min_nodes, a.max_nodes), head)
            sizes.update(built if i == 0 else {})
            result["nodes"] = result.get("nodes", 0) + sum(built.values())
        result["build_s"] = round(time.monotonic() - t0, 1)
        sampler.start()
        for i, target in enumerate(backend.targets):
            procs += start_agents(a, target, work, a.ramp + a.duration, ledger=i, of=n)
        t_start = time.monotonic()
        cpu = CpuMeter(backend)
        cpu.agents = [p.pid for p, _ in procs]
        time.sleep(a.ramp)  # the fleet settles into its pace before the console starts
        sampler.phase = "tasks"
        screen = ScreenLog(ledgers=n > 1)
        argv = [sys.executable, "-m", "console", "console", "--ledger", backend.target, "--runs", str(work / "runs")]
        env: dict | None = None
        if n > 1:  # one console, every ledger, named in a contexts file (console/ledgers.py)
            contexts = work / "console.toml"
            contexts.write_text("[ledgers]\n" + "".join(f'L{i} = "{t}"\n' for i, t in enumerate(backend.targets)))
            env = {"WARDEN_CONSOLE_CONFIG": str(contexts)}
            argv[4:6] = [x for i in range(n) for x in ("--ledger", f"L{i}")]
        if a.trace:  # the console's live path on a timeline (console_trace.py), beside every write
            argv[1:3] = [str(ROOT / "tests" / "bench" / "console_trace.py")]
            env = {**(env or {}), "WARDEN_BENCH_TRACE": str(Path(a.trace).resolve())}
            Path(a.trace).write_text("")
        t0 = console_from = time.monotonic()
        term = Terminal(argv, a.cols, a.rows, env=env)
        term.observers.append(screen)
        result["first_frame_s"] = round(term.wait_for(shows("t0000"), 120, "the task list") - t0, 3)
        t_list_end = t_start + a.ramp + a.duration * (1 - a.graph_share)
        screen.mode = "tasks"
        list_from = time.monotonic()
        cpu0 = term.cpu_seconds()
        cpu.console = term.proc.pid
        parts0 = cpu.snap()
        key_list: list[float] = []
        keys_for(term, t_list_end, key_list)
        list_to = time.monotonic()
        cpu_list = (term.cpu_seconds() - cpu0) / (list_to - list_from) * 100
        parts_list = cpu.since(parts0)
        rss_list = term.rss_mb()
        screen.mode = None
        # the graph of a busy task
        busy = busiest_open_task(backend.target, sizes)
        (work / "control.json").write_text(json.dumps({"task": busy, "agents": a.busy_agents}))
        sampler.phase = "graph"
        if n > 1:  # L0's rows only (its busy task's id is in every ledger)
            term.press(b"l")
            term.wait_for(lambda s: "L0 only" in s.display[0], 60, "L0 only")
        term.press(b"/")
        term.wait_for(lambda s: any("filter tasks by" in line for line in s.display), 60, "the filter input")
        term.press(busy.encode())
        term.wait_for(lambda s: task_ids_shown(s.display) == [busy], 60, "the task list filtered to the busy task")
        term.press(b"\r")
        time.sleep(0.3)
        t0 = term.press(b"\r")
        term.wait_for(shows("n000"), 60, "the busy task's graph")
        result["graph_open_s"] = round(time.monotonic() - t0, 3)
        screen.mode = "graph"
        graph_from = time.monotonic()
        cpu0 = term.cpu_seconds()
        parts0 = cpu.snap()
        key_graph: list[float] = []
        keys_for(term, t_start + a.ramp + a.duration, key_graph)
        graph_to = time.monotonic()
        cpu_graph = (term.cpu_seconds() - cpu0) / (graph_to - graph_from) * 100
        parts_graph = cpu.since(parts0)
        time.sleep(3.0)  # grace: the last writes reach the screen
        screen.mode = None
        rss_end = term.rss_mb()
        alive = term.proc.poll() is None
        if not alive:
            result["console_exited"] = {"rc": term.proc.returncode, "screen": term.lines()}
        by_ledger = [[(p, out) for p, out in procs if n == 1 or out.name.startswith(f"agent-L{i}-")]
                     for i in range(n)]
        agents = [finish_agents(ps) for ps in by_ledger]
        procs = []
        sampler.stop.set()
        result["uptime_end"] = uptime()
        windows = {"tasks": (list_from, list_to), "graph": (graph_from, graph_to), "console": (console_from, console_from)}
        result.update(report(a, agents[0], journal(backend.target), of_ledger(screen, 0, n), busy, windows))
        if n > 1:  # every ledger's commits to its own rows: pooled, and by ledger
            pooled = list(result["tasks_view"].pop("_lat_ms"))
            result["tasks_view_by_ledger"] = {"L0": dict(result["tasks_view"])}
            for i in range(1, n):
                r = report(a, agents[i], journal(backend.targets[i]), of_ledger(screen, i, n), None, windows)
                pooled += r["tasks_view"].pop("_lat_ms")
                result["tasks_view_by_ledger"][f"L{i}"] = r["tasks_view"]
                result["ledger"][f"L{i}"] = r["ledger"]
                result.setdefault("claims_by_ledger", {"L0": result["claims"]["call"]})[f"L{i}"] = r["claims"]["call"]
            result["tasks_view"]["commit_to_screen"] = summary(pooled)
            result["tasks_view"]["measurable"] = sum(v["measurable"] for v in result["tasks_view_by_ledger"].values())
            result["tasks_view"]["missed"] = sum(v["missed"] for v in result["tasks_view_by_ledger"].values())
        result["tasks_view"].pop("_lat_ms", None)
        result["tasks_view"].update({"key_to_frame": summary(key_list), "console_cpu_pct": round(cpu_list, 1),
                                     "rss_mb": round(rss_list, 1), "cpu_pct_by_part": parts_list})
        result["graph_view"].update({"key_to_frame": summary(key_graph), "console_cpu_pct": round(cpu_graph, 1),
                                     "rss_mb": round(rss_end, 1), "cpu_pct_by_part": parts_graph})
        result["connections_max"] = dict(sampler.max)
        result["connections_by_phase"] = sampler.by_phase
    finally:
        sampler.stop.set()
        if term is not None:
            term.close()
        for p, _ in procs:
            p.kill()
        backend.close()
        shutil.rmtree(work, ignore_errors=True)
    return result


def task_ids_shown(lines: list[str]) -> list[str]:
    """The task ids of the task rows on screen (with or without a LEDGER column)."""
    out = []
    for line in lines:
        m = TASK_ROW.match(line) or LEDGER_TASK_ROW.match(line)
        if m:
            out.append(m.group(1) if m.re is TASK_ROW else m.group(2))
    return out


def of_ledger(screen: ScreenLog, i: int, n: int) -> ScreenLog:
    """The screen's rows of ledger ``i`` (keys without their "L{i}/"); the graph's are L0's."""
    if n == 1:
        return screen
    view = ScreenLog()
    prefix = f"L{i}/"
    view.tasks = {k[len(prefix):]: r for k, r in screen.tasks.items() if k.startswith(prefix)}
    if i == 0:
        view.summary, view.nodes = screen.summary, screen.nodes
    return view


def report(a: argparse.Namespace, agents: list[dict], events: list, screen: ScreenLog, busy: str | None,
           windows: dict[str, tuple[float, float]]) -> dict:
    """Match every write to the screen; the ledger's sustained rates; the claims."""
    returned: dict[int, float] = {}
    claims: dict[tuple[str, str], list[float]] = {}
    other: dict[tuple[str, str, str], list[float]] = {}
    writes = 0
    for ag in agents:
        for what, task, node, eid, t in ag["writes"]:
            writes += 1
            if eid is not None:
                returned[int(eid)] = t
            if what == "claimed":
                claims.setdefault((task, node), []).append(t)
            elif what == "handoff":
                other.setdefault((task, node, what), []).append(t)
    done: dict[str, int] = {}
    commits: list[tuple[str, int, float]] = []
    node_changes: list[tuple[str, str, float]] = []
    claim_seen: dict[tuple[str, str], int] = {}
    first_at = last_at = None
    for e in events:
        if e.kind == "node.committed":
            done[e.task_id] = done.get(e.task_id, 0) + 1
            if e.id in returned:
                commits.append((e.task_id, done[e.task_id], returned[e.id]))
                if e.task_id == busy:
                    node_changes.append((e.node, "succeeded", returned[e.id]))
        elif e.kind == "node.claimed" and e.actor.startswith("agent-"):
            n = claim_seen.get((e.task_id, e.node), 0)
            claim_seen[(e.task_id, e.node)] = n + 1
            ts = claims.get((e.task_id, e.node), [])
            if e.task_id == busy and n < len(ts):
                node_changes.append((e.node, "running", ts[n]))
        elif e.kind == "node.failed" and e.id in returned and e.task_id == busy:
            node_changes.append((e.node, "pending", returned[e.id]))
        if e.actor.startswith("agent-"):
            first_at = e.at if first_at is None else first_at
            last_at = e.at
    span = (last_at - first_at) if first_at is not None and last_at is not None and last_at > first_at else 1.0
    n_events = sum(1 for e in events if e.actor.startswith("agent-"))
    n_commits = sum(1 for e in events if e.kind == "node.committed")
    lo, hi = windows["tasks"]
    tl = match_counts(screen.tasks, [c for c in commits if lo <= c[2] <= hi], hi)
    glo, ghi = windows["graph"]
    gs = match_counts(screen.summary, [c for c in commits if c[0] == busy and glo <= c[2] <= ghi], ghi)
    gn = match_nodes(screen.nodes, [c for c in node_changes if glo <= c[2] <= ghi], ghi)
    claim_s = [s * 1000 for ag in agents for s in ag["claim_s"]]
    waits = [s * 1000 for ag in agents for s in ag["waits_s"]]
    # the long waits, with what made them, and when (s after the console started; the view it was on)
    long_waits = sorted(([round(w * 1000, 1), calls, round(longest * 1000, 1), polls,
                          round(end - windows["console"][0], 2), view_at(end, windows), ag["agent"]]
                         for ag in agents for w, calls, longest, polls, end in ag.get("long_waits", [])),
                        reverse=True)
    errors: dict[str, int] = {}
    for ag in agents:
        for k, v in ag.get("errors", {}).items():
            errors[k] = errors.get(k, 0) + v
    return {
        "ledger": {"writes": writes, "journal_events": n_events, "writes_per_s": round(n_events / span, 1),
                   "node_commits_per_s": round(n_commits / span, 1), "span_s": round(span, 1),
                   "agent_errors": errors},
        "claims": {"call": summary(claim_s), "longest_wait_ms": round(max(waits), 1) if waits else None,
                   "wait": summary(waits),
                   "long_waits": {"fields": ["wait_ms", "claim_calls", "longest_call_ms", "polls",
                                             "ended_s_after_console_start", "view", "agent"],
                                  "over_ms": fleet.LONG_WAIT_S * 1000, "rows": long_waits[:10],
                                  "n": len(long_waits)}},
        "tasks_view": {"commit_to_screen": summary(tl["lat_ms"]), "_lat_ms": tl["lat_ms"],
                       "measurable": len(tl["lat_ms"]) + len(tl["missed"]),
                       "missed": len(tl["missed"]), "missed_examples": tl["missed"][:5],
                       "rows_seen": len(screen.tasks),
                       **({"samples": tl["samples"]} if a.trace else {})},
        "graph_view": {"task": busy, "summary_commit_to_screen": summary(gs["lat_ms"]), "summary_missed": len(gs["missed"]),
                       "node_change_to_screen": summary(gn["lat_ms"]), "node_missed": len(gn["missed"]),
                       "node_superseded": gn["superseded"], "node_missed_examples": gn["missed"][:5],
                       **({"node_samples": gn["samples"]} if a.trace else {})},
    }


def view_at(t: float, windows: dict[str, tuple[float, float]]) -> str:
    for name in ("tasks", "graph"):
        lo, hi = windows[name]
        if lo <= t <= hi:
            return name
    return "opening" if t < windows["tasks"][0] else "between"


def table(r: dict) -> str:
    def lat(d: dict) -> str:
        return "—" if not d or not d.get("n") else f"{d['p50_ms']} / {d['p95_ms']} / {d['max_ms']} ms (n={d['n']})"

    def parts(v: dict) -> str:
        p = v.get("cpu_pct_by_part") or {}
        return " / ".join(str(p.get(k, "—")) for k in ("agents", "server", "console", "benchmark", "machine"))

    t, g = r.get("tasks_view", {}), r.get("graph_view", {})
    c = r.get("connections_max", {})
    rows = [
        ("commit → screen p50 / p95 / max", lat(t.get("commit_to_screen", {})),
         lat(g.get("summary_commit_to_screen", {})) + " (summary)"),
        ("  missed / measurable", f"{t.get('missed')} of {t.get('measurable')}", f"{g.get('summary_missed')}"),
        ("node change → screen (graph rows)", "", lat(g.get("node_change_to_screen", {}))
         + f", missed {g.get('node_missed')}, superseded {g.get('node_superseded')}"),
        ("key → frame p50 / p95 / max", lat(t.get("key_to_frame", {})), lat(g.get("key_to_frame", {}))),
        ("console CPU (% of a core) / RSS MB", f"{t.get('console_cpu_pct')} / {t.get('rss_mb')}",
         f"{g.get('console_cpu_pct')} / {g.get('rss_mb')}"),
        ("CPU % of a core: agents/server/console/bench/machine", parts(t), parts(g)),
    ]
    w = max(len(x[0]) for x in rows)
    lines = [f"{r['backend']}: {r.get('ledgers', 1)} ledger(s), {r['agents']} agents, {r['tasks']} tasks each ({r.get('nodes')} nodes), target {r['rate']:g} writes/s",
             f"{'':{w}}  {'task list':44}  graph of {g.get('task')}"]
    lines += [f"{x:{w}}  {y:44}  {z}" for x, y, z in rows]
    for name, v in (r.get("tasks_view_by_ledger") or {}).items():  # --ledgers: each ledger's own rows
        lines.append(f"  {name}: commit → screen {lat(v.get('commit_to_screen', {}))}, missed {v.get('missed')} of "
                     f"{v.get('measurable')}")
    led, cl = r.get("ledger", {}), r.get("claims", {})
    each = {"L0": led.get("writes_per_s", 0),  # with several ledgers, "ledger" is L0's and holds the others'
            **{k: v.get("writes_per_s", 0) for k, v in led.items() if k.startswith("L") and isinstance(v, dict)}}
    lines += [
        f"first frame {r.get('first_frame_s')} s; ledger sustained {led.get('writes_per_s')} writes/s, "
        f"{led.get('node_commits_per_s')} node commits/s over {led.get('span_s')} s; agent errors {led.get('agent_errors')}",
        *([f"  in all ({' + '.join(f'{k} {v}' for k, v in each.items())}): {round(sum(each.values()), 1)} writes/s"]
          if len(each) > 1 else []),
        *([f"  head: the first {r['head']['tasks']} tasks of each ledger have {r['head']['nodes']} nodes"]
          if (r.get("head") or {}).get("tasks") else []),
        f"claims: call {lat(cl.get('call', {}))}; longest wait for a claim {cl.get('longest_wait_ms')} ms",
        *(f"  a wait of {w} ms: {calls} claim calls (longest {lc} ms), {polls} polls; ended {at} s after the "
          f"console started ({view}), agent {ag}" for w, calls, lc, polls, at, view, ag
          in (cl.get("long_waits") or {}).get("rows", [])[:3]),
        f"PostgreSQL connections (max): agents {c.get('warden-agent', '—')}, console {c.get('warden-console', '—')} "
        f"+ its analysis worker {c.get('warden-analysis', '—')} (together {c.get('console+analysis', '—')}), "
        f"other {({k: v for k, v in c.items() if k not in ('warden-agent', 'warden-console', 'warden-analysis', 'console+analysis')})}",
        *(["  by ledger, console + analysis worker: " + ", ".join(
            f"{k.split(':')[0]} {v}" for k, v in sorted(c.items()) if k.endswith(":console+analysis"))]
          if any(k.endswith(":console+analysis") for k in c) else []),
        f"uptime before: {r.get('uptime_start')}", f"uptime after:  {r.get('uptime_end')}",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    ap.add_argument("--ledgers", type=int, default=1, help="ledgers, each of --tasks tasks, in one console")
    ap.add_argument("--agents", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--min-nodes", type=int, default=20)
    ap.add_argument("--max-nodes", type=int, default=200)
    ap.add_argument("--rate", type=float, default=200.0, help="writes per second, all agents together")
    ap.add_argument("--duration", type=float, default=300.0, help="seconds the console watches (after --ramp)")
    ap.add_argument("--ramp", type=float, default=5.0)
    ap.add_argument("--graph-share", type=float, default=0.35, help="the last share of --duration on a busy graph")
    ap.add_argument("--busy-agents", type=int, default=2, help="agents that go to the busy task first")
    ap.add_argument("--claim", choices=("sticky", "any"), default="sticky")
    ap.add_argument("--head-nodes", default="auto", type=lambda v: v if v == "auto" else str(int(v)),
                    help="nodes of each task on the task list's first screen (the first rows/ledgers tasks "
                         "of every ledger); auto: with --claim any, enough for the whole run, else as the others")
    ap.add_argument("--pg-url", help="an existing server: a fresh database is made there (else a private cluster)")
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--out", help="also write the JSON report here")
    ap.add_argument("--trace", metavar="FILE",
                    help="the console's timeline here (tests/bench/console_trace.py); the report then lists every "
                         "task-list commit (task, when its call returned, ms to the screen) under tasks_view.samples, "
                         "and every graph row change under graph_view.node_samples")
    ap.add_argument("--pg-durable", action="store_true",
                    help="the private cluster with fsync=on, synchronous_commit=on (default: off, like CI)")
    ap.add_argument("--capacity", action="store_true", help="no console: unpaced agents, more and more (fleet_capacity.py)")
    ap.add_argument("--capacity-agents", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8, 16])
    ap.add_argument("--step", type=float, default=20.0, help="--capacity: seconds per number of agents")
    a = ap.parse_args()
    if a.capacity:
        from tests.bench.fleet_capacity import capacity, table as capacity_table

        work = Path(tempfile.mkdtemp(prefix="warden-fleet-"))
        backend = Backend(a, work)
        try:
            result = {"backend": a.backend, "durable": a.pg_durable, "tasks": a.tasks, "cpus": os.cpu_count(),
                      "uptime_start": uptime(), **capacity(a, backend, work), "uptime_end": uptime()}
        finally:
            backend.close()
            shutil.rmtree(work, ignore_errors=True)
        text = json.dumps(result, indent=2, default=str)
        if a.out:
            Path(a.out).write_text(text)
        print(text)
        print(capacity_table(result))
        print(f"uptime before: {result['uptime_start']}\nuptime after:  {result['uptime_end']}")
        return
    result = run(a)
    text = json.dumps(result, indent=2, default=str)
    if a.out:
        Path(a.out).write_text(text)
    print(text)
    print(table(result))


if __name__ == "__main__":
    main()

"""Agents survive a PostgreSQL restart; every step is committed exactly once.

Against a REAL server of the test's own (tests/support/pgcluster.py; never the shared dev
server), restarted mid-run with ``pg_ctl restart -m fast`` several times at random points, and
with commits caught in flight: the agent's COMMIT is made to wait after its commit record is
flushed, and the server is restarted (or the backend terminated) while the answer is
outstanding — the case a naive retry would double. Plus the budget, the typed errors and
``application_name`` on the shared server, and SQLite's busy timeout.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from store import Ledger, LedgerUnavailable, NodeSpec
from store.storage import checkpoints
from store.storage.db import Backoff, ConnectionLost, LedgerBusy, WardenPostgres
from tests.support import pgcluster
from tests.support.waiting import Deadline

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AGENT = os.path.join(HERE, "restart_agent.py")
WAIT = 300.0


@pytest.fixture(scope="module")
def cluster():
    why = pgcluster.available()
    if why:
        pytest.skip(why)
    c = pgcluster.Cluster().start()
    yield c
    c.stop()


def _schema_url(cluster, name: str) -> str:
    cluster.query(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    cluster.query(f'CREATE SCHEMA "{name}"')
    return f"{cluster.url}?options=-csearch_path%3D{name}"


def _wait_until(cond, what: str, timeout: float = WAIT) -> None:
    deadline = Deadline(timeout)
    while not cond():
        if deadline.expired():
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _succeeded(cluster, schema: str) -> int:
    return int(cluster.query(f'SELECT count(*) FROM "{schema}".node WHERE status = %s', ("succeeded",))[0][0])


def _in_syncrep(cluster, pid: int) -> bool:
    rows = cluster.query("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,))
    return bool(rows) and rows[0][0] == "SyncRep"


def _held_commit(cluster, marker) -> int | None:
    """The backend pid named in ``marker`` once its COMMIT waits for its answer. Read afresh
    each time: a plain restart that cut the held commit before it waited makes the agent hold
    the re-run, naming its new backend."""
    text = marker.read_text() if marker.exists() else ""
    return int(text) if text and _in_syncrep(cluster, int(text)) else None


def _wait_for_held_commit(cluster, marker, key: str) -> int:
    deadline = Deadline(WAIT)
    while (pid := _held_commit(cluster, marker)) is None:
        if deadline.expired():
            raise AssertionError(f"timed out waiting for {key}'s commit to wait for its answer")
        time.sleep(0.02)  # polling the server's state
    return pid


def _release_held_commits(cluster) -> None:
    """End every backend still waiting for a COMMIT answer (one a failed test left behind would
    hold the journal's advisory lock and stall every later test on this cluster)."""
    cluster.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")


def _run_agent(url: str, markers: str, hold: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, AGENT, url, "run", "agent-1", markers, "--hold", ",".join(hold)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _check_exactly_once(url: str, n: int, outcomes: list[dict]) -> None:
    led = Ledger.open(url, create=False)
    try:
        task = led.task("run")
        nodes = led.graph("run").nodes
        events = led.events(0, task_id="run", limit=100_000)
    finally:
        led.close()
    committed = [e.node for e in events if e.kind == "node.committed"]
    claimed = [e.node for e in events if e.kind == "node.claimed"]
    dup_commits = sorted({k for k in committed if committed.count(k) > 1})
    dup_claims = sorted({k for k in claimed if claimed.count(k) > 1})
    assert dup_commits == [] and dup_claims == [], (dup_commits, dup_claims)
    assert sorted(committed) == sorted(f"s{i:03d}" for i in range(n))
    assert all(nd.status == "succeeded" and nd.attempt == 1 and nd.claim_count == 1 for nd in nodes), \
        [(nd.key, nd.status, nd.attempt, nd.claim_count) for nd in nodes if nd.attempt != 1 or nd.claim_count != 1]
    assert task.status == "completed"
    assert task.tokens_used == 12 * n  # 2 heartbeat tokens + 10 commit tokens per step: nothing doubled
    steps = [o for o in outcomes if "node" in o]
    assert [o["status"] for o in steps] == ["committed"] * n, steps
    assert outcomes[-1] == {"done": n}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_an_agent_finishes_every_step_exactly_once_across_server_restarts(cluster, tmp_path, seed):
    """N steps; the server restarted at random step counts and twice while a commit's answer was
    outstanding (once by restart, once by pg_terminate_backend of the agent's backend)."""
    rng = random.Random(seed)
    n = 24
    schema = f"restart_{seed}"
    url = _schema_url(cluster, schema)
    with Ledger.open(url) as led:
        led.create_task("run")
        led.add_nodes("run", [NodeSpec(f"s{i:03d}", deps=((f"s{i - 1:03d}",) if i else ())) for i in range(n)])
    restart_at = sorted(rng.sample(range(1, n - 1), 3))  # plain restarts after this many steps
    held = sorted(rng.sample([f"s{i:03d}" for i in range(2, n - 1) if i not in restart_at], 2))
    how = {held[0]: "restart", held[1]: "terminate"}
    markers = tmp_path / "markers"
    markers.mkdir()
    restarts_before = cluster.restarts
    agent = _run_agent(url, str(markers), held)
    try:
        todo_restarts = list(restart_at)
        todo_held = dict(how)
        while agent.poll() is None and (todo_restarts or todo_held):
            for key in list(todo_held):
                marker = markers / f"hold-{key}"
                if marker.exists():
                    (markers / f"go-{key}").write_text("go")  # no plain restart until this one is done
                    pid = _wait_for_held_commit(cluster, marker, key)
                    if todo_held.pop(key) == "restart":
                        cluster.restart()
                    else:
                        cluster.query("SELECT pg_terminate_backend(%s)", (pid,))
            if todo_restarts and _succeeded(cluster, schema) >= todo_restarts[0]:
                todo_restarts.pop(0)
                cluster.restart()
            time.sleep(0.02)  # polling the server's state (not synchronisation of the agent)
        out, err = agent.communicate(timeout=WAIT)
    finally:
        if agent.poll() is None:
            agent.kill()
        _release_held_commits(cluster)
    assert agent.returncode == 0, err[-3000:]
    assert not todo_restarts and not todo_held, (todo_restarts, todo_held, err[-2000:])
    assert cluster.restarts - restarts_before == len(restart_at) + 1
    outcomes = [json.loads(line) for line in out.splitlines() if line.strip()]
    _check_exactly_once(url, n, outcomes)


def test_a_commit_whose_answer_was_lost_is_returned_not_redone(cluster, monkeypatch):
    """In one process: the commit waits after its record is flushed, the backend is terminated;
    commit() returns the same event id (read from its request record) and the journal holds one
    node.committed."""
    url = _schema_url(cluster, "lost_answer")
    led = Ledger.open(url, reconnect_s=60)
    led.create_task("t")
    led.add_node("t", "a")
    c = led.claim("t", "w", lease_s=300)
    pids: list[int] = []

    def hold(_task: str, what: str) -> None:
        if what == "commit" and not pids:
            led.db.execute_sql("SET LOCAL synchronous_commit = on")
            pids.append(int(led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]))

    monkeypatch.setattr(checkpoints, "reach",
                        lambda point, task, what: hold(task, what) if point == "tx.before_commit" else None)
    killer = threading.Thread(target=lambda: (
        _wait_until(lambda: bool(pids) and _in_syncrep(cluster, pids[0]), "the commit to wait"),
        cluster.query("SELECT pg_terminate_backend(%s)", (pids[0],))))
    killer.start()
    event_id = led.commit(c, output={"x": 1}, tokens=5)
    killer.join(WAIT)
    events = [e for e in led.events(0, task_id="t") if e.kind == "node.committed"]
    assert [e.id for e in events] == [event_id]
    assert led.node("t", "a").status == "succeeded" and led.task("t").tokens_used == 5
    assert int(led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]) != pids[0]  # a new connection
    led.close()


def test_a_claim_whose_answer_was_lost_is_the_same_claim(cluster, monkeypatch):
    """The claim committed but its answer was lost: the retry returns that lease (same token),
    not a second node, and the node is claimed once."""
    url = _schema_url(cluster, "lost_claim")
    led = Ledger.open(url, reconnect_s=60)
    led.create_task("t", inputs={"q": 1})
    led.add_nodes("t", [NodeSpec("a"), NodeSpec("b")])
    pids: list[int] = []

    def hold(_task: str, what: str) -> None:
        if what == "claim round" and not pids:
            led.db.execute_sql("SET LOCAL synchronous_commit = on")
            pids.append(int(led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]))

    monkeypatch.setattr(checkpoints, "reach",
                        lambda point, task, what: hold(task, what) if point == "tx.before_commit" else None)
    killer = threading.Thread(target=lambda: (
        _wait_until(lambda: bool(pids) and _in_syncrep(cluster, pids[0]), "the claim to wait"),
        cluster.query("SELECT pg_terminate_backend(%s)", (pids[0],))))
    killer.start()
    c = led.claim("t", "w", lease_s=300)
    killer.join(WAIT)
    assert c is not None and c.node_key == "a" and c.inputs["task"] == {"q": 1} and c.inputs["attempt"] == 1
    assert led.node("t", "b").status == "pending"
    led.commit(c, output=1)  # the token handed back is the live one
    assert [e.node for e in led.events(0, task_id="t") if e.kind == "node.claimed"] == ["a"]
    led.close()


def test_a_server_away_longer_than_the_budget_is_one_line(cluster):
    """Budget spent → LedgerUnavailable, one line, no driver error; the back-off waits grow and
    stay within their bounds (injected sleep and clock: no wall time spent waiting)."""
    url = _schema_url(cluster, "budget")
    now = [0.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        now[0] += s

    led = Ledger.open(url, backoff=Backoff(budget_s=10.0, first_s=0.1, max_s=2.0, sleep=sleep,
                                           clock=lambda: now[0], rng=random.Random(0)))
    led.create_task("t")
    # Point the open connection at a port bound here but never listening: every reconnect is
    # refused, and no other process (another test's cluster) can start listening on it meanwhile.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        led.db.connect_params["port"] = held.getsockname()[1]
        led.db.connection().close()
        with pytest.raises(LedgerUnavailable) as e:
            led.task("t")
        msg = str(e.value)
        assert "\n" not in msg and "could not reconnect within 10s" in msg and "Traceback" not in msg
        assert type(e.value).__module__.startswith("store")
        assert waits and all(0.05 <= w <= 2.0 for w in waits) and sum(waits) <= 10.0
        assert waits[-1] > waits[0]
        with pytest.raises(LedgerUnavailable) as e:
            led.add_node("t", "x")
        assert "could not reconnect" in str(e.value)


def test_application_name_is_set(pg_target):
    from tests.conftest import pg_admin

    url = pg_target()
    roles = {}
    for name in ("warden-agent", "warden-console", "warden-cli"):
        led = Ledger.open(url, application_name=name) if name != "warden-agent" else Ledger.open(url)
        pid = int(led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0])
        with pg_admin() as admin:
            roles[name] = admin.execute("SELECT application_name FROM pg_stat_activity WHERE pid = %s",
                                        (pid,)).fetchone()[0]
        led.close()
    assert roles == {n: n for n in roles}


def test_an_agent_reconnects_after_its_backend_is_terminated(pg_target):
    """pg_terminate_backend between writes (shared dev server: only our own backend)."""
    from tests.conftest import pg_admin

    url = pg_target()
    led = Ledger.open(url)
    led.create_task("t")
    led.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    c = led.claim("t", "w")
    for what in ("heartbeat", "commit", "claim", "read"):
        pid = int(led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0])
        with pg_admin() as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        if what == "heartbeat":
            led.heartbeat(c, tokens=3, observation="x")
        elif what == "commit":
            led.commit(c, output={"ok": True})
        elif what == "claim":
            c = led.claim("t", "w")
            assert c is not None and c.node_key == "b"
        else:
            assert led.task("t").tokens_used == 3
    led.close()


def test_sqlite_lock_held_past_the_timeout_is_ledger_unavailable(tmp_path):
    """Another process holds the write lock past busy_timeout_s: LedgerBusy (a LedgerUnavailable),
    one line, nothing written."""
    path = str(tmp_path / "l.db")
    with Ledger.open(path) as led:
        led.create_task("t")
        led.add_node("t", "a")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.readline()", path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        led = Ledger.open(path, busy_timeout_s=0.2)
        before = led.last_event_id()
        for write in (lambda: led.add_node("t", "b"), lambda: led.claim("t", "w"),
                      lambda: led.create_task("u")):
            with pytest.raises(LedgerBusy) as e:
                write()
            assert isinstance(e.value, LedgerUnavailable)
            assert "busy" in str(e.value) and "0.2s" in str(e.value) and "\n" not in str(e.value)
        assert led.last_event_id() == before  # reads still work (WAL); nothing was written
        assert [n.key for n in led.graph("t").nodes] == ["a"]
    finally:
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(30)
    assert led.claim("t", "w") is not None  # and once the lock is gone, writes go through
    led.close()


def test_busy_timeout_must_be_positive(tmp_path):
    from store import Refused

    with pytest.raises(Refused):
        Ledger.open(str(tmp_path / "x.db"), busy_timeout_s=0)


def test_sqlite_io_error_is_ledger_unavailable(tmp_path):
    """An I/O-class SQLite error (here: the database file replaced by garbage under an open
    connection) surfaces as LedgerUnavailable, one line."""
    path = str(tmp_path / "l.db")
    led = Ledger.open(path)
    led.create_task("t")
    led.close()
    with open(path, "r+b") as f:  # corrupt every page but the header
        f.seek(100)
        f.write(os.urandom(os.path.getsize(path) - 100))
    for p in (path + "-wal", path + "-shm"):
        if os.path.exists(p):
            os.remove(p)
    with pytest.raises(LedgerUnavailable) as e:
        led = Ledger.open(path)
        led.task("t")
        led.add_node("t", "x")
    assert "\n" not in str(e.value)
    assert not isinstance(e.value, sqlite3.Error)


def test_the_console_and_the_cli_name_their_connections(pg_target, capsys, monkeypatch):
    """warden-cli for `warden` commands, warden-console for the console's feed (PostgreSQL)."""
    from console.cli import main as warden
    from console.cli.common import APPLICATION_NAME
    from store.reading.feed import Feed
    from tests.conftest import pg_admin

    url = pg_target()
    with Ledger.open(url) as led:
        led.create_task("t")
    assert APPLICATION_NAME == "warden-cli"
    seen: list[str] = []
    real_open = Ledger.open.__func__

    def spy(cls, target, **kw):
        led = real_open(cls, target, **kw)
        pid = int(led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0])
        with pg_admin() as admin:
            seen.append(admin.execute("SELECT application_name FROM pg_stat_activity WHERE pid = %s",
                                      (pid,)).fetchone()[0])
        return led

    monkeypatch.setattr(Ledger, "open", classmethod(spy))
    assert warden(["status", "--ledger", url]) == 0
    feed = Feed(url, read_only=True)
    feed.last_event_id()
    feed.close()
    capsys.readouterr()
    assert seen == ["warden-cli", "warden-console"]


class _DriverError(Exception):
    """A driver error with a SQLSTATE, as psycopg's carry one (no server needed)."""

    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize("code, raised, words", [
    ("55P03", LedgerBusy, "is busy"),
    ("53100", LedgerUnavailable, "its disk is full"),
    ("53200", LedgerUnavailable, "it is out of memory"),
    ("08006", ConnectionLost, "lost the connection"),
    ("22P02", None, None),  # a statement's own error (bad input): not the backend's to translate
])
def test_postgres_driver_errors_become_typed_errors(code, raised, words):
    pytest.importorskip("psycopg")
    db = WardenPostgres("warden", prefer_psycopg3=True, autoconnect=False)
    db.display = "postgresql://db.example/warden"
    e = _DriverError(f"server said {code}", code)
    if raised is None:
        db.translate_error(e)  # returns: the caller raises the driver's error as it is
        return
    with pytest.raises(raised) as got:
        db.translate_error(e)
    assert words in str(got.value) and "db.example" in str(got.value)



def _reads(led: Ledger) -> dict:
    """Reading entries agents, the CLI and the console call, by name: each answers a plain value."""
    from store.reading.feed import _graph_at, _tail_at
    from store.reading.tally import TaskTally
    from store.reading.task_report import task_report

    def tally() -> list[int]:
        t = TaskTally()
        t.start(led.tasks())
        return [v.done for v in t.apply(led, led.events(0, task_id="t"))]

    return {
        "claim with a task id": lambda: led.claim("t", "w2", kinds=("none",)),
        "task_report": lambda: task_report(led, "t")["status"],
        "tasks": lambda: [t.task_id for t in led.tasks()],
        "task": lambda: led.task("t").done,
        "graph": lambda: [n.key for n in led.graph("t").nodes],
        "graph_pages": lambda: [len(p.nodes) for p in led.graph_pages("t")],
        "node_detail": lambda: led.node_detail("t", "a").node.status,
        "mind": lambda: led.mind("t").task_id,
        "plans": lambda: [v.version for v in led.plans("t")],
        "plan_park": lambda: led.plan_park("t", reason="r").action,
        "tally": tally,
        "graph_at": lambda: len(_graph_at(led, "t")[0].nodes),
        "tail_at": lambda: len(_tail_at(led, 10)[0]),
    }


READS = ("claim with a task id", "task_report", "tasks", "task", "graph", "graph_pages", "node_detail", "mind",
         "plans", "plan_park", "tally", "graph_at", "tail_at")


@pytest.mark.slow
@pytest.mark.parametrize("what", READS)
def test_a_connection_lost_inside_a_read_snapshot_is_read_again(pg_target, what):
    """The connection dies right after the call's first transaction begins (the window a server
    restart hit in CI: a claim's version check read in a snapshot, and ConnectionLost reached the
    agent). The read is re-run on a new connection and answers what it answers undisturbed. (store.storage.db.read_tx also refuses, under the
    suite, any snapshot that nothing would re-run: WARDEN_STRICT_READS.)"""
    from tests.conftest import pg_admin

    url = pg_target()
    led = Ledger.open(url)
    try:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
        led.commit(led.claim("t", "w"), output={"ok": True})
        reads = _reads(led)
        assert tuple(reads) == READS  # one list of the entries tested
        read = reads[what]
        want = read()
        killed: list[int] = []
        real_begin = led.db.begin

        def begin_then_lose(isolation_level=None):
            real_begin(isolation_level)
            if not killed:
                pid = int(led.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0])
                killed.append(pid)
                with pg_admin() as admin:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

        led.db.begin = begin_then_lose
        got = read()
        assert killed, f"{what} opened no transaction"
        assert got == want
    finally:
        led.close()

"""Nothing in this process drops the SQLite locks another connection of it holds.

POSIX advisory locks belong to the process: closing *any* descriptor of the ledger file drops every
lock every connection of the process holds on it (sqlite.org/howtocorrupt.html §2.2). Then another
process's close believes it is the last connection, checkpoints and deletes the ``-wal`` under a
live writer, whose later commits go to a deleted file: acknowledged, and seen by nobody.

Two levels of proof:

* the locks themselves, read from ``/proc/locks``: an idle WAL connection holds a ``READ`` lock on
  the database file for as long as it is open (that lock is how another process's close knows it
  is not the last). Every way Warden can open, inspect, probe, re-open or read the ledger in the
  same process must leave that lock in place;
* what an operator would see: a writer, a second ``Ledger`` in the same process (read-only or
  writable, sequential or in a thread), other processes reading, writing and exiting — and then
  every write of the first process is still seen by a fresh process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from store import Ledger
from store.storage import lockguard, sqlite_file
from store.storage.commitprobe import CommitProbe
from store.reading.feed import Feed
from store.runs import SafeTree

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs /proc/locks (Linux)")


def my_locks(path: str) -> set[tuple[str, str, str]]:
    """This process's POSIX locks on ``path``'s inode: (type, start, end)."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    out = set()
    with open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            # "1: POSIX  ADVISORY  READ 1234 fe:00:2148081 1073741826 1073742335"
            if "->" in fields:
                continue  # a blocked waiter
            if len(fields) >= 8 and fields[1] == "POSIX" and fields[4] == str(os.getpid()) and fields[5] == dev:
                out.add((fields[3], fields[6], fields[7]))
    return out


@pytest.fixture
def writer(tmp_path):
    """A writable ledger with one write done: its connection now holds its READ lock."""
    path = str(tmp_path / "ledger.db")
    led = Ledger.open(path)
    led.create_task("A")
    led.add_node("A", "n1")
    yield path, led
    led.close()


def _read_only(path: str) -> None:
    with Ledger.open(path, read_only=True) as ro:
        ro.tasks()


def _writable(path: str) -> None:
    with Ledger.open(path, create=False) as again:
        again.tasks()


def _inspect(path: str) -> None:
    sqlite_file.inspect(path, read_only=True)
    sqlite_file.inspect(path, read_only=False)


def _feed(path: str) -> None:
    for ro in (True, False):
        feed = Feed(path, read_only=ro)
        try:
            feed.check()
            feed.last_event_id()
        finally:
            feed.close()


def _probe(path: str) -> None:
    p = CommitProbe(path)
    p.mark()
    p.moved()
    p.close()


def _thread(path: str) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            _read_only(path)
            _writable(path)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert not errors, errors


def _tidy(path: str) -> None:
    sqlite_file.tidy(path)


def _wake_on_a_hard_link(path: str) -> None:
    """A watched file replaced by a hard link to the ledger after the park: the change is
    noticed, the ledger is not read (reading it would mean closing a descriptor of it)."""
    watched = Path(path).with_name("signal.txt")
    # As long as the ledger file, so that only its content (hashed) can tell them apart: the
    # check must then decide whether to read it.
    watched.write_bytes(b"\0" * os.stat(path).st_size)
    with Ledger.open(path, create=False) as led:
        led.apply(led.plan_park("A", reason="wait", wake_on=f"file:{watched}"), operator="op")
        watched.unlink()
        os.link(path, watched)
        try:
            assert os.stat(watched).st_size == led.task("A").wake_state["task"]["conditions"][0]["size"]
            [woken] = led.check_wakes()
            assert "a ledger file this process has open; not read" in woken["evidence"], woken
        finally:
            watched.unlink()
            led.apply(led.plan_resume("A"), operator="op")


def _run_dir_with_the_ledger(path: str) -> None:
    runs = Path(path).with_name("runs")
    (runs / "r1").mkdir(parents=True)
    os.link(path, runs / "r1" / "state.json")
    try:
        tree, problem = SafeTree.open_root(str(runs / "r1"))
        assert tree is not None, problem
        with tree:
            read = tree.read("state.json")
        assert read.problem and "ledger file this process has open" in read.problem
    finally:
        os.unlink(runs / "r1" / "state.json")


SECOND_OPENERS = {
    "read-only-ledger": _read_only, "writable-ledger": _writable, "inspect": _inspect, "feed": _feed,
    "commit-probe": _probe, "ledgers-in-a-thread": _thread, "tidy": _tidy,
    "wake-file-hard-link": _wake_on_a_hard_link, "run-dir-hard-link": _run_dir_with_the_ledger,
}


@pytest.mark.parametrize("how", sorted(SECOND_OPENERS))
def test_a_second_open_in_this_process_keeps_the_writers_lock(writer, how):
    path, led = writer
    before = my_locks(path)
    assert any(kind == "READ" for kind, _, _ in before), before  # the premise: an idle WAL connection's lock
    SECOND_OPENERS[how](path)
    assert my_locks(path) >= before, how
    led.create_task("B")  # and the writer still writes
    assert my_locks(path) >= before


def test_a_refused_file_is_explained_without_dropping_a_lock(writer, tmp_path):
    """Explaining a refusal reads the header only when this process has no descriptor on the
    file; a broken copy elsewhere is explained in full."""
    path, _led = writer
    before = my_locks(path)
    broken = tmp_path / "broken.db"
    with Ledger.open(broken) as other:
        other.create_task("X")
    data = bytearray(broken.read_bytes())  # not the writer's file: reading it here would drop its lock
    data[16:18] = (3000).to_bytes(2, "big")
    broken.write_bytes(bytes(data))
    with pytest.raises(Exception, match="page size 3000"):
        Ledger.open(broken, read_only=True)
    assert my_locks(path) >= before


def test_close_keeps_a_descriptor_that_became_a_ledger(writer):
    """lockguard.close: a descriptor of a file that is (now) a ledger of this process stays open
    for the life of the process instead of being closed."""
    path, _led = writer
    before = my_locks(path)
    fd = os.open(path, os.O_RDONLY)
    lockguard.close(fd)
    st, mine = os.fstat(fd), os.stat(path)  # still open (EBADF had it been closed), on the ledger
    assert (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)
    assert my_locks(path) >= before


# ---------------------------------------------------------------------- what an operator sees
def _fresh_tasks(path: str) -> list[str]:
    code = ("import sys, json; from store import Ledger\n"
            "with Ledger.open(sys.argv[1], create=False) as l: print(json.dumps(sorted(t.task_id for t in l.tasks())))")
    r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    return __import__("json").loads(r.stdout)


def _warden(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT))


@pytest.mark.parametrize("second", ["read-only", "writable", "thread"])
def test_a_second_open_beside_a_writer_loses_nothing(tmp_path, second):
    """The sequence that lost writes: a writer, any second open in the same process, another process that
    reads and exits and one that writes (``warden park --yes``) and exits — then the writer's
    next writes are seen by a fresh process, and its -wal is still there."""
    path = str(tmp_path / "l.db")
    a = Ledger.open(path)
    try:
        a.create_task("A")
        a.add_node("A", "n1")
        a.create_task("P")
        {"read-only": _read_only, "writable": _writable, "thread": _thread}[second](path)
        r = _warden("status", "--ledger", path)
        assert r.returncode == 0, r.stderr
        r = _warden("park", "P", "--reason", "wait", "--yes", "--ledger", path)
        assert r.returncode == 0, r.stderr
        assert os.path.exists(path + "-wal") and os.path.exists(path + "-shm")
        a.create_task("B")
        claim = a.claim("A", "w1")
        assert claim is not None
        a.commit(claim, output={"ok": 1})
        assert _fresh_tasks(path) == ["A", "B", "P"]
    finally:
        a.close()
    with Ledger.open(path, create=False) as fresh:
        assert fresh.node("A", "n1").status == "succeeded"
        assert fresh.task("P").status == "parked"


# ---------------------------------------------------------------------- fork()
def _child(path: str, other: str, inherited: Ledger, q) -> None:
    """In a process fork()ed while the parent had ``path`` open."""
    out = {}
    try:
        inherited.tasks()
        out["use"] = "used"
    except Exception as e:
        out["use"] = f"{type(e).__name__}: {e}"
    try:
        Ledger.open(path, create=False).close()
        out["reopen"] = "opened"
    except Exception as e:
        out["reopen"] = f"{type(e).__name__}: {e}"
    inherited.close()  # the parent's connection is left alone
    with Ledger.open(other) as led:  # another ledger: the child's own, usable
        led.create_task("child")
        out["other"] = [t.task_id for t in led.tasks()]
    q.put(out)


def test_a_forked_child_refuses_the_parents_sqlite_ledger_and_the_parent_loses_nothing(tmp_path):
    import multiprocessing as mp

    path, other = str(tmp_path / "l.db"), str(tmp_path / "child.db")
    parent = Ledger.open(path)
    parent.create_task("A")
    before = my_locks(path)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(path, other, parent, q))
    p.start()
    out = q.get(timeout=120)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert out["use"].startswith("LedgerUnavailable") and "fork()" in out["use"], out
    assert out["reopen"].startswith("LedgerUnavailable") and "spawn" in out["reopen"], out
    assert out["other"] == ["child"]
    assert my_locks(path) >= before
    assert os.path.exists(path + "-wal")
    parent.create_task("B")
    assert _fresh_tasks(path) == ["A", "B"]
    parent.close()


def _pg_child(url: str, inherited: Ledger, q) -> None:
    out = {}
    try:
        inherited.tasks()
        out["use"] = "used"
    except Exception as e:
        out["use"] = f"{type(e).__name__}: {e}"
    inherited.close()  # must not end the parent's session
    with Ledger.open(url) as own:  # a new connection of the child's own is fine on PostgreSQL
        out["own"] = sorted(t.task_id for t in own.tasks())
    q.put(out)


@pytest.mark.postgres
def test_a_forked_child_gets_its_own_postgresql_connection(pg_target):
    import multiprocessing as mp

    url = pg_target("forked")
    parent = Ledger.open(url)
    parent.create_task("A")
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_pg_child, args=(url, parent, q))
    p.start()
    out = q.get(timeout=120)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert out["use"].startswith("LedgerUnavailable") and "open a new Ledger" in out["use"], out
    assert out["own"] == ["A"]
    parent.create_task("B")  # the parent's session is intact
    assert sorted(t.task_id for t in parent.tasks()) == ["A", "B"]
    parent.close()

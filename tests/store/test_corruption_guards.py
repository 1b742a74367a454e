"""Each item of SQLite's "How To Corrupt An SQLite Database File" that Warden can
prevent or refuse, tested (docs/security.md "SQLite's ways to corrupt a ledger" maps every item to
its code and test; the descriptor and fork items are in tests/store/test_lock_safety.py).

* §1.1 a descriptor reused after close: a process whose stdin/stdout/stderr are closed opens and
  writes a ledger, then writes to descriptor 2 — the ledger is intact (SQLite never takes fd < 3);
* §2.2 / §2.7 processes Warden spawns (alert hooks, supervised commands) inherit no descriptor of
  the ledger, its -wal or -shm;
* §2.3 one SQLite library in a process that imported everything Warden imports;
* §2.4 one locking protocol: a ``?vfs=`` in a ledger path is a file name, never a VFS;
* §2.5 a ledger renamed, removed or replaced while open: the next write is refused, nothing is
  written anywhere;
* §2.6 a hard-linked ledger is refused by every way of opening it (and the file left alone);
* §2.1 a ledger on a network file system is refused;
* §3.2 / §5 / §7 the pragmas: WAL, ``synchronous=FULL``, ``mmap_size=0``, normal locking.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from store import Ledger, LedgerUnavailable
from store.storage import sqlite_file

ROOT = str(Path(__file__).resolve().parents[2])
ENV = {**os.environ, "PYTHONPATH": ROOT}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: Linux")


def _fingerprint(path: str) -> tuple[str, int, int, int]:
    st = os.stat(path)
    return (hashlib.sha256(Path(path).read_bytes()).hexdigest(), st.st_size, st.st_mtime_ns, st.st_nlink)


def _ledger(path: str, *tasks: str) -> None:
    with Ledger.open(path) as led:
        for t in tasks:
            led.create_task(t)


def _integrity(path: str) -> str:
    with Ledger.open(path, create=False, read_only=True) as led:
        return str(led.db.execute_sql("PRAGMA integrity_check").fetchone()[0])


# ---------------------------------------------------------------------- §1.1 descriptors 0-2
CLOSED_STDIO = """
import os, sys
os.close(0); os.close(1); os.close(2)
from store import Ledger
led = Ledger.open(sys.argv[1])
for i in range(50):
    led.create_task(f"t{i}", title="x" * 200)
    try:
        os.write(2, b"GARBAGE" * 100)  # a stray write to "stderr", as in SQLite's Fossil story
    except OSError:
        pass
# every descriptor SQLite has on the ledger's files is above 2
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if target.startswith(sys.argv[1]) and int(fd) < 3:
        os._exit(7)
led.close()
os._exit(0)
"""


def test_a_process_without_stdio_writes_its_ledger_and_stray_writes_to_fd_2_miss_it(tmp_path):
    path = str(tmp_path / "ledger.db")
    r = subprocess.run([sys.executable, "-c", CLOSED_STDIO, path], env=ENV, timeout=120,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert r.returncode == 0, r.returncode  # 7: a ledger file on descriptor 0, 1 or 2
    assert _integrity(path) == "ok"
    with Ledger.open(path, create=False, read_only=True) as led:
        assert len(led.tasks()) == 50
    assert b"GARBAGE" not in Path(path).read_bytes()


# ---------------------------------------------------------------------- §2.2/§2.7 spawned processes
LIST_FDS = ("import os, sys\nout = []\nfor fd in os.listdir('/proc/self/fd'):\n    try: out.append(os.readlink("
            "'/proc/self/fd/' + fd))\n    except OSError: pass\nopen(sys.argv[1], 'w').write('\\n'.join(out))\n")


def _spawn_alert_hook(argv: list[str]) -> None:
    from console.alerts import Alert, run_hook

    assert run_hook(argv, Alert("handoff", "t", "n", None, "alarm", 1.8e9, "x")) is None


def _spawn_supervised(argv: list[str]) -> None:
    from store.adapters.process import Child

    child = Child(argv, cwd=os.getcwd(), env=ENV, sink=lambda _line: None).start()
    try:
        assert child.wait(60) == 0
    finally:
        child.close()


def _spawn_passing_every_descriptor(argv: list[str]) -> None:
    # close_fds=False: only SQLite's own O_CLOEXEC keeps its descriptors from the child
    assert subprocess.run(argv, close_fds=False, timeout=60).returncode == 0


SPAWNERS: dict[str, Callable[[list[str]], None]] = {
    "alert-hook": _spawn_alert_hook, "warden-run-child": _spawn_supervised,
    "popen-close-fds-false": _spawn_passing_every_descriptor,
}


@pytest.mark.parametrize("how", sorted(SPAWNERS))
def test_a_spawned_process_inherits_no_descriptor_of_the_ledger(tmp_path, how):
    path = str(tmp_path / "ledger.db")
    led = Ledger.open(path)
    reader = Ledger.open(path, create=False, read_only=True)
    try:
        led.create_task("t")
        reader.tasks()
        assert os.path.exists(path + "-wal") and os.path.exists(path + "-shm")  # all three are open here
        listed = tmp_path / "fds.txt"
        SPAWNERS[how]([sys.executable, "-c", LIST_FDS, str(listed)])
        seen = listed.read_text().splitlines()
        assert seen, "the child listed nothing"
        assert not [t for t in seen if t.startswith(path)], seen
        led.create_task("u")  # and nothing the child did (exiting) touched the parent's locks
    finally:
        reader.close()
        led.close()
    assert _integrity(path) == "ok"


# ---------------------------------------------------------------------- §2.3 one SQLite
ONE_SQLITE = """
import importlib.util, sys
import store, store.reading.feed, store.storage.commitprobe, console.app, psycopg, textual
if importlib.util.find_spec("mcp") is not None:
    import mcp
from store import Ledger
led = Ledger.open(sys.argv[1])
led.create_task("t")
libs = sorted({ln.split()[-1] for ln in open("/proc/self/maps") if ".so" in ln.split()[-1].rsplit("/", 1)[-1]
               and "sqlite" in ln.split()[-1].lower()})  # (the ledger's -shm is mapped too: the WAL index)
print("\\n".join(libs))
"""


def test_one_sqlite_library_is_loaded_in_a_process_that_imported_all_of_warden(tmp_path):
    r = subprocess.run([sys.executable, "-c", ONE_SQLITE, str(tmp_path / "l.db")], env=ENV, timeout=300,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    libs = r.stdout.split()
    engines = [p for p in libs if "libsqlite3" in os.path.basename(p)]
    others = [p for p in libs if p not in engines and not os.path.basename(p).startswith("_sqlite3")]
    assert len(engines) <= 1 and not others, libs  # (a statically linked _sqlite3 has no libsqlite3 at all)


# ---------------------------------------------------------------------- §2.4 one locking protocol
@pytest.mark.parametrize("suffix", ["?vfs=unix-none", "?vfs=unix-dotfile", "?nolock=1", "#x?immutable=1"])
def test_uri_parameters_in_a_ledger_path_are_part_of_its_name(tmp_path, suffix):
    from tests.store.test_lock_safety import my_locks

    path = str(tmp_path / "ledger.db") + suffix
    led = Ledger.open(f"sqlite:///{path}")
    try:
        led.create_task("t")
        assert os.path.exists(path) and os.path.exists(path + "-wal"), os.listdir(tmp_path)
        assert my_locks(path), "no POSIX lock held: another locking protocol was used"
    finally:
        led.close()


# ---------------------------------------------------------------------- §2.5 renamed while in use
def _rename(path: str) -> None:
    os.rename(path, path + ".moved")


def _unlink(path: str) -> None:
    os.unlink(path)


def _replace_by_copy(path: str) -> None:
    shutil.copyfile(path, path + ".copy")
    os.replace(path + ".copy", path)


def _replace_by_another_ledger(path: str) -> None:
    other = path + ".other"
    _ledger(other, "other")
    os.replace(other, path)


MOVES = {"rename": _rename, "unlink": _unlink, "replace-by-copy": _replace_by_copy,
         "replace-by-another-ledger": _replace_by_another_ledger}


@pytest.mark.parametrize("move", sorted(MOVES))
def test_a_ledger_moved_under_a_writer_refuses_the_next_write(tmp_path, move):
    path = str(tmp_path / "ledger.db")
    led = Ledger.open(path)
    try:
        led.create_task("before")
        led.db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")  # the file itself holds "before"
        MOVES[move](path)
        for write in (lambda: led.create_task("after"), lambda: led.add_node("before", "n", kind="work")):
            with pytest.raises(LedgerUnavailable, match="while this process had it open: nothing was written"):
                write()
        assert [t.task_id for t in led.tasks()] == ["before"]  # reads go on (from what it has open)
    finally:
        led.close()
    for p in (path, path + ".moved"):
        if os.path.exists(p) and os.path.getsize(p):
            with Ledger.open(p, create=False, read_only=True) as r:
                ids = [t.task_id for t in r.tasks()]
            assert "after" not in ids, (p, ids)
            assert _integrity(p) == "ok"


def test_a_ledger_renamed_back_writes_again(tmp_path):
    path = str(tmp_path / "ledger.db")
    led = Ledger.open(path)
    try:
        led.create_task("a")
        os.rename(path, path + ".x")
        with pytest.raises(LedgerUnavailable):
            led.create_task("b")
        os.rename(path + ".x", path)
        led.create_task("c")
        assert [t.task_id for t in led.tasks()] == ["a", "c"]
    finally:
        led.close()


# ---------------------------------------------------------------------- §2.6 hard links
OPENERS: dict[str, Callable[[str], object]] = {
    "writable": lambda p: Ledger.open(p, create=False),
    "agent-create": lambda p: Ledger.open(p),
    "read-only": lambda p: Ledger.open(p, create=False, read_only=True),
    "sqlite-url": lambda p: Ledger.open(f"sqlite:///{p}", create=False, read_only=True),
}


@pytest.mark.parametrize("name", ["original", "link"])
@pytest.mark.parametrize("how", sorted(OPENERS))
def test_a_hard_linked_ledger_is_refused_and_left_alone(tmp_path, how, name):
    path = str(tmp_path / "ledger.db")
    _ledger(path, "t")
    link = str(tmp_path / "other-name.db")
    os.link(path, link)
    before = _fingerprint(path)
    listing = sorted(os.listdir(tmp_path))
    with pytest.raises(LedgerUnavailable, match="has 2 hard links"):
        OPENERS[how](path if name == "original" else link)
    assert _fingerprint(path) == before and sorted(os.listdir(tmp_path)) == listing


def test_the_cli_refuses_a_hard_linked_ledger_in_one_line(tmp_path):
    path = str(tmp_path / "ledger.db")
    _ledger(path, "t")
    os.link(path, str(tmp_path / "b.db"))
    r = subprocess.run([sys.executable, "-m", "console", "status", "--ledger", path], env=ENV, timeout=120,
                       capture_output=True, text=True)
    assert r.returncode == 4 and len(r.stderr.strip().splitlines()) == 1 and "hard links" in r.stderr, r


# ---------------------------------------------------------------------- §2.1 network file systems
@pytest.mark.parametrize("fstype,refused", [("nfs4", True), ("nfs", True), ("cifs", True), ("9p", True),
                                            ("fuse.sshfs", True), ("ceph", True), ("ext4", False),
                                            ("tmpfs", False), ("overlay", False), ("fuse.portal", False)])
def test_a_ledger_on_a_network_file_system_is_refused(tmp_path, monkeypatch, fstype, refused):
    path = str(tmp_path / "ledger.db")
    _ledger(path, "t")
    st = os.stat(path)
    fake = tmp_path / "mountinfo"
    fake.write_text(f"1 0 {os.major(st.st_dev)}:{os.minor(st.st_dev)} / {tmp_path} rw - {fstype} server:/x rw\n")
    monkeypatch.setattr(sqlite_file, "MOUNTINFO", str(fake))
    before = _fingerprint(path)
    for open_ in OPENERS.values():
        if refused:
            with pytest.raises(LedgerUnavailable, match=f"on a network file system \\({fstype}\\)"):
                open_(path)
        else:
            open_(path).close()  # type: ignore[attr-defined]
    if refused:
        assert _fingerprint(path) == before


# ---------------------------------------------------------------------- §3.2, §5, §7 settings
def test_every_connection_runs_with_the_safe_settings(tmp_path):
    path = str(tmp_path / "ledger.db")
    _ledger(path, "t")
    for read_only in (False, True):
        with Ledger.open(path, create=False, read_only=read_only) as led:
            q = lambda sql: led.db.execute_sql(sql).fetchone()[0]  # noqa: E731
            assert q("PRAGMA journal_mode") == "wal"
            assert q("PRAGMA mmap_size") == 0  # no memory-mapped I/O (§5)
            assert q("PRAGMA locking_mode") == "normal"
            assert q("PRAGMA writable_schema") == 0
            if not read_only:
                assert q("PRAGMA synchronous") == 2  # FULL (§3.2)
            else:
                assert q("PRAGMA query_only") == 1


# ---------------------------------------------------------------------- §1.3/§1.4 journals and their ledger
@pytest.mark.parametrize("side", ["-wal", "-journal"])
@pytest.mark.parametrize("ledger_file", ["missing", "empty"])
def test_a_new_ledger_is_not_created_beside_another_databases_journal(tmp_path, side, ledger_file):
    path = str(tmp_path / "ledger.db")
    Path(path + side).write_bytes(b"\x37\x7f\x06\x82" + os.urandom(4092))  # a journal left by someone else
    if ledger_file == "empty":
        Path(path).write_bytes(b"")
    listing = sorted(os.listdir(tmp_path))
    with pytest.raises(LedgerUnavailable, match=f"{side} is left from another database"):
        Ledger.open(path)
    assert sorted(os.listdir(tmp_path)) == listing
    os.unlink(path + side)  # moved away: the agent creates its ledger
    Path(path + side).write_bytes(b"")  # (an empty one is nobody's: SQLite resets it)
    _ledger(path, "t")
    assert _integrity(path) == "ok"

"""A full disk is a typed, truthful error, and nothing committed is damaged.

On a real, small file system (a 1 MiB tmpfs, mounted here when this process may mount — root, as in
CI — else the test says why it falls back): the ledger's WAL is emptied, the disk is filled to the
last byte, and then every kind of write — claim, heartbeat, commit, add_node, create_task, an
operator's apply, and ``warden park --yes`` — must raise ``LedgerUnavailable`` saying the disk is
full (never Peewee's "cannot rollback - no transaction is active", which is what SQLite's own
rollback on SQLITE_FULL used to turn it into), and the CLI must exit 4 with that one line. After
the space comes back, the same open Ledger writes again by itself, everything committed before is
there, and SQLite's integrity check passes.

Where mounting is not allowed, an injected SQLITE_FULL (``PRAGMA max_page_count``) checks the same
translation for the writes that need a new page.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from store import Ledger, LedgerUnavailable

ROOT = str(Path(__file__).resolve().parents[2])


def _try_mount(d: str) -> str | None:
    """Mount a 1 MiB tmpfs on ``d``; None when that worked, else why not."""
    if not sys.platform.startswith("linux") or shutil.which("mount") is None:
        return "no mount(8) here"
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", d], capture_output=True,
                       text=True)
    return None if r.returncode == 0 else (r.stderr.strip() or f"mount exited {r.returncode}")


@pytest.fixture
def small_fs() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="warden-full-")
    why = _try_mount(d)
    if why is not None:
        os.rmdir(d)
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail(f"CI runs as root and must test a real full disk, but mounting a tmpfs failed: {why}")
        pytest.skip(f"cannot mount a small tmpfs ({why}); the injected SQLITE_FULL test covers the translation")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d], check=False)
        os.rmdir(d)


def fill(d: str) -> None:
    """Fill the file system of ``d`` to the last byte."""
    for i, size in enumerate((65536, 4096, 512, 64, 1)):
        fd = os.open(os.path.join(d, f"filler{i}"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            while True:
                os.write(fd, b"\0" * size)
        except OSError:
            pass
        finally:
            os.close(fd)
    st = os.statvfs(d)
    assert st.f_bavail == 0, st


def unfill(d: str) -> None:
    for name in os.listdir(d):
        if name.startswith("filler"):
            os.unlink(os.path.join(d, name))


def _empty_wal(led: Ledger) -> None:
    """The next write must grow the WAL: checkpoint it into the database and truncate it."""
    led.db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.fixture
def full_ledger(small_fs) -> Iterator[tuple[str, Ledger]]:
    path = os.path.join(small_fs, "ledger.db")
    led = Ledger.open(path)
    led.create_task("t", title="before the disk filled")
    for key in ("a", "b", "c", "d"):
        led.add_node("t", key, kind="work")
    yield small_fs, led
    led.close()


def _writes(led: Ledger) -> dict[str, Callable[[], object]]:
    held = {}

    def claim() -> object:
        held["c"] = led.claim("t", "w1", lease_s=600)
        return held["c"]

    return {
        "claim": claim,
        "heartbeat": lambda: led.heartbeat(held["c"], units_done=1, units_total=3, observation="half way " * 50),
        "commit": lambda: led.commit(held["c"], output={"text": "x" * 3000}),
        "add_node": lambda: led.add_node("t", "late", kind="work", title="y" * 500),
        "create_task": lambda: led.create_task("u", title="z" * 500),
        "apply": lambda: led.apply(led.plan_park("t", reason="disk full drill"), operator="op"),
    }


def test_every_write_on_a_full_disk_says_so_and_resumes_by_itself(full_ledger):
    d, led = full_ledger
    for name, write in _writes(led).items():
        _empty_wal(led)
        fill(d)
        with pytest.raises(LedgerUnavailable) as e:
            write()
        msg = str(e.value)
        assert "the disk is full" in msg and "cannot rollback" not in msg, (name, msg)
        assert "\n" not in msg and str(led.display) in msg
        unfill(d)
        assert write() is not None, name  # the same open Ledger: writing resumes by itself
    assert led.task("t").status == "parked"
    assert led.node("t", "a").status == "succeeded" and led.node("t", "a").output == {"text": "x" * 3000}
    assert {t.task_id for t in led.tasks()} == {"t", "u"}
    assert [r[0] for r in led.db.execute_sql("PRAGMA integrity_check").fetchall()] == ["ok"]


def test_a_failed_write_leaves_what_was_committed_intact(full_ledger):
    d, led = full_ledger
    c = led.claim("t", "w1", lease_s=600)
    led.commit(c, output={"kept": True})
    before = [(n.key, n.status, n.output) for n in led.graph("t").nodes]
    _empty_wal(led)
    fill(d)
    for _ in range(3):  # repeated failures do not wear anything down
        with pytest.raises(LedgerUnavailable, match="the disk is full"):
            led.add_node("t", "never", kind="work", title="w" * 2000)
    # A reader in another process, while the disk is still full, sees exactly what was committed.
    code = ("import sys, json; from store import Ledger\n"
            "with Ledger.open(sys.argv[1], read_only=True) as l:\n"
            "    print(json.dumps([[n.key, n.status, n.output] for n in l.graph('t').nodes]))")
    r = subprocess.run([sys.executable, "-c", code, os.path.join(d, "ledger.db")], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    import json

    assert [tuple(x) for x in json.loads(r.stdout)] == before
    unfill(d)
    assert [(n.key, n.status, n.output) for n in led.graph("t").nodes] == before
    assert [r[0] for r in led.db.execute_sql("PRAGMA integrity_check").fetchall()] == ["ok"]


def test_the_cli_exits_4_with_one_line_saying_the_disk_is_full(full_ledger):
    d, led = full_ledger
    _empty_wal(led)
    fill(d)
    r = subprocess.run([sys.executable, "-m", "console", "park", "t", "--reason", "full", "--yes", "--ledger",
                        os.path.join(d, "ledger.db")], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "the disk is full" in lines[0] and "Traceback" not in r.stderr, r.stderr
    unfill(d)
    r = subprocess.run([sys.executable, "-m", "console", "park", "t", "--reason", "space back", "--yes",
                        "--ledger", os.path.join(d, "ledger.db")], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    assert led.task("t").status == "parked"


def test_opening_a_new_ledger_on_a_full_disk_says_so(small_fs):
    fill(small_fs)
    with pytest.raises(LedgerUnavailable, match="the disk is full"):
        Ledger.open(os.path.join(small_fs, "new.db"))


def test_an_injected_sqlite_full_is_the_same_typed_error(tmp_path):
    """Where no file system can be filled: SQLITE_FULL from ``PRAGMA max_page_count``."""
    led = Ledger.open(tmp_path / "ledger.db")
    try:
        led.create_task("t")
        pages = led.db.execute_sql("PRAGMA page_count").fetchone()[0]
        led.db.execute_sql(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(LedgerUnavailable) as e:
            led.add_node("t", "big", kind="work", title="x" * 200, preconditions={"blob": "y" * 20000})
        assert "the disk is full" in str(e.value) and "cannot rollback" not in str(e.value)
        led.db.execute_sql("PRAGMA max_page_count = 1073741823")
        led.add_node("t", "big", kind="work", preconditions={"blob": "y" * 20000})
        assert led.node("t", "big").status == "pending"
    finally:
        led.close()

"""``file:`` wake conditions read only regular files, bounded in bytes and time.

``plan_park(wake_on="file:/dev/zero")`` never returned, and a watched file an agent swapped for a
symbolic link to ``/dev/zero`` or for a FIFO after the park hung every ``warden status``, ``warden
check-wakes`` and the console (which then spun a core after ``q``). Now: planning one is refused in
one line; after the park the swap is a change ("not a regular file"), never read; and every reader
returns at once. Also: year-1 times with an offset, and U+202E in a refused value.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from store import Ledger, Refused
from store.errors import InvalidValue
from store.parks import conditions as wc
from tests.support import not_regular
from tests.support.waiting import stretch

ROOT = str(Path(__file__).resolve().parents[2])
QUICK_S = 20.0  # a safety net for a loaded machine: the hang this replaces was forever


def _dev_zero_link(p: Path) -> None:
    os.symlink("/dev/zero", p)


def _link_to_file(p: Path) -> None:
    real = p.with_name("real.txt")
    real.write_text("real")
    os.symlink(real, p)


NOT_REGULAR: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (not_regular.fifo, "not a regular file (a FIFO)"),
    "symlink-to-dev-zero": (_dev_zero_link, "not a regular file (a symbolic link)"),
    "symlink-to-a-file": (_link_to_file, "not a regular file (a symbolic link)"),
    "directory": (not_regular.directory, "not a regular file (a directory)"),
    "socket": (not_regular.unix_socket, "not a regular file (a socket)"),
}


@pytest.fixture
def parked_ready(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a")
    return ledger


@pytest.mark.parametrize("case", sorted(NOT_REGULAR) + ["dev-zero", "dev-null"])
def test_planning_a_wake_on_something_not_a_regular_file_is_refused_at_once(parked_ready, tmp_path, case):
    if case.startswith("dev-"):
        target, words = f"/dev/{case[4:]}", "not a regular file (a device)"
    else:
        make, words = NOT_REGULAR[case]
        target = str(tmp_path / "watched")
        make(Path(target))
    before = parked_ready.task("t").revision
    t0 = time.monotonic()
    with pytest.raises(Refused) as e:
        parked_ready.plan_park("t", reason="wait", wake_on=f"file:{target}")
    assert time.monotonic() - t0 < stretch(QUICK_S)
    assert words in str(e.value) and "\n" not in str(e.value)
    assert parked_ready.task("t").revision == before


@pytest.mark.parametrize("case", sorted(NOT_REGULAR))
def test_a_watched_file_swapped_after_the_park_is_a_change_and_never_read(parked_ready, tmp_path, case):
    make, words = NOT_REGULAR[case]
    watched = tmp_path / "watched"
    watched.write_text("waiting")
    parked_ready.apply(parked_ready.plan_park("t", reason="wait", wake_on=f"file:{watched}"), operator="op")
    watched.unlink()
    make(watched)
    t0 = time.monotonic()
    [woken] = parked_ready.check_wakes()
    assert time.monotonic() - t0 < stretch(QUICK_S)
    assert f"{watched} is now {words}; not read" in woken["evidence"], woken


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})


def _parked_then_swapped(tmp_path: Path, swap: str) -> str:
    """A ledger file whose task ``t`` is parked on a watched file, then the file swapped (NOT_REGULAR)."""
    path = str(tmp_path / "ledger.db")
    watched = tmp_path / "watched"
    watched.write_text("waiting")
    with Ledger.open(path) as led:
        led.create_task("t")
        led.add_node("t", "a")
        led.apply(led.plan_park("t", reason="wait", wake_on=f"file:{watched}"), operator="op")
    watched.unlink()
    NOT_REGULAR[swap][0](watched)
    return path


@pytest.mark.parametrize("swap", ["symlink-to-dev-zero", "fifo"])
def test_status_and_check_wakes_do_not_hang_on_a_swapped_file(tmp_path, swap):
    path = _parked_then_swapped(tmp_path, swap)
    r = _run("status", "--ledger", path, "--json", timeout=60)  # the hang was forever
    assert r.returncode == 0, r.stderr
    r = _run("check-wakes", "--ledger", path, timeout=60)
    assert r.returncode == 0, r.stderr
    with Ledger.open(path, read_only=True) as led:
        assert "not a regular file" in (led.task("t").wake_state or {}).get("task", {}).get("evidence", "")


def test_the_console_with_a_swapped_file_quits_and_leaves_no_thread(tmp_path):
    """The console reads the wake signal (and, not read-only, checks the wakes): it loads, and after
    ``q`` no thread of it is left running."""
    path = _parked_then_swapped(tmp_path, "symlink-to-dev-zero")
    code = f"""
import asyncio, threading, time, sys
from console.app import WardenApp
from tests.support.waiting import Deadline
async def main():
    app = WardenApp({path!r}, "runs")
    async with app.run_test(size=(100, 30)) as pilot:
        deadline = Deadline(60)
        while not app.loaded:
            assert not deadline.expired(), "never loaded"
            await pilot.pause(0.05)
        app.check_wakes()  # what its timer does every 15 s
        deadline = Deadline(60)
        while any(w.group == "wakes" and w.is_running for w in app.workers):
            assert not deadline.expired(), "check-wakes never finished"
            await pilot.pause(0.05)
        await pilot.press("q")
asyncio.run(main())
deadline = Deadline(20)
while [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]:
    assert not deadline.expired(), [t.name for t in threading.enumerate()]
    time.sleep(0.05)
print("clean")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0 and r.stdout.strip().endswith("clean"), r.stderr[-2000:]


def test_bytes_and_time_bounds(parked_ready, tmp_path, monkeypatch):
    big = tmp_path / "big.bin"
    big.write_bytes(b"a" * 5000)
    monkeypatch.setattr(wc, "HASH_CAP", 1000)  # bigger than this: compared by size and mtime
    parked_ready.apply(parked_ready.plan_park("t", reason="wait", wake_on=f"file:{big}"), operator="op")
    cond = parked_ready.task("t").wake_state["task"]["conditions"][0]
    assert cond["sha256"] is None and cond["size"] == 5000
    os.utime(big, ns=(1, 1))
    [woken] = parked_ready.check_wakes()
    assert "changed (modified, 5000 bytes)" in woken["evidence"]
    monkeypatch.setattr(wc, "HASH_CAP", 1 << 20)
    monkeypatch.setattr(wc, "HASH_TIME_S", 0.0)  # too slow to hash: by size and mtime too
    fp = wc.file_state(str(big))
    assert fp["exists"] and fp["sha256"] is None and fp["size"] == 5000


def test_a_reader_never_blocks_on_a_fifo_swapped_in_between_its_lstat_and_open(tmp_path, monkeypatch):
    """The race: lstat sees a regular file, then it becomes a FIFO before the open. O_NONBLOCK
    opens it without waiting for a writer, and fstat refuses it."""
    from store.storage import lockguard

    p = tmp_path / "racy"
    p.write_text("x")
    real_lstat = os.lstat

    def lstat_then_swap(path, *a, **kw):
        st = real_lstat(path, *a, **kw)
        if str(path) == str(p) and not os.path.exists(str(p) + ".done"):
            Path(str(p) + ".done").write_text("")
            os.unlink(p)
            os.mkfifo(p)
        return st

    monkeypatch.setattr(lockguard.os, "lstat", lstat_then_swap)
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(fp=lockguard.read_regular(str(p), max_bytes=100, max_s=1)))
    t.start()
    t.join(timeout=QUICK_S)
    assert not t.is_alive(), "blocked on the FIFO"
    assert result["fp"].problem is not None and "FIFO" in result["fp"].problem


# ---------------------------------------------------------------------- times and escaped values
@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+01:00", "0001-01-01T00:59:59+01:00",
                                   "0001-01-01T05:00:00+14:00", "9999-12-31T23:59:59-01:00"])
def test_a_time_outside_the_years_warden_can_store_is_a_clear_refusal(parked_ready, value):
    for kw in ({"until": value}, {"wake_on": f"at:{value}"}):
        with pytest.raises(InvalidValue) as e:
            parked_ready.plan_park("t", reason="wait", **kw)
        msg = str(e.value)
        assert "None" not in msg and "years 1 to 9999" in msg and value in msg, msg


def test_year_1_utc_itself_is_simply_in_the_past(parked_ready):
    with pytest.raises(Refused, match="0001-01-01T00:00:00.000Z is not in the future"):
        parked_ready.plan_park("t", reason="wait", until="0001-01-01T00:00:00Z")


@pytest.mark.parametrize("spec", ["at:2h\u202e", "at:\u202e2h", "at:2h\x1b[31m", "node:\u202eevil", "soon\u2066"])
def test_refusals_quote_values_escaped(parked_ready, spec):
    with pytest.raises(Refused) as e:
        parked_ready.plan_park("t", reason="wait", wake_on=spec)
    msg = str(e.value)
    for raw in ("\u202e", "\u2066", "\x1b"):
        assert raw not in msg and raw not in e.value.message
    assert "\\u202e" in msg or "\\x1b" in msg or "\\u2066" in msg

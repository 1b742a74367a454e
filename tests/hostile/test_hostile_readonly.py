"""A ledger one may read but not write (an auditor's account): readable, never written, and a
write attempt is one clear line. Run as ``nobody`` — root ignores file permissions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import store.ledger.queries  # noqa: F401  (imported before the unprivileged child runs)
from hostile_support import assert_one_clear_line, fingerprint, run_as_nobody, world_dir  # noqa: F401
from store import Ledger
from store.reading.feed import Feed

SETUPS = {
    # name: (file mode, directory mode, an agent holds it open while the auditor reads)
    "file-0444": (0o444, 0o755, False),
    "dir-0555": (0o644, 0o555, False),
    "file-0444-dir-0555": (0o444, 0o555, False),
    "dir-0555-agent-running": (0o644, 0o555, True),
    "file-0444-dir-0555-agent-running": (0o444, 0o555, True),
    "dir-owned-by-reader": (0o444, None, False),
}


class _Agent:
    """An agent process holding the ledger open (another process, as agents are: the auditor
    runs in a child forked from this one, which must not have the ledger open at the fork —
    SQLite forbids it, and store/storage/lockguard.py refuses it)."""

    def __init__(self, p: Path) -> None:
        code = ("import sys; from store import Ledger\n"
                "led = Ledger.open(sys.argv[1]); led.task('t'); print('ready', flush=True); sys.stdin.read()")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(p)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def _make(world: Path, name: str) -> tuple[Path, Any]:
    fmode, dmode, running = SETUPS[name]
    d = world / name
    d.mkdir()
    p = d / "ledger.db"
    with Ledger.open(p) as led:
        led.create_task("t", title="audit me")
        led.add_node("t", "a")
    agent = None
    if running:
        agent = _Agent(p)  # its connection is open: -wal and -shm are there
    os.chmod(p, fmode)
    if dmode is None:
        os.chown(d, 65534, 65534)
    else:
        os.chmod(d, dmode)
    return p, agent


def _read(p: Path) -> Any:
    with Ledger.open(p, read_only=True) as led:
        return {"tasks": [t.title for t in led.tasks()], "nodes": [n.key for n in led.graph("t").nodes],
                "snapshot": led.db.snapshot}


def _feed(p: Path) -> Any:
    feed = Feed(p, read_only=True)
    feed.check()
    try:
        return {"last": feed.last_event_id(), "live": feed.live}
    finally:
        feed.close()


def _write(p: Path) -> Any:
    with Ledger.open(p, create=False) as led:
        led.create_task("mine")
    return "wrote"


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_an_auditor_reads_what_they_may_not_write(name: str, world_dir: Path) -> None:  # noqa: F811
    p, agent = _make(world_dir, name)
    try:
        before = fingerprint(p)
        got = run_as_nobody(lambda: _read(p))
        assert got.get("tasks") == ["audit me"], got
        assert got["nodes"] == ["a"]
        running = SETUPS[name][2]
        if running:
            assert got["snapshot"] is False  # the agent's -shm is shared read-only: live
        if name == "dir-owned-by-reader":
            assert got["snapshot"] is False  # the reader may create -shm: live
        feed = run_as_nobody(lambda: _feed(p))
        assert feed.get("last", 0) > 0, feed
        assert feed["live"] is (not got["snapshot"])
        w = run_as_nobody(lambda: _write(p))
        assert w.get("error") == "LedgerUnavailable", w
        assert_one_clear_line(w["message"], names=str(p))
        assert "cannot write" in w["message"]
        after = fingerprint(p)
        assert after["sha256"] == before["sha256"] and after["stat"] == before["stat"]
        if agent is None and name != "dir-owned-by-reader":
            assert after["listing"] == before["listing"] == ["ledger.db"]
    finally:
        if agent is not None:
            agent.close()


def test_a_snapshot_reader_does_not_see_later_commits_and_says_so(world_dir: Path) -> None:  # noqa: F811
    p, _ = _make(world_dir, "file-0444-dir-0555")
    got = run_as_nobody(lambda: _read(p))
    assert got["snapshot"] is True
    assert run_as_nobody(lambda: _feed(p))["live"] is False


def _console_read_only(p: Path) -> Any:
    """The console, read-only, as the auditor: it shows the task and no PermissionError."""
    import asyncio

    from console.app import WardenApp

    async def run() -> Any:
        app = WardenApp(str(p), str(p.parent / "runs"), read_only=True)
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(400):  # a condition with a bound, not a sleep: the first load
                if app.loaded or app.failed:
                    break
                await pilot.pause(0.05)
            await pilot.pause()
            app.screen.refresh_status()
            await pilot.pause()
            shown = str(app.screen.query_one("#status").render())
            rows = [r.view.title for r in app.tasks_model.rows]
            return {"loaded": bool(app.loaded), "failed": app.failed, "unavailable": app.unavailable,
                    "rows": rows, "status": shown, "live": app.live}

    return asyncio.run(run())


@pytest.mark.parametrize("name", ["file-0444-dir-0555", "dir-0555-agent-running"])
def test_the_console_read_only_as_an_auditor(name: str, world_dir: Path) -> None:  # noqa: F811
    # The child cannot read root's files (Python's own included): a first run here, as root, on a
    # ledger of its own, imports every module the console loads lazily.
    warm = world_dir / "warm"
    warm.mkdir()
    with Ledger.open(warm / "ledger.db") as led:
        led.create_task("warm")
    assert _console_read_only(warm / "ledger.db")["loaded"]

    p, agent = _make(world_dir, name)
    try:
        got = run_as_nobody(lambda: _console_read_only(p))
        assert "error" not in got, got
        assert got["loaded"] and not got["failed"] and not got["unavailable"], got
        assert got["rows"] == ["audit me"]
        assert "PermissionError" not in got["status"] and "read-only" in got["status"]
        assert ("snapshot" in got["status"]) is (agent is None)
    finally:
        if agent is not None:
            agent.close()

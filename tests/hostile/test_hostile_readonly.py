"""A ledger one may read but not write (an auditor's account): readable, never written, and a
write attempt is one clear line. Run as ``nobody`` — root ignores file permissions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import store.ledger.queries  # noqa: F401  (imported before the unprivileged child runs)
from hostile_support import assert_one_clear_line, fingerprint, run_as_nobody, world_dir  # noqa: F401
from store import Ledger
from store.feed import Feed

SETUPS = {
    # name: (file mode, directory mode, an agent holds it open while the auditor reads)
    "file-0444": (0o444, 0o755, False),
    "dir-0555": (0o644, 0o555, False),
    "file-0444-dir-0555": (0o444, 0o555, False),
    "dir-0555-agent-running": (0o644, 0o555, True),
    "file-0444-dir-0555-agent-running": (0o444, 0o555, True),
    "dir-owned-by-reader": (0o444, None, False),
}


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
        agent = Ledger.open(p)
        agent.task("t")  # its connection is open: -wal and -shm are there
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

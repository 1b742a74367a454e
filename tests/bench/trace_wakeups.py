"""Trace the feed's wake-ups against isolated commits, made seconds apart (6-7 s: no
write nearby to wake the feed, so a missed file event shows as a late read).

    python tests/bench/trace_wakeups.py [--commits 8] [--spacing 6] [--slow-fsync-ms 0]
                                        [--watcher inotify|watchfiles] [--no-probe] [--target URL] [-v]

A writer process (tests/support/commit_writer.py) makes one commit every ``--spacing`` seconds and
nothing else; the feed code alone (``store.reading.feed.Feed.wakeups`` + ``since`` in a worker thread, as
the console runs them) follows it. Logged on one monotonic clock: every inotify event on the
ledger's directory (file, mask), every check of the feed's probe (a recording ``CommitProbe`` given to the feed) and every wake-up, every
read (its ``PRAGMA data_version`` before and after, the events it found), and when each write
returned in the writer. Per commit it prints when it was read and which wake-up found it; ``-v``
prints the whole timeline around each commit. ``--no-probe`` runs the feed without its
``data_version`` probe (wake on file events alone); ``--slow-fsync-ms`` delays the writer's fsync with strace (a
slow or busy disk). ``--target`` follows a PostgreSQL ledger instead (a URL; a task is created).
"""

from __future__ import annotations

import argparse
from collections import Counter
import asyncio
import ctypes
import ctypes.util
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from store import Ledger  # noqa: E402
from store.reading.feed import Feed  # noqa: E402
from store.storage.commitprobe import CommitProbe  # noqa: E402
from store.storage.watch import inotify_events  # noqa: E402
from tests.support.commit_writer import Writer  # noqa: E402

MASKS = {0x1: "access", 0x2: "modify", 0x4: "attrib", 0x8: "close_write", 0x10: "close_nowrite", 0x20: "open",
         0x40: "moved_from", 0x80: "moved_to", 0x100: "create", 0x200: "delete"}


def mask_text(m: int) -> str:
    return "|".join(v for k, v in MASKS.items() if m & k) or hex(m)


def inotify_logger(directory: str, log: list) -> int | None:
    """Every inotify event in ``directory`` appended to ``log`` as (t, "inotify name mask")."""
    if not sys.platform.startswith("linux"):
        return None
    lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fd = lib.inotify_init1(os.O_NONBLOCK)
    lib.inotify_add_watch(fd, os.fsencode(directory), 0xFFF)

    def on_readable() -> None:
        t = time.monotonic()
        while True:
            try:
                buf = os.read(fd, 65536)
            except BlockingIOError:
                return
            for m, name in inotify_events(buf):
                log.append((t, f"inotify {name.decode() or '.'} {mask_text(m)}"))

    asyncio.get_running_loop().add_reader(fd, on_readable)
    return fd


async def trace(a: argparse.Namespace) -> dict:
    if a.target:
        target, task = a.target, f"trace-{os.getpid()}"
    else:
        target, task = os.path.join(tempfile.mkdtemp(prefix="warden-trace-"), "ledger.db"), "trace"
    with Ledger.open(target) as ledger:
        ledger.create_task(task, title="wake-up trace")
    log: list[tuple[float, str]] = []
    woken: list[str] = []

    class Probe(CommitProbe):  # the feed's own probe, each check logged
        def moved(self) -> bool:
            moved = super().moved()
            log.append((time.monotonic(), "check moved" if moved else "check"))
            return moved

    feed = Feed(target, read_only=True, use_inotify=a.watcher == "inotify", probe=None if a.no_probe else Probe)
    if feed.path:
        inotify_logger(os.path.dirname(feed.path), log)
    cursor = feed.last_event_id()
    found: dict[int, tuple[float, str]] = {}  # event id -> (when read, the wake-up that led to the read)

    def read(cursor: int):
        db = feed.ledger.db
        version = (lambda: db.execute_sql("PRAGMA data_version").fetchone()[0]) if feed.path else (lambda: "-")
        t0, v0 = time.monotonic(), version()
        delta = feed.since(cursor)
        return t0, time.monotonic(), v0, version(), delta

    async def follow() -> None:
        nonlocal cursor
        async for reason in feed.wakeups():
            log.append((time.monotonic(), reason))
            woken.append(reason)
            t0, t1, v0, v1, delta = await asyncio.to_thread(read, cursor)
            log.append((t0, f"read ({reason}) data_version {v0}->{v1}: events {[e.id for e in delta.events]}"))
            for e in delta.events:
                found[e.id] = (t1, reason)
            cursor = delta.cursor

    follower = asyncio.ensure_future(follow())
    writer = await Writer(target, task, slow_fsync_ms=a.slow_fsync_ms).start()
    commits = []
    try:
        for i in range(a.commits):
            await asyncio.sleep(a.spacing)  # pacing the writes, not synchronisation
            wrote = await writer.send("add" if i % 2 == 0 else "claim")
            if wrote is not None:
                commits.append(wrote)
                log.append((wrote[2], f"WRITE RETURNED: event {wrote[0]}"))
        await asyncio.sleep(min(a.spacing, feed.fallback_poll_s + 1))
    finally:
        await writer.close()
        follower.cancel()
    log.sort()
    rows = []
    for n, (eid, _key, done) in enumerate(commits):
        got = found.get(eid)
        late = None if got is None else (got[0] - done) * 1000
        # on its own wake-up: read within 250 ms (the goal) and not by the fallback poll; a read
        # later than that came from something else (the next write, the writer closing its file)
        own = got is not None and got[0] - done <= 0.25 and got[1] != "poll"
        rows.append({"event": eid, "read_after_ms": late, "woken_by": got[1] if got else None, "on_its_own_wakeup": own})
        print(f"commit {n} (event {eid}): " + (f"read {late:.1f} ms after the write returned, woken by {got[1]}"
                                               if got else "never read") + ("" if own else "  <-- MISSED its wake-up"))
        if a.verbose:
            end = got[0] if got else done + a.spacing
            for t, what in log:
                if done - 0.3 <= t <= end + 0.001:
                    print(f"    {1000 * (t - done):+10.2f} ms  {what}")
    missed = sum(1 for r in rows if not r["on_its_own_wakeup"])
    lat = sorted(r["read_after_ms"] for r in rows if r["read_after_ms"] is not None)
    summary = {"commits": len(rows), "missed_own_wakeup": missed, "wakeups": dict(Counter(woken)),
               "read_after_ms_max": lat[-1] if lat else None, "load1": os.getloadavg()[0]}
    print(summary)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=8)
    ap.add_argument("--spacing", type=float, default=6.0)
    ap.add_argument("--slow-fsync-ms", type=float, default=0)
    ap.add_argument("--watcher", choices=("inotify", "watchfiles"), default="inotify")
    ap.add_argument("--no-probe", action="store_true", help="wake on file events alone (no data_version probe)")
    ap.add_argument("--target", help="a PostgreSQL URL to follow instead of a fresh SQLite file")
    ap.add_argument("-v", "--verbose", action="store_true")
    asyncio.run(trace(ap.parse_args()))


if __name__ == "__main__":
    main()

"""Every commit reaches the console's model on its own wake-up — whether or not anything
is written after it — never by waiting for the fallback poll (set far beyond the test's deadline).

An agent process writes one change at a time and waits until the console's model shows it before
writing the next, so nothing written later can carry an earlier commit along. On SQLite the
writer's fsync is also delayed (strace), which makes each commit visible well after its last file
event: the case a console woken by file events alone never saw until the next write. The
assertion is on the path that delivered each change (tests/support/follower_log.py), not on time.
"""

from __future__ import annotations

import random
import time

import pytest

from tests.support.commit_writer import Writer, strace_can_delay
from tests.support.follower_log import FollowerLog

from tests.support.console_app import build_ledger, graph_loaded, make_app, settle, wait_for, graph_of

FALLBACK_S = 600.0  # the poll cannot be what delivers anything within the test


def writes(seed: int) -> list[str]:
    rnd = random.Random(seed)
    plan = ["add", "claim"]
    for _ in range(5):
        plan.append(rnd.choice(["beat", "note", "add", "claim", "commit"]))
    return plan + ["commit"]


async def follow_writes(pilot, log: FollowerLog, target: str, plan: list[str], slow_fsync_ms: float = 0) -> list[str]:
    """Send each write, wait for the model to show it; returns the wake-up path of each."""
    app = pilot.app
    app.open_graph("report-001")
    await graph_loaded(pilot)
    writer = await Writer(target, "report-001", slow_fsync_ms=slow_fsync_ms).start()
    paths = []
    try:
        for cmd in plan:
            before = dict(log.deliveries)
            wrote = await writer.send(cmd)
            if wrote is None:
                continue
            eid, key, _ = wrote

            def shown() -> bool:
                g = graph_of(app)
                node = g.nodes[g.index[key]] if g is not None and key in g.index else None
                in_log = bool(app.events_model.events) and app.events_model.events[-1].id >= eid
                return node is not None and in_log and app.cursor >= eid

            await wait_for(pilot, shown, timeout=30.0, what=f"{cmd} (event {eid}) in the model")
            g = graph_of(app)
            node = g.nodes[g.index[key]]
            if cmd == "claim":
                assert node.status == "running"
            elif cmd == "commit":
                assert node.status == "succeeded"
            new = {k: v - before.get(k, 0) for k, v in log.deliveries.items() if v != before.get(k, 0)}
            paths.extend(new)
    finally:
        await writer.close()
    return paths


def sqlite_params() -> list:
    skip = pytest.mark.skipif(not strace_can_delay(), reason="needs strace (to delay the writer's fsync)")
    return [pytest.param(0, id="disk"), pytest.param(150, id="fsync150ms", marks=skip)]


@pytest.mark.parametrize("slow_ms", sqlite_params())
@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "watchfiles"])
async def test_each_commit_reaches_the_model_without_the_poll(tmp_path, inotify, slow_ms):
    from store.storage.watch import inotify_lib

    if inotify and inotify_lib() is None:
        pytest.skip("no inotify on this platform")
    path = build_ledger(tmp_path / "ledger.db")
    app = make_app(path, fallback_poll_s=FALLBACK_S)
    app.feed.use_inotify = inotify
    log = FollowerLog(app)  # every wake-up, and which led to each read
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        t0 = time.monotonic()
        paths = await follow_writes(pilot, log, str(path), writes(slow_ms + inotify), slow_fsync_ms=slow_ms)
        assert time.monotonic() - t0 < FALLBACK_S
        assert paths and set(paths) <= {"change", "settle"}, paths
        if slow_ms:
            assert "settle" in paths  # visible only after its last file event: a follow-up found it
        assert "poll" not in log.wakeups
        assert log.deliveries["poll"] == 0 and log.deliveries["other"] == 0


async def test_each_commit_reaches_the_model_on_postgresql(pg_target):
    url = pg_target()
    build_ledger(url)
    app = make_app(url, fallback_poll_s=FALLBACK_S)
    log = FollowerLog(app)  # every wake-up, and which led to each read
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        paths = await follow_writes(pilot, log, url, writes(3))
        assert paths and set(paths) == {"change"}, paths  # a NOTIFY comes after the commit is visible
        assert "poll" not in log.wakeups
        assert log.deliveries["poll"] == 0 and log.deliveries["other"] == 0


@pytest.mark.parametrize("nodes", [400, 3000])
async def test_node_estimates_follow_the_screen_not_the_graph(tmp_path, nodes):
    """P80s are computed for the rows on screen (and a screen either side), never for
    the whole graph; rows scrolled to get theirs on the next analysis tick."""
    from store import Ledger, NodeSpec

    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        ledger.create_task("wide", title="many nodes")
        ledger.add_nodes("wide", [NodeSpec(f"n{i:05d}", est_wall_s=30.0 + i % 7) for i in range(nodes)])
        c = ledger.claim("wide", worker="w", lease_s=600)
        ledger.heartbeat(c, units_done=1, units_total=4)
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        app.open_graph("wide")
        await graph_loaded(pilot)
        g = graph_of(app)
        screen = app.screen
        rows = screen.row_list.visible_range()

        def shown_have_p80() -> bool:
            keys = [g.node_at(p).key for p in screen.row_list.visible_range()]
            return all(k in g.etas for k in keys)

        await wait_for(pilot, shown_have_p80, what="P80s of the rows on screen")
        assert len(g.etas) <= 3 * len(rows) + 1 < nodes
        await wait_for(pilot, lambda: g.task_eta.get("p80_s") is not None, what="the task's P80 (estimate_task)")
        await pilot.press("end")
        await wait_for(pilot, lambda: screen.row_list.visible_range().start > rows.stop, what="the scroll")
        await wait_for(pilot, shown_have_p80, timeout=60, what="P80s of the rows scrolled to")  # a safety net
        assert len(g.etas) <= 6 * len(rows) + 2 < nodes

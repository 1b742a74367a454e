"""The fleet benchmark's method (tests/bench/fleet_screen.py): what it reads off a terminal screen
and how it matches writes to it — short and deterministic, so the method is checked in the suite
while the benchmark itself (minutes, timing-dependent) is not."""

from __future__ import annotations

import pyte

from tests.bench.fleet_screen import ScreenLog, match_counts, match_nodes


def draw(screen: pyte.Screen, lines: dict[int, str]) -> None:
    stream = pyte.Stream(screen)
    for y, text in lines.items():
        stream.feed(f"\x1b[{y + 1};1H\x1b[2K{text}")


def test_task_rows_and_their_changes_are_read_off_the_screen():
    screen = pyte.Screen(100, 10)
    log = ScreenLog()
    log.mode = "tasks"
    draw(screen, {0: " warden  tasks", 1: "t0001               ▶ active      3/20    —   ", 2: "t0002  ✔ completed  20/20"})
    log(screen, 1.0)
    draw(screen, {1: "t0001               ▶ active      5/20    —          ⚠ 1  ✋2"})
    log(screen, 2.0)
    log(screen, 3.0)  # nothing changed: no new entry, but still on screen
    assert log.tasks["t0001"].changes == [(1.0, (3, "active", 0)), (2.0, (5, "active", 2))]
    assert log.tasks["t0002"].changes == [(1.0, (20, "completed", 0))]
    assert (log.tasks["t0001"].first_seen, log.tasks["t0001"].last_seen) == (1.0, 3.0)
    log.mode = None
    draw(screen, {1: "t0001               ▶ active      9/20"})
    log(screen, 4.0)  # not recording
    assert log.tasks["t0001"].changes[-1] == (2.0, (5, "active", 2))


def test_graph_rows_and_the_summary_are_read_in_graph_mode():
    screen = pyte.Screen(100, 10)
    log = ScreenLog()
    log.mode = "graph"
    draw(screen, {0: " warden  task t0007", 1: "t0007  ▶ active  4/150  P80 3m", 2: "NODE  STATUS",
                  3: "n000                   ✔ succeeded   1", 4: "  n001                 ▶ running     1"})
    log(screen, 1.0)
    assert log.summary["t0007"].changes == [(1.0, (4, "active", 0))]
    assert log.nodes["n000"].changes == [(1.0, ("succeeded",))]
    assert log.nodes["n001"].changes == [(1.0, ("running",))]


def rows_from(changes):
    log = ScreenLog()
    log.mode = "tasks"
    screen = pyte.Screen(100, 5)
    for t, done in changes:
        draw(screen, {1: f"t0001   ▶ active   {done}/50"})
        log(screen, t)
    return log.tasks


def test_a_commit_is_matched_to_the_first_screen_showing_its_count():
    rows = rows_from([(10.0, 0), (10.5, 1), (11.2, 4), (20.0, 4)])
    got = match_counts(rows, [("t0001", 1, 10.49), ("t0001", 2, 10.9), ("t0001", 3, 11.0), ("t0001", 4, 11.1)], 20.0)
    assert [round(x) for x in got["lat_ms"]] == [10, 300, 200, 100]  # 2, 3, 4 shown together at 11.2
    assert got["missed"] == []
    # --trace's samples: each measured commit's task, when its call returned, and its latency
    assert [(task, t, round(ms)) for task, t, ms in got["samples"]] == [
        ("t0001", 10.49, 10), ("t0001", 10.9, 300), ("t0001", 11.0, 200), ("t0001", 11.1, 100)]


def test_a_commit_never_shown_while_its_row_was_on_screen_is_missed():
    rows = rows_from([(10.0, 0), (10.5, 1), (20.0, 1)])
    got = match_counts(rows, [("t0001", 1, 10.4), ("t0001", 2, 11.0)], 20.0)
    assert got["missed"] == [("t0001", 2)] and len(got["lat_ms"]) == 1


def test_commits_of_rows_off_screen_are_not_measured():
    rows = rows_from([(10.0, 0), (12.0, 1)])
    got = match_counts(rows, [("t0001", 1, 9.0), ("t0002", 1, 11.0)], 20.0)  # before t0001 showed; t0002 never
    assert got == {"lat_ms": [], "missed": [], "samples": []}


def test_node_changes_superseded_before_they_showed_are_told_apart_from_missed_ones():
    log = ScreenLog()
    log.mode = "graph"
    screen = pyte.Screen(100, 5)
    for t, status in [(1.0, "pending"), (2.05, "running"), (9.0, "succeeded"), (30.0, "succeeded")]:
        draw(screen, {2: f"n005   ✔ {status}"})
        log(screen, t)
    changes = [("n005", "running", 2.0), ("n005", "failed", 5.0), ("n005", "running", 6.0), ("n005", "succeeded", 8.9)]
    got = match_nodes(log.nodes, changes, 30.0)
    assert [round(x) for x in got["lat_ms"]] == [50, 100]  # the first claim, the commit
    assert got["superseded"] == 2  # failed and the second running never drawn: succeeded came first
    assert got["missed"] == []
    got = match_nodes(log.nodes, [("n005", "blocked", 29.0)], 30.0)
    assert got["missed"] == [("n005", "blocked")]


def test_a_long_wait_for_a_claim_is_reported_with_what_made_it_and_when():
    import argparse

    from tests.bench.bench_fleet import report, table, view_at

    windows = {"console": (100.0, 100.0), "tasks": (101.0, 150.0), "graph": (152.0, 200.0)}
    assert [view_at(t, windows) for t in (100.5, 120.0, 151.0, 160.0)] == ["opening", "tasks", "between", "graph"]
    agents = [{"agent": 0, "writes": [], "claim_s": [0.01, 1.2], "waits_s": [0.01, 1.3],
               "long_waits": [[1.3, 2, 1.2, 0, 121.5]]},
              {"agent": 1, "writes": [], "claim_s": [0.02], "waits_s": [0.62], "long_waits": [[0.62, 4, 0.02, 3, 160.0]]},
              {"agent": 2, "writes": [], "claim_s": [0.02], "waits_s": [0.02]}]  # an older agent file: no long_waits
    got = report(argparse.Namespace(trace=None), agents, [], ScreenLog(), "t0001", windows)["claims"]
    assert got["longest_wait_ms"] == 1300.0
    assert got["long_waits"]["n"] == 2
    assert got["long_waits"]["rows"] == [[1300.0, 2, 1200.0, 0, 21.5, "tasks", 0], [620.0, 4, 20.0, 3, 60.0, "graph", 1]]
    text = table({"backend": "sqlite", "agents": 3, "tasks": 1, "rate": 1.0, "claims": got})
    assert "a wait of 1300.0 ms: 2 claim calls (longest 1200.0 ms), 0 polls; ended 21.5 s after the console started (tasks), agent 0" in text

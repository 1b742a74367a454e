"""What the console's screen showed during bench_fleet.py, and which writes it showed when.

:class:`ScreenLog` is a :class:`~tests.support.console_terminal.Terminal` observer: after every chunk
the console wrote, it parses the lines pyte marked dirty — task rows (``t0042  ▶ active  17/150 …
✋1``), the graph's summary line (``t0042  ▶ active  17/150  P80 …``) and graph rows
(``n017  ✔ succeeded …``) — and keeps, per row, every change of what it showed with the time the
chunk was read, and when each row was on screen.

Matching a write to the screen (the method of bench_console.py, for many writers): the journal
says what each write changed — a ``node.committed`` event is the k-th success of its task (the
bench's tasks start with none done and nothing abandons), so once it is on screen the task's row
shows a done count of at least k; a claim makes its node ``running``, a commit ``succeeded``, a
retryable failure ``pending``, a handoff ``blocked``. The write's latency is from when its agent's
call returned to the first chunk after which the screen showed that (or something later: a row
that jumped from 5 to 8 showed commits 6, 7 and 8 at once). A write is *measurable* when its row
was on screen when it returned; it is *missed* when its row stayed on screen and never showed it
(within ``grace`` after the end); *superseded* (node rows only) when the node changed again before
the screen showed the first change, and the screen then showed the later one.
"""

from __future__ import annotations

import re
import threading
from typing import Iterable
from dataclasses import dataclass, field

from wcwidth import wcwidth

TASK_ROW = re.compile(r"^\s*(t\d{4})\s+\S+\s+(active|parked|completed|failed|aborted)\s+(\d+)/(\d+)")
# several ledgers in one console: the LEDGER column first (``L0  t0042  ▶ active  17/150 …``)
LEDGER_TASK_ROW = re.compile(r"^\s*(L\d+)(?:\s+\S)?\s+(t\d{4})\s+\S+\s+(active|parked|completed|failed|aborted)\s+(\d+)/(\d+)")
HANDOFFS = re.compile(r"✋(\d+)")
NODE_ROW = re.compile(r"^\s*(n\d{3})\s+\S+\s+(pending|running|blocked|parked|succeeded|failed|abandoned)\b")
SUMMARY = re.compile(r"^\s*(t\d{4})\s+\S+\s+(active|parked|completed|failed|aborted)\s+(\d+)/(\d+)")


@dataclass
class Row:
    """One row's history on screen: (time, shown value) at each change, and when it was seen."""

    changes: list[tuple[float, tuple]] = field(default_factory=list)
    first_seen: float = 0.0
    last_seen: float = 0.0

    def saw(self, t: float, value: tuple) -> None:
        if not self.changes:
            self.first_seen = t
        if not self.changes or self.changes[-1][1] != value:
            self.changes.append((t, value))
        self.last_seen = t


class ScreenLog:
    """Rows parsed from the screen as it changes (``mode``: "tasks", "graph" or None: not recording)."""

    def __init__(self, ledgers: bool = False) -> None:
        self.ledgers = ledgers  # rows carry their ledger: a task row's key is "L0/t0042"
        self.mode: str | None = None
        self.tasks: dict[str, Row] = {}
        self.summary: dict[str, Row] = {}
        self.nodes: dict[str, Row] = {}
        self.lock = threading.Lock()
        self.chunks = 0
        self._parsed: list[tuple[dict[str, Row], str, tuple] | None] = []  # by screen line
        self._parsed_mode: str | None = None

    def __call__(self, screen, t: float) -> None:
        """After every chunk the terminal read: only the lines pyte marked dirty are rendered and
        parsed again (rendering all of ``screen.display`` per chunk took as much of the
        benchmark's CPU as pyte's parsing, on the 2 cores the fleet and the console share); every
        row on screen is seen at ``t``."""
        parsed = self._parsed
        if len(parsed) != screen.lines or self._parsed_mode != self.mode:
            self._parsed = parsed = [None] * screen.lines
            self._parsed_mode = self.mode
            dirty: Iterable[int] = range(screen.lines)
        else:
            dirty = screen.dirty
        for y in dirty:
            if 0 <= y < len(parsed):
                parsed[y] = self._parse(render_line(screen, y), y)
        screen.dirty.clear()
        if self.mode is None:
            return
        self.chunks += 1
        for item in parsed:
            if item is not None:
                rows, key, value = item
                rows.setdefault(key, Row()).saw(t, value)

    def _parse(self, line: str, y: int) -> tuple[dict[str, Row], str, tuple] | None:
        if self.mode == "tasks" and self.ledgers:
            m = LEDGER_TASK_ROW.match(line)
            if m:
                h = HANDOFFS.search(line)
                return self.tasks, f"{m.group(1)}/{m.group(2)}", (int(m.group(4)), m.group(3), int(h.group(1)) if h else 0)
        elif self.mode == "tasks":
            m = TASK_ROW.match(line)
            if m:
                h = HANDOFFS.search(line)
                return self.tasks, m.group(1), (int(m.group(3)), m.group(2), int(h.group(1)) if h else 0)
        elif self.mode == "graph":
            m = NODE_ROW.match(line)
            if m:
                return self.nodes, m.group(1), (m.group(2),)
            m = SUMMARY.match(line)
            if m and y <= 2:
                h = HANDOFFS.search(line)
                return self.summary, m.group(1), (int(m.group(3)), m.group(2), int(h.group(1)) if h else 0)
        return None


def render_line(screen, y: int) -> str:
    """Line ``y`` as ``screen.display`` renders it (pyte: a wide character's stub cell skipped)."""
    line = screen.buffer[y]
    out = []
    wide = False
    for x in range(screen.columns):
        if wide:
            wide = False
            continue
        char = line[x].data
        wide = bool(char) and wcwidth(char[0]) == 2
        out.append(char)
    return "".join(out)


def _first_at_least(row: Row, index: int, want: int, after: float = float("-inf")) -> float | None:
    for t, value in row.changes:
        if t >= after and value[index] >= want:
            return t
    return None


def match_counts(rows: dict[str, Row], commits: list[tuple[str, int, float]], end: float,
                 grace: float = 3.0) -> dict:
    """``commits``: (task, done count after it, time its call returned). Latency per measurable
    commit, and the missed ones (their row on screen throughout, the count never reached)."""
    samples: list[tuple[str, float, float]] = []  # (task, when its call returned, ms to the screen)
    missed: list[tuple[str, int]] = []
    for task, k, t_ret in commits:
        row = rows.get(task)
        if row is None or not (row.first_seen <= t_ret <= row.last_seen):
            continue
        shown = _first_at_least(row, 0, k)
        if shown is None:
            if row.last_seen >= min(end, t_ret + grace):
                missed.append((task, k))
            continue
        samples.append((task, t_ret, (shown - t_ret) * 1000))
    return {"lat_ms": [ms for _, _, ms in samples], "missed": missed, "samples": samples}


def match_nodes(rows: dict[str, Row], changes: list[tuple[str, str, float]], end: float,
                grace: float = 3.0) -> dict:
    """``changes``: (node key, status it got, time its call returned), in journal order. A change
    shown before the node's next change returned is measured; one the screen never showed but
    showed the node's later state is superseded; one never shown while on screen, missed."""
    by_key: dict[str, list[tuple[str, float]]] = {}
    for key, status, t_ret in changes:
        by_key.setdefault(key, []).append((status, t_ret))
    samples: list[tuple[str, float, float]] = []  # ("key status", when its call returned, ms to the screen)
    missed: list[tuple[str, str]] = []
    superseded = 0
    for key, seq in by_key.items():
        row = rows.get(key)
        if row is None:
            continue
        for n, (status, t_ret) in enumerate(seq):
            if not (row.first_seen <= t_ret <= row.last_seen):
                continue
            nxt = seq[n + 1][1] if n + 1 < len(seq) else float("inf")
            shown = next((t for t, v in row.changes if v[0] == status and t >= t_ret - 0.05 and t < nxt + 5.0), None)
            if shown is not None and (shown < nxt or nxt == float("inf")):
                samples.append((f"{key} {status}", t_ret, (shown - t_ret) * 1000))
            elif nxt != float("inf"):
                superseded += 1
            elif row.last_seen >= min(end, t_ret + grace):
                missed.append((key, status))
    return {"lat_ms": [ms for _, _, ms in samples], "missed": missed, "superseded": superseded, "samples": samples}


__all__ = ["Row", "ScreenLog", "match_counts", "match_nodes"]

"""The task list's model, for a fleet: thousands of tasks, a filter, an urgency order, a summary.

Each change costs the UI thread the same whatever the number of tasks (5,000 tasks, under
1 ms of UI work per change): a row's view is replaced in place; when the change moves it in the
display order (the urgency order, or in or out of the filter) it is taken out and put back by
bisection on its sort key (the list's other rows are not looked at, nor re-sorted); the summary's
totals move by the row's difference. Only a new filter text or a new order walks every row.

* **Order** (``order``): ``"created"`` — creation order, as the ledger lists tasks — or
  ``"urgency"``: unfinished tasks first; among them the most alarms first (signals of severity
  alarm, a budget at its hard or stop gate counts as one), then the most open handoffs (agents
  waiting for a person), then the budget's gate (stop, hard, soft, ok) and how much of it is used
  (in tenths), then the most warnings, then the latest P80 (in doublings: 1–2 min, 2–4 min, …: the
  task that will finish last); ties in creation order. Finished tasks (completed, failed, aborted)
  follow, in creation order. The budget and the P80 count in steps, not exactly: every commit
  moves both a little, and a list re-ordered by each commit is one nobody can read (and one the
  screen must redraw whole at each change); a row moves when it crosses a step.
* **Filter** (``/``): every word must match the task's id, title, status or origin (``/mcp``,
  ``/parked``, ``/t04 nightly``).
* **Summary** (:class:`Summary`): tasks by status, alarms, open handoffs, tokens used in all (the
  header's spend rate is its rise over the last minute) — kept as totals, moved by each row's
  change. Agents alive come from the journal (:class:`AgentsAlive`), not from task rows.

Rows are addressed two ways: a *row* is the task's index in :attr:`TaskListModel.rows` (creation
order; stable), a *position* its place on screen (filtered and ordered).
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, NamedTuple, Sequence

from store.reading.cli_json import budget_json, empty_eta
from store.storage.events import NodeClaimed, NodeHeartbeat, payload_of
from store.views import EventView, TaskView

from .glyphs import MARKS, TASK_GLYPHS, age_label, eta_label, task_label
from .model import (FINISHED_TASK, TASK_COLUMNS, EtaJson, SignalJson, alerting, progress_text, signals_cell,
                    status_cell)
from .text import safe_line
from .widgets.figures import gauge
from .widgets.rowlist import Cell

Clock = Callable[[], float]
ORDERS = ("created", "urgency")
GATE_RANK = {"stop": 3, "hard": 2, "soft": 1}
SPEND_WINDOW_S = 60.0  # the spend rate: tokens used over the last minute
RATE_SHOWN_EVERY_S = 1.0  # the spend rate's text moves at most this often (TaskListModel._rate_text)
ALIVE_AFTER_WRITE_S = 60.0  # an agent that wrote within this long counts as alive, lease or not


class Repaint(NamedTuple):
    """What a change asks of the screen: ``rows``, positions whose row changed in place; ``span``,
    positions whose rows shifted (a row moved in the order: every position between where it was
    and where it is now), None when none did; ``reshaped``: rows were added or came into or left
    the filter (the count changed), repaint everything; ``changed``: the tasks whose row changed
    (an analysis result equal to what the row shows changes nothing)."""

    rows: list[int]
    span: range | None
    reshaped: bool
    changed: frozenset[str] = frozenset()


@dataclass
class _Paint:
    """A batch's repaint, gathered row by row."""

    rows: list[int] = field(default_factory=list)
    lo: int = -1
    hi: int = -1
    reshaped: bool = False
    changed: set[str] = field(default_factory=set)

    def took(self, i: int, moved: range | bool, shown: bool) -> None:
        if moved is True:
            self.reshaped = True
        elif isinstance(moved, range):
            self.lo = moved.start if self.lo < 0 else min(self.lo, moved.start)
            self.hi = max(self.hi, moved.stop)
        elif shown:
            self.rows.append(i)

    def done(self, model: "TaskListModel") -> Repaint:
        changed = frozenset(self.changed)
        if self.reshaped:
            return Repaint([], None, True, changed)
        return Repaint(model.positions(self.rows), range(self.lo, self.hi) if self.lo >= 0 else None, False, changed)


@dataclass
class TaskRow:
    view: TaskView
    eta: EtaJson = field(default_factory=empty_eta)
    signals: tuple[SignalJson, ...] = ()
    # what the summary counted for this row (so a change moves the totals by its difference)
    alarms: int = 0
    warns: int = 0
    gate: str = "ok"  # the budget's gate and ratio, as the row shows them
    ratio: float = 0.0
    key: tuple[int, ...] = ()  # its sort key in the current order (ends with the row number: unique)
    shown: bool = False  # in the display order (matches the filter)


def severities(view: TaskView, signals: Sequence[SignalJson]) -> tuple[int, int, str, float]:
    """(alarms, warnings, budget gate, budget ratio) of a task row: its signals, and its budget's
    gate as the row shows it (a hard or stop gate is an alarm, a soft one a warning)."""
    alarms = warns = 0
    for s in alerting(signals):
        if s.get("severity") == "alarm":
            alarms += 1
        else:
            warns += 1
    gate, ratio = "ok", 0.0
    if view.token_cap or view.wall_cap_s:
        b = budget_json(view)
        gate, ratio = b["gate"], float(b["ratio"])
        if gate in ("hard", "stop"):
            alarms += 1
        elif gate == "soft":
            warns += 1
    return alarms, warns, gate, ratio


def ratio_step(ratio: float) -> int:
    """A budget's use in tenths (the urgency order's step)."""
    return int(max(0.0, ratio) * 10)


def p80_step(p80: object) -> int:
    """A P80 in doublings of a second (the urgency order's step); -1 without one."""
    if not isinstance(p80, (int, float)) or p80 != p80:
        return -1
    return int(math.log2(p80)) if p80 >= 1.0 else 0


@dataclass
class Summary:
    """The list's totals (see the module's docstring); :meth:`spend_rate` in tokens a second."""

    by_status: dict[str, int] = field(default_factory=dict)
    alarms: int = 0
    handoffs: int = 0
    tokens: int = 0
    spend: deque = field(default_factory=deque)  # (monotonic time, tokens in all), the last minute's

    def add(self, row: TaskRow, sign: int) -> None:
        v = row.view
        self.by_status[v.status] = self.by_status.get(v.status, 0) + sign
        if not self.by_status[v.status]:
            del self.by_status[v.status]
        self.alarms += sign * row.alarms
        self.handoffs += sign * v.handoffs_open
        self.tokens += sign * v.tokens_used

    def sample(self, now: float) -> None:
        spend = self.spend
        if not spend or spend[-1][1] != self.tokens or now - spend[-1][0] > 5.0:
            spend.append((now, self.tokens))
        while len(spend) > 2 and now - spend[1][0] > SPEND_WINDOW_S:
            spend.popleft()

    def spend_rate(self, now: float) -> float | None:
        """Tokens a second over (up to) the last minute; None before two samples a second apart."""
        if len(self.spend) < 2:
            return None
        t0, n0 = self.spend[0]
        t1, n1 = self.spend[-1]
        span = max(now, t1) - t0
        return (n1 - n0) / span if span >= 1.0 else None


class AgentsAlive:
    """Workers seen in the journal: alive while the lease their last claim or heartbeat took lasts,
    or within ``ALIVE_AFTER_WRITE_S`` of their last write (an agent between two nodes)."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def seed(self, leases: Iterable[tuple[str, float]]) -> None:
        """(worker, lease_until) of the leases held when the console started."""
        for worker, until in leases:
            self._until[worker] = max(self._until.get(worker, 0.0), float(until))

    def saw(self, events: Iterable[EventView]) -> None:
        until = self._until
        for e in events:
            if e.layer != "execution" or not e.actor:
                continue
            p = payload_of(e)
            lease = p.lease_until if isinstance(p, (NodeClaimed, NodeHeartbeat)) else 0.0
            t = max(lease, e.at + ALIVE_AFTER_WRITE_S)
            if t > until.get(e.actor, 0.0):
                until[e.actor] = t

    def count(self, now: float) -> int:
        until = self._until
        gone = [w for w, t in until.items() if t <= now]
        for w in gone:
            del until[w]
        return len(until)


class TaskListModel:
    """Every task; filtered, in creation or urgency order (see the module's docstring)."""

    def __init__(self, clock: Clock, monotonic: Clock = time.monotonic) -> None:
        self.clock = clock
        self.monotonic = monotonic
        self.rows: list[TaskRow] = []
        self.index: dict[str, int] = {}
        self.filter_text = ""
        self._terms: list[str] = []
        self.order = "created"
        self._keys: list[tuple[int, ...]] = []  # the shown rows' keys, in display order
        self.keys_version = 0  # moves whenever the display order does (a row in, out or moved)
        self.summary = Summary()
        self.agents = AgentsAlive()
        self._rate_shown: tuple[float, str] | None = None  # (monotonic time, the spend rate's text)

    # ------------------------------------------------------------------ loading and changes
    def load(self, tasks: Iterable[TaskView]) -> None:
        """Every task afresh (the first read, or a replaced ledger); estimates and signals already
        known are kept."""
        old = {r.view.task_id: r for r in self.rows}
        self.rows = []
        for t in tasks:
            prev = old.get(t.task_id)
            self.rows.append(TaskRow(t, prev.eta, prev.signals) if prev is not None else TaskRow(t))
        self.index = {r.view.task_id: i for i, r in enumerate(self.rows)}
        self.summary = Summary(spend=self.summary.spend)
        for r in self.rows:
            self._measure(r)
            self.summary.add(r, +1)
        self.summary.sample(self.monotonic())
        self._rebuild()

    def update(self, tasks: Iterable[TaskView]) -> Repaint:
        """Fresh task rows: what to repaint."""
        paint = _Paint()
        for t in tasks:
            i = self.index.get(t.task_id)
            if i is None:
                i = self.index[t.task_id] = len(self.rows)
                row = TaskRow(t)
                self.rows.append(row)
                self._measure(row)
                self.summary.add(row, +1)
                self._place(i)
                paint.reshaped = True
                paint.changed.add(t.task_id)
                continue
            row = self.rows[i]
            self.summary.add(row, -1)
            row.view = t
            self._measure(row)
            self.summary.add(row, +1)
            paint.changed.add(t.task_id)
            paint.took(i, self._replace(i), row.shown)
        self.summary.sample(self.monotonic())
        return paint.done(self)

    def set_analyses(self, results: Iterable[tuple[str, EtaJson | None, Sequence[SignalJson]]]) -> Repaint:
        """Estimates and signals, ``(task id, eta, signals)`` each (tasks not in the list are
        skipped): what to repaint."""
        paint = _Paint()
        for task_id, eta, signals in results:
            i = self.index.get(task_id)
            if i is None:
                continue
            row = self.rows[i]
            eta, signals = eta or empty_eta(), tuple(signals)
            if eta == row.eta and signals == row.signals:
                continue  # the row shows this already
            self.summary.add(row, -1)
            row.eta, row.signals = eta, signals
            paint.changed.add(task_id)
            self._measure(row)
            self.summary.add(row, +1)
            paint.took(i, self._replace(i), row.shown)
        return paint.done(self)

    def set_analysis(self, task_id: str, eta: EtaJson | None, signals: Sequence[SignalJson]) -> Repaint:
        """One task's estimate and signals (:meth:`set_analyses`)."""
        return self.set_analyses([(task_id, eta, signals)])

    # ------------------------------------------------------------------ order and filter
    def set_order(self, order: str) -> None:
        if order not in ORDERS:
            raise ValueError(f"unknown order {order!r}")
        self.order = order
        self._rebuild()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self._terms = self.filter_text.casefold().split()
        self._rebuild()

    def _matches(self, v: TaskView) -> bool:
        for term in self._terms:
            if not (term in v.task_id.casefold() or term in v.title.casefold() or v.status.startswith(term)
                    or term == v.origin):
                return False
        return True

    def _key(self, i: int) -> tuple[int, ...]:
        if self.order == "created":
            return (i,)
        row = self.rows[i]
        v = row.view
        if v.status in FINISHED_TASK:
            return (1, 0, 0, 0, 0, 0, 0, i)
        p80 = (row.eta or {}).get("p80_s")
        return (0, -row.alarms, -v.handoffs_open, -GATE_RANK.get(row.gate, 0), -ratio_step(row.ratio), -row.warns,
                -p80_step(p80), i)

    def _rebuild(self) -> None:
        keys = []
        for i, r in enumerate(self.rows):
            r.shown = self._matches(r.view)
            r.key = self._key(i)
            if r.shown:
                keys.append(r.key)
        keys.sort()
        self._keys = keys
        self.keys_version += 1

    def _place(self, i: int) -> None:
        row = self.rows[i]
        row.key = self._key(i)
        row.shown = self._matches(row.view)
        if row.shown:
            insort(self._keys, row.key)
            self.keys_version += 1

    def _replace(self, i: int) -> range | bool:
        """Row ``i`` changed: take it out of the display order and put it back where it belongs now.
        Returns False when its place is the same, the positions it moved across (every row there
        shifted by one) when it moved, True when it came into or left the filter (the count changed)."""
        row = self.rows[i]
        key, shown = self._key(i), self._matches(row.view)
        if key == row.key and shown == row.shown:
            return False
        self.keys_version += 1
        was = None
        if row.shown:
            was = bisect_left(self._keys, row.key)
            del self._keys[was]
        row.key, row.shown = key, shown
        if not shown:
            return True
        insort(self._keys, key)
        if was is None:
            return True
        now = bisect_left(self._keys, key)
        return range(min(was, now), max(was, now) + 1)

    def _measure(self, row: TaskRow) -> None:
        row.alarms, row.warns, row.gate, row.ratio = severities(row.view, row.signals)

    # ------------------------------------------------------------------ rows and positions
    def position_of(self, row: int) -> int | None:
        r = self.rows[row] if 0 <= row < len(self.rows) else None
        if r is None or not r.shown:
            return None
        return bisect_left(self._keys, r.key)

    def position_of_key(self, key: Hashable) -> int | None:
        """Where the row ``row_key`` named is shown now (None: not shown)."""
        return self.position_of(key) if isinstance(key, int) else None

    def positions(self, rows: Iterable[int]) -> list[int]:
        out = []
        for r in rows:
            p = self.position_of(r)
            if p is not None:
                out.append(p)
        return out

    def position_of_task(self, task_id: str) -> int | None:
        i = self.index.get(task_id)
        return None if i is None else self.position_of(i)

    def row_at(self, pos: int) -> TaskRow | None:
        if 0 <= pos < len(self._keys):
            return self.rows[self._keys[pos][-1]]
        return None

    def row_count(self) -> int:
        return len(self._keys)

    def display_keys(self) -> list[tuple[int, ...]]:
        """The shown rows' sort keys in display order (each ends with its row number); read only
        (``keys_version`` says when they changed)."""
        return self._keys

    def any_tasks(self) -> bool:
        """The ledger has tasks (shown or not)."""
        return bool(self.rows)

    def row_key(self, pos: int) -> int:
        """The row shown at ``pos`` (its number): the row list caches its line by this, so a
        line survives rows moving around it."""
        return self._keys[pos][-1] if 0 <= pos < len(self._keys) else -1 - pos

    def row_cells(self, pos: int) -> list[Cell]:
        row = self.row_at(pos)
        if row is None:
            return []
        t = row.view
        b = budget_json(t)
        if t.token_cap or t.wall_cap_s:
            budget = (f"{gauge(b['ratio'], 6)} {b['ratio'] * 100:3.0f}% {b['gate']}",
                      {"ok": "", "soft": "warn"}.get(b["gate"], "alarm"))
        else:
            budget = (MARKS["dash"], "dim")
        # A finished task has no time left: no P80, not even the last one computed while it ran
        # (the next analysis would drop it a few seconds later).
        eta = None if t.status in FINISHED_TASK else row.eta
        sigs = list(row.signals)
        if b["gate"] in ("soft", "hard", "stop") and (t.token_cap or t.wall_cap_s):
            sigs.append({"kind": f"budget_{b['gate']}", "severity": "warn" if b["gate"] == "soft" else "alarm"})
        return [
            (task_label(t.task_id, t.origin), "key"),
            status_cell(t.status, TASK_GLYPHS),
            (progress_text(t.counts), ""),
            (eta_label(eta), "" if (eta or {}).get("p80_s") is not None else "dim"),
            budget,
            signals_cell(sigs),
            (f"{MARKS['handoff']}{t.handoffs_open}", "blocked") if t.handoffs_open else (MARKS["dash"], "dim"),
            (age_label(self.clock() - t.created_at), "dim"),
            (safe_line(t.title), ""),
        ]

    # ------------------------------------------------------------------ the header's summary
    def summary_text(self) -> str:
        """One line: agents alive, tasks active (and parked), alarms, open handoffs, spend rate."""
        s = self.summary
        now = self.clock()
        alive = self.agents.count(now)
        parts = [f"{alive} agent{'s' if alive != 1 else ''}", f"{s.by_status.get('active', 0)} active"]
        if s.by_status.get("parked"):
            parts.append(f"{s.by_status['parked']} parked")
        parts.append(f"{MARKS['signal']} {s.alarms} alarm{'s' if s.alarms != 1 else ''}")
        parts.append(f"{MARKS['handoff']} {s.handoffs} open")
        parts.append(self._rate_text())
        return "  ".join(safe_line(p) for p in parts)

    def _rate_text(self) -> str:
        """The spend rate — a minute's average — computed again at most every RATE_SHOWN_EVERY_S:
        every token-bearing write moves its last digits, and the summary line would be drawn
        again for each of a fleet's writes (the screen's tick shows the new figure each second)."""
        now = self.monotonic()
        shown = self._rate_shown
        if shown is None or not 0 <= now - shown[0] < RATE_SHOWN_EVERY_S:
            rate = self.summary.spend_rate(now)
            text = f"{rate * 60:,.0f} tokens/min" if rate is not None else f"{MARKS['dash']} tokens/min"
            shown = self._rate_shown = (now, text)
        return shown[1]


__all__ = ["AgentsAlive", "ORDERS", "Repaint", "Summary", "p80_step", "ratio_step", "TASK_COLUMNS", "TaskListModel", "TaskRow", "severities"]

"""The feed side of the console: what worker threads read from the ledger, and the pending delta.

:class:`LedgerFollower` owns the journal cursor and what the screens watch (the tasks whose graph is
open, the node details on screen: ``console.hub.FeedHub`` keeps these for them). Its
:meth:`~LedgerFollower.run` loop (the app's ``follow_ledger`` worker) waits for a wake-up
(``store.reading.feed``: file events, NOTIFY, a slow fallback poll), reads the journal after the cursor and
exactly the rows the new events name — in worker threads — and merges them, and any change of the
ledger's availability, into :class:`Pending`. Task rows come with the same read: a
:class:`~store.reading.tally.TaskTally` moves each task's counts by the nodes the events name (no recount
of a task's nodes per change), so a commit reaches the task list as soon as the graph. Then it calls ``changed()`` (the app posts a
coalescing ``LedgerChanged``); the hub takes the pending delta on the UI thread, applies it to the
shared models and tells the screens that subscribed. Nothing here touches a widget or the app.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from store.errors import NotFound, WardenError
from store.reading.feed import Feed, tail_at
from store.reading.tally import TaskTally, live_leases
from store.views import EventView, NodeDetail, NodeView, TaskView


EVENT_TAIL = 2000  # events the log shows when the console opens

NodeKey = tuple[str, str]  # (task id, node key)


@dataclass(frozen=True)
class Status:
    """The ledger became unavailable (``error`` set) or available again (``error`` None);
    ``fatal``: it could not be opened at all (the console shows the error screen)."""

    error: str | None
    fatal: bool = False


@dataclass
class Pending:
    """What the feed worker has read and the UI has not applied yet."""

    events: list[EventView] = field(default_factory=list)
    nodes: dict[NodeKey, NodeView] = field(default_factory=dict)  # rows of the watched tasks' graphs
    as_of: dict[NodeKey, int] = field(default_factory=dict)  # the journal id each row was read at
    tasks: dict[str, TaskView] = field(default_factory=dict)
    details: dict[NodeKey, NodeDetail] = field(default_factory=dict)  # the watched node details
    all_tasks: list[TaskView] | None = None  # set when the ledger was read afresh (with ``tail``)
    tail: list[EventView] | None = None
    leases: list[tuple[str, float]] | None = None  # (worker, lease end) held then (with ``all_tasks``)
    status: Status | None = None  # the ledger's availability, when it changed

    def __bool__(self) -> bool:
        return bool(self.events or self.nodes or self.tasks or self.details
                    or self.all_tasks is not None or self.status is not None)

    def merge(self, step: "Step") -> bool:
        """Add one read step; True when there is something to apply."""
        self.events.extend(step.events)
        for n in step.nodes:
            self.nodes[(n.task_id, n.key)] = n
            self.as_of[(n.task_id, n.key)] = step.cursor
        for t in step.tasks:
            self.tasks[t.task_id] = t
        for d in step.details:
            self.details[(d.node.task_id, d.node.key)] = d
        return bool(self)


@dataclass
class Step:
    """One read after the cursor: the events, and the rows they name that the console shows."""

    cursor: int
    more: bool = False
    events: list[EventView] = field(default_factory=list)
    nodes: list[NodeView] = field(default_factory=list)
    tasks: list[TaskView] = field(default_factory=list)
    details: list[NodeDetail] = field(default_factory=list)


class LedgerFollower:
    """The cursor, the watches and the pending delta (see the module's docstring)."""

    def __init__(self, feed: Feed, *, spacing_s: float = 0.0) -> None:
        self.feed = feed
        # Journal reads start at least this far apart while changes keep coming (the first after a
        # quiet spell, and a screen's request, at once): the wake-ups of a burst meanwhile make one
        # read, not one each (the console passes its LIVE_APPLY_S; 0: every wake-up reads).
        self.spacing_s = spacing_s
        self.pending = Pending()
        self.graphs: Counter[str] = Counter()  # tasks whose changed nodes are read (open graphs)
        self.details: Counter[NodeKey] = Counter()  # node details on screen
        self.wanted: set[NodeKey] = set()  # details to read on the next turn whatever changed
        self.kick: asyncio.Event | None = None
        self.analysis_dirty: set[str] = set()  # tasks whose estimates and signals are out of date
        self.tally = TaskTally()  # the task rows, kept from the journal (owned by the read thread)
        self.cursor = 0
        self.live = True
        self.loaded = False  # the first full read succeeded
        self.error: str | None = None  # why the ledger is unavailable (None: it is not)
        self.woken: set[str] = set()  # the feed's wake-up reasons since the last read
        # Clear from a wake-up of the feed until what it brought is applied and drawn (``settled``);
        # a big graph's loading thread waits on it between pages (console/screens/graph.py), so that
        # a change on its way has the interpreter to itself.
        self.quiet = threading.Event()
        self.quiet.set()
        self.loaders: set[int] = set()  # the threads loading a graph now (they wait on ``quiet``)
        self._changed: Callable[[], object] = lambda: None

    # ------------------------------------------------------------------ the UI thread's side
    def watch_graph(self, task_id: str) -> None:
        """Read the nodes of ``task_id`` that new events name (until :meth:`unwatch_graph`)."""
        self.graphs[task_id] += 1

    def unwatch_graph(self, task_id: str) -> None:
        self.graphs[task_id] -= 1
        if self.graphs[task_id] <= 0:
            del self.graphs[task_id]

    def watch_detail(self, key: NodeKey) -> None:
        """Read this node's detail now, and again whenever an event names the node."""
        self.details[key] += 1
        self.want_detail(key)

    def unwatch_detail(self, key: NodeKey) -> None:
        self.details[key] -= 1
        if self.details[key] <= 0:
            del self.details[key]
            self.wanted.discard(key)

    def want_detail(self, key: NodeKey) -> None:
        """Read this node's detail on the next turn (and wake the loop)."""
        self.wanted.add(key)
        self._wake()

    def _wake(self) -> None:
        if self.kick is not None:
            self.kick.set()

    def take_pending(self) -> Pending:
        p, self.pending = self.pending, Pending()
        return p

    def settled(self) -> None:
        """The delta taken is applied and drawn (the UI thread, after its frame): quiet again
        unless more is on its way."""
        if not self.pending and not self.woken:
            self.quiet.set()

    def idle(self) -> bool:
        """Nothing asked for, nothing read that the UI has not taken."""
        return not self.wanted and not self.pending

    def report(self, error: str | None) -> None:
        """Another reader (a screen's worker) found the ledger unavailable: the header says so
        until a read succeeds again."""
        self._status(error)

    def _status(self, error: str | None, *, fatal: bool = False) -> None:
        if error != self.error or fatal:
            self.error = error
            self.pending.status = Status(error, fatal)
            self._changed()

    # ------------------------------------------------------------------ the loop (an async worker)
    async def run(self, changed: Callable[[], object]) -> None:
        """Follow the ledger until cancelled; ``changed()`` is called (on this loop) whenever the
        pending delta has something new to apply."""
        feed = self.feed
        self._changed = changed
        kick = self.kick = asyncio.Event()

        async def pump() -> None:
            async for reason in feed.wakeups():
                if reason == "lost":  # PostgreSQL went away: say so now, not after a read's retries
                    self._status(feed.outage or "the ledger is unreachable; reconnecting")
                    continue  # nothing to read until it is back ("change" says so)
                self.woken.add(reason)
                self.quiet.clear()
                kick.set()

        pump_task: asyncio.Future[None] | None = None
        cursor: int | None = None
        loop = asyncio.get_running_loop()
        last_read = read_before = -1e9  # loop.time() when the last journal read started, and the one before
        read_now = True  # read the journal on this turn (a full batch, or a failed read, reads on)
        try:
            while True:
                more = False
                try:
                    if cursor is None:
                        tasks, tail, first, leases = await asyncio.to_thread(self.read_initial)
                        cursor = self.cursor = first
                        self.pending.all_tasks = tasks
                        self.pending.tail = tail
                        self.pending.leases = leases
                        self.live = feed.live
                        self.loaded = True
                        self.wanted |= set(self.details)
                        self._status(None)
                        changed()
                        if pump_task is None:
                            pump_task = asyncio.ensure_future(pump())
                    wanted, self.wanted = self.wanted, set()
                    woken, self.woken = self.woken, set()
                    # A turn woken by nothing the feed or a screen asked for reads nothing.
                    if read_now or wanted or woken:
                        read_now = True  # until this read has succeeded
                        read_before, last_read = last_read, loop.time()
                        step = await asyncio.to_thread(self.read_step, cursor, frozenset(self.graphs),
                                                       frozenset(self.details), wanted)
                        if step is None:
                            cursor = None  # the file was replaced: reload everything
                            continue
                        cursor = self.cursor = step.cursor
                        more = read_now = step.more  # a full batch: read on at once
                        self.analysis_dirty.update(e.task_id for e in step.events if e.task_id is not None)
                        if self.pending.merge(step):
                            changed()
                        self._status(None)
                except WardenError as e:
                    if not self.loaded:
                        self._status(str(e), fatal=True)
                        return
                    self._status(str(e))
                    if pump_task is None:
                        pump_task = asyncio.ensure_future(pump())
                if more:
                    continue
                if not self.pending and not self.woken:  # nothing on its way (a delta: once drawn)
                    self.quiet.set()
                await kick.wait()
                kick.clear()
                hold = last_read + self.spacing_s - loop.time()
                burst = last_read - read_before < 2 * self.spacing_s  # (a lone read never holds the next)
                if burst and 0 < hold <= self.spacing_s and not self.wanted:
                    await asyncio.sleep(hold)  # the burst's next wake-ups join this read
                    kick.clear()
        finally:
            self.kick = None
            if pump_task is not None:
                pump_task.cancel()

    # ------------------------------------------------------------------ reads (worker threads)
    def read_initial(self) -> tuple[list[TaskView], list[EventView], int, list[tuple[str, float]]]:
        """Every task, the journal's tail and the cursor they reflect; the live leases (the
        summary's agents alive start from them). The tally starts from these rows."""
        self.feed.check()
        tasks, tail, first = tail_at(self.feed, EVENT_TAIL)
        unfinished = [t.task_id for t in tasks if t.status in ("active", "parked")]
        leases = self.feed.read(lambda ledger: live_leases(ledger, unfinished))
        self.tally.start(tasks)
        return tasks, tail, first, leases

    def read_step(self, cursor: int, graphs: frozenset[str], details: frozenset[NodeKey],
                  wanted: set[NodeKey]) -> Step | None:
        """The journal after the cursor, the rows of the tasks it names (from the tally: only the
        nodes it names are read), and exactly the node rows it names that are watched (and the
        ``wanted`` details whatever changed); None when the ledger's file was replaced (then
        everything is read again)."""
        feed = self.feed
        if feed.check():
            return None
        step = Step(cursor=cursor)
        delta = feed.since(cursor)
        step.cursor, step.more, step.events = delta.cursor, delta.more, list(delta.events)
        if step.events:
            events = step.events
            step.tasks = feed.read(lambda ledger: self.tally.apply(ledger, events))
            for task_id in sorted(graphs):
                keys = sorted(delta.node_keys(task_id))
                if keys:
                    step.nodes.extend(feed.read(lambda ledger: ledger.nodes(task_id, keys)))
        for task_id, key in sorted(details):
            if (task_id, key) in wanted or key in delta.node_keys(task_id):
                try:
                    step.details.append(feed.read(lambda ledger: ledger.node_detail(task_id, key)))
                except NotFound:
                    pass
        return step


__all__ = ["EVENT_TAIL", "LedgerFollower", "NodeKey", "Pending", "Status", "Step"]

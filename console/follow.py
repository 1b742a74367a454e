"""The feed side of the console: what worker threads read from the ledger, and the pending delta.

:class:`LedgerFollower` owns the journal cursor and what the app has asked for (the open graph's
task, the open node detail, one-off requests). Its :meth:`~LedgerFollower.run` loop (the app's
``follow_ledger`` worker) waits for a wake-up (``store.feed``: file events, NOTIFY, a slow fallback
poll), reads the journal after the cursor and exactly the rows the new events name — in worker
threads — and merges them into :class:`Pending`. It then posts a coalescing ``LedgerChanged``;
the app takes the pending delta on the UI thread and applies it to the view models. Nothing here
touches a widget.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from textual.message import Message

from store.errors import LedgerUnavailable, NotFound, WardenError
from store.feed import Feed, graph_pages, tail_at
from store.tally import TaskTally, live_leases
from store.views import EventView, NodeDetail, NodeView, TaskView

from .messages import GraphPageReady, LedgerChanged, LedgerStatus

EVENT_TAIL = 2000  # events the log shows when the console opens


@dataclass
class Pending:
    """What the feed worker has read and the UI has not applied yet."""

    events: list[EventView] = field(default_factory=list)
    nodes: dict[tuple[str, str], NodeView] = field(default_factory=dict)
    as_of: dict[str, int] = field(default_factory=dict)  # node key → the journal id it was read at
    tasks: dict[str, TaskView] = field(default_factory=dict)
    detail: NodeDetail | None = None
    all_tasks: list[TaskView] | None = None
    tail: list[EventView] | None = None
    leases: list[tuple[str, float]] | None = None  # (worker, lease end) held then (with ``all_tasks``)

    def __bool__(self) -> bool:
        return bool(self.events or self.nodes or self.tasks or self.detail
                    or self.all_tasks is not None)

    def merge(self, step: "Step") -> bool:
        """Add one read step; True when there is something to apply."""
        self.events.extend(step.events)
        for n in step.nodes:
            self.nodes[(n.task_id, n.key)] = n
            self.as_of[n.key] = step.cursor
        for t in step.tasks:
            self.tasks[t.task_id] = t
        if step.detail is not None:
            self.detail = step.detail
        return bool(self)


@dataclass
class Step:
    """One read after the cursor: the events, and the rows they name that the console shows."""

    cursor: int
    more: bool = False
    events: list[EventView] = field(default_factory=list)
    nodes: list[NodeView] = field(default_factory=list)
    tasks: list[TaskView] = field(default_factory=list)
    detail: NodeDetail | None = None


def delivered_by(reasons: set[str]) -> str:
    """Which path brought a read: a notification (``change``), a follow-up check that saw a commit
    land after its last file event (``settle``), the feed starting (``start``), only the fallback
    poll (``poll``), or none of the feed's wake-ups (``other``: a request)."""
    for r in ("change", "settle", "start", "poll"):
        if r in reasons:
            return r
    return "other"


class FollowHost(Protocol):
    """What the loop needs of the app: its state, its messages, its graph loader."""

    loaded: bool
    unavailable: str | None

    def post_message(self, message: Message) -> bool: ...
    def load_graph(self, task_id: str) -> Any: ...


class LedgerFollower:
    """The cursor, the requests and the pending delta (see the module's docstring)."""

    def __init__(self, feed: Feed) -> None:
        self.feed = feed
        self.pending = Pending()
        self.requests: list[tuple[str, Any]] = []
        self.kick: asyncio.Event | None = None
        self.graph_task: str | None = None  # the open graph's task: its nodes are read as they change
        self.detail_key: tuple[str, str] | None = None  # the open node detail
        self.analysis_dirty: set[str] = set()  # tasks whose estimates and signals are out of date
        self.tally = TaskTally()  # the task rows, kept from the journal (owned by the read thread)
        self.cursor = 0
        self.live = True
        self.woken: set[str] = set()  # the feed's wake-up reasons since the last read
        self.deliveries: Counter[str] = Counter()  # events read, by the wake-up that led to the read
        self.reads = 0  # journal reads done (tests, the benchmark)

    # ------------------------------------------------------------------ the UI thread's side
    def request(self, kind: str, arg: Any) -> None:
        """Ask the loop for a one-off read (``("detail", (task, key))``) and wake it."""
        self.requests.append((kind, arg))
        if self.kick is not None:
            self.kick.set()

    def take_pending(self) -> Pending:
        p, self.pending = self.pending, Pending()
        return p

    def idle(self) -> bool:
        """Nothing requested and nothing read that the UI has not taken."""
        return not self.requests and not self.pending

    # ------------------------------------------------------------------ the loop (an async worker)
    async def run(self, host: FollowHost) -> None:
        feed = self.feed
        kick = self.kick = asyncio.Event()

        async def pump() -> None:
            async for reason in feed.wakeups():
                if reason == "lost":  # PostgreSQL went away: say so now, not after a read's retries
                    host.post_message(LedgerStatus(feed.outage or "the ledger is unreachable; reconnecting"))
                    continue  # nothing to read until it is back ("change" says so)
                self.woken.add(reason)
                kick.set()

        pump_task: asyncio.Future | None = None
        cursor: int | None = None
        read_now = True  # read the journal on this turn (a full batch, or a failed read, reads on)
        try:
            while True:
                more = False
                try:
                    if cursor is None:
                        tasks, tail, cursor, leases = await asyncio.to_thread(self.read_initial)
                        self.pending.all_tasks = tasks
                        self.pending.tail = tail
                        self.pending.leases = leases
                        self.live = feed.live
                        if self.graph_task:
                            host.load_graph(self.graph_task)
                        if self.detail_key:
                            self.requests.append(("detail", self.detail_key))
                        host.post_message(LedgerStatus(None))
                        host.post_message(LedgerChanged())
                        if pump_task is None:
                            pump_task = asyncio.ensure_future(pump())
                    requests, self.requests = self.requests, []
                    woken, self.woken = self.woken, set()
                    # A turn woken by nothing the feed or a request asked for reads nothing.
                    if read_now or requests or woken:
                        read_now = True  # until this read has succeeded
                        step = await asyncio.to_thread(self.read_step, cursor, self.graph_task, self.detail_key,
                                                       requests)
                        if step is None:
                            cursor = None  # the file was replaced: reload everything
                            continue
                        cursor = self.cursor = step.cursor
                        self.reads += 1
                        if step.events:
                            self.deliveries[delivered_by(woken)] += len(step.events)
                        more = read_now = step.more  # a full batch: read on at once
                        self.analysis_dirty.update(e.task_id for e in step.events if e.task_id is not None)
                        if self.pending.merge(step):
                            host.post_message(LedgerChanged())
                        if host.unavailable:
                            host.post_message(LedgerStatus(None))
                except WardenError as e:
                    if not host.loaded:
                        host.post_message(LedgerStatus(str(e), fatal=True))
                        return
                    host.post_message(LedgerStatus(str(e)))
                    if pump_task is None:
                        pump_task = asyncio.ensure_future(pump())
                if more:
                    continue
                await kick.wait()
                kick.clear()
        finally:
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

    def read_step(self, cursor: int, graph_task: str | None, detail_key: tuple[str, str] | None,
                  requests: list[tuple[str, Any]]) -> Step | None:
        """The journal after the cursor, the rows of the tasks it names (from the tally: only the
        nodes it names are read), and exactly the node rows it names that are shown; None when the
        ledger's file was replaced (then everything is read again)."""
        feed = self.feed
        if feed.check():
            return None
        step = Step(cursor=cursor)
        want_detail = False
        for kind, arg in requests:
            if kind == "detail" and arg == detail_key:
                want_detail = True
        delta = feed.since(cursor)
        step.cursor, step.more, step.events = delta.cursor, delta.more, list(delta.events)
        if step.events:
            events = step.events
            step.tasks = feed.read(lambda ledger: self.tally.apply(ledger, events))
        if graph_task and step.events:
            keys = delta.node_keys(graph_task)
            if keys:
                step.nodes = feed.read(lambda ledger: ledger.nodes(graph_task, sorted(keys)))
        if detail_key is not None and (want_detail or detail_key[1] in delta.node_keys(detail_key[0])):
            try:
                step.detail = feed.read(lambda ledger: ledger.node_detail(*detail_key))
            except NotFound:
                pass
        return step

    def read_graph(self, task_id: str, post: Callable[[Message], Any], cancelled: Callable[[], bool]) -> None:
        """The open task's graph, page by page from one snapshot, posted as ``GraphPageReady``: the
        first rows paint after one small page; the rest stream in while the list is already usable.
        Stops when ``cancelled()`` or another graph is opened.

        Each page waits until the UI has applied and painted the previous one. Without that, this
        thread (pure Python while it builds rows) holds the GIL and the UI thread, which drops
        it at every select(), waits up to a switch interval each time it wants it back: the first
        rows of a 100k-node graph painted after 1.1 s although the page was read in 0.25 s."""
        try:
            for page in graph_pages(self.feed, task_id):
                if cancelled() or self.graph_task != task_id:
                    return
                ack = threading.Event()
                post(GraphPageReady(task_id, page, ack))
                while not ack.wait(0.2):
                    if cancelled() or self.graph_task != task_id:
                        return
        except NotFound:
            post(GraphPageReady(task_id, None))
        except LedgerUnavailable as e:
            post(LedgerStatus(str(e)))

__all__ = ["EVENT_TAIL", "FollowHost", "LedgerFollower", "Pending", "Step", "delivered_by"]

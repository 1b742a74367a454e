"""The feed hub: what the console knows of the ledger, and who wants to hear when it changes.

The app owns one :class:`FeedHub` (``app.hub``): the models every screen shares (the task list,
the event log's tail) and the signals a screen or widget subscribes to for what it shows. The app
knows nothing screen-specific: a screen subscribes when it is mounted and is forgotten when it is
unmounted (Toolong's ``LogLines`` and its watcher; Textual's ``Signal``)::

    def on_mount(self) -> None:
        hub = self.wapp.hub
        hub.subscribe(self, hub.tasks_changed, self._tasks_changed)
        hub.watch_graph(self, self.task_id)          # the follower now reads this task's nodes

    def on_unmount(self) -> None:
        self.wapp.hub.forget(self)                   # every subscription and watch

(``WardenScreen`` does the ``forget`` for every screen.) The signals are Textual ``Signal`` objects;
:meth:`FeedHub.subscribe` subscribes with ``immediate=True``: the callback runs on the UI thread
while the delta is applied, right after the hub's own models took it — as the app's one handler
did before screens subscribed (no extra hop between a commit and its row on screen; when
``app.settled()`` holds, every screen has what was read). An exception in a callback is raised in
the subscriber's own message queue (Textual's ``Signal`` would only log it). For one delta the
signals are published in this order: ``status_changed``, ``reloaded``, ``tasks_changed``,
``events_changed``, ``nodes_changed``, ``details_read``, then ``applied``; ``analysed`` after each
analysis run. Nothing here reads the ledger: the follower (``console.follow``) reads in worker
threads what is watched, and :meth:`FeedHub.apply` runs on the UI thread.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol, Sequence, TypeVar

from textual.dom import DOMNode
from textual.signal import Signal

from store.views import EventView, NodeDetail, NodeView

from .event_log import EventLogModel
from .follow import LedgerFollower, NodeKey, Pending
from .messages import AnalysisReady
from .tasklist import TaskListModel
from .text import safe_line

if TYPE_CHECKING:
    from .model import GraphModel

T = TypeVar("T")


def _raise(error: BaseException) -> None:
    raise error


@dataclass(frozen=True)
class TasksChanged:
    """Task rows changed: ``rows`` are positions in the task list model whose row changed in place,
    ``span`` positions whose rows shifted (a row moved in the urgency order), every row when
    ``reshaped`` (rows were added, reloaded, or came into or left the filter); ``task_ids`` the
    tasks; ``analysis``: only their estimates and signals (the rows as read are unchanged)."""

    rows: Sequence[int]
    reshaped: bool
    task_ids: frozenset[str]
    analysis: bool = False
    span: range | None = None


@dataclass(frozen=True)
class EventsChanged:
    """New journal events (``events``, in id order; empty when only the tail was reloaded);
    ``added`` rows at the end of the event log model, every row when ``reshaped``."""

    events: Sequence[EventView]
    added: int
    reshaped: bool


@dataclass(frozen=True)
class NodesChanged:
    """Rows of the watched graphs that new events named, each with the journal id it was read at."""

    nodes: Mapping[NodeKey, NodeView]
    as_of: Mapping[NodeKey, int]

    def of(self, task_id: str) -> tuple[list[NodeView], dict[str, int]]:
        """This task's rows and, by node key, the journal id each was read at."""
        rows = [v for k, v in self.nodes.items() if k[0] == task_id]
        return rows, {k[1]: at for k, at in self.as_of.items() if k[0] == task_id}


class OnScreen(Protocol):
    """A screen that shows what estimates and signals are computed for (``FeedHub.show``)."""

    def tasks_on_screen(self) -> Iterable[str]:
        """The tasks whose rows are on screen now."""
        ...

    def graph_on_screen(self) -> "tuple[GraphModel, range] | None":
        """The graph this screen shows (once its first page is in) and its rows on screen."""
        ...


class FeedHub:
    """The shared models, the signals, and what is watched (see the module's docstring)."""

    def __init__(self, owner: DOMNode, follower: LedgerFollower, clock: Callable[[], float]) -> None:
        self.follower = follower
        self.tasks = TaskListModel(clock)
        self.events = EventLogModel()
        self.loaded = False  # the first delta (every task, the journal's tail) is applied
        self.unavailable: str | None = None  # why the ledger cannot be read now (escaped by the app)
        self.reconnected_at: float | None = None  # time.monotonic() the ledger came back after an outage
        #: the header's facts changed: the ledger's availability, the open alerts
        self.status_changed: Signal[None] = Signal(owner, "status-changed")
        #: the ledger was read afresh (the first load; a replaced file): re-read what you hold
        self.reloaded: Signal[int] = Signal(owner, "reloaded")
        self.tasks_changed: Signal[TasksChanged] = Signal(owner, "tasks-changed")
        self.events_changed: Signal[EventsChanged] = Signal(owner, "events-changed")
        self.nodes_changed: Signal[NodesChanged] = Signal(owner, "nodes-changed")  # watched graphs only
        self.details_read: Signal[NodeDetail] = Signal(owner, "details-read")  # watched details only
        #: estimates and signals computed (the task list's are in ``tasks`` already)
        self.analysed: Signal[AnalysisReady] = Signal(owner, "analysed")
        #: one delta applied, after every signal above
        self.applied: Signal[Pending] = Signal(owner, "applied")
        #: each signal's unsubscribe (a tuple of the signals would be of Signal[X] for different X)
        self._unsubscribe: tuple[Callable[[DOMNode], None], ...] = tuple(s.unsubscribe for s in (
            self.status_changed, self.reloaded, self.tasks_changed, self.events_changed, self.nodes_changed,
            self.details_read, self.analysed, self.applied))
        self._graphs: dict[DOMNode, list[str]] = defaultdict(list)
        self._details: dict[DOMNode, list[NodeKey]] = defaultdict(list)
        self._shown: list[OnScreen] = []

    # ------------------------------------------------------------------ subscriptions and watches
    def subscribe(self, owner: DOMNode, signal: Signal[T], callback: Callable[[T], object]) -> None:
        """Call ``callback(data)`` for each publication of ``signal`` (one of this hub's) until
        ``owner`` is forgotten: at once, while the delta is applied; an exception it raises is
        raised again in ``owner``'s message queue, like any handler's."""

        def deliver(data: T) -> None:
            try:
                callback(data)
            except Exception as error:  # noqa: BLE001 - re-raised where Textual reports it
                owner.call_next(_raise, error)

        signal.subscribe(owner, deliver, immediate=True)

    def watch_graph(self, owner: DOMNode, task_id: str) -> None:
        """``owner`` shows ``task_id``'s graph: the follower reads the nodes events name
        (``nodes_changed``) until ``owner`` is forgotten."""
        self._graphs[owner].append(task_id)
        self.follower.watch_graph(task_id)

    def watch_detail(self, owner: DOMNode, task_id: str, key: str) -> None:
        """``owner`` shows this node's detail: read now, and again whenever an event names the
        node (``details_read``), until ``owner`` is forgotten."""
        self._details[owner].append((task_id, key))
        self.follower.watch_detail((task_id, key))

    def show(self, owner: OnScreen) -> None:
        """``owner`` shows tasks or a graph: their estimates and signals are computed
        (``console.analysis_runs``) until it is forgotten."""
        self._shown.append(owner)

    def unshow(self, owner: OnScreen) -> None:
        """``owner`` (registered with :meth:`show`, not a screen itself) shows nothing any more."""
        self._shown = [s for s in self._shown if s is not owner]

    def shown(self) -> list[OnScreen]:
        """What the screens registered with :meth:`show` show, oldest first."""
        return list(self._shown)

    def forget(self, owner: DOMNode) -> None:
        """Every subscription and watch of ``owner`` (it is being unmounted)."""
        self._shown = [s for s in self._shown if id(s) != id(owner)]
        for unsubscribe in self._unsubscribe:
            unsubscribe(owner)
        for task_id in self._graphs.pop(owner, ()):
            self.follower.unwatch_graph(task_id)
        for key in self._details.pop(owner, ()):
            self.follower.unwatch_detail(key)

    # ------------------------------------------------------------------ applying a delta (UI thread)
    def apply(self, p: Pending) -> bool:
        """Apply one pending delta to the models and tell the subscribers. Returns whether this
        delta was the first load."""
        first = False
        if p.status is not None and not p.status.fatal:
            error = safe_line(p.status.error) if p.status.error else None
            if error != self.unavailable:
                if error is None:  # back after an outage: the header says "reconnected" for a while
                    self.reconnected_at = time.monotonic()
                self.unavailable = error
                self.status_changed.publish(None)
        if p.all_tasks is not None:
            first = not self.loaded
            self.tasks.load(p.all_tasks)
            self.tasks.agents.seed(p.leases or ())
            self.events.reset(p.tail or ())
            self.loaded = True
            self.reloaded.publish(self.follower.cursor)
            self.tasks_changed.publish(TasksChanged((), True, frozenset(t.task_id for t in p.all_tasks)))
            self.events_changed.publish(EventsChanged((), 0, True))
        if p.events:
            self.tasks.agents.saw(p.events)
        if p.tasks:
            paint = self.tasks.update(p.tasks.values())
            self.tasks_changed.publish(TasksChanged(paint.rows, paint.reshaped, frozenset(p.tasks), span=paint.span))
        if p.events:
            added, reshaped = self.events.extend(p.events)
            self.events_changed.publish(EventsChanged(tuple(p.events), added, reshaped))
        if p.nodes:
            self.nodes_changed.publish(NodesChanged(p.nodes, p.as_of))
        for detail in p.details.values():
            self.details_read.publish(detail)
        self.applied.publish(p)
        return first


__all__ = ["EventsChanged", "FeedHub", "NodesChanged", "OnScreen", "TasksChanged"]

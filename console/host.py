"""What the console's screens and dialogs may use of the app: :class:`ConsoleHost`.

Screens and dialogs sit below the app (``console.app.WardenApp`` implements this protocol and
imports them); they reach it through ``self.app`` typed as a ``ConsoleHost``, never by importing
``console.app``. Store reads and writes go through ``feed.read`` from thread workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.notifications import SeverityLevel
    from textual.screen import Screen, ScreenResultCallbackType

    from store.reading.feed import Feed
    from store.views import GraphRow

    from .analysis_runs import AnalysisRuns
    from .event_log import EventLogModel
    from .follow import LedgerFollower
    from .hub import FeedHub
    from .tasklist import TaskListModel

_R = TypeVar("_R")


class ConsoleHost(Protocol):
    """The app as its screens and dialogs see it."""

    feed: "Feed"  # ``feed.read(fn)`` runs ``fn(ledger)`` on a worker thread's connection
    clock: Callable[[], float]  # the injected clock (``time.time`` unless a test fixes it)
    read_only: bool
    operator: str  # who acts ("" for console.operator's default)
    runs_dir: str
    project: str | None
    records: str | None
    follower: "LedgerFollower"  # the journal cursor and the pending delta (console/follow.py)
    hub: "FeedHub"  # the shared models and the signals a screen subscribes to (console/hub.py)
    analysis: "AnalysisRuns"  # when estimates and signals are computed (a graph screen tells it of its pages)

    @property
    def loaded(self) -> bool: ...
    @property
    def live(self) -> bool: ...
    @property
    def unavailable(self) -> str | None: ...
    @property
    def reconnected_at(self) -> float | None: ...
    @property
    def open_alerts(self) -> int: ...
    @property
    def waiting_alerts(self) -> int: ...
    @property
    def tasks_model(self) -> "TaskListModel": ...
    @property
    def events_model(self) -> "EventLogModel": ...

    def now(self) -> float: ...
    def open_graph(self, task_id: str) -> None: ...
    def open_node(self, task_id: str, key: str) -> None: ...
    def shown_node(self, task_id: str, key: str) -> "GraphRow | None": ...
    def open_action(self, action: str, task_id: str | None, node_key: str | None) -> None: ...
    def retry_open(self) -> None: ...

    # Textual's App, as used here
    def push_screen(self, screen: "Screen[_R]", callback: "ScreenResultCallbackType[_R] | None" = None) -> object: ...
    def pop_screen(self) -> object: ...
    def notify(self, message: str, *, title: str = "", severity: "SeverityLevel" = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...


def host_of(node: "DOMNode") -> ConsoleHost:
    """``node.app`` as the console's app — as the screen ``node`` is on sees it: with several
    ledgers open, the app with the ledger of that screen (``console.sides``)."""
    app = node.app
    host_for = getattr(app, "host_for", None)
    return cast(ConsoleHost, app if host_for is None else host_for(node))


__all__ = ["ConsoleHost", "host_of"]

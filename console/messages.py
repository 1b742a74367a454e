"""Messages workers post to the UI thread."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Mapping, Sequence

from textual.message import Message

if TYPE_CHECKING:
    from store.reading.feed import GraphPage

    from .model import EtaJson, SignalJson


class LedgerChanged(Message):
    """New data is waiting in the app's pending delta. Carries nothing itself but which ledger's
    (``side``: None for the app's first ledger, else its ``console.sides.LedgerSide``), so a queue
    of these coalesces into one per ledger (``can_replace``) without losing any change."""

    def __init__(self, side: object = None) -> None:
        super().__init__()
        self.side = side

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LedgerChanged) and message.side is self.side


class LedgerStatus(Message):
    """A read outside the feed worker (a screen's own) found the ledger unavailable (``error``)."""

    def __init__(self, error: str | None, follower: object = None) -> None:
        super().__init__()
        self.error = error
        self.follower = follower  # the reading ledger's follower (None: the app's first ledger)


class AnalysisReady(Message):
    """Estimates and signals, computed off the UI thread. ``parts`` says what was computed
    (``eta``: task figures, ``nodes``: P80s of the graph rows around the screen, ``signals``); a
    part not computed is None in the tuples and leaves what is shown as it was."""

    def __init__(self, tasks: dict[str, tuple[EtaJson | None, Sequence[SignalJson] | None]],
                 graph: tuple[str, EtaJson | None, Mapping[str, EtaJson] | None, Sequence[SignalJson] | None] | None,
                 *, parts: frozenset[str] = frozenset({"eta", "nodes", "signals"}), kind: str = "full") -> None:
        super().__init__()
        self.tasks = tasks
        self.graph = graph
        self.parts = parts
        self.kind = kind  # the run's kind (console/analysis_runs.py): full, graph, signals or nodes
        self.side: object = None  # a further ledger's run (console/sides.py); None: the app's first ledger


class GraphPageReady(Message):
    """One page of a task's graph (``store.reading.feed.GraphPage``; None: the task is not in the ledger),
    read in the graph screen's worker thread and posted to that screen."""

    def __init__(self, task_id: str, page: "GraphPage | None", ack: threading.Event | None = None, *,
                 generation: int = 0) -> None:
        super().__init__()
        self.task_id = task_id
        self.page = page
        self.ack = ack  # set by the UI once the page is applied and painted
        self.generation = generation  # which load of the graph it belongs to

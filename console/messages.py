"""Messages workers post to the UI thread."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class LedgerChanged(Message):
    """New data is waiting in the app's pending delta. Carries nothing itself, so a queue of
    these coalesces into one (``can_replace``) without losing any change."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LedgerChanged)


class LedgerStatus(Message):
    """The ledger became unavailable (``error`` set) or available again (``error`` None)."""

    def __init__(self, error: str | None, *, fatal: bool = False, hint: str = "") -> None:
        super().__init__()
        self.error = error
        self.fatal = fatal
        self.hint = hint


class AnalysisReady(Message):
    """Estimates and signals, computed off the UI thread. ``parts`` says what was computed
    (``eta``: task figures, ``nodes``: P80s of the graph rows around the screen, ``signals``); a
    part not computed is None in the tuples and leaves what is shown as it was."""

    def __init__(self, tasks: dict[str, tuple[Any, Any]], graph: tuple[str, Any, Any, Any] | None,
                 *, parts: frozenset[str] = frozenset({"eta", "nodes", "signals"})) -> None:
        super().__init__()
        self.tasks = tasks
        self.graph = graph
        self.parts = parts

    @property
    def signals_only(self) -> bool:
        return self.parts == {"signals"}


class Loaded(Message):
    """A one-off read for a screen (handoffs, runs) finished."""

    def __init__(self, what: str, data: Any) -> None:
        super().__init__()
        self.what = what
        self.data = data


class GraphPageReady(Message):
    """One page of the open task's graph (``store.feed.GraphPage``), read in a worker thread."""

    def __init__(self, task_id: str, page: Any, ack: Any = None) -> None:
        super().__init__()
        self.task_id = task_id
        self.page = page
        self.ack = ack  # a threading.Event the UI sets once the page is applied and painted



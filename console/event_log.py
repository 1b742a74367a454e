"""The event log's model: the tail of the journal as lean rows, filtered by layer and task (the
rest of the console's view models are in :mod:`console.model`, which re-exports these)."""

from __future__ import annotations

import enum
from collections import deque
from types import MappingProxyType
from typing import Mapping, Sequence

from store.clock import iso
from store.views import EventView

from .glyphs import MARKS
from .text import safe_line
from .widgets.rowlist import Cell, Column

LAYERS = ("decision", "execution", "operator", "system")


class Keep(enum.Enum):
    """``set_filter``'s default: that part of the filter stays as it is."""

    KEEP = enum.auto()


def clock_time(ts: float | None) -> str:
    """HH:MM:SSZ (UTC) for the event log; the full ISO time is in the node detail."""
    s = iso(ts)
    return s[11:19] + "Z" if s else MARKS["dash"]


# ---------------------------------------------------------------------- event log
# At 80 columns: time, task, node, kind and about 25 characters of summary; the layer (also the
# `l` filter's, and the row's colour) from 90, the id from 100. Narrower, the summary narrows first;
# wide (from about 170), task, node and kind grow to show long ids and kinds whole.
EVENT_COLUMNS = [
    Column("ID", 7, priority=3, align="right"),
    Column("AT", 9),
    Column("LAYER", 9, priority=2),
    Column("TASK", 13, priority=1, shrink=8, room=24),
    Column("NODE", 14, shrink=8, room=24),
    Column("KIND", 14, shrink=10, room=20),
    Column("SUMMARY", 23, flex=True, shrink=12),
]


NO_PAYLOAD: Mapping[str, object] = MappingProxyType({})
"""The log keeps each event without its payload (the log never shows it, and the payloads of
20,000 events were most of the ring's memory): this one empty mapping stands for it."""


def log_event(e: EventView, words: dict[str, str]) -> EventView:
    """``e`` as the log keeps it: without its payload, repeated names kept once (``words``)."""
    w = words.setdefault
    return EventView(e.id, e.at, None if e.task_id is None else w(e.task_id, e.task_id), e.node, w(e.layer, e.layer),
                     w(e.kind, e.kind), w(e.actor, e.actor), e.summary, NO_PAYLOAD)


class EventLogModel:
    """The tail of the journal (a bounded ring of events without their payload), filtered by layer and task."""

    def __init__(self, capacity: int = 20000) -> None:
        self.capacity = capacity
        self.events: deque[EventView] = deque(maxlen=capacity)
        self.layer: str | None = None
        self.task_id: str | None = None
        self.rows: list[EventView] = []
        self._words: dict[str, str] = {}

    def _keep(self, e: EventView) -> bool:
        return (self.layer is None or e.layer == self.layer) and (self.task_id is None or e.task_id == self.task_id)

    def reset(self, events: Sequence[EventView]) -> None:
        """The journal's tail read afresh (the console opened, or the ledger file was replaced)."""
        self.events.clear()
        self.extend(events)
        self._refilter()

    def extend(self, events: Sequence[EventView]) -> tuple[int, bool]:
        """Append new events. Returns (rows added, whether old rows were dropped)."""
        if len(self._words) > 5000:
            self._words = {}
        words = self._words
        lean = [log_event(e, words) for e in events]
        dropped = len(self.events) + len(lean) > self.capacity
        self.events.extend(lean)
        if dropped:
            self._refilter()
            return 0, True
        added = [e for e in lean if self._keep(e)]
        self.rows.extend(added)
        return len(added), False

    def set_filter(self, *, layer: str | None | Keep = Keep.KEEP, task_id: str | None | Keep = Keep.KEEP) -> None:
        if not isinstance(layer, Keep):
            self.layer = layer
        if not isinstance(task_id, Keep):
            self.task_id = task_id
        self._refilter()

    def _refilter(self) -> None:
        self.rows = [e for e in self.events if self._keep(e)]

    def row_count(self) -> int:
        return len(self.rows)

    def row_cells(self, pos: int) -> list[Cell]:
        if not 0 <= pos < len(self.rows):
            return []
        e = self.rows[pos]
        return [
            (str(e.id), "dim"),
            (clock_time(e.at), "dim"),
            (safe_line(e.layer), "key" if e.layer == "decision" else ("warn" if e.layer == "operator" else "")),
            (safe_line(e.task_id or MARKS["dash"]), ""),
            (safe_line(e.node or MARKS["dash"]), ""),
            (safe_line(e.kind), ""),
            (safe_line(e.summary), ""),
        ]

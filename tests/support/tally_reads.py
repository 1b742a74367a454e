"""How many node rows the task tally (``store.reading.tally``) read, counted on the test side from
the statements it sends — the tally itself keeps no counters.

``TallyReads(monkeypatch)`` replaces that module's ``sql`` with a pass-through whose ``fetch_all``
counts the tally's two node reads: a task read whole (``whole_reads``: one per statement) and nodes
read by key (``node_reads``: one per row found). It counts every tally in the process (the console
has one, in its feed worker)."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Sequence

import pytest

from store.reading import tally as tally_module

NODES = "SELECT id, status, attempt FROM node WHERE task_id = ?"


class _CountingSql:
    def __init__(self, real: ModuleType, reads: TallyReads) -> None:
        self._real = real
        self._reads = reads

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def fetch_all(self, db: Any, query: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        rows = self._real.fetch_all(db, query, params)
        if query == NODES:
            self._reads.whole_reads += 1
        elif query.startswith(NODES + " AND key IN"):
            self._reads.node_reads += len(rows)
        return rows


class TallyReads:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.whole_reads = 0  # tasks read whole (no recount per change)
        self.node_reads = 0  # nodes read by key
        monkeypatch.setattr(tally_module, "sql", _CountingSql(tally_module.sql, self))

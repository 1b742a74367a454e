"""Stall signals and budget gates. (Issue 4 replaces this first cut.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Signal:
    kind: str
    task_id: str
    node: str | None
    since: float | None
    severity: str  # info | warn | alarm
    evidence: str


def signals_for_graph(ledger: Any, graph: Any) -> list[Signal]:
    return []

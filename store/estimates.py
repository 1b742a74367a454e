"""P80 remaining-time estimates with confidence. (Issue 4 replaces this first cut.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


def confidence(samples: int) -> str:
    if samples <= 0:
        return "none"
    if samples < 5:
        return "low"
    if samples < 20:
        return "medium"
    return "high"


@dataclass(frozen=True)
class Estimate:
    p50_s: float | None
    p80_s: float | None
    samples: int
    confidence: str

    def to_json(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 1)  # noqa: E731
        return {"p50_s": r(self.p50_s), "p80_s": r(self.p80_s), "samples": self.samples, "confidence": self.confidence}


NO_ESTIMATE = Estimate(None, None, 0, "none")


@dataclass(frozen=True)
class GraphEstimate:
    task: Estimate
    nodes: Mapping[str, Estimate] = field(default_factory=dict)


def estimate_graph(ledger: Any, graph: Any) -> GraphEstimate:
    return GraphEstimate(NO_ESTIMATE, {})

"""Cost density: tokens spent per unit of progress, and what the ledger does about it (whether a
step should continue). Pure: the ledger (``store/ledger/cost.py``) feeds it a node's figures.

The seed's rule, for a node while it runs::

    progress ≤ 0                     → hold                 (dispatch nothing new meanwhile)
    tokens / progress > 3 × limit    → abort                (stop the node now, keep what it made)
    tokens / progress > limit        → finish_no_successor  (let it finish; do not dispatch its successors)
    otherwise                        → continue

On Warden's task graph (docs/agents.md "Cost density"):

* the **limit** is the task's ``Budget(density_limit=)``: tokens per unit of progress a node may
  spend. Without one the ledger acts on nothing (the ``cost_density`` signal still warns against
  the task's own norm): a limit inferred from the norm would stop nodes that are legitimately
  expensive — a workload's heavy tail — so acting is the task author's decision;
* **progress** is the node's ``units_done``; only a node that measures progress (it reported
  ``units_done`` or declared ``units_total``) is judged;
* **hold** needs the node to have spent at least one unit's worth (the limit) with nothing to show:
  a node that has just started is not holding anything up.
"""

from __future__ import annotations

from dataclasses import dataclass

CONTINUE = "continue"
HOLD = "hold"
ABORT = "abort"
FINISH_NO_SUCCESSOR = "finish_no_successor"
VERDICTS = (CONTINUE, HOLD, FINISH_NO_SUCCESSOR, ABORT)

ABORT_FACTOR = 3.0  # over 3 × the limit: stop the node now


@dataclass(frozen=True)
class Limit:
    """Tokens per unit a node may spend (``Budget(density_limit=)``)."""

    tokens_per_unit: float

    def describe(self) -> str:
        return f"the task's limit of {self.tokens_per_unit:,.0f} tokens/unit"


def limit_for(density_limit: float | None) -> Limit | None:
    """The limit in force: the budget's, else None (nothing is judged)."""
    if density_limit is not None and density_limit > 0:
        return Limit(float(density_limit))
    return None


@dataclass(frozen=True)
class Judgement:
    verdict: str
    tokens: float
    units: float | None
    density: float | None  # tokens per unit (None when no progress)
    limit: Limit | None

    def evidence(self, key: str) -> str:
        """One line saying what the node spent against the limit and what the ledger does."""
        if self.limit is None:
            return f"{key}: no cost-density limit in force"
        spent = f"{key} spent {self.tokens:,.0f} tokens"
        if self.density is None:
            spent += " with no progress reported"
        else:
            spent += (f" for {self.units:g} unit{'' if self.units == 1 else 's'} ({self.density:,.0f} tokens/unit, "
                      f"{self.density / self.limit.tokens_per_unit:.1f}× the limit)")
        action = {
            HOLD: "hold: no other node of the task is dispatched until it reports progress or ends",
            ABORT: f"abort: over {ABORT_FACTOR:g}× the limit, the ledger stopped it (what it made is kept)",
            FINISH_NO_SUCCESSOR: "finish without successor: it may finish, its successors are parked",
            CONTINUE: "continue",
        }[self.verdict]
        return f"{spent}; limit: {self.limit.describe()}: {action}"


def judge(tokens: float, units_done: float | None, units_total: float | None, limit: Limit | None) -> Judgement:
    """The seed's verdict on a running node's figures (see the module docstring)."""
    tokens = float(tokens or 0)
    measured = units_done is not None or units_total is not None
    if limit is None or not measured:
        return Judgement(CONTINUE, tokens, units_done, None, limit)
    progress = float(units_done or 0)
    if progress <= 0:
        verdict = HOLD if tokens >= limit.tokens_per_unit else CONTINUE
        return Judgement(verdict, tokens, progress, None, limit)
    density = tokens / progress
    if density > ABORT_FACTOR * limit.tokens_per_unit:
        verdict = ABORT
    elif density > limit.tokens_per_unit:
        verdict = FINISH_NO_SUCCESSOR
    else:
        verdict = CONTINUE
    return Judgement(verdict, tokens, progress, density, limit)

"""Budget gates: one pure function shared by the claim path, signals and the console."""

from __future__ import annotations

SOFT_RATIO = 0.7
HARD_RATIO = 1.0
STOP_RATIO = 1.2

GATES = ("ok", "soft", "hard", "stop")


def usage_ratio(tokens_used: float, token_cap: float | None, wall_used_s: float, wall_cap_s: float | None) -> float:
    """The larger of tokens and wall-clock used over their caps (0 when there is no cap)."""
    ratios = [0.0]
    if token_cap:
        ratios.append(tokens_used / token_cap)
    if wall_cap_s:
        ratios.append(wall_used_s / wall_cap_s)
    return max(ratios)


def gate(ratio: float, soft_ratio: float = SOFT_RATIO) -> str:
    """``ok`` below the soft ratio, ``soft`` up to 100 %, ``hard`` from 100 %, ``stop`` from 120 %."""
    if ratio >= STOP_RATIO:
        return "stop"
    if ratio >= HARD_RATIO:
        return "hard"
    if ratio >= soft_ratio:
        return "soft"
    return "ok"


def admit(gate_name: str, always_admit: bool) -> str:
    """The governor: ``admit | admit_degraded | deny_hard``.

    ``ok`` admits; ``soft`` admits degraded (the agent should economise); ``hard`` and ``stop``
    admit only ``always_admit`` nodes — the closing whitelist (the report, the list of what is left
    undone, telling the user), admitted whatever the budget,
    so a task out of budget still delivers. Everything else is denied.

    The contract's "stop from 120 % (nothing claimable)" (docs/contracts.md "Estimates and signals") is held for every other node; for the
    closing steps the seed's whitelist wins (docs/operations.md "Budget gates and the closing
    whitelist").
    """
    if gate_name == "ok":
        return "admit"
    if gate_name == "soft":
        return "admit_degraded"
    if gate_name in ("hard", "stop") and always_admit:
        return "admit_degraded"
    return "deny_hard"


# ---------------------------------------------------------------------- the wall clock (waiting is not work)
STOPPED_STATUSES = ("parked", "completed", "failed", "aborted")


def wall_used(started_at: float | None, finished_at: float | None, paused_s: float, paused_since: float | None,
              now: float) -> float:
    """Wall-clock seconds of work: from the first claim to the end (or now), less the time the
    clock stood still (``paused_s`` so far, plus the current stop from ``paused_since``)."""
    if started_at is None:
        return 0.0
    end = finished_at if finished_at is not None else now
    stopped = float(paused_s or 0.0)
    if paused_since is not None:
        stopped += max(0.0, end - paused_since)
    return max(0.0, end - started_at - stopped)


def clock_stopped(status: str, running: bool, waiting: bool) -> bool:
    """Whether a started task's budget clock stands still: while it is parked or finished, and
    while it is active with nothing running and something waiting (a node blocked on a human or
    parked on its own). An idle task with nothing waiting — ready work nobody claims — keeps
    its clock running: that is not waiting on the outside world."""
    if status in STOPPED_STATUSES:
        return True
    return status == "active" and waiting and not running


# ---------------------------------------------------------------------- admission by estimate
TOKEN_MARGIN = 1.2  # a node is admitted when est_tokens × 1.2 fits in the tokens left …
WALL_MARGIN = 1.5  # … and est_wall_s × 1.5 in the wall-clock seconds left


def left(tokens_used: float, token_cap: float | None, wall_used_s: float,
         wall_cap_s: float | None) -> tuple[float | None, float | None]:
    """(tokens left, wall-clock seconds left) under the caps; None where there is no cap."""
    return (None if not token_cap else token_cap - tokens_used,
            None if not wall_cap_s else wall_cap_s - wall_used_s)


def shortfall(est_tokens: float | None, est_wall_s: float | None, tokens_left: float | None,
              wall_left: float | None) -> dict[str, float]:
    """What a node's estimate (with its margin) lacks in what is left: ``{"tokens": n}`` and/or
    ``{"wall_s": s}``; empty when it fits (or there is no cap, or no estimate)."""
    out: dict[str, float] = {}
    if tokens_left is not None and est_tokens:
        need = est_tokens * TOKEN_MARGIN
        if need > tokens_left:
            out["tokens"] = need - max(tokens_left, 0.0)
    if wall_left is not None and est_wall_s:
        need = est_wall_s * WALL_MARGIN
        if need > wall_left:
            out["wall_s"] = need - max(wall_left, 0.0)
    return out

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

    ``ok`` admits; ``soft`` admits degraded (the agent should economise); ``hard`` admits only
    ``always_admit`` nodes (the closing steps); ``stop`` admits nothing (DESIGN.md: "nothing
    claimable"), not even the closing steps.
    """
    if gate_name == "ok":
        return "admit"
    if gate_name == "soft":
        return "admit_degraded"
    if gate_name == "hard" and always_admit:
        return "admit_degraded"
    return "deny_hard"

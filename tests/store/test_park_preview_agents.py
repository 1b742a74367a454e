"""A park's preview says what will happen to a running node, by the integration that drives it.

Without ``--now`` a running node keeps its lease; what that means depends on the agent: `warden
run` stops the command's processes at once, `warden mcp` answers its next call ``parked``, a
Claude Code or Codex hook holds the next tool call. Only an agent of the ledger's API may finish
its current step (and only there is ``--now`` the way to stop it sooner). Both backends.
"""

from __future__ import annotations

import pytest

WORDS = {
    "run": ("warden run stops the command's processes at once", False),
    "mcp": ("the agent's next warden mcp call answers parked", True),
    "claude": ("Claude Code's next tool call waits until the task is resumed", True),
    "codex": ("Codex's next tool call waits until the task is resumed", True),
    None: ("keep their leases and may finish their current step", True),
}


@pytest.mark.parametrize("origin", list(WORDS), ids=[str(o) for o in WORDS])
def test_the_park_preview_words_a_running_node_by_its_agent(ledger, origin):
    ledger.create_task("t", title="busy", origin=origin)
    ledger.add_node("t", "step", kind="tool")
    assert ledger.claim("t", "w", kinds=["tool"]) is not None
    plan = ledger.plan_park("t", reason="hold")
    [warning] = [w for w in plan.warnings if "running node" in w]
    words, use_now = WORDS[origin]
    assert warning.startswith("1 running node(s) ") and words in warning and warning.count(": step") == 1
    assert ("use --now" in warning) is use_now
    if origin != "run":
        assert "at once" not in warning
    assert ledger.plan_park("t", reason="hold", now=True).changes == {"step": ("running", "parked")}

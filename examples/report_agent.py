"""A complete Warden agent: a three-step report, safe to kill and restart at any line.

Run it twice, or from several terminals at once; then `warden status` and `warden console`.
"""

import sys

from store import Budget, Ledger, NodeSpec
from store.worker import StepResult, work_once

ledger = Ledger.open(sys.argv[1] if len(sys.argv) > 1 else "ledger.db")
ledger.create_task("report-001", title="Pilot report", inputs={"topic": "pilot"},
                   constraints=["cite every figure"], budget=Budget(tokens=50_000, wall_s=3600),
                   exist_ok=True)
ledger.add_nodes("report-001", [
    NodeSpec("draft", kind="llm_call", est_wall_s=60),
    NodeSpec("verify", kind="llm_call", deps=("draft",)),
    NodeSpec("finalize", kind="tool", deps=("verify",), always_admit=True),
])


def step(inputs, keeper):
    """One step of whichever node was claimed; `inputs` is a copy (deps' outputs, rejections...)."""
    node = keeper.claim.node_key
    keeper.progress(units_done=1, units_total=2, tokens=300, observation=f"{node}: outline written")
    if node == "finalize":  # the closing step writes the artifact, stored with its sha256
        body = f"# Report on {inputs['task']['topic']}\n".encode()
        return StepResult(output={"bytes": len(body)}, artifact=("report.md", body), tokens=100)
    return StepResult(output={"node": node, "after": sorted(inputs["deps"])}, tokens=500)


while work_once(ledger, "report-001", worker="example", step=step, lease_s=30) is not None:
    pass
print(ledger.task("report-001").status)

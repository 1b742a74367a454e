"""An agent that keeps writing to a ledger until told to stop — the "agent writing" a console must
stay usable under (tests/console/test_keys_pty.py).

    python tests/support/busy_agent.py LEDGER TASK STOPFILE

Creates TASK, then until STOPFILE exists: adds a node, claims it, heartbeats it three times and
commits it (six journal events a round), paced by a short pause between rounds (pacing only: the
test synchronises on the ledger and the screen). Prints ``ready`` once the task exists.
"""

from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def command(ledger: str, task: str, stop: str) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), ledger, task, stop]


def main(argv: list[str]) -> None:
    sys.path.insert(0, ROOT)
    from store import Ledger

    target, task, stop = argv
    ledger = Ledger.open(target, create=False)
    ledger.create_task(task, title="an agent writing")
    print("ready", flush=True)
    n = 0
    while not os.path.exists(stop):
        n += 1
        ledger.add_node(task, f"step-{n}", kind="tool")
        claim = ledger.claim(task, worker="busy", lease_s=600)
        assert claim is not None
        for part in range(3):
            ledger.heartbeat(claim, units_done=part + 1, units_total=3, observation=f"step {n}: part {part + 1}")
        ledger.commit(claim, output={"n": n})
        time.sleep(0.02)
    ledger.close()


if __name__ == "__main__":
    main(sys.argv[1:])

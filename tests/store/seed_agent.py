"""A real agent process for the seed-rule tests (run as a script, not collected).

Time comes from a file clock (``--clock FILE``, the float the test wrote), shared by every process.
Each command prints JSON lines.

  die-after-intend LEDGER TASK WORKER KEY EFFECT    claim KEY, log EFFECT as intended (the external
                                                    call "made"), heartbeat once, then die (exit 9)
                                                    before confirming it
  die-holding LEDGER TASK WORKER KEY                claim KEY, heartbeat once, die (exit 9)
  claim LEDGER TASK WORKER                          (after a line on stdin) claim once; if it got a
                                                    node, intend EFFECT (--effect) and say what it saw
  check LEDGER                                      (after a line on stdin) Ledger.check_expired once
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import LeaseLost, Ledger  # noqa: E402
from tests.support.fileclock import FileClock  # noqa: E402
from tests.support.jsonlines import say  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("command")
    ap.add_argument("ledger")
    ap.add_argument("rest", nargs="*")
    ap.add_argument("--clock", required=True)
    ap.add_argument("--lease", type=float, default=30.0)
    ap.add_argument("--effect", default=None)
    a = ap.parse_args()
    ledger = Ledger.open(a.ledger, clock=FileClock(a.clock), create=False)
    if a.command in ("die-after-intend", "die-holding"):
        task, worker, key = a.rest[:3]
        claim = ledger.claim(task, worker, lease_s=a.lease, key=key)
        if claim is None:
            say(event="nothing")
            return 0
        if a.command == "die-after-intend":
            ledger.intend_effect(claim, a.rest[3], payload={"amount": 42})
            say(event="intended", node=key, attempt=claim.attempt)
        ledger.heartbeat(claim, observation="working on it")
        say(event="dying", node=key)
        os._exit(9)  # the worker dies: no confirm, no commit, no fail
    if a.command == "claim":
        task, worker = a.rest[:2]
        say(event="ready")
        sys.stdin.readline()
        claim = ledger.claim(task, worker, lease_s=a.lease)
        if claim is None:
            say(event="nothing")
            return 0
        seen = None
        if a.effect:
            try:
                seen = ledger.intend_effect(claim, a.effect).status
            except LeaseLost as e:
                seen = f"lost: {e}"
        say(event="claimed", node=claim.node_key, attempt=claim.attempt, effect=seen)
        return 0
    if a.command == "check":
        say(event="ready")
        sys.stdin.readline()
        say(event="checked", judged=ledger.check_expired(actor=f"check-{os.getpid()}"))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())

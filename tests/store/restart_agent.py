"""An agent loop for the restart tests (run as a script, not collected).

    python restart_agent.py URL TASK WORKER MARKERS --hold s003,s011

Runs ``work_once`` (with its background ``LeaseKeeper``) until nothing is left to claim. Each step
reports two observations with one token each (heartbeats, sent at once) and commits its output
with ten tokens, so the task's ``tokens_used`` tells whether any write was doubled.

For the steps named in ``--hold`` the agent makes its commit wait *after* the commit record is
flushed (``SET LOCAL synchronous_commit = on`` on a server whose standby never comes; see
tests/support/pgcluster.py) and drops a marker file ``MARKERS/hold-<key>`` holding its backend's
pid: the test then restarts the server or terminates this backend while the COMMIT's answer is
outstanding.

Prints one JSON line per outcome and ``{"done": n}`` at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import Ledger
from store.storage import checkpoints  # noqa: E402
from store.worker import StepResult, work_once  # noqa: E402
from tests.support.jsonlines import say  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("task")
    ap.add_argument("worker")
    ap.add_argument("markers")
    ap.add_argument("--hold", default="")
    ap.add_argument("--reconnect-s", type=float, default=180.0)
    args = ap.parse_args()
    hold = {k for k in args.hold.split(",") if k}
    ledger = Ledger.open(args.url, create=False, reconnect_s=args.reconnect_s)
    current: dict[str, str] = {}

    def before_commit(what: str) -> None:
        # Every attempt of a held step's commit that gets this far is held, not only the first:
        # should a plain restart cut the first before its COMMIT waited (nothing committed), the
        # re-run holds again and says so with its new backend pid. Once a held COMMIT has waited,
        # its record is flushed: the re-run after the restart finds the step committed (its body
        # refuses the stale lease, run_write reads the record) and never gets here again.
        # Before the COMMIT is sent the agent waits for the test's go (a file): from the moment
        # the test has seen the marker it restarts nothing else, so no plain restart can land on a
        # COMMIT that is already waiting for its answer (one the test would never see held).
        key = current.get("key")
        if what == "commit" and key in hold:
            ledger.db.execute_sql("SET LOCAL synchronous_commit = on")
            pid = ledger.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]
            marker = os.path.join(args.markers, f"hold-{key}")
            with open(marker + ".tmp", "w") as f:
                f.write(str(pid))
            os.replace(marker + ".tmp", marker)  # the test never reads a half-written pid
            go = os.path.join(args.markers, f"go-{key}")
            deadline = time.monotonic() + 300  # a safety net: the test says go once it has seen the marker
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.01)  # polling a file the test writes

    # store/storage/checkpoints.py: at "tx.before_commit" run_write passes ("", the write's name). This
    # process is the test's own: the function is replaced for good.
    checkpoints.reach = lambda point, _task, what: before_commit(what) if point == "tx.before_commit" else None

    def step(inputs: dict, keeper) -> StepResult:
        key = keeper.claim.node_key
        current["key"] = key
        for i in range(2):
            if not keeper.progress(tokens=1, observation=f"{key}: part {i}", now=True):
                raise RuntimeError("lease lost")
        return StepResult(output={"key": key, "deps": sorted(inputs["deps"])}, tokens=10)

    done = 0
    while True:
        out = work_once(ledger, args.task, args.worker, step, lease_s=120)
        if out is None:
            break
        say(node=out.claim.node_key, status=out.status, attempt=out.claim.attempt, detail=out.detail)
        if out.status == "committed":
            done += 1
    say(done=done)
    ledger.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A claimer process for the quota race tests: opens the ledger, says ``ready``, waits for a line
on stdin, then claims (``hold``: once, keeping the lease; ``drain``: claim and commit until
nothing is handed out) and prints one JSON line per claim."""

from __future__ import annotations

import json
import sys

from store import Ledger


def main() -> None:
    db, task, worker, mode = sys.argv[1:5]
    led = Ledger.open(db)
    led.task(task)
    print(json.dumps({"event": "ready"}), flush=True)
    sys.stdin.readline()
    while True:
        c = led.claim(task, worker, lease_s=3600)
        if c is None:
            break
        print(json.dumps({"event": "claimed", "node": c.node_key}), flush=True)
        if mode == "hold":
            break
        led.commit(c, output={})
    led.close()


if __name__ == "__main__":
    main()

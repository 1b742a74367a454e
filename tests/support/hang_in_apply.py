"""``warden`` as shipped (the CLI or the console), stopped inside an operator action's write
transaction once every row of it is written — its operator event is the last — until it is killed:
``python -m tests.support.hang_in_apply MARKER ACTION WARDEN-ARGS…``. The marker file appears once
it is inside (the test waits on it, then kills the process)."""

from __future__ import annotations

import sys
import threading

from store.storage.core import LedgerCore


def main(argv: list[str]) -> int:
    marker, action, rest = argv[0], argv[1], argv[2:]
    journal = LedgerCore.journal

    def journal_then_hang(self, task_id, node, actor, summary, payload, **kw):  # type: ignore[no-untyped-def]
        out = journal(self, task_id, node, actor, summary, payload, **kw)
        if payload.event_kind() == f"operator.{action}":
            with open(marker, "w") as f:
                f.write("inside")
            threading.Event().wait()  # until SIGKILL
        return out

    LedgerCore.journal = journal_then_hang  # type: ignore[method-assign]
    from console.cli import main as warden

    return warden(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

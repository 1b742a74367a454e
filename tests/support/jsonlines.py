"""How the agent scripts of the tests (tests/store/*_agent.py, agent_proc.py) report: one JSON
object a line on stdout, flushed at once (the test synchronises on these lines), whole lines even
when several threads of the script say something at the same moment."""

from __future__ import annotations

import json
import sys
import threading

_SAY = threading.Lock()


def say(**kw: object) -> None:
    with _SAY:
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()

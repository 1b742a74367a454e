"""``warden console`` on a terminal that cannot do full screen: lines instead (docs/console.md,
"Sizes and terminals").

``TERM=dumb`` (an Emacs shell buffer, a serial console, a pipe-like terminal) cannot move a cursor
or clear a screen, so the full-screen console would be garbage there. Instead:

1. one line saying what this is, then ``warden status``'s table of the tasks;
2. every new journal event but heartbeats as one line (``warden events --follow``'s), until Ctrl+C;
3. each handoff an agent opens as an ``ALERT`` line, with the bell (unless ``--no-bell``) and the
   ``--on-alert`` hook — the same alert, JSON and debounce as the console (``console.alerts``).
   Signals turning alarm need the console's analysis and are not alerted here.

Read-only: nothing here writes the ledger; the actions are the ``warden`` subcommands.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from typing import Sequence

from store.reading import cli_json as report
from store.reading.feed import Feed
from store.storage.events import NodeHeartbeat

from ..alerts import Alert, AlertWatch, run_hook
from ..text import safe_line
from .common import APPLICATION_NAME, connect_timeout, ledger_target, open_ledger, out_console
from .inspection import event_line, print_status

NOTICE = ("warden: this terminal (TERM={term}) cannot show the full-screen console: the tasks, then new events "
          "(heartbeats left out: `warden events --follow` has them) and alerts as lines. Ctrl+C stops; a terminal "
          "such as xterm or tmux shows the console.")
QUIET_KINDS = (NodeHeartbeat.KIND,)  # one every few seconds per running node: they would bury the rest


def run_lines(args: argparse.Namespace, *, bell: bool, hook: Sequence[str] | None) -> int:
    c = out_console()
    print(NOTICE.format(term=safe_line(os.environ.get("TERM", "") or "unset")), flush=True)
    with open_ledger(args, read_only=True) as ledger:
        cursor = ledger.last_event_id()
        status = report.status_json(ledger)
    print_status(c, status, ledger.display)
    watch = AlertWatch(last_event=cursor)
    feed = Feed(ledger_target(args), read_only=True, application_name=APPLICATION_NAME,
                connect_timeout_s=connect_timeout(args))

    def drain(cursor: int) -> int:
        while True:
            delta = feed.since(cursor)
            for e in delta.events:
                if e.kind not in QUIET_KINDS:
                    c.print(event_line(e), soft_wrap=True)
            for a in watch.events(delta.events, time.time()):
                sys.stdout.write(("\a" if bell else "") + "ALERT " + a.line() + "\n")
                sys.stdout.flush()
                if hook:
                    threading.Thread(target=_hook, args=(hook, a), daemon=True).start()
            cursor = delta.cursor
            if not delta.more:
                return cursor

    async def follow(cursor: int) -> None:
        async for _ in feed.wakeups():  # a wake-up is a hint; the cursor is the truth
            cursor = drain(cursor)

    try:
        asyncio.run(follow(drain(cursor)))
    finally:
        feed.close()
    return 0


def _hook(argv: Sequence[str], alert: Alert) -> None:
    problem = run_hook(argv, alert)
    if problem:
        print(f"warden: {safe_line(problem, limit=300)}", file=sys.stderr, flush=True)


__all__ = ["NOTICE", "run_lines"]

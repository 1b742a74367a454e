"""A worker process for the model-based test (tests/store/test_ledger_model.py); run as a script.

It reads one JSON command per line on stdin and answers each with one JSON line on stdout. It holds
several ``Ledger``s of one file at once, each served by a thread of its own (so every Ledger lives
in a different thread, as in a console or a threaded agent); the ``Claim`` objects stay here and
are named by a number.

Commands: ``open`` (path, clock, slots: a read-only flag per Ledger), ``claim``, ``heartbeat``,
``commit``, ``fail`` (slot, claim…), ``park``/``resume`` (slot, task), ``reopen`` (slot), ``close``;
and ``check`` (path, task): open a fresh Ledger, read everything the test checks, close it — the
checker process holds no other connection, so its close is another process's "am I the last?".
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import LeaseLost, Ledger, Refused  # noqa: E402
from tests.support.fileclock import FileClock  # noqa: E402


class Worker:
    def __init__(self) -> None:
        self.slots: list[Ledger | None] = []
        self.read_only: list[bool] = []
        self.threads: list[ThreadPoolExecutor] = []
        self.claims: dict[int, Any] = {}
        self.path = ""
        self.clock: FileClock | None = None

    def on(self, slot: int, fn: Callable[[Ledger], Any]) -> Any:
        """Run ``fn`` with slot's Ledger, in slot's own thread."""
        return self.threads[slot].submit(lambda: fn(self.slots[slot])).result()

    def _open(self, i: int) -> Ledger:
        return Ledger.open(self.path, clock=self.clock, create=False, read_only=self.read_only[i])

    def handle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        op = cmd["op"]
        if op == "open":
            self.path, self.clock, self.read_only = cmd["path"], FileClock(cmd["clock"]), list(cmd["slots"])
            while len(self.threads) < len(self.read_only):
                self.threads.append(ThreadPoolExecutor(max_workers=1))
            self.slots = [None] * len(self.read_only)
            for i in range(len(self.read_only)):
                self.slots[i] = self.threads[i].submit(self._open, i).result()
            self.claims.clear()
            return {"ok": True}
        if op == "close":
            for i, led in enumerate(self.slots):
                if led is not None:
                    self.threads[i].submit(led.close).result()
            self.slots = []
            return {"ok": True}
        if op == "reopen":
            i = cmd["slot"]

            def again(led: Ledger) -> None:
                led.close()
                self.slots[i] = self._open(i)

            self.on(i, again)
            return {"ok": True}
        if op == "claim":
            c = self.on(cmd["slot"], lambda led: led.claim(cmd["task"], cmd["worker"], lease_s=cmd["lease"]))
            if c is None:
                return {"claim": None}
            n = len(self.claims) + 1
            self.claims[n] = c
            return {"claim": n, "node": c.node_key, "attempt": c.attempt, "token": c.token}
        if op in ("heartbeat", "commit", "fail"):
            c = self.claims[cmd["claim"]]
            calls = {
                "heartbeat": lambda led: led.heartbeat(c, units_done=1, units_total=2),
                "commit": lambda led: led.commit(c, output=cmd["output"]),
                "fail": lambda led: led.fail(c, error="model says fail", retryable=True, retry_after_s=0),
            }
            try:
                self.on(cmd["slot"], calls[op])
            except LeaseLost as e:
                return {"lost": str(e)}
            return {"ok": True}
        if op in ("park", "resume"):
            def act(led: Ledger) -> int | None:
                plan = (led.plan_park(cmd["task"], reason="model park", now=True) if op == "park"
                        else led.plan_resume(cmd["task"]))
                return led.apply(plan, operator="model").action_id
            try:
                return {"ok": True, "action_id": self.on(cmd["slot"], act)}
            except Refused as e:
                return {"refused": str(e)}
        if op == "check":
            led = Ledger.open(cmd["path"], create=False, clock=FileClock(cmd["clock"]))
            try:
                events = led.events(0, limit=1_000_000)
                return {
                    "nodes": {n.key: {"status": n.status, "output": n.output, "attempt": n.attempt,
                                      "owner": n.lease_owner} for n in led.graph(cmd["task"]).nodes},
                    "task": led.task(cmd["task"]).status,
                    "ids": [e.id for e in events],
                    "kinds": [e.kind for e in events],
                }
            finally:
                led.close()
        return {"error": f"unknown op {op}"}


def main() -> int:
    w = Worker()
    for line in sys.stdin:
        try:
            out = w.handle(json.loads(line))
        except Exception as e:  # reported to the test, which fails on it
            out = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

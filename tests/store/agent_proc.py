"""A real agent process for the multi-process tests (run as a script, not collected).

Time comes from a *file clock*: the float in ``--clock FILE`` (written by the test), so several
processes share one injected clock and nothing depends on how fast the machine is.

Commands (each prints one JSON line per thing it did):
  step TASK WORKER [--crash-before-commit] [--lease S]   claim one node, run it, commit it
  drain TASK WORKER [--gate]                             claim and commit until nothing is ready
                                                         (--gate: say "ready", start on a line of stdin)
  hang-in-commit TASK WORKER --marker FILE               claim, then block inside commit's transaction
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import LeaseLost, Ledger, NodeSpec  # noqa: E402


class FileClock:
    def __init__(self, path: str | None) -> None:
        self.path = path

    def __call__(self) -> float:
        if self.path is None:
            import time

            return time.time()
        with open(self.path) as f:
            return float(f.read().strip())


def say(**kw) -> None:
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def run_report_step(ledger: Ledger, claim, crash: bool) -> None:
    """The report workflow: draft → verify (first finds a section missing) → finalize."""
    inputs = claim.inputs
    kind = claim.kind
    if kind == "draft":
        sections = ["Summary", "Findings"]
        if inputs["rejections"] or any(d["output"].get("missing") for d in inputs["deps"].values()
                                       if isinstance(d.get("output"), dict)):
            sections.append("Risks")
        result = dict(output={"sections": sections}, tokens=500)
    elif kind == "verify":
        draft = next(iter(inputs["deps"].values()))["output"]
        missing = [s for s in inputs["task"]["required"] if s not in draft["sections"]]
        if missing:
            n = sum(1 for k in inputs["deps"]) + claim.attempt  # stable enough for keys below
            suffix = claim.node_key.split(".")[-1] if "." in claim.node_key else "0"
            r = int(suffix[1:]) + 1 if suffix.startswith("r") else 1
            result = dict(
                output={"ok": False, "missing": missing}, tokens=200, repair=True,
                next_nodes=[NodeSpec(f"draft.r{r}", kind="draft", deps=(claim.node_key,)),
                            NodeSpec(f"verify.r{r}", kind="verify", deps=(f"draft.r{r}",))],
            )
            del n
        else:
            result = dict(output={"ok": True}, tokens=200,
                          next_nodes=[NodeSpec("finalize", kind="finalize", deps=(claim.node_key,), always_admit=True)])
    elif kind == "finalize":
        draft_sections = inputs["deps"]
        body = ("# Pilot report\n\n" + json.dumps(draft_sections, sort_keys=True) + "\n").encode()
        result = dict(output={"bytes": len(body)}, tokens=100, artifact=("report.md", body),
                      output_ref="run:report-001/artifact/report.md")
    else:
        result = dict(output={"kind": kind})
    if crash:
        say(event="crashing", node=claim.node_key, attempt=claim.attempt)
        os._exit(3)  # computed, but dies before committing
    ledger.commit(claim, **result)
    say(event="committed", node=claim.node_key, attempt=claim.attempt)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("command")
    ap.add_argument("ledger")
    ap.add_argument("task")
    ap.add_argument("worker")
    ap.add_argument("--clock")
    ap.add_argument("--lease", type=float, default=30.0)
    ap.add_argument("--crash-before-commit", action="store_true")
    ap.add_argument("--marker")
    ap.add_argument("--gate", action="store_true")
    a = ap.parse_args()
    ledger = Ledger.open(a.ledger, clock=FileClock(a.clock), create=False)
    if a.command == "step":
        claim = ledger.claim(a.task, a.worker, lease_s=a.lease)
        if claim is None:
            say(event="nothing")
            return 0
        say(event="claimed", node=claim.node_key, attempt=claim.attempt)
        try:
            run_report_step(ledger, claim, a.crash_before_commit)
        except LeaseLost as e:
            say(event="lease_lost", node=claim.node_key, why=str(e))
        return 0
    if a.command == "drain":
        if a.gate:  # every drainer starts together, whichever finished starting Python first
            ledger.task(a.task)
            say(event="ready")
            sys.stdin.readline()
        while True:
            claim = ledger.claim(a.task, a.worker, lease_s=a.lease)
            if claim is None:
                if ledger.task(a.task).status != "active":
                    return 0
                # Dependencies still running elsewhere: look again (bounded by the test's timeout).
                continue
            say(event="claimed", node=claim.node_key, attempt=claim.attempt)
            ledger.heartbeat(claim, units_done=1, units_total=1, observation=f"{claim.node_key} done")
            ledger.commit(claim, output={"by": a.worker})
            say(event="committed", node=claim.node_key)
    if a.command == "hang-in-commit":
        claim = ledger.claim(a.task, a.worker, lease_s=a.lease)
        original = Ledger.maybe_complete_task

        def hang(self, task_id, now):  # runs inside commit's write transaction, after every update
            original(self, task_id, now)
            with open(a.marker, "w") as f:
                f.write("inside")
            threading.Event().wait()  # until SIGKILL

        Ledger.maybe_complete_task = hang
        ledger.commit(claim, output={"x": 1}, tokens=77, artifact=("a.bin", b"half"))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""A real agent process for the multi-process tests (run as a script, not collected).

Time comes from a *file clock*: the float in ``--clock FILE`` (written by the test), so several
processes share one injected clock and nothing depends on how fast the machine is.

Commands (each prints one JSON line per thing it did):
  step TASK WORKER [--crash-before-commit] [--lease S]   claim one node, run it, commit it
  drain TASK WORKER [--gate]                             claim and commit until nothing is ready
                                                         (--gate: say "ready", start on a line of stdin)
  hang-in-commit TASK WORKER --marker FILE               claim, then block inside commit's transaction
  fence TASK WORKER                                      claim; on a line of stdin heartbeat, then
                                                         commit (each through another Ledger)
  churn PREFIX WORKER [--rounds N]                       N times: open, create task PREFIX-WORKER-i,
                                                         close; open read-only, read, close; exit

``--ledgers K --style S``: the process holds K ``Ledger``s on the same file at once —
``threads`` (drain: one drainer thread per Ledger), ``reopen`` (claim, heartbeat and commit each
through the next Ledger; the claiming one closed and opened again after every commit),
``ro-beside`` (one writable drainer, the others read-only, reading before every claim and
re-opened after every commit) or ``mixed`` (a drainer thread, a drainer thread that re-opens, and a
read-only reader thread that re-opens in a loop). hang-in-commit and fence use the extra Ledgers
the same ways while they work.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import LeaseLost, Ledger, NodeSpec  # noqa: E402
from tests.support.fileclock import FileClock  # noqa: E402
from tests.support.jsonlines import say  # noqa: E402


class Ledgers:
    """K Ledgers of one file in this process; slot 0 writable, the others as the style says."""

    def __init__(self, path: str, k: int, style: str, clock: FileClock) -> None:
        self.path, self.style, self.clock = path, style, clock
        self.read_only = [style in ("ro-beside", "mixed") and i > 0 and (style != "mixed" or i == 2)
                          for i in range(k)]
        self.slots = [self._open(i) for i in range(k)]

    def _open(self, i: int) -> Ledger:
        return Ledger.open(self.path, clock=self.clock, create=False, read_only=self.read_only[i])

    def reopen(self, i: int) -> Ledger:
        self.slots[i].close()
        self.slots[i] = self._open(i)
        return self.slots[i]

    def only(self, i: int) -> "Ledgers":
        """Slot ``i`` alone, as a Ledgers of one (a thread's own Ledger)."""
        one = Ledgers.__new__(Ledgers)
        one.path, one.style, one.clock = self.path, "threads", self.clock
        one.read_only, one.slots = [self.read_only[i]], [self.slots[i]]
        return one

    def writable(self) -> list[int]:
        return [i for i, ro in enumerate(self.read_only) if not ro]

    def close(self) -> None:
        for led in self.slots:
            led.close()


class Gate:
    """``--pause-every N``: after every N commits of this process, its drainers (and readers) stop
    before their next claim; once all are idle — every Ledger open, none in a transaction — the
    process says ``paused`` and waits for a line on stdin. The test runs another process that
    opens, writes and closes meanwhile: the close that finds itself "last" when this process's locks
    were dropped (POSIX locks are per process: closing one Ledger must not release those its other
    Ledgers still hold). Without the flag it never closes."""

    def __init__(self, every: int) -> None:
        self.every, self.commits = every, 0
        self.open = True
        self.cond = threading.Condition()
        self.running = 0  # threads not finished
        self.waiting = 0  # threads stopped at the gate

    def before(self) -> None:
        with self.cond:
            if self.open:
                return
            self.waiting += 1
            self.cond.notify_all()
            while not self.open:
                self.cond.wait()
            self.waiting -= 1

    def committed(self) -> None:
        with self.cond:
            self.commits += 1
            if self.every and self.commits % self.every == 0:
                self.open = False

    def run(self, jobs: list) -> None:
        """Run ``jobs`` in threads; pause them as described; raise the first error."""
        errors: list[BaseException] = []

        def guarded(fn) -> None:
            try:
                fn()
            except BaseException as e:  # reported as the process's failure below
                errors.append(e)
            finally:
                with self.cond:
                    self.running -= 1
                    self.cond.notify_all()

        self.running = len(jobs)
        threads = [threading.Thread(target=guarded, args=(job,)) for job in jobs]
        for t in threads:
            t.start()
        with self.cond:
            while self.running:
                if not self.open and self.waiting == self.running:
                    say(event="paused")
                    sys.stdin.readline()
                    self.open = True
                    self.cond.notify_all()
                self.cond.wait()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]


GATE = Gate(0)


def drain_one(ledgers: Ledgers, task: str, worker: str, lease: float, *, reopen_slot: int | None = None,
              readers: tuple[int, ...] = (), done: threading.Event | None = None) -> None:
    """Claim and commit until the task is finished, through ``ledgers`` (see the module doc)."""
    n = 0
    try:
        while True:
            GATE.before()
            for r in readers:  # read-only Ledgers read beside the writer
                ledgers.slots[r].task(task)
            w = ledgers.writable()
            claimer = ledgers.slots[w[n % len(w)]] if ledgers.style == "reopen" else ledgers.slots[w[0]]
            if reopen_slot is not None:
                claimer = ledgers.slots[reopen_slot]
            claim = claimer.claim(task, worker, lease_s=lease)
            if claim is None:
                if claimer.task(task).status != "active":
                    return
                continue  # dependencies still running elsewhere: look again (bounded by the test's timeout)
            say(event="claimed", node=claim.node_key, worker=worker)
            beat = ledgers.slots[w[(n + 1) % len(w)]] if ledgers.style == "reopen" else claimer
            beat.heartbeat(claim, units_done=1, units_total=1, observation=f"{claim.node_key} done")
            last = ledgers.slots[w[(n + 2) % len(w)]] if ledgers.style == "reopen" else claimer
            last.commit(claim, output={"by": worker})
            say(event="committed", node=claim.node_key, worker=worker)
            GATE.committed()
            if ledgers.style == "reopen":
                ledgers.reopen(w[n % len(w)])
            elif reopen_slot is not None:
                ledgers.reopen(reopen_slot)
            for r in readers:
                ledgers.reopen(r)
            n += 1
    finally:
        if done is not None:
            done.set()


def drain(ledgers: Ledgers, task: str, worker: str, lease: float) -> None:
    style, k = ledgers.style, len(ledgers.slots)
    if k == 1 or style == "reopen":
        GATE.run([lambda: drain_one(ledgers, task, worker, lease)])
        return
    if style == "ro-beside":
        GATE.run([lambda: drain_one(ledgers, task, worker, lease, readers=tuple(range(1, k)))])
        return
    if style == "threads":  # each thread drains through a Ledger of its own
        GATE.run([lambda i=i: drain_one(ledgers.only(i), task, f"{worker}.{i}", lease) for i in range(k)])
        return
    # mixed: a drainer, a drainer that re-opens after each commit, a read-only reader that re-opens
    done = [threading.Event(), threading.Event()]

    def reader(i: int) -> None:
        while not all(d.is_set() for d in done):
            GATE.before()
            ledgers.slots[i].task(task)
            ledgers.reopen(i)

    jobs = [lambda: drain_one(ledgers, task, f"{worker}.0", lease, done=done[0]),
            lambda: drain_one(ledgers, task, f"{worker}.1", lease, reopen_slot=1, done=done[1])]
    if k > 2:
        jobs.append(lambda: reader(2))
    GATE.run(jobs)


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
    ap.add_argument("--ledgers", type=int, default=1)
    ap.add_argument("--style", default="threads", choices=["threads", "reopen", "ro-beside", "mixed"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pause-every", type=int, default=0)
    a = ap.parse_args()
    GATE.every = a.pause_every
    if a.command == "churn":  # another process that writes, reads and exits
        for i in range(a.rounds):
            with Ledger.open(a.ledger, clock=FileClock(a.clock), create=False) as led:
                led.create_task(f"{a.task}-{a.worker}-{i}")
            say(event="created", task=f"{a.task}-{a.worker}-{i}")
            with Ledger.open(a.ledger, clock=FileClock(a.clock), read_only=True) as ro:
                ro.tasks()
        return 0
    if a.command in ("drain", "fence") or (a.command == "hang-in-commit" and a.ledgers > 1):
        return multi(a)
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
    if a.command == "hang-in-commit":
        return hang_in_commit(ledger, a)
    return 2


def multi(a: argparse.Namespace) -> int:
    ledgers = Ledgers(a.ledger, a.ledgers, a.style, FileClock(a.clock))
    if a.command == "drain":
        if a.gate:  # every drainer starts together, whichever finished starting Python first
            ledgers.slots[0].task(a.task)
            say(event="ready")
            sys.stdin.readline()
        drain(ledgers, a.task, a.worker, a.lease)
        ledgers.close()
        return 0
    if a.command == "fence":
        w = ledgers.writable()
        claim = ledgers.slots[w[0]].claim(a.task, a.worker, lease_s=a.lease)
        if claim is None:
            say(event="nothing")
            return 0
        say(event="claimed", node=claim.node_key, token=claim.token)
        sys.stdin.readline()  # the test expires the lease and lets another process reclaim
        for i in range(len(ledgers.slots)):  # every Ledger re-opened or read meanwhile
            if i != w[0]:
                ledgers.reopen(i).task(a.task)
        for what, call in (("heartbeat", lambda led: led.heartbeat(claim, units_done=1)),
                           ("commit", lambda led: led.commit(claim, output={"late": a.worker}))):
            led = ledgers.slots[w[-1]]
            try:
                call(led)
                say(event=what, result="ok")
            except LeaseLost as e:
                say(event=what, result="lease_lost", why=str(e))
        ledgers.close()
        return 0
    # hang-in-commit with other Ledgers of the file open and busy beside the hanging commit
    stop = threading.Event()

    def busy(i: int) -> None:
        while not stop.is_set():
            ledgers.slots[i].task(a.task)
            ledgers.reopen(i)

    for i in range(1, len(ledgers.slots)):
        threading.Thread(target=busy, args=(i,), daemon=True).start()
    return hang_in_commit(ledgers.slots[0], a)


def hang_in_commit(ledger: Ledger, a: argparse.Namespace) -> int:
    """Claim, then commit with the process hanging inside the commit's write transaction, after
    every update (the marker file says so) until the test kills it."""
    claim = ledger.claim(a.task, a.worker, lease_s=a.lease)
    original = Ledger.maybe_complete_task

    def hang(self, task_id, now):
        original(self, task_id, now)
        with open(a.marker, "w") as f:
            f.write("inside")
        threading.Event().wait()  # until SIGKILL

    Ledger.maybe_complete_task = hang
    ledger.commit(claim, output={"x": 1}, tokens=77, artifact=("a.bin", b"half"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

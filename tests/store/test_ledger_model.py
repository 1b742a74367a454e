"""A model-based test of the ledger with several processes and several Ledgers each.

Hypothesis drives two worker processes (tests/store/model_worker.py), each holding three Ledgers
of one SQLite file — two writable and one read-only, each in a thread of its own — through claim,
heartbeat, commit, fail, lease expiry (a manual clock shared through a file), park/resume and
re-opening any Ledger. The test keeps a model of what must be true and, after every step, asks a
third process to open a fresh Ledger (it holds no other connection, so its close is another
process's "am I the last connection?" — a close that wrongly
believes so checkpoints and deletes a live -wal) and checks:

* every acknowledged write is visible: each acknowledged commit's node is succeeded with its
  output; the number of ``node.claimed`` / ``node.committed`` events is exactly the number of
  acknowledged claims and commits;
* no node has two live leases: a claim is granted only on a node nobody holds (pending, or
  running with an expired lease), and the ledger's lease owner is the model's live holder;
* every write through a lost lease is refused (``LeaseLost``) and every write through a live one
  goes through;
* the journal is contiguous (ids without holes).

Settings come from the hypothesis profiles in tests/conftest.py (``model-ci`` by default, a few
minutes of CI at most; ``WARDEN_MODEL_PROFILE=model-deep`` for a long run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, rule, run_state_machine_as_test

from store import Ledger

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_worker.py")
NODES = ("a", "b", "c")
LEASE = 30.0
SLOTS = [False, False, True]  # two writable Ledgers and a read-only one per worker process
WRITABLE = [i for i, ro in enumerate(SLOTS) if not ro]
T0 = 1_800_000_000.0

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform != "linux", reason="POSIX locks as on Linux")]


class Proc:
    """A worker process: one JSON command in, one JSON answer out."""

    def __init__(self) -> None:
        self.p = subprocess.Popen([sys.executable, WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)

    def __call__(self, **cmd: Any) -> dict[str, Any]:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(json.dumps(cmd) + "\n")
        line = self.p.stdout.readline()
        assert line, f"worker died (exit {self.p.poll()})"
        out = json.loads(line)
        assert "error" not in out, out["error"]
        return out

    def stop(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait(timeout=60)


@dataclass
class Held:
    """A claim the model knows of: which process holds it, its node, token and lease."""

    proc: int
    ref: int
    node: str
    token: str
    until: float
    worker: str
    lost: bool = False


@dataclass
class Model:
    now: float = T0
    task: str = "active"  # active | parked | completed
    status: dict[str, str] = field(default_factory=lambda: {n: "pending" for n in NODES})
    holder: dict[str, Held | None] = field(default_factory=lambda: {n: None for n in NODES})
    outputs: dict[str, Any] = field(default_factory=dict)
    claims: int = 0
    commits: int = 0

    def live(self, h: Held) -> bool:
        return not h.lost and self.holder[h.node] is h and h.until > self.now

    def claimable(self) -> set[str]:
        if self.task != "active":
            return set()
        out = set()
        for n in NODES:
            h = self.holder[n]
            if self.status[n] == "pending" or (self.status[n] == "running" and h is not None and h.until <= self.now):
                out.add(n)
        return out


PROCS: list[Proc] = []


class LedgerMachine(RuleBasedStateMachine):
    claims = Bundle("claims")

    @initialize()
    def start(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="warden-model-")
        self.path = os.path.join(self.dir, "ledger.db")
        self.clock_path = os.path.join(self.dir, "clock")
        self.m = Model()
        self._write_clock()
        with Ledger.open(self.path, clock=lambda: self.m.now) as led:
            led.create_task("t", max_claims=10_000)
            for n in NODES:
                led.add_node("t", n, kind="work")
        for p in PROCS[:2]:
            p(op="open", path=self.path, clock=self.clock_path, slots=SLOTS)

    def teardown(self) -> None:
        if hasattr(self, "path"):
            for p in PROCS[:2]:
                p(op="close")
            # A truly fresh process at the end, too: everything acknowledged is there.
            code = ("import sys, json; from store import Ledger\n"
                    "with Ledger.open(sys.argv[1], create=False) as l:\n"
                    "    print(json.dumps({n.key: n.status for n in l.graph('t').nodes}))")
            r = subprocess.run([sys.executable, "-c", code, self.path], capture_output=True, text=True, timeout=120,
                               env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(
                                   os.path.abspath(__file__))))})
            assert r.returncode == 0, r.stderr
            seen = json.loads(r.stdout)
            for n in self.m.outputs:
                assert seen[n] == "succeeded", (n, seen)

    def _write_clock(self) -> None:
        with open(self.clock_path + ".tmp", "w") as f:
            f.write(repr(self.m.now))
        os.replace(self.clock_path + ".tmp", self.clock_path)

    # ------------------------------------------------------------------ agent writes
    @rule(target=claims, proc=st.integers(0, 1), slot=st.sampled_from(WRITABLE))
    def claim(self, proc: int, slot: int):
        expected = self.m.claimable()
        out = PROCS[proc](op="claim", slot=slot, task="t", worker=f"w{proc}.{slot}", lease=LEASE)
        if out["claim"] is None:
            assert not expected, f"nothing claimed though {sorted(expected)} were claimable"
            return None
        node = out["node"]
        assert node in expected, f"{node} claimed while not claimable (held: {self.m.holder[node]})"
        old = self.m.holder[node]
        if old is not None:
            old.lost = True  # reclaimed after expiry
        h = Held(proc, out["claim"], node, out["token"], self.m.now + LEASE, f"w{proc}.{slot}")
        self.m.holder[node] = h
        self.m.status[node] = "running"
        self.m.claims += 1
        return h

    def _write(self, h: Held | None, op: str, slot: int, **extra: Any) -> bool:
        if h is None:
            return False
        live = self.m.live(h)
        out = PROCS[h.proc](op=op, slot=slot, claim=h.ref, **extra)
        if live:
            assert out.get("ok"), f"{op} through a live lease refused: {out}"
        else:
            assert "lost" in out, f"{op} through a lost lease went through"
            assert "lease lost" in out["lost"]
        return live

    @rule(h=claims, slot=st.sampled_from(WRITABLE))
    def heartbeat(self, h: Held | None, slot: int) -> None:
        if self._write(h, "heartbeat", slot):
            h.until = self.m.now + LEASE

    @rule(h=consumes(claims), slot=st.sampled_from(WRITABLE))
    def commit(self, h: Held | None, slot: int) -> None:
        if h is None:
            return
        output = {"by": f"w{h.proc}", "claim": h.ref}
        if self._write(h, "commit", slot, output=output):
            self.m.status[h.node] = "succeeded"
            self.m.holder[h.node] = None
            self.m.outputs[h.node] = output
            self.m.commits += 1
            h.lost = True
            if all(s == "succeeded" for s in self.m.status.values()):
                self.m.task = "completed"

    @rule(h=consumes(claims), slot=st.sampled_from(WRITABLE))
    def fail(self, h: Held | None, slot: int) -> None:
        if h is not None and self._write(h, "fail", slot):
            self.m.status[h.node] = "pending"  # retryable, retry_after_s=0: claimable again now
            self.m.holder[h.node] = None
            h.lost = True

    # ------------------------------------------------------------------ time, operators, re-opens
    @rule(seconds=st.sampled_from([1.0, 5.0, LEASE - 1, LEASE, LEASE + 1]))
    def time_passes(self, seconds: float) -> None:
        self.m.now += seconds
        self._write_clock()

    @rule(proc=st.integers(0, 1), slot=st.sampled_from(WRITABLE), park=st.booleans())
    def operator(self, proc: int, slot: int, park: bool) -> None:
        out = PROCS[proc](op="park" if park else "resume", slot=slot, task="t")
        ok = (self.m.task == "active") if park else (self.m.task == "parked")
        assert bool(out.get("ok")) is ok, (park, self.m.task, out)
        if not ok:
            return
        if park:  # --now: running leases revoked, those nodes parked
            self.m.task = "parked"
            for n in NODES:
                if self.m.status[n] == "running":
                    self.m.status[n] = "parked"
                    h = self.m.holder[n]
                    if h is not None:
                        h.lost = True
                    self.m.holder[n] = None
        else:
            self.m.task = "active"
            for n in NODES:
                if self.m.status[n] == "parked":
                    self.m.status[n] = "pending"

    @rule(proc=st.integers(0, 1), slot=st.integers(0, len(SLOTS) - 1))
    def reopen(self, proc: int, slot: int) -> None:
        PROCS[proc](op="reopen", slot=slot)

    # ------------------------------------------------------------------ after every step
    @invariant()
    def a_fresh_connection_sees_every_acknowledged_write(self) -> None:
        if not hasattr(self, "path"):
            return
        seen = PROCS[2](op="check", path=self.path, clock=self.clock_path, task="t")
        ids = seen["ids"]
        assert ids == list(range(ids[0], ids[0] + len(ids))), f"a hole in the journal: {ids}"
        assert seen["kinds"].count("node.claimed") == self.m.claims
        assert seen["kinds"].count("node.committed") == self.m.commits
        assert seen["task"] == self.m.task
        for n in NODES:
            got = seen["nodes"][n]
            assert got["status"] == self.m.status[n], (n, got, self.m.status[n])
            if n in self.m.outputs:
                assert got["output"] == self.m.outputs[n]
            h = self.m.holder[n]
            if self.m.status[n] == "running" and h is not None:
                assert got["owner"] == h.worker and got["attempt"] >= 1, (n, got, h)


@pytest.fixture(scope="module")
def procs():
    PROCS[:] = [Proc() for _ in range(3)]
    yield PROCS
    for p in PROCS:
        p.stop()
    PROCS.clear()


def test_several_processes_and_ledgers_lose_nothing_and_double_nothing(procs):
    profile = os.environ.get("WARDEN_MODEL_PROFILE", "model-ci")
    run_state_machine_as_test(LedgerMachine, settings=settings.get_profile(profile))

"""A fleet of agents: the ledger it works on and the agent processes (bench_fleet.py, and the
console's connection test).

``build(target, tasks, seed)`` — ``tasks`` tasks ``t0000``…, each a layered DAG of 20–200 nodes
(layers 2–12 wide, every node after the first layer depending on one or two nodes of the layer
before it), a token budget on every task, built through the public API (``create_task``,
``add_nodes``) as an operator's tooling would. ``head=(k, size)``: the first ``k`` tasks get
``size`` nodes each — the rows a console in creation order shows, kept busy for a whole run when
the others are small (``claim(None)`` takes the oldest tasks with work first).

``agent(...)`` — one agent process (``command(...)`` is its argv): opens the
ledger with ``Ledger.open`` (``application_name`` ``warden-agent``) and, until its deadline, claims
a node, heartbeats it with an observation and commits it (now and then a retryable failure or a
handoff to a human instead), one transaction each, paced so that the whole fleet writes about
``rate`` transactions a second. How it picks work (``--claim``):

* ``sticky`` (default): a task chosen at random among the active ones, kept for a few nodes (an
  agent that works one task at a time), another one when it has nothing ready, and after three
  misses in a row ``claim(None)`` (any task): the fleet spreads over every task, as many agents on
  many tasks do;
* ``any``: always ``claim(None)`` — the ledger picks (the oldest active task with a ready node).

A control file (``--control``) names a *busy* task and how many agents go to it: the benchmark
writes it when it opens that task's graph, and agents ``0…k-1`` then claim from that task first.

At the end each agent writes one JSON file: every write it made (what, task, node, event id where
the API returns one, the monotonic time it returned), every claim's duration, and for each node it
got, how long it waited for it: the time spent in ``claim`` calls from wanting work to holding a
claim (its own pacing between calls left out), plus 0.2 s for each time no task offered anything;
and each wait over ``LONG_WAIT_S`` with what it was made of (the number of claim calls, the longest
one, the polls, and the monotonic time it ended), so a long wait says whether one slow call or many
empty answers made it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script (an agent process): the repository's packages
    sys.path.insert(0, str(ROOT))

from tests.support.asks import ask  # noqa: E402

KINDS = ("llm_call", "tool", "test", "review")
HEARTBEATS = 3  # per node: claim, three heartbeats, commit = five writes
FAIL_EVERY = 80  # about one node in 80 fails (retryable), one in HANDOFF_EVERY asks a human
HANDOFF_EVERY = 400
LONG_WAIT_S = 0.5  # such waits are kept with what they were made of (the claim calls, the polls)


def task_ids(n: int) -> list[str]:
    return [f"t{i:04d}" for i in range(n)]


def layered_specs(rng: random.Random, size: int) -> list:
    """A layered DAG of ``size`` nodes as NodeSpecs."""
    from store import NodeSpec

    specs, previous, layer = [], [], []
    i = 0
    while i < size:
        width = min(size - i, rng.randint(2, 12))
        layer = []
        for _ in range(width):
            key = f"n{i:03d}"
            deps = tuple(sorted(set(rng.sample(previous, min(len(previous), rng.choice((1, 1, 2))))))) if previous else ()
            specs.append(NodeSpec(key=key, kind=rng.choice(KINDS), deps=deps, title=f"step {i}",
                                  est_tokens=rng.choice((None, 200, 500))))
            layer.append(key)
            i += 1
        previous = layer
    return specs


def build(target: str, tasks: int, seed: int, sizes: tuple[int, int] = (20, 200),
          head: tuple[int, int] = (0, 0)) -> dict:
    """The fleet's ledger; returns {task id: node count}. ``head``: (k, size), the first k tasks'
    size (at most 1,000 nodes: the keys are ``n000``…``n999``)."""
    from store import Budget, Ledger

    if head[0] and not 1 <= head[1] <= 1000:
        raise ValueError(f"a head task of {head[1]} nodes: 1 to 1,000")
    rng = random.Random(seed)
    out: dict[str, int] = {}
    with Ledger.open(target, create=True, application_name="warden-cli") as ledger:
        for i, tid in enumerate(task_ids(tasks)):
            size = rng.randint(*sizes)
            size = head[1] if i < head[0] else size
            ledger.create_task(tid, title=f"fleet task {tid}", workflow="fleet",
                               budget=Budget(tokens=size * 400, wall_s=24 * 3600.0))
            ledger.add_nodes(tid, layered_specs(rng, size))
            out[tid] = size
    return out


class Pacer:
    """Spaces an agent's writes ``interval`` apart on average (no catching up in bursts)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.next = time.monotonic()

    def wait(self) -> None:
        self.next = max(self.next + self.interval, time.monotonic() - self.interval)
        delay = self.next - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing the load generator, not synchronisation


def read_control(path: str | None, cache: dict) -> tuple[str | None, int]:
    """(busy task, agents it gets) from the control file, re-read when it changed."""
    if not path:
        return None, 0
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None, 0
    if cache.get("mtime") != st.st_mtime_ns:
        try:
            cache["value"] = json.loads(Path(path).read_text())
            cache["mtime"] = st.st_mtime_ns
        except (ValueError, OSError):
            return cache.get("value", {}).get("task"), cache.get("value", {}).get("agents", 0)
    v = cache.get("value") or {}
    return v.get("task"), int(v.get("agents", 0))


def agent(target: str, index: int, tasks: int, rate: float, until: float | None, out: str, claim_mode: str,
          control: str | None, seed: int) -> None:
    """One agent process (see the module's docstring). ``until``: a ``time.monotonic()`` deadline,
    or None: after ``ready``, wait for a line ``go <time.time() deadline>`` on stdin (:func:`go`)."""
    from store import Ledger
    from store.errors import LeaseLost, WardenError

    rng = random.Random(seed * 1000 + index)
    name = f"agent-{index:02d}"
    ledger = Ledger.open(target, create=False)
    ids = task_ids(tasks)
    rng.shuffle(ids)
    resting: dict[str, float] = {}  # task → when to look at it again (it had nothing ready)
    writes: list[list] = []  # [what, task, node, event id or None, monotonic time it returned]
    claim_s: list[float] = []
    waits: list[float] = []
    long_waits: list[list] = []  # waits over LONG_WAIT_S: [waited, claim calls, longest call, polls, monotonic end]
    misses = 0
    current: str | None = None
    left_here = 0
    control_cache: dict = {}
    pacer = Pacer(1.0 / rate)
    errors: dict[str, int] = {}
    print("ready", flush=True)
    if until is None:  # wait for the word: every agent of the fleet starts writing at once
        word = sys.stdin.readline().split()
        until = time.monotonic() + (float(word[1]) - time.time())
        pacer = Pacer(1.0 / rate)
    while time.monotonic() < until:
        busy, busy_agents = read_control(control, control_cache)
        waited = 0.0  # time in claim calls (and polling when nothing was offered) until one succeeded
        calls = polls = 0
        longest = 0.0
        claim = None
        while claim is None and time.monotonic() < until:
            now = time.monotonic()
            if busy is not None and index < busy_agents and resting.get(busy, 0) <= now:
                task: str | None = busy
            elif claim_mode == "any" or misses >= 3:
                task = None
            elif current is not None and left_here > 0 and resting.get(current, 0) <= now:
                task = current
            else:
                choices = [t for t in ids[:64] if resting.get(t, 0) <= now] or ids
                task = current = rng.choice(choices)
                left_here = rng.randint(3, 20)
                ids.append(ids.pop(ids.index(task)))  # the next pick prefers the others
            pacer.wait()
            t0 = time.monotonic()
            try:
                claim = ledger.claim(task, name, lease_s=60.0)
            except WardenError as e:
                errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                claim = None
            t1 = time.monotonic()
            claim_s.append(t1 - t0)
            waited += t1 - t0
            calls += 1
            longest = max(longest, t1 - t0)
            if claim is None:
                if task is None:
                    misses = 0
                    polls += 1
                    time.sleep(0.2)  # nothing ready anywhere: an agent polls again later
                    waited += 0.2
                else:
                    resting[task] = t1 + 5.0
                    misses += 1
                    left_here = 0
            else:
                misses = 0
                left_here -= 1
                current = claim.task_id
                writes.append(["claimed", claim.task_id, claim.node_key, None, t1])
        if claim is None:
            break
        waits.append(waited)
        if waited > LONG_WAIT_S:
            long_waits.append([waited, calls, longest, polls, time.monotonic()])
        try:
            for beat in range(HEARTBEATS):
                pacer.wait()
                ledger.heartbeat(claim, units_done=beat + 1, units_total=HEARTBEATS + 1, tokens=40,
                                 observation=f"{claim.node_key}: step {beat + 1} of {HEARTBEATS + 1}, "
                                             f"{rng.randint(0, 10 ** 6)} rows checked")
                writes.append(["heartbeat", claim.task_id, claim.node_key, None, time.monotonic()])
            pacer.wait()
            roll = rng.randrange(HANDOFF_EVERY)
            if roll == 0:
                ask(ledger, claim, kind="direction", question=f"{claim.node_key}: which way?",
                                     options=[{"id": "a", "label": "this way"}, {"id": "b", "label": "that way"}])
                writes.append(["handoff", claim.task_id, claim.node_key, None, time.monotonic()])
            elif roll < HANDOFF_EVERY // FAIL_EVERY:
                eid = ledger.fail(claim, error="flaky tool", retryable=True, retry_after_s=2.0, tokens=20)
                writes.append(["failed", claim.task_id, claim.node_key, eid, time.monotonic()])
            else:
                eid = ledger.commit(claim, output={"rows": rng.randint(0, 1000)}, tokens=120)
                writes.append(["committed", claim.task_id, claim.node_key, eid, time.monotonic()])
        except LeaseLost:
            errors["LeaseLost"] = errors.get("LeaseLost", 0) + 1
        except WardenError as e:
            errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
    ledger.close()
    Path(out).write_text(json.dumps({"agent": index, "writes": writes, "claim_s": claim_s, "waits_s": waits,
                                     "long_waits": long_waits, "errors": errors}))


def command(target: str, index: int, *, tasks: int, rate: float, until_wall: float, out: str,
            claim: str = "sticky", control: str = "", seed: int = 29) -> list[str]:
    """The argv of one agent process (it prints ``ready`` once its ledger is open). ``until_wall``
    0: it waits for :func:`go` (started with ``stdin=PIPE``)."""
    return [sys.executable, str(Path(__file__).resolve()), target, str(index), "--tasks", str(tasks),
            "--rate", str(rate), "--until-wall", repr(until_wall), "--out", out, "--claim", claim,
            "--control", control, "--seed", str(seed)]


def start(argvs: list[list[str]], seconds: float) -> list:
    """Start agent processes (argv from :func:`command` with ``until_wall=0``), wait until every one
    is ready, then let them all write for ``seconds``. Returns the processes."""
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT) for argv in argvs]
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"an agent did not start ({line!r})")
    until = time.time() + seconds
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(f"go {until!r}\n".encode())
        p.stdin.flush()
    return procs


def main() -> None:
    ap = argparse.ArgumentParser(description="one fleet agent (tests/support/fleet.py)")
    ap.add_argument("target")
    ap.add_argument("index", type=int)
    ap.add_argument("--tasks", type=int, required=True)
    ap.add_argument("--rate", type=float, required=True, help="this agent's writes per second")
    ap.add_argument("--until-wall", type=float, required=True, help="time.time() to stop at")
    ap.add_argument("--out", required=True)
    ap.add_argument("--claim", choices=("sticky", "any"), default="sticky")
    ap.add_argument("--control", default="")
    ap.add_argument("--seed", type=int, default=29)
    a = ap.parse_args()
    until = time.monotonic() + (a.until_wall - time.time()) if a.until_wall else None
    agent(a.target, a.index, a.tasks, a.rate, until, a.out, a.claim, a.control or None, a.seed)


if __name__ == "__main__":
    main()

"""Task rows kept from the journal (``store/reading/tally.py``) equal what a full read says.

Random sequences of every operation — tasks made and grown (a finished task reopened by growth),
claims (of a task and of any), heartbeats, commits with follow-up nodes, retryable and final
failures, handoffs asked and answered, parks and resumes of tasks and nodes, rewinds, narrows,
aborts with compensations, escalations, effects marked compensated, leases left to expire and
taken again, max-claims exhaustion — on both backends; the tally reads the journal at random
points in batches of random sizes (as the console's feed worker does, with writes landing between
the events it reads and the rows it then reads). Whenever it has read to the end: every row it
holds equals ``Ledger.tasks()`` and its JSON equals ``warden status --json``'s (eta and signals
aside, which it does not compute). And it never read a task's nodes whole per change: once per
task, plus unknown event kinds.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from store import Budget, Ledger, ManualClock, NodeSpec
from store.errors import LeaseLost, WardenError
from store.reading.cli_json import status_json, task_json
from store.reading.tally import TaskTally, current
from store.storage.payloads import Payload
from tests.support.tally_reads import TallyReads
from tests.support.asks import ask

T0 = 1_800_000_000.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class _FutureKind(Payload, kind="future.kind", layer="system"):
    """A kind a later Warden journals: declared after this Warden's list was made, so not in it."""


class Fleet:
    """A random workload on one ledger (see the module's docstring)."""

    def __init__(self, ledger: Ledger, clock: ManualClock, rng: random.Random) -> None:
        self.ledger = ledger
        self.clock = clock
        self.rng = rng
        self.tasks: list[str] = []
        self.claims: list = []
        self.keys: dict[str, list[str]] = {}
        self.effects: list[tuple[str, str]] = []
        self.n = 0

    def specs(self, task: str, count: int) -> list[NodeSpec]:
        have = self.keys.setdefault(task, [])
        out = []
        for _ in range(count):
            key = f"k{len(have)}"
            deps = tuple(self.rng.sample(have, min(len(have), self.rng.randint(0, 2)))) if have else ()
            pre = {"region": self.rng.choice(["eu", "us"])} if self.rng.random() < 0.3 else None
            out.append(NodeSpec(key=key, deps=deps, preconditions=pre, max_claims=self.rng.choice([None, 2, 5])))
            have.append(key)
        return out

    def step(self) -> None:
        rng, led = self.rng, self.ledger
        op = rng.choices(
            ["task", "grow", "claim", "claim_any", "claim_comp", "beat", "commit", "fail", "human", "resolve", "park", "resume",
             "park_node", "rewind", "narrow", "abort", "escalate", "effect", "compensated", "time"],
            weights=[3, 2, 14, 4, 1, 8, 12, 4, 2, 3, 2, 2, 1, 2, 1, 1, 1, 2, 1, 3])[0]
        task = rng.choice(self.tasks) if self.tasks else None
        self.n += 1
        if op == "task" or task is None:
            tid = f"t{len(self.tasks)}"
            led.create_task(tid, title=tid, budget=Budget(tokens=rng.choice([None, 5000])) if rng.random() < 0.5
                            else None)
            led.add_nodes(tid, self.specs(tid, rng.randint(1, 12)))
            self.tasks.append(tid)
        elif op == "grow":
            led.add_nodes(task, self.specs(task, rng.randint(1, 3)))
        elif op in ("claim", "claim_any", "claim_comp"):
            c = led.claim(task if op == "claim" else None, f"w{rng.randint(0, 3)}", lease_s=rng.choice([5, 60]),
                          kinds=["compensation"] if op == "claim_comp" else None)
            if c is not None:
                self.claims.append(c)
        elif op == "time":
            self.clock.advance(rng.choice([1, 10, 100]))
        elif op in ("beat", "commit", "fail", "human", "effect") and self.claims:
            c = rng.choice(self.claims)
            try:
                self.use(op, c)
            except LeaseLost:
                self.claims.remove(c)  # expired and taken again, or revoked by an operator action
        elif op == "resolve":
            open_ = led.handoffs(status="open")
            if open_:
                h = rng.choice(open_)
                self.apply(lambda: led.plan_resolve(h.id, option=(h.options[0].get("id") if h.options else None)))
        elif op == "park":
            self.apply(lambda: led.plan_park(task, reason="wait", now=rng.random() < 0.5))
        elif op == "resume":
            self.apply(lambda: led.plan_resume(task))
        elif op == "park_node":
            self.apply(lambda: led.plan_park(task, reason="wait", node=rng.choice(self.keys[task])))
        elif op == "rewind":
            self.apply(lambda: led.plan_rewind(task, rng.choice(self.keys[task]), reason="again"))
        elif op == "narrow":
            self.apply(lambda: led.plan_narrow(task, reason="smaller", set={"region": [rng.choice(["eu", "us"])]}))
        elif op == "abort":
            self.apply(lambda: led.plan_abort(task, reason="stop"))
        elif op == "escalate":
            self.apply(lambda: led.plan_escalate(task, rng.choice(self.keys[task]), reason="look"))
        elif op == "compensated" and self.effects:
            t, key = rng.choice(self.effects)
            self.apply(lambda: led.plan_compensated(t, key, reason="undone by hand"))

    def use(self, op: str, c) -> None:
        """A write with claim ``c``: a heartbeat, its commit, a failure, a handoff, an effect."""
        rng, led = self.rng, self.ledger
        if op == "beat":
            led.heartbeat(c, tokens=rng.randint(0, 300), observation=f"step {self.n}")
        elif op == "commit":
            nxt = self.specs(c.task_id, rng.randint(1, 2)) if rng.random() < 0.15 else ()
            led.commit(c, tokens=rng.randint(0, 500), next_nodes=nxt)
            self.claims.remove(c)
        elif op == "fail":
            led.fail(c, error="boom", retryable=rng.random() < 0.7, retry_after_s=rng.choice([0.0, 5.0]))
            self.claims.remove(c)
        elif op == "human":
            ask(led, c, kind="direction", question="which?", options=[{"id": "a"}, {"id": "b"}])
            self.claims.remove(c)
        else:
            key = f"e{self.n}"
            led.intend_effect(c, key, compensation="undo it")
            led.confirm_effect(c, key, external_id=key)
            self.effects.append((c.task_id, key))

    def apply(self, plan) -> None:
        try:
            self.ledger.apply(plan(), operator="op")
        except WardenError:
            pass  # not applicable now (refused, stale, nothing to do): the sequence goes on


def without_time(v):
    return dataclasses.replace(v, wall_used_s=0.0, waited_s=0.0)


def check_equal(tally: TaskTally, ledger: Ledger) -> None:
    now = ledger.now()
    truth = {t.task_id: t for t in ledger.tasks()}
    held = {v.task_id: current(v, now) for v in tally.views()}
    assert held.keys() == truth.keys()
    for tid, t in truth.items():
        assert held[tid] == t, tid
    status = {t["task_id"]: t for t in status_json(ledger)["tasks"]}
    for tid, v in held.items():
        mine = task_json(v)
        theirs = status[tid]
        for k in ("eta", "signals"):
            mine.pop(k)
            theirs.pop(k)
        assert mine == theirs, tid


@pytest.mark.parametrize("seed", range(8))
def test_rows_from_the_journal_equal_a_full_read(backend, new_target, seed, monkeypatch):
    rng = random.Random(seed)
    clock = ManualClock(T0)
    target = new_target("ledger")
    writer = Ledger.open(target, clock=clock)
    reader = Ledger.open(target, create=False, clock=clock, read_only=True)
    try:
        fleet = Fleet(writer, clock, rng)
        for _ in range(3):
            fleet.step()
        tally = TaskTally()
        counted = TallyReads(monkeypatch)
        cursor = reader.last_event_id()
        tally.start(reader.tasks())
        for _ in range(160 if backend == "sqlite" else 100):
            try:
                fleet.step()
            except WardenError:
                pass  # an operation that does not apply now (LeaseLost after an expiry, a refusal)
            if rng.random() < 0.3:
                events = reader.events(cursor, limit=rng.randint(1, 8))
                if events:
                    tally.apply(reader, events)
                    cursor = events[-1].id
            if rng.random() < 0.08:  # read to the end: then every row is exact
                while events := reader.events(cursor, limit=50):
                    tally.apply(reader, events)
                    cursor = events[-1].id
                check_equal(tally, reader)
        while events := reader.events(cursor, limit=50):
            tally.apply(reader, events)
            cursor = events[-1].id
        check_equal(tally, reader)
        assert counted.whole_reads <= len(fleet.tasks)  # each task's nodes read whole once, never per change
        assert counted.node_reads > 0
    finally:
        reader.close()
        writer.close()


def test_rows_follow_without_reading_a_task_whole_per_change(tmp_path, monkeypatch):
    """A 2,000-node task: each change reads the nodes it names, not the task's 2,000."""
    clock = ManualClock(T0)
    path = str(tmp_path / "l.db")
    with Ledger.open(path, clock=clock) as led:
        led.create_task("big")
        led.add_nodes("big", [NodeSpec(key=f"n{i}") for i in range(2000)])
        tally = TaskTally()
        counted = TallyReads(monkeypatch)
        cursor = led.last_event_id()
        tally.start(led.tasks())
        for i in range(30):
            c = led.claim("big", "w")
            led.commit(c)
            events = led.events(cursor)
            got = tally.apply(led, events)
            cursor = events[-1].id
            assert [v.task_id for v in got] == ["big"]
            assert got[0].counts == {"succeeded": i + 1, "pending": 2000 - i - 1}
            assert got[0].claim_count == i + 1
        assert counted.whole_reads == 1
        assert counted.node_reads == 29  # the node each claim + commit named (the first pair: read whole)


@pytest.mark.parametrize("beats", [1, 7, 40])
def test_heartbeats_and_notes_move_the_row_without_reading_nodes(tmp_path, beats, monkeypatch):
    """A heartbeat or a note changes the task's row (tokens, last beat) but no node's status or
    attempts: the row is read again, no node is (a fleet's heartbeats are most of its writes)."""
    clock = ManualClock(T0)
    path = str(tmp_path / "l.db")
    with Ledger.open(path, clock=clock) as led:
        led.create_task("t", budget=Budget(tokens=10**6))
        led.add_nodes("t", [NodeSpec(key=f"n{i}") for i in range(5)])
        tally = TaskTally()
        counted = TallyReads(monkeypatch)
        tally.start(led.tasks())
        cursor = led.last_event_id()
        c = led.claim("t", "w")
        events = led.events(cursor)
        tally.apply(led, events)
        cursor = events[-1].id
        reads = counted.node_reads, counted.whole_reads
        for i in range(beats):
            clock.advance(1)
            led.heartbeat(c, tokens=10, observation=f"step {i}")
            if i % 3 == 0:
                led.note(c, f"note {i}")
        events = led.events(cursor)
        [view] = tally.apply(led, events)
        assert (counted.node_reads, counted.whole_reads) == reads
        want = led.task("t")
        assert view.counts == want.counts and view.claim_count == want.claim_count
        assert view.tokens_used == want.tokens_used == 10 * beats
        cursor = events[-1].id
        led.commit(c)  # and the next change that moves a node still reads it
        events = led.events(cursor)
        [view] = tally.apply(led, events)
        assert counted.node_reads == reads[0] + 1 and view.counts == led.task("t").counts


def test_an_unknown_event_kind_reads_its_task_whole(tmp_path, monkeypatch):
    """A kind this module does not know may change nodes without naming them: the task is read whole."""
    from store.storage import sql

    clock = ManualClock(T0)
    path = str(tmp_path / "l.db")
    with Ledger.open(path, clock=clock) as led:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec(key=f"n{i}") for i in range(5)])
        tally = TaskTally()
        counted = TallyReads(monkeypatch)
        tally.start(led.tasks())
        cursor = led.last_event_id()
        led.commit(led.claim("t", "w"))
        events = led.events(cursor)
        tally.apply(led, events)
        cursor = events[-1].id
        # a future writer changes a node and journals a kind of its own, naming nothing
        with led.db.atomic():
            sql.execute(led.db, "UPDATE node SET status = 'abandoned' WHERE task_id = 't' AND key = 'n4'")
            led.journal("t", None, "x", "changed something", _FutureKind())
        events = led.events(cursor)
        [view] = tally.apply(led, events)
        assert view.counts == {"succeeded": 1, "pending": 3, "abandoned": 1} == led.task("t").counts
        assert counted.whole_reads == 2


def test_live_leases_names_each_worker_holding_a_live_lease(ledger, clock):
    from store.reading.tally import live_leases

    for tid in ("a", "b"):
        ledger.create_task(tid)
        ledger.add_nodes(tid, [NodeSpec(key=f"n{i}") for i in range(3)])
    ledger.claim("a", "w1", lease_s=30)
    ledger.claim("b", "w1", lease_s=60)
    c = ledger.claim("a", "w2", lease_s=10)
    ledger.claim("b", "w3", lease_s=5)
    ledger.commit(c)  # w2's lease ended with its commit
    clock.advance(6)  # w3's lease expired
    assert live_leases(ledger, ["a", "b"]) == [("w1", T0 + 60)]
    assert live_leases(ledger, ["a"]) == [("w1", T0 + 30)]

"""What an agent is handed (what survives a compaction keeps the task's core
constraints, the key conclusions, where it stands and the problems still open; a read carries
the time it was read, or after a resume nobody knows how old the data is). ``Claim.inputs
["memory"]["open_problems"]`` lists the task's open handoffs and failed nodes, within the
block's 48 KB bound (omissions counted); ``inputs["deps"][k]["committed_at"]`` says when each
dependency's output was committed. Both backends."""

from __future__ import annotations

import json

from store import NodeSpec
from store.clock import iso
from store.mind.recall import LIMITS
from tests.support.asks import ask

LONG = 10**7


def test_the_open_problems_reach_the_next_claim_newest_first(ledger, clock):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a", retryable=False), NodeSpec("b"), NodeSpec("c"), NodeSpec("d")])
    a = ledger.claim("t", "w", lease_s=LONG, key="a")
    ledger.fail(a, error="TimeoutError: the index server did not answer in 30 s")
    clock.advance(10)
    b = ledger.claim("t", "w", lease_s=LONG, key="b")
    hid = ask(ledger, b, kind="direction", question="Which branch should the fix go to?",
                               options=[{"id": "main", "label": "main", "consequence": "released tonight"},
                                        {"id": "lts", "label": "lts", "consequence": "released next month"}],
                               recommendation="main",
                               context={"done": "the fix", "stuck": "where it goes", "why": "main ships sooner"})
    clock.advance(10)
    c = ledger.claim("t", "w", lease_s=LONG, key="c")
    problems = c.inputs["memory"]["open_problems"]
    assert problems == [
        {"kind": "handoff", "id": hid, "node": "b", "handoff_kind": "direction",
         "question": "Which branch should the fix go to?", "at": iso(clock() - 10)},
        {"kind": "failed", "node": "a", "error": "TimeoutError: the index server did not answer in 30 s",
         "failure_class": "transient", "at": iso(clock() - 20)},
    ]
    assert c.inputs["memory"]["omitted"]["open_problems"] == 0
    json.dumps(c.inputs["memory"])


def test_open_problems_are_bounded_and_the_block_stays_within_48_kb(ledger):
    ledger.create_task("t", constraints=["x" * 20_000, "y" * 20_000])
    ledger.add_nodes("t", [NodeSpec(f"f{i}", retryable=False) for i in range(30)] + [NodeSpec("last")])
    for i in range(30):
        c = ledger.claim("t", "w", lease_s=LONG, key=f"f{i}")
        ledger.fail(c, error=f"E{i}: " + "detail " * 2000)
    c = ledger.claim("t", "w", lease_s=LONG, key="last")
    mem = c.inputs["memory"]
    size = len(json.dumps(mem, ensure_ascii=False, separators=(",", ":")).encode())
    assert size <= LIMITS["bytes"] + 512  # the block's bound (the dumps of the store is canonical)
    kept = mem["open_problems"]
    assert 0 < len(kept) <= 20 and len(kept) + mem["omitted"]["open_problems"] == 30
    assert all(len(p["error"]) <= LIMITS["text_chars"] for p in kept)
    assert kept[0]["node"] == "f29"  # the newest kept first; the oldest left out first
    assert [x["text"][:1] for x in mem["constraints"]] == ["x", "y"]  # the task's rules still there


def test_each_dependency_says_when_it_committed(ledger, clock):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("read"), NodeSpec("gone"), NodeSpec("use", deps=("read", "gone"))])
    r = ledger.claim("t", "w", lease_s=LONG, key="read")
    clock.advance(42)
    ledger.commit(r, output={"rows": 3})
    committed = clock()
    ledger.apply(ledger.plan_narrow("t", exclude=["gone"], reason="not needed"), operator="op")
    clock.advance(3600)
    u = ledger.claim("t", "w", lease_s=LONG, key="use")
    assert u.inputs["deps"]["read"]["committed_at"] == iso(committed)
    assert u.inputs["deps"]["gone"]["committed_at"] is None  # abandoned: nothing was committed

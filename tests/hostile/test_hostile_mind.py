"""The task's mind under hostile text: conclusions, rejected paths, proposed memories, replans,
requirements and constraints, each written with values generated per run from fixed seeds.

Each call answers within :data:`CALL_S` — a ``WardenError`` whose line is one clear line and that
changed nothing (the journal, the mind's lists), or an acceptance. Then what the mind holds is
bounded where it is handed out (a claim's ``inputs["memory"]``: 48 KB, texts cut) and shown
escaped (``warden mind``)."""

from __future__ import annotations

import json
import random
import time
from typing import Any, Callable

import pytest

from console.cli import main as warden
from store import Ledger, NodeSpec, WardenError
from store.mind import rules
from store.mind.recall import LIMITS
from store.text import safe
from tests.hostile.hostile_support import HOSTILE_TEXTS, assert_one_clear_line, hostile_text
from tests.support.waiting import stretch

SEEDS = (5, 17)
CALL_S = 30.0  # the bound on one call (generous: the point is that it answers)
LONG = 10**7

WRONG = [None, 7, -1.5, True, [], ["x"], {}, {"a": 1}, b"bytes", ("t",)]
UNSAFE = ["\x00", "\x1b[2J", "\x1b]52;c;cHduZWQ=\x07", "\x9b", "\u202e", "\u2066", "\u200b", "\ufeff", "\u2028",
          "\ud800", "\udfff", "\U000e0041", "\ue000", "\n", "\r", "\t"]


def texts(rng: random.Random, cap: int) -> list[Any]:
    """Hostile values for a text argument whose cap is ``cap`` characters."""
    out: list[Any] = list(WRONG)
    out += [f"a{c}b" for c in rng.sample(UNSAFE, 8)] + ["", " ", "\n\n"]
    out += rng.sample(HOSTILE_TEXTS, 4) + [hostile_text(rng) for _ in range(3)]
    out += ["x" * cap, "x" * (cap + 1), "中" * (cap + 1), "y" * 100_000]
    return out


def snapshot(led: Ledger) -> tuple[Any, ...]:
    return (led.last_event_id(), len(led.conclusions("t", kind="finding", limit=10_000)),
            len(led.conclusions("t", kind="rejected", limit=10_000)), len(led.memories(limit=10_000)),
            len(led.plans("t")), len(led.requirements("t")), len(led.graph("t").nodes))


def attempt(led: Ledger, what: str, call: Callable[[], Any]) -> bool:
    """One call: answered in time; refused with one clear line and nothing changed, or accepted."""
    before = snapshot(led)
    t0 = time.monotonic()
    try:
        call()
    except WardenError as e:
        assert time.monotonic() - t0 < stretch(CALL_S), what
        assert_one_clear_line(str(e))
        assert snapshot(led) == before, f"{what} was refused but changed the ledger"
        return False
    assert time.monotonic() - t0 < stretch(CALL_S), what
    return True


@pytest.fixture
def world(ledger):
    ledger.create_task("t", title="mind", requirements=[{"id": "r1", "text": "the whole service"}],
                       constraints=["never push to main"])
    ledger.add_nodes("t", [NodeSpec("a", serves=("r1",)), NodeSpec("b", deps=("a",))])
    claim = ledger.claim("t", "w", lease_s=LONG, key="a")
    return ledger, claim


@pytest.mark.parametrize("seed", SEEDS)
def test_hostile_mind_texts_are_answered_and_what_is_kept_is_bounded_and_escaped(world, seed, backend, capsys) -> None:
    if backend == "postgres" and seed != SEEDS[0]:
        pytest.skip("one seed on PostgreSQL (the shared server is slow): the corpus's CI time stays modest")
    led, claim = world
    rng = random.Random(seed)
    accepted = 0
    for v in texts(rng, rules.ENTRY_TEXT_MAX):
        accepted += attempt(led, f"conclude text={v!r:.60}", lambda: led.conclude(claim, v, source="src/a.py"))
        accepted += attempt(led, f"rejected reason={v!r:.60}",
                            lambda: led.conclude(claim, "tried it", kind="rejected", reason=v))
    for v in texts(rng, rules.SOURCE_MAX):
        accepted += attempt(led, f"conclude source={v!r:.60}", lambda: led.conclude(claim, "found", source=v))
    for v in WRONG + ["", "rejected ", "FINDING", "\x1b", "finding\n"]:
        attempt(led, f"conclude kind={v!r:.60}", lambda: led.conclude(claim, "k", kind=v, reason="r"))
    for v in texts(rng, rules.MEMORY_TEXT_MAX):
        accepted += attempt(led, f"propose_memory text={v!r:.60}", lambda: led.propose_memory(claim, v))
    for v in WRONG + ["", "global", "kind\n"]:
        attempt(led, f"propose_memory scope={v!r:.60}", lambda: led.propose_memory(claim, "m", scope=v))
    n = 0
    for v in texts(rng, rules.REASON_MAX):
        n += 1
        accepted += attempt(led, f"replan reason={v!r:.60}", lambda: led.replan(
            "t", add=[NodeSpec(f"x{seed}-{n}")], trigger="pattern", reason=v, actor="w"))
    for v in texts(rng, rules.GOAL_MAX):
        n += 1
        accepted += attempt(led, f"replan goal={v!r:.60}", lambda: led.replan(
            "t", narrow={"goal": v}, trigger="operator", reason="narrow", actor="w"))
    for v in WRONG + ["", "whim", "\x1b[31m"]:
        n += 1
        attempt(led, f"replan trigger={v!r:.60}", lambda: led.replan(
            "t", add=[NodeSpec(f"y{seed}-{n}")], trigger=v, reason="r", actor="w"))
    for v in [{"drop": v} for v in WRONG] + [{"drop": ["nope"]}, {"goal": 7}, {"weird": 1}, "goal"]:
        attempt(led, f"replan narrow={v!r:.60}", lambda: led.replan("t", narrow=v, trigger="operator",
                                                                   reason="r", actor="w"))
    # requirements and constraints: a task each, made or refused whole
    for i, v in enumerate(texts(rng, rules.REQUIREMENT_TEXT_MAX)):
        attempt(led, f"requirement text={v!r:.60}",
                lambda: led.create_task(f"req{seed}-{i}", requirements=[{"id": "r1", "text": v}]))
    for i, v in enumerate([[{"id": x, "text": "t"}] for x in WRONG + ["", "a b", "r\n", "\u202e"]]
                          + [[{"id": f"r{k}", "text": "t"} for k in range(rules.REQUIREMENTS_MAX + 1)],
                             [{"id": "r1", "text": "a"}, {"id": "r1", "text": "b"}], "r1", [["r1", "t"]]]):
        attempt(led, f"requirements={v!r:.60}", lambda: led.create_task(f"reqs{seed}-{i}", requirements=v))
    kept_constraints: list[str] = []
    for i, v in enumerate(texts(rng, 10_000)):
        if attempt(led, f"constraint={v!r:.60}", lambda: led.create_task(f"con{seed}-{i}", constraints=[v])):
            kept_constraints.append(v)
    assert accepted > 20  # hostile text that can be stored is stored, as written

    # every constraint that was kept, in one task with the widest requirements: its block is bounded
    wide = [{"id": f"r{k}", "text": "需" * rules.REQUIREMENT_TEXT_MAX} for k in range(rules.REQUIREMENTS_MAX)]
    led.create_task(f"all{seed}", constraints=kept_constraints, requirements=wide)
    led.add_node(f"all{seed}", "n", serves=("r3",))
    block = led.claim(f"all{seed}", "w3", lease_s=LONG).inputs["memory"]
    assert len(json.dumps(block, separators=(",", ":"), ensure_ascii=False).encode()) <= LIMITS["bytes"]
    assert len(block["constraints"]) + block["omitted"]["constraints"] == len(kept_constraints)
    assert len(block["requirements"]) + block["omitted"]["requirements"] == len(wide)

    # handed out bounded: the next node's memory block
    c = led.claim("t", "w", lease_s=LONG, key="a")
    assert c is None or c.node_key == "a"
    led.commit(claim, output={"ok": True})
    nxt = led.claim("t", "w2", lease_s=LONG, key="b")
    assert nxt is not None
    mem = nxt.inputs["memory"]
    assert len(json.dumps(mem, separators=(",", ":"), ensure_ascii=False).encode()) <= LIMITS["bytes"]
    for part in ("rejected", "conclusions", "memories"):
        assert all(len(e["text"]) <= LIMITS["text_chars"] for e in mem[part]), part
    # shown escaped: warden mind prints no raw control, bidi or zero-width character
    target = led.db.display if led.db.backend == "sqlite" else led.db.url
    capsys.readouterr()
    assert warden(["mind", "t", "--ledger", target]) == 0
    out = capsys.readouterr().out
    assert out and safe(out) == out
    assert warden(["mind", "t", "--json", "--ledger", target]) == 0
    json.loads(capsys.readouterr().out)

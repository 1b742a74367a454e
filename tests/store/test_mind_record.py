"""The task's mind: requirements and what serves them, conclusions and rejected paths
(the agent's own and those the ledger writes for failures, rewinds and escalations), and what a
claim is handed of them (``Claim.inputs["memory"]``) — on both backends (the ``ledger`` fixture)."""

from __future__ import annotations

import json
import random

import pytest

from store import LeaseLost, NodeSpec, NotFound, Refused
from store.errors import InvalidValue
from store.mind import rules
from store.mind.recall import LIMITS

LONG = 10**7
REQS = [{"id": "r1", "text": "every cycle between modules is broken"},
        {"id": "r2", "text": "the public API keeps its signatures"}]


def claim_of(ledger, task, key):
    c = ledger.claim(task, "w", lease_s=LONG, key=key)
    assert c is not None, key
    return c


# ---------------------------------------------------------------------- requirements and serves
def test_requirements_are_stored_in_order_and_nodes_say_which_they_serve(ledger):
    ledger.create_task("t", requirements=REQS, constraints=["only test files change"])
    ledger.add_node("t", "a", serves=["r1"])
    ledger.add_nodes("t", [NodeSpec("b", deps=("a",), serves=("r2", "r1", "r2"))])
    ledger.add_node("t", "c")
    assert [(r.id, r.text, r.status) for r in ledger.requirements("t")] == [
        ("r1", REQS[0]["text"], "active"), ("r2", REQS[1]["text"], "active")]
    assert ledger.node("t", "b").serves == ("r2", "r1")  # duplicates dropped, order kept
    m = ledger.mind("t")
    assert [(u.requirement.id, [k for k, _ in u.nodes], u.total) for u in m.requirements] == [
        ("r1", ["a", "b"], 2), ("r2", ["b"], 1)]
    assert m.unserving == (("c", "pending"),) and m.unserving_total == 1
    assert m.constraints == ("only test files change",) and m.state.requirements == 2


@pytest.mark.parametrize("bad, match", [
    ([{"id": "r1", "text": "x"}, {"id": "r1", "text": "y"}], "listed twice"),
    ([{"id": "r 1", "text": "x"}], "not a requirement id"),
    ([{"id": "r1", "text": "   "}], "must not be empty"),
    ([{"id": "r1", "text": "x" * (rules.REQUIREMENT_TEXT_MAX + 1)}], "longer than"),
    ([{"id": "r1"}], 'needs|"id" and "text"'),
    ([{"id": "r1", "text": "x", "prio": 1}], "unknown keys"),
    ("r1: do it", 'list of \\{"id", "text"\\}'),
    ([{"id": f"r{i}", "text": "x"} for i in range(rules.REQUIREMENTS_MAX + 1)], "more than"),
])
def test_bad_requirements_are_refused_with_one_line_and_nothing_is_created(ledger, bad, match):
    with pytest.raises(InvalidValue, match=match) as e:
        ledger.create_task("t", requirements=bad)
    assert "\n" not in str(e.value)
    with pytest.raises(NotFound):
        ledger.task("t")


def test_a_node_cannot_serve_a_requirement_the_task_does_not_have(ledger):
    ledger.create_task("t", requirements=REQS)
    with pytest.raises(Refused, match="unknown requirement 'r9'.*r1, r2"):
        ledger.add_node("t", "a", serves=["r9"])
    with pytest.raises(InvalidValue, match="not a requirement id"):
        ledger.add_node("t", "a", serves=["r1\n"])
    with pytest.raises(InvalidValue):
        NodeSpec("a", serves=("x" * 65,))
    assert ledger.graph("t").nodes == ()
    ledger.create_task("plain")
    with pytest.raises(Refused, match="requirements: none"):
        ledger.add_node("plain", "a", serves=["r1"])


# ---------------------------------------------------------------------- conclusions and rejected paths
def test_conclusions_and_rejected_paths_carry_time_source_and_reason(ledger, clock):
    ledger.create_task("t", requirements=REQS)
    ledger.add_node("t", "scan", serves=["r1"])
    c = claim_of(ledger, "t", "scan")
    clock.advance(5)
    e1 = ledger.conclude(c, "a and b import each other", source="src/a.py")
    e2 = ledger.conclude(c, "matching cycles by file name", kind="rejected", reason="no cycle is named that way",
                         source="grep -r import")
    assert e2 > e1
    with pytest.raises(Refused, match="needs its reason"):
        ledger.conclude(c, "guessing", kind="rejected", source="tests")
    with pytest.raises(InvalidValue, match="conclusion kind"):
        ledger.conclude(c, "x", kind="idea", source="tests")
    with pytest.raises(InvalidValue, match="one line"):
        ledger.conclude(c, "x", source="a\nb")
    found = ledger.conclusions("t")
    rejected = ledger.conclusions("t", kind="rejected")
    assert [(e.text, e.source, e.origin, e.node, e.attempt, e.at) for e in found] == [
        ("a and b import each other", "src/a.py", "agent", "scan", 1, clock())]
    assert rejected[0].reason == "no cycle is named that way" and rejected[0].actor == "w"
    kinds = [e.kind for e in ledger.events(task_id="t") if e.kind.startswith("mind.")]
    assert kinds == ["mind.concluded", "mind.rejected"]


def test_a_conclusion_under_a_lost_lease_writes_nothing(ledger, clock):
    ledger.create_task("t")
    ledger.add_node("t", "a")
    c = ledger.claim("t", "w", lease_s=10)
    clock.advance(11)
    before = ledger.last_event_id()
    with pytest.raises(LeaseLost):
        ledger.conclude(c, "late finding", source="tests")
    with pytest.raises(LeaseLost):
        ledger.propose_memory(c, "late memory", source="tests")
    assert ledger.conclusions("t") == [] and ledger.memories() == [] and ledger.last_event_id() == before


def test_an_agent_cannot_write_unbounded_entries_on_one_node(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a")
    c = claim_of(ledger, "t", "a")
    for i in range(rules.ENTRIES_PER_NODE):
        ledger.conclude(c, f"finding {i}", source="tests")
    with pytest.raises(Refused, match=f"already has {rules.ENTRIES_PER_NODE}"):
        ledger.conclude(c, "one too many", source="tests")
    with pytest.raises(InvalidValue, match="longer than"):
        ledger.conclude(c, "x" * (rules.ENTRY_TEXT_MAX + 1), source="tests")
    assert len(ledger.conclusions("t", limit=1000)) == rules.ENTRIES_PER_NODE


def test_failures_rewinds_and_escalations_are_written_as_rejected_paths(ledger, clock):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",)), NodeSpec("c")])
    c = claim_of(ledger, "t", "a")
    ledger.fail(c, error="TimeoutError: the index server did not answer", failure_class="transient",
                retry_after_s=0)
    c = claim_of(ledger, "t", "a")
    ledger.commit(c, output={"ok": 1})
    ledger.apply(ledger.plan_rewind("t", "a", reason="it read the stale snapshot"), operator="alice")
    ledger.apply(ledger.plan_escalate("t", "c", reason="its run dir is incomplete"), operator="bob")
    got = [(e.node, e.origin, e.reason, e.actor) for e in reversed(ledger.conclusions("t", kind="rejected"))]
    assert got == [("a", "fail", "TimeoutError: the index server did not answer", "w"),
                   ("a", "rewind", "it read the stale snapshot", "alice"),
                   ("c", "escalate", "its run dir is incomplete", "bob")]
    assert "operator alice" in ledger.conclusions("t", kind="rejected", node="a")[0].source


# ---------------------------------------------------------------------- what a claim is handed
def test_a_claim_gets_its_own_and_its_ancestors_rejected_paths_and_its_dependencies_conclusions(ledger, clock):
    """root → mid → leaf; side is a sibling branch: its entries never reach leaf."""
    ledger.create_task("t", requirements=REQS, constraints=["no network"])
    ledger.add_nodes("t", [NodeSpec("root"), NodeSpec("mid", deps=("root",), serves=("r1",)),
                           NodeSpec("side"), NodeSpec("leaf", deps=("mid", "side"), serves=("r2",))])
    for key in ("root", "mid", "side"):
        c = claim_of(ledger, "t", key)
        clock.advance(1)
        ledger.conclude(c, f"found by {key}", source=f"{key}.log")
        ledger.conclude(c, f"tried by {key}", kind="rejected", reason=f"{key} said no",
                        source=f"{key}.cmd.log")
        ledger.commit(c, output={})
    c = claim_of(ledger, "t", "leaf")
    mem = c.inputs["memory"]
    assert [x["text"] for x in mem["constraints"]] == ["no network"]
    assert [(r["id"], r["serves"]) for r in mem["requirements"]] == [("r1", False), ("r2", True)]
    assert [e["text"] for e in mem["rejected"]] == ["tried by side", "tried by mid", "tried by root"]
    # conclusions: of its direct dependencies only (root's finding reached mid, not leaf)
    assert [e["text"] for e in mem["conclusions"]] == ["found by side", "found by mid"]
    for e in mem["rejected"] + mem["conclusions"]:
        assert e["at"].endswith("Z") and e["origin"] == "agent"
        assert e["source"].endswith(".log"), e
    assert [e["at"] for e in mem["rejected"]] == sorted((e["at"] for e in mem["rejected"]), reverse=True)
    c_mid = ledger.claim("t", "w2", lease_s=LONG)
    assert c_mid is None  # nothing else ready
    json.dumps(mem)  # plain JSON, as an agent passes it to a model


def test_a_sibling_never_sees_anothers_rejected_path_but_a_replan_reason_reaches_every_claim(ledger):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("x"), NodeSpec("y"), NodeSpec("z")])
    c = claim_of(ledger, "t", "x")
    ledger.conclude(c, "x's dead end", kind="rejected", reason="nope", source="tests")
    ledger.replan("t", remove=["z"], trigger="evidence_conflict", reason="z's premise was refuted by x", actor="w")
    c2 = claim_of(ledger, "t", "y")
    texts = [(e["node"], e["origin"], e["reason"]) for e in c2.inputs["memory"]["rejected"]]
    assert texts == [(None, "replan", "z's premise was refuted by x")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_memory_block_is_bounded_in_count_and_bytes_and_keeps_the_newest(ledger, seed):
    rnd = random.Random(seed)
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("dep"), NodeSpec("n", deps=("dep",))])
    c = claim_of(ledger, "t", "dep")
    n_found, n_rej = rnd.randint(21, 60), rnd.randint(21, 60)
    size = rnd.choice([10, 900, rules.ENTRY_TEXT_MAX - 5])
    for i in range(n_found):
        ledger.conclude(c, f"f{i:03d} " + "x" * size, source=f"s{i}")
    for i in range(n_rej):
        ledger.conclude(c, f"r{i:03d} " + "y" * size, kind="rejected", reason="z" * rnd.choice([5, 1999]), source="tests")
    ledger.commit(c, output={})
    mem = claim_of(ledger, "t", "n").inputs["memory"]
    found, rej = mem["conclusions"], mem["rejected"]
    assert len(json.dumps(mem, separators=(",", ":"), ensure_ascii=False).encode()) <= LIMITS["bytes"]
    assert len(found) + mem["omitted"]["conclusions"] == n_found and len(found) <= LIMITS["conclusions"]
    assert len(rej) + mem["omitted"]["rejected"] == n_rej and len(rej) <= LIMITS["rejected"]
    assert [e["text"][:4] for e in found] == [f"f{i:03d}" for i in range(n_found - 1, n_found - 1 - len(found), -1)]
    assert all(len(e["text"]) <= LIMITS["text_chars"] and len(e["reason"] or "") <= LIMITS["text_chars"]
               for e in found + rej)
    assert rej or found  # the bounds never leave nothing when there is something


def _block_bytes(mem) -> int:
    return len(json.dumps(mem, separators=(",", ":"), ensure_ascii=False).encode())


@pytest.mark.parametrize("shape", ["one huge constraint", "many constraints", "wide requirements", "both"])
def test_the_memory_block_stays_within_its_bytes_when_constraints_and_requirements_are_huge(ledger, shape):
    """Constraints and requirements are handed out whole while they fit; past the 48 KB their
    longest texts are cut (``cut`` counts what went), then requirements this node does not serve,
    the others, and constraints are left out from the end, counted in ``omitted``."""
    constraints = {"one huge constraint": ["c" * 100_000, "never push to main"],
                   "many constraints": ["never push to main"] + [f"rule {i}: " + "r" * 900 for i in range(200)],
                   "wide requirements": ["never push to main"],
                   "both": ["\x1b" * 30_000, "中" * 20_000, "never push to main"]}[shape]
    reqs = ([{"id": f"r{i}", "text": "需" * rules.REQUIREMENT_TEXT_MAX} for i in range(rules.REQUIREMENTS_MAX)]
            if shape in ("wide requirements", "both") else [])
    ledger.create_task("t", constraints=constraints, requirements=reqs)
    ledger.add_node("t", "a", **({"serves": ["r5"]} if reqs else {}))
    c = claim_of(ledger, "t", "a")
    mem = c.inputs["memory"]
    assert _block_bytes(mem) <= LIMITS["bytes"]
    kept_c, kept_r = mem["constraints"], mem["requirements"]
    assert len(kept_c) + mem["omitted"]["constraints"] == len(constraints)
    assert len(kept_r) + mem["omitted"]["requirements"] == len(reqs)
    for e in kept_c + kept_r:  # a cut text says how much went; the rest are whole
        full = next(t for t in constraints + [r["text"] for r in reqs] if t.startswith(e["text"].rstrip("…")))
        assert e.get("cut", 0) == len(full) - len(e["text"]) + (1 if e.get("cut") else 0)
        assert len(e["text"]) <= max(LIMITS["text_chars"], len(full) if "cut" not in e else 0)
    if reqs:
        assert "r5" in [r["id"] for r in kept_r]  # the one this node serves is left out last
    assert "never push to main" in [e["text"] for e in kept_c]  # a short rule is never cut
    assert ledger.task("t").constraints == tuple(constraints)  # the task keeps them whole


def test_a_memory_block_that_fits_hands_out_every_constraint_whole(ledger):
    rule = "keep the public API stable: " + "x" * 3000
    ledger.create_task("t", constraints=[rule], requirements=[{"id": "r1", "text": "y" * 1500}])
    ledger.add_node("t", "a", serves=["r1"])
    mem = claim_of(ledger, "t", "a").inputs["memory"]
    assert [e["text"] for e in mem["constraints"]] == [rule] and "cut" not in mem["constraints"][0]
    assert mem["requirements"][0]["text"] == "y" * 1500
    assert mem["omitted"] == {"rejected": 0, "conclusions": 0, "memories": 0, "open_problems": 0, "constraints": 0,
                             "requirements": 0}


def test_hostile_text_is_stored_and_handed_back_as_written(ledger):
    nasty = "\x1b[31mred\x1b[0m [b]bold[/b] \u202eevil\u202c \u200bzw\x07 $(rm -rf /)"
    ledger.create_task("t", requirements=[{"id": "r1", "text": nasty}])
    ledger.add_node("t", "a", serves=["r1"])
    c = claim_of(ledger, "t", "a")
    ledger.conclude(c, nasty, source="[link=file:///etc/passwd]x[/link]", kind="rejected", reason=nasty)
    mid = ledger.propose_memory(c, nasty, source="tests")
    assert ledger.requirements("t")[0].text == nasty
    e = ledger.conclusions("t", kind="rejected")[0]
    assert (e.text, e.reason, e.source) == (nasty, nasty, "[link=file:///etc/passwd]x[/link]")
    assert ledger.memory(mid).text == nasty
    assert c.inputs["memory"]["requirements"][0]["text"] == nasty

"""The agent-side API: readiness, leases and fencing, progress, failures, handoffs, effects."""

from __future__ import annotations

import sqlite3

import pytest

from store import Budget, LeaseLost, Ledger, NodeSpec, NotFound, Refused
from store.storage.db import write_tx
from store.judges.novelty import normalise_lines
from store.storage.core import retry_delay
from tests.support.asks import ask


def state(ledger: Ledger, task_id: str) -> tuple:
    """Everything an agent write could change, to prove a refused write changed nothing."""
    g = ledger.graph(task_id)
    return (g.task, g.nodes, ledger.last_event_id(), ledger.artifacts(task_id), ledger.effects(task_id))


@pytest.fixture
def chain(ledger):
    ledger.create_task("t", title="Chain", inputs={"topic": "x"}, budget=Budget(tokens=1000))
    ledger.add_node("t", "a", kind="draft", est_wall_s=60)
    ledger.add_node("t", "b", kind="verify", deps=["a"])
    ledger.add_node("t", "c", kind="finalize", deps=["b"], always_admit=True)
    return ledger


def test_claim_takes_ready_nodes_in_order_and_gives_dep_outputs(chain, clock):
    a = chain.claim("t", "w1", lease_s=30)
    assert (a.node_key, a.attempt, a.lease_until) == ("a", 1, clock() + 30)
    assert chain.claim("t", "w2") is None  # b waits for a
    chain.commit(a, output={"text": "hello"}, tokens=100)
    b = chain.claim("t", "w2")
    assert b.node_key == "b"
    assert b.inputs["deps"]["a"]["output"] == {"text": "hello"}
    assert b.inputs["task"] == {"topic": "x"}
    assert b.token != a.token
    n = chain.node("t", "b")
    assert n.status == "running" and n.lease_owner == "w2" and n.claim_count == 1 and n.input_digest


def test_claim_refuses_unknown_task_and_bad_arguments(ledger):
    with pytest.raises(NotFound):
        ledger.claim("nope", "w")
    ledger.create_task("t")
    with pytest.raises(Refused):
        ledger.claim("t", "")


def test_add_node_refuses_unknown_dep_cycle_and_conflicting_redefinition(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a")
    with pytest.raises(Refused, match="unknown node 'zz'"):
        ledger.add_node("t", "b", deps=["zz"])
    with pytest.raises(Refused, match="itself"):
        ledger.add_node("t", "b", deps=["b"])
    with pytest.raises(Refused, match="cycle"):
        ledger.add_nodes("t", [NodeSpec("x", deps=("y",)), NodeSpec("y", deps=("x",))])
    ledger.add_node("t", "b", deps=["a"])
    ledger.add_node("t", "b", deps=["a"])  # the same again: a no-op (an agent restarted)
    with pytest.raises(Refused, match="other dependencies"):
        ledger.add_node("t", "b", deps=[])
    with pytest.raises(Refused, match="invalid node key"):
        ledger.add_node("t", "bad key")
    with pytest.raises(Refused, match="invalid task id"):
        ledger.create_task("bad id!")
    assert [n.key for n in ledger.graph("t").nodes] == ["a", "b"]


def test_add_nodes_out_of_order_is_stored_topologically(ledger):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("c", deps=("b",)), NodeSpec("b", deps=("a",)), NodeSpec("a")])
    assert [n.key for n in ledger.graph("t").nodes] == ["a", "b", "c"]
    assert ledger.dependents("t", "a") == ("b",)


def test_expiry_is_judged_at_write_time_and_lease_until_equal_now_is_expired(chain, clock):
    a = chain.claim("t", "w1", lease_s=30)
    clock.advance(29.999)
    chain.heartbeat(a)  # still live: extends to now + 30
    clock.advance(30)  # exactly at lease_until
    before = state(chain, "t")
    with pytest.raises(LeaseLost, match="expired"):
        chain.commit(a, output=1)
    with pytest.raises(LeaseLost):
        chain.heartbeat(a)
    assert state(chain, "t") == before


def test_commit_after_a_reclaim_under_the_same_worker_name_is_refused(chain, clock):
    a1 = chain.claim("t", "alice", lease_s=10)
    clock.advance(10)
    a2 = chain.claim("t", "alice", lease_s=10)  # the same name, a new claim
    assert a2.node_key == "a" and a2.attempt == 2 and a2.token != a1.token
    before = state(chain, "t")
    with pytest.raises(LeaseLost, match="reclaimed"):
        chain.commit(a1, output="late")
    assert state(chain, "t") == before
    chain.commit(a2, output="fresh")
    assert chain.node("t", "a").output == "fresh"
    assert chain.node("t", "a").claim_count == 2


def test_heartbeat_records_progress_tokens_and_new_information(chain, clock):
    a = chain.claim("t", "w1")
    p = chain.heartbeat(a, units_done=1, units_total=4, tokens=50, observation="Found 3 issues\n\n  in  module  A")
    assert p.new_units == 2 and not p.parked
    p = chain.heartbeat(a, tokens=25, observation="found 3 issues\nIN MODULE a\nnew line")
    assert p.new_units == 1
    p = chain.heartbeat(a, observation="found 3 issues")
    assert p.new_units == 0
    n = chain.node("t", "a")
    assert (n.units_done, n.units_total, n.tokens_used) == (1, 4, 75)
    assert chain.task("t").tokens_used == 75
    obs = chain.node_detail("t", "a").observations
    assert [o.new_units for o in obs] == [2, 1, 0]
    assert obs[0].digest != obs[1].digest
    assert n.version == chain.node("t", "a").version  # heartbeats do not bump the version


def test_normalise_lines():
    # numbers are volatile (a counter alone is not new information): store/judges/novelty.py
    assert normalise_lines("  Hello   World \n\n\tB  2 \r\n") == ["hello world", "b #"]
    assert normalise_lines("B 2") == normalise_lines("b 17")


def test_fail_retryable_persists_back_off_then_retries_with_next_attempt(chain, clock):
    a = chain.claim("t", "w1")
    chain.fail(a, error="timeout", failure_class="transient", retryable=True)
    n = chain.node("t", "a")
    assert n.status == "pending" and n.next_retry_at == clock() + retry_delay(1)
    assert chain.claim("t", "w1") is None  # back-off not passed
    clock.advance(retry_delay(1))
    again = chain.claim("t", "w1")
    assert again.node_key == "a" and again.attempt == 2
    chain.fail(again, error="bad spec", failure_class="spec", retryable=False)
    n = chain.node("t", "a")
    assert n.status == "failed" and n.failure_class == "spec"
    assert chain.task("t").status == "failed"  # nothing else can move
    with pytest.raises(Refused, match="failure class"):
        chain.fail(again, error="x", failure_class="oops")


def test_max_claims_fails_the_node_instead_of_claiming(ledger, clock):
    ledger.create_task("t", max_claims=2)
    ledger.add_node("t", "a")
    ledger.add_node("t", "b")
    ledger.claim("t", "w", lease_s=5)
    clock.advance(5)
    second = ledger.claim("t", "w", lease_s=5)
    assert (second.node_key, second.attempt) == ("a", 2)
    clock.advance(5)
    third = ledger.claim("t", "w", lease_s=5)
    assert third.node_key == "b"  # a failed instead of a third claim
    a = ledger.node("t", "a")
    assert a.status == "failed" and "limit is 2" in a.error


def test_hard_and_stop_gates_admit_only_the_closing_whitelist(chain, clock):
    a = chain.claim("t", "w1")
    assert a.admission == "admit"
    chain.commit(a, output=1, tokens=1000)  # 100 %: hard
    assert chain.admit("t", "b") == "deny_hard"
    assert chain.admit("t", "c") == "admit_degraded"
    assert chain.claim("t", "w1") is None  # b is not always_admit
    chain.add_node("t", "close", kind="finalize", always_admit=True)
    c = chain.claim("t", "w1")
    assert c.node_key == "close" and c.admission == "admit_degraded"
    chain.commit(c, output=1, tokens=200)  # 120 %: stop
    chain.add_node("t", "close2", always_admit=True)
    assert chain.admit("t", "b") == "deny_hard"  # stop: nothing else is claimable …
    c2 = chain.claim("t", "w1")  # … but the closing whitelist is admitted whatever the budget
    assert c2.node_key == "close2" and c2.admission == "admit_degraded"
    chain.commit(c2, output=1)
    assert chain.claim("t", "w1") is None


def test_soft_gate_admits_degraded(chain):
    a = chain.claim("t", "w1")
    chain.commit(a, output=1, tokens=700)
    b = chain.claim("t", "w1")
    assert b.admission == "admit_degraded"


def test_commit_completes_the_task_and_stores_the_artifact(chain, clock):
    for _ in range(3):
        c = chain.claim("t", "w")
        clock.advance(2)
        chain.commit(c, output={"k": c.node_key}, artifact=(f"{c.node_key}.txt", c.node_key.encode()))
    t = chain.task("t")
    assert t.status == "completed" and t.finished_at == clock()
    view, data = chain.latest_artifact("t")
    assert (view.name, data, view.node) == ("c.txt", b"c", "c")
    assert chain.node("t", "a").wall_used_s == 2
    kinds = [e.kind for e in chain.events(0, task_id="t")]
    assert kinds[-1] == "task.completed" and kinds.count("node.committed") == 3


def test_commit_with_next_nodes_grows_the_graph_atomically(ledger):
    ledger.create_task("t", max_repairs=1)
    ledger.add_node("t", "verify", kind="verify")
    v = ledger.claim("t", "w")
    ledger.commit(v, output={"ok": False}, repair=True, next_nodes=[NodeSpec("fix", deps=("verify",))])
    assert [n.key for n in ledger.graph("t").nodes] == ["verify", "fix"]
    assert ledger.task("t").repair_count == 1
    f = ledger.claim("t", "w")
    with pytest.raises(Refused, match="unknown node"):
        ledger.commit(f, output=1, next_nodes=[NodeSpec("x", deps=("nope",))])
    assert ledger.node("t", "fix").status == "running"  # the refused commit wrote nothing
    assert [n.key for n in ledger.graph("t").nodes] == ["verify", "fix"]
    # past max_repairs the round is not made: the node and the task fail (tests/store/test_seed_repair.py)
    ledger.commit(f, output={"ok": False}, repair=True, next_nodes=[NodeSpec("fix2", deps=("fix",))])
    assert ledger.node("t", "fix").status == "failed" and ledger.task("t").status == "failed"
    assert [n.key for n in ledger.graph("t").nodes] == ["verify", "fix"]


def test_request_human_blocks_the_node_and_opens_a_handoff(chain):
    a = chain.claim("t", "w1")
    hid = ask(chain, a, kind="confirm", question="Open the PR?",
                              options=[{"id": "yes", "label": "Open it", "consequence": "a PR is created"},
                                       {"id": "no", "label": "Skip"}],
                              recommendation="yes", context={"done": "diff ready"})
    assert chain.node("t", "a").status == "blocked"
    h = chain.handoff(hid)
    assert (h.status, h.kind, h.recommendation, h.node) == ("open", "confirm", "yes", "a")
    assert [o["id"] for o in h.options] == ["yes", "no"]
    assert chain.task("t").handoffs_open == 1
    with pytest.raises(LeaseLost):
        chain.heartbeat(a)
    b = chain.claim("t", "w2")
    assert b is None  # nothing else is ready
    with pytest.raises(Refused, match="recommendation"):
        ask(chain, a, kind="confirm", question="?", options=[{"id": "x"}], recommendation="y")


def test_effects_are_an_idempotent_intent_log(chain):
    a = chain.claim("t", "w1")
    e = chain.intend_effect(a, "pr:repo/fix:create", payload={"title": "fix"}, compensation="close the PR")
    assert e.status == "intended"
    assert chain.intend_effect(a, "pr:repo/fix:create").id == e.id
    c = chain.confirm_effect(a, "pr:repo/fix:create", external_id="#42")
    assert (c.status, c.external_id, c.compensation) == ("confirmed", "#42", "close the PR")
    assert chain.intend_effect(a, "pr:repo/fix:create").status == "confirmed"  # do not repeat it
    with pytest.raises(Refused, match="never intended"):
        chain.confirm_effect(a, "other")
    chain.note(a, "Skipping module x: generated code")
    detail = chain.node_detail("t", "a")
    assert detail.events[0].layer == "decision" and detail.events[0].summary.startswith("Skipping")
    assert [x.effect_key for x in detail.effects] == ["pr:repo/fix:create"]


def test_agent_writes_after_the_task_is_gone_are_fenced(chain, clock):
    a = chain.claim("t", "w1")
    with write_tx(chain.db):  # what an operator's revocation does to the row
        chain.db.execute_sql("UPDATE node SET lease_token = NULL, status = 'pending', version = version + 1 "
                             "WHERE key = 'a'")
    before = state(chain, "t")
    for call in (lambda: chain.heartbeat(a), lambda: chain.commit(a, output=1),
                 lambda: chain.fail(a, error="x"), lambda: chain.note(a, "x"),
                 lambda: chain.intend_effect(a, "k"),
                 lambda: ask(chain, a, kind="confirm", question="?")):
        with pytest.raises(LeaseLost, match="revoked"):
            call()
    assert state(chain, "t") == before


def test_nested_write_transaction_guard_fires(ledger):
    ledger.create_task("t")
    ledger.add_node("t", "a")
    with pytest.raises(RuntimeError, match="nested write transaction"):
        with ledger.db.atomic():
            ledger.claim("t", "w")
    with pytest.raises(RuntimeError, match="nested"):
        with write_tx(ledger.db):
            with write_tx(ledger.db):
                pass
    assert ledger.node("t", "a").status == "pending"


def test_journal_ids_only_grow_and_events_read_after_a_cursor(chain):
    a = chain.claim("t", "w")
    chain.heartbeat(a, observation="x")
    chain.commit(a, output=1)
    evs = chain.events(0)
    ids = [e.id for e in evs]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert [e.id for e in chain.events(ids[2])] == ids[3:]
    assert chain.last_event_id() == ids[-1]
    assert chain.nodes("t", ["b", "a", "zz"])[0].key == "a"


def test_create_task_exist_ok_is_idempotent(ledger):
    ledger.create_task("t", title="one")
    assert ledger.create_task("t", title="two", exist_ok=True).title == "one"
    with pytest.raises(Refused, match="already exists"):
        ledger.create_task("t")


def test_output_too_large_is_refused(chain):
    a = chain.claim("t", "w")
    with pytest.raises(Refused, match="artifact"):
        chain.commit(a, output="x" * 70000)
    assert chain.node("t", "a").status == "running"


def test_sqlite_pragmas(sqlite_only, ledger):
    cur = ledger.db.execute_sql("PRAGMA journal_mode")
    assert cur.fetchone()[0] == "wal"
    assert ledger.db.execute_sql("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert ledger.db.execute_sql("PRAGMA foreign_keys").fetchone()[0] == 1
    assert ledger.db.execute_sql("PRAGMA busy_timeout").fetchone()[0] >= 1000
    assert isinstance(sqlite3.sqlite_version, str)


def test_commit_many_commits_each_step_atomically_in_one_transaction(ledger, clock):
    ledger.create_task("t")
    for k in "abc":
        ledger.add_node("t", k)
    a, b, c = (ledger.claim("t", "w", lease_s=10) for _ in range(3))
    # b's lease is taken away before the group commit: only b is refused.
    with write_tx(ledger.db):
        ledger.db.execute_sql("UPDATE node SET lease_token = NULL, status = 'pending' WHERE key = 'b'")
    res = ledger.commit_many([(a, {"output": 1, "tokens": 5}), (b, {"output": 2}),
                              (c, {"output": 3, "artifact": ("c.txt", b"c")})])
    assert isinstance(res[0], int) and isinstance(res[2], int)
    assert isinstance(res[1], LeaseLost)
    assert [ledger.node("t", k).status for k in "abc"] == ["succeeded", "pending", "succeeded"]
    assert ledger.node("t", "b").output is None
    assert ledger.task("t").tokens_used == 5
    with pytest.raises(TypeError):
        ledger.commit_many([(a, {"nonsense": 1})])


def test_graph_pages_take_a_whole_float_as_its_rule_does(ledger: Ledger) -> None:
    # The LIMIT rule accepts 1.0 (a whole number); the driver's fetchmany refused it (a TypeError).
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",)), NodeSpec("c")])
    pages = list(ledger.graph_pages("t", first=1.0, page=2.0))  # type: ignore[arg-type]
    assert [n.key for n in pages[0].nodes] == ["a"] and [n.key for p in pages for n in p.nodes] == ["a", "b", "c"]

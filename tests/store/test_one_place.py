"""An observation and a rewind's reason are each stored once and reach their readers one way; a
ledger written before (schema 4: the observation copied into the heartbeat's payload, the reason
copied into each reset node) reads as it always did and migrates without a rewrite."""

from __future__ import annotations

import json

import pytest

from console.cli import main as warden
from store import Ledger, NodeSpec, SchemaMismatch
from store.judges.novelty import excerpt
from store.mind.rules import ENTRIES_PER_NODE
from store.reading.signals import read_observations
from store.storage import schema
from store.storage.db import is_sqlite, open_database
from store.storage.events import NodeHeartbeat, payload_of
from store.storage.models import dumps
from store.views import FLAG_RESULT

LONG = 3600.0
OBSERVED_KEYS = {"new_units", "digest", "lines", "action_key", "action", "content", "result", "flags"}


def _beats(ledger: Ledger, clock) -> None:
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    c = ledger.claim("t", "w", lease_s=LONG, key="a")
    clock.advance(2)
    ledger.heartbeat(c, observation="compiling\n  module x", units_done=1)
    clock.advance(2)
    ledger.heartbeat(c, action="pytest -q tests/   -x", result="  3 passed,\n 1 failed")
    clock.advance(2)
    ledger.heartbeat(c, tokens=5)  # reports nothing: no observation


def _stored(ledger: Ledger, sql_text: str, params: list[object]) -> list[tuple[object, ...]]:
    ph = "?" if is_sqlite(ledger.db) else "%s"
    return list(ledger.db.execute_sql(sql_text.replace("?", ph), params).fetchall())


def test_a_heartbeat_stores_what_its_report_brought_once_and_shows_it_as_the_journal_always_did(ledger, clock):
    _beats(ledger, clock)
    beats = [e for e in ledger.events(0) if e.kind == NodeHeartbeat.KIND]
    stored = _stored(ledger, "SELECT payload, observation_id FROM event WHERE kind = ? ORDER BY id", [NodeHeartbeat.KIND])
    assert [oid is not None for _, oid in stored] == [True, True, False]
    assert all(not OBSERVED_KEYS & set(json.loads(p)) for p, _ in stored)  # the payload holds none of it
    first, second, quiet = beats
    assert {"digest", "new_units", "lines"} <= set(first.payload) and "action" not in first.payload
    assert second.payload["action"] == "pytest -q tests/ -x" and second.payload["result"] == "3 passed, 1 failed"
    assert second.payload["action_key"] and second.payload["content"]
    assert not OBSERVED_KEYS & set(quiet.payload) and quiet.observation is None
    assert list(second.payload) == sorted(second.payload)  # the keys in the order the journal keeps
    # One way to every reader: the heartbeat's typed payload and the stall signals' evidence get
    # the same thing from the same row.
    node_id = ledger.node("t", "a").id
    from_evidence = [o.digest for o in read_observations(ledger, [node_id], 12)[node_id]]
    from_events = [p.observation.digest for p in map(payload_of, beats)
                   if isinstance(p, NodeHeartbeat) and p.observation is not None]
    assert from_events == from_evidence and len(from_events) == 2
    assert beats[1].observation == payload_of(beats[1]).observation  # type: ignore[attr-defined]


def test_a_rewind_reason_is_stored_once_and_reaches_every_reset_node_from_there(ledger, clock):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    for key in ("a", "b"):
        c = ledger.claim("t", "w", lease_s=LONG, key=key)
        ledger.commit(c, output={"k": key})
    reason = "the totals must use the 2024 figures"
    ledger.apply(ledger.plan_rewind("t", "a", reason=reason), operator="ana")
    assert _stored(ledger, "SELECT COUNT(*) FROM conclusion WHERE reason = ?", [reason]) == [(1,)]
    [(cid,)] = _stored(ledger, "SELECT id FROM conclusion WHERE reason = ?", [reason])
    assert sorted(_stored(ledger, "SELECT key, rejections FROM node WHERE task_id = ?", ["t"])) == [
        ("a", dumps([cid])), ("b", dumps([cid]))]  # each reset node names it; neither copies it
    assert ledger.node("t", "b").rejections == (reason,)
    claim = ledger.claim("t", "w", lease_s=LONG, key="a")
    assert claim.inputs["rejections"] == [reason]
    assert [e["reason"] for e in claim.inputs["memory"]["rejected"]] == [reason]


def test_a_rewind_is_never_left_out_of_what_the_agent_is_handed(ledger, clock):
    """A node past its bound of written conclusions still gets an operator's rewind reason."""
    ledger.create_task("t")
    ledger.add_node("t", "a")
    c = ledger.claim("t", "w", lease_s=LONG, key="a")
    for i in range(ENTRIES_PER_NODE):
        ledger.conclude(c, f"finding {i}", source="test")
    ledger.commit(c, output={})
    ledger.apply(ledger.plan_rewind("t", "a", reason="wrong repository"), operator="ana")
    assert ledger.claim("t", "w", lease_s=LONG, key="a").inputs["rejections"] == ["wrong repository"]


def _as_schema_4(path: str) -> None:
    """The ledger as schema 4 wrote it: what a heartbeat's report brought copied into its payload,
    the rewind's reason copied into each reset node's rejections, no ``event.observation_id``."""
    with Ledger.open(path) as led:
        shown = {e.id: dict(e.payload) for e in led.events(0, limit=100_000)}
        reasons = led.rejection_reasons(json.loads(r) for (r,) in led.db.execute_sql("SELECT rejections FROM node"))
        nodes = [(i, json.loads(r)) for i, r in led.db.execute_sql("SELECT id, rejections FROM node")]
    db = open_database(path)
    ph = "?" if is_sqlite(db) else "%s"
    with db.atomic():
        for eid, payload in shown.items():
            db.execute_sql(f"UPDATE event SET payload = {ph} WHERE id = {ph}", (dumps(payload), eid))
        for nid, values in nodes:
            db.execute_sql(f"UPDATE node SET rejections = {ph} WHERE id = {ph}",
                           (dumps([reasons[v] if isinstance(v, int) else v for v in values]), nid))
        db.execute_sql("ALTER TABLE event DROP COLUMN observation_id")
        db.execute_sql(f"UPDATE meta SET value = {ph} WHERE key = 'schema_version'", ("4",))
    db.close()


def test_a_schema_4_ledger_reads_as_it_did_and_migrates_without_a_rewrite(ledger_path, clock, capsys):
    with Ledger.open(ledger_path, clock=clock) as led:
        _beats(led, clock)
        led.apply(led.plan_rewind("t", "a", reason="use the other API"), operator="ana")
        before = [(e.id, e.kind, e.summary, json.dumps(dict(e.payload))) for e in led.events(0)]
        shown_rejections = {n.key: n.rejections for n in led.graph("t").nodes}
    _as_schema_4(ledger_path)
    with pytest.raises(SchemaMismatch, match="schema 4.*warden migrate"):
        Ledger.open(ledger_path)
    assert warden(["migrate", "--ledger", ledger_path]) == 0
    assert "4" in capsys.readouterr().out
    with Ledger.open(ledger_path, clock=clock) as led:
        assert schema.SCHEMA_VERSION == 5
        # the old heartbeats and rejections read exactly as before: nothing was rewritten
        assert [(e.id, e.kind, e.summary, json.dumps(dict(e.payload))) for e in led.events(0)] == before
        assert {n.key: n.rejections for n in led.graph("t").nodes} == shown_rejections
        old = [payload_of(e) for e in led.events(0) if e.kind == NodeHeartbeat.KIND]
        assert [p.observation is not None for p in old if isinstance(p, NodeHeartbeat)] == [True, True, False]
        # new writes store each fact once, beside the old ones
        c = led.claim("t", "w", lease_s=LONG, key="a")
        assert c.inputs["rejections"] == ["use the other API"]
        clock.advance(1)
        led.heartbeat(c, observation="new line")
        new = led.events(0)[-1]
        assert new.observation is not None and new.payload["digest"] == new.observation.digest
        led.apply(led.plan_rewind("t", "a", reason="and again"), operator="ana")
        assert led.node("t", "a").rejections == ("use the other API", "and again")  # old text, then an id


def test_a_plain_report_judged_as_a_tools_output_shows_its_text_as_the_result_to_every_reader(ledger, clock):
    ledger.create_task("t")
    ledger.add_nodes("t", [NodeSpec("a")])
    c = ledger.claim("t", "w", lease_s=LONG, key="a")
    text = "$ pytest -q\n3 passed, 1 failed\nFAILED tests/test_x.py::test_y - AssertionError"
    ledger.heartbeat(c, observation=text)
    [beat] = [e for e in ledger.events(0) if e.kind == NodeHeartbeat.KIND]
    [(flags, result)] = _stored(ledger, "SELECT flags, result FROM observation", [])
    assert int(flags) & FLAG_RESULT and result is None  # judged as output; no result column of its own
    assert beat.payload["result"] == excerpt(text) and beat.payload["content"]
    node_id = ledger.node("t", "a").id
    [seen] = read_observations(ledger, [node_id], 12)[node_id]
    assert (seen.result, seen.content) == (beat.payload["result"], beat.payload["content"])

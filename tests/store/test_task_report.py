"""The stop deliverable: ``task_report`` at any time, above all at the stop gate and after abort.
And the migration that brings the columns it and the budget clock need (schema 1 → 2, then on to 3)."""

from __future__ import annotations

import hashlib

import pytest

from store import Budget, Ledger, NodeSpec
from store.storage import schema
from store.storage.db import is_sqlite, open_database
from store.reading.task_report import task_report
from tests.support.asks import ask

LONG = 10**7
KEYS = ["best_artifact", "unfinished", "budget", "handoffs_open", "effects_unconfirmed"]


@pytest.fixture
def stopped(ledger, clock):
    """A task at the stop gate: a report drafted (artifact), a section rewound after a better
    draft, a handoff open, an effect intended but never confirmed, closing steps not run."""
    ledger.create_task("t", title="Pilot report", budget=Budget(tokens=1000))
    ledger.add_nodes("t", [NodeSpec("draft", "llm"), NodeSpec("review", "llm", ("draft",)),
                           NodeSpec("ask", "human"), NodeSpec("pr", "tool", ("review",)),
                           NodeSpec("summary", "llm", ("review",), always_admit=True)])
    c = ledger.claim("t", "w", lease_s=LONG, kinds=["llm"])
    clock.advance(10)
    ledger.commit(c, output={}, tokens=300, artifact=("report.md", b"# v1\n"))
    c = ledger.claim("t", "w", lease_s=LONG, kinds=["llm"])
    ledger.commit(c, output={}, tokens=300, artifact=("report.md", b"# v2 reviewed\n"))
    c = ledger.claim("t", "w", lease_s=LONG, kinds=["human"])
    hid = ask(ledger, c, kind="acceptance", question="Accept v2?", options=[{"id": "yes"}],
                               recommendation="yes")
    c = ledger.claim("t", "w", lease_s=LONG, kinds=["tool"])
    ledger.intend_effect(c, "pr:report", compensation="close the PR")
    ledger.commit(c, output={}, tokens=700)  # 1,300 of 1,000: stop
    clock.advance(5)
    return hid


def test_the_report_at_the_stop_gate(ledger, clock, stopped):
    assert ledger.claim("t", "w", kinds=["tool", "human"]) is None  # nothing is claimable at stop …
    assert ledger.admit("t", "summary") == "admit_degraded"  # … but the closing whitelist
    r = task_report(ledger, "t")  # … and this is what it leaves
    assert [k for k in r if k in KEYS] == KEYS
    assert r["status"] == "active" and r["budget"]["gate"] == "stop"
    art = r["best_artifact"]
    assert (art["name"], art["node"], art["current"], art["bytes"]) == ("report.md", "review", True, 14)
    assert art["sha256"] == hashlib.sha256(b"# v2 reviewed\n").hexdigest()
    assert [(u["key"], u["status"], u["always_admit"]) for u in r["unfinished"]] == [
        ("ask", "blocked", False), ("summary", "pending", True)]
    assert r["budget"]["tokens_used"] == 1300 and r["budget"]["gates"]["stop"] == {
        "tokens": 1200, "wall_s": None, "reached": True}
    assert r["budget"]["gates"]["soft"]["tokens"] == 700
    [h] = r["handoffs_open"]
    assert (h["id"], h["node"], h["kind"], h["question"], h["age_s"]) == (stopped, "ask", "acceptance",
                                                                          "Accept v2?", 5.0)
    assert r["effects_unconfirmed"] == [{"node": "pr", "effect_key": "pr:report",
                                         "intended_at": r["effects_unconfirmed"][0]["intended_at"]}]
    assert r["progress"] == {"done": 3, "total": 5, "counts": {"succeeded": 3, "blocked": 1, "pending": 1}}


def test_a_superseded_artifact_is_marked_and_a_current_one_preferred(ledger, clock, stopped):
    ledger.apply(ledger.plan_rewind("t", "review", reason="v2 is wrong"), operator="op")
    art = task_report(ledger, "t")["best_artifact"]
    assert (art["node"], art["current"]) == ("draft", True)  # v1 still stands; v2 was rewound
    ledger.apply(ledger.plan_rewind("t", "draft", reason="start over"), operator="op")
    art = task_report(ledger, "t")["best_artifact"]
    assert (art["node"], art["current"]) == ("review", False)  # only superseded ones: the newest, marked


def test_the_report_after_abort_lists_what_to_compensate(ledger, clock, stopped):
    ledger.apply(ledger.plan_abort("t", reason="stop here"), operator="op")
    r = task_report(ledger, "t")
    assert r["status"] == "aborted" and r["unfinished"] == [] and r["handoffs_open"] == []
    assert r["effects_unconfirmed"][0]["effect_key"] == "pr:report"
    assert r["effects_to_compensate"] == []  # intended only: nothing confirmed to undo


def test_a_task_without_anything(ledger):
    ledger.create_task("e")
    r = task_report(ledger, "e")
    assert r["best_artifact"] is None and r["unfinished"] == [] and r["budget"]["gates"]["stop"]["reached"] is False


# ---------------------------------------------------------------------- the migration 1 → 2 → … → now
# The columns and tables added after schema 1: each later schema's part adds its own here, so the
# schema-1 ledger below lacks them all and `warden migrate` must bring every one back.
NEW = {"task": ["paused_s", "paused_since", "wake_state"],
       "effect": ["compensation_node_id", "compensated_at", "compensated_by", "compensation_note"],
       "node": ["beat_interval_s", "units_at", "wait_on", "wait_since", "wait_until"]}  # schema 3's
NEW["task"] += ["origin"]  # schema 4 part "origin": which integration made the task
NEW_TABLES = ["write_request"]  # schema 2's
NEW["task"] += ["mind"]  # schema 4 part "mind": requirements, conclusions, plan versions
NEW["node"] += ["serves", "removed_in", "removed_mode"]
NEW_TABLES += ["requirement", "conclusion", "plan_version", "memory"]
NEW["node"] += ["progress_at", "beat_gaps", "beat_long_s", "paused_s"]  # schema 4, part "novelty"
NEW["observation"] = ["action", "result", "action_key", "content", "flags", "concepts"]  # schema 4, "novelty"
NEW["node"] = NEW["node"] + ["step_deadline", "density", "repair"]  # schema 4's part "seed rules"
NEW["task"] = NEW["task"] + ["density_limit"]  # schema 4's part "seed rules"
NEW["event"] = ["observation_id"]  # schema 5's part "one observation"


def _make_schema_1(path: str, clock) -> None:
    """A ledger as schema 1 wrote it: made now, then the columns of schemas 2 and 3 dropped."""
    led = Ledger.open(path, clock=clock)
    led.create_task("t", budget=Budget(wall_s=100))
    led.add_nodes("t", [NodeSpec("a"), NodeSpec("b")])
    c = led.claim("t", "w", lease_s=LONG)
    clock.advance(10)
    led.commit(c, output={})
    led.apply(led.plan_park("t", reason="wait"), operator="op")
    led.create_task("done")
    led.add_node("done", "x")
    c = led.claim("done", "w", lease_s=LONG)
    clock.advance(3)
    led.commit(c, output={})
    led.close()
    db = open_database(path)
    with db.atomic():
        for table in NEW_TABLES:
            db.execute_sql(f"DROP TABLE {table}")
        for table, cols in NEW.items():
            for col in cols:
                db.execute_sql(f"ALTER TABLE {table} DROP COLUMN {col}")
        ph = "?" if is_sqlite(db) else "%s"
        db.execute_sql(f"UPDATE meta SET value = {ph} WHERE key = 'schema_version'", ("1",))
    db.close()


def test_a_schema_1_ledger_migrates_to_the_current_schema(ledger_path, clock):
    from console.cli import main as warden

    _make_schema_1(ledger_path, clock)
    with pytest.raises(Exception, match="warden migrate"):
        Ledger.open(ledger_path)
    assert warden(["migrate", "--ledger", ledger_path]) == 0
    db = open_database(ledger_path)
    try:
        for table, cols in NEW.items():
            have = {c.name for c in db.get_columns(table)}
            assert set(cols) <= have
        assert set(NEW_TABLES) <= set(db.get_tables())
        assert db.execute_sql("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(schema.SCHEMA_VERSION)
    finally:
        db.close()
    clock.advance(500)
    with Ledger.open(ledger_path, clock=clock) as led:
        t = led.task("t")
        # parked at the upgrade: its clock stands still from the park on, not from the upgrade
        assert t.status == "parked" and t.paused_since is not None and t.wall_used_s == pytest.approx(10)
        d = led.task("done")
        assert d.status == "completed" and d.wall_used_s == pytest.approx(3)
        led.apply(led.plan_resume("t"), operator="op")
        c = led.claim("t", "w", lease_s=LONG)
        clock.advance(2)
        assert led.task("t").wall_used_s == pytest.approx(12)
        assert led.effects("t") == [] and c is not None
        led.heartbeat(c, observation="polling", waiting_on="ci", wait_s=60)  # schema 3's columns
        assert led.node("t", c.node_key).wait_on == "ci"

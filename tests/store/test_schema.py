"""Opening ledgers: schema versions, migrate, read-only, corrupt and foreign files."""

from __future__ import annotations

import json
import sqlite3

import pytest

from console.cli import main as warden
from store import Ledger, LedgerUnavailable, NodeSpec, ReadOnly, SchemaMismatch
from store.storage import schema
from store.storage.db import is_sqlite, open_database


def set_version(path: str, v: int) -> None:
    db = open_database(path)
    ph = "?" if is_sqlite(db) else "%s"
    with db.atomic():
        db.execute_sql(f"UPDATE meta SET value = {ph} WHERE key = 'schema_version'", (str(v),))
    db.close()


def columns(path: str, table: str) -> list[str]:
    db = open_database(path)
    try:
        return [c.name for c in db.get_columns(table)]
    finally:
        db.close()


def make(path: str) -> None:
    led = Ledger.open(path)
    led.create_task("t")
    led.add_node("t", "a")
    led.close()


def test_a_newer_schema_is_refused_naming_both_versions(ledger_path, capsys):
    make(ledger_path)
    set_version(ledger_path, schema.SCHEMA_VERSION + 5)
    with pytest.raises(SchemaMismatch) as e:
        Ledger.open(ledger_path)
    msg = str(e.value)
    assert f"schema {schema.SCHEMA_VERSION + 5}" in msg and f"schema {schema.SCHEMA_VERSION}" in msg
    assert warden(["status", "--ledger", ledger_path]) == 4
    err = capsys.readouterr().err
    assert "newer Warden" in err and len(err.strip().splitlines()) == 1
    assert warden(["migrate", "--ledger", ledger_path]) == 4  # migrate refuses too


@pytest.mark.parametrize("version", [schema.SCHEMA_VERSION + 95, 0])
def test_a_refused_migrate_leaves_the_directory_as_it_found_it(tmp_path, capsys, version):
    """Schema 99 (newer) or 0 (no migration from it): exit 4 with the line, and no ``-writers``
    gate, ``-wal`` or ``-shm`` left beside the ledger."""
    path = str(tmp_path / "ledger.db")
    make(path)
    set_version(path, version)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert before == ["ledger.db"]
    assert warden(["migrate", "--ledger", path]) == 4
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"schema {version}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_older_schema_asks_for_migrate_and_migrate_upgrades(ledger_path, monkeypatch, capsys):
    make(ledger_path)
    # Pretend this Warden is one schema ahead with one registered migration step.
    calls = []

    def step(db):
        calls.append(db.transaction_depth())
        db.execute_sql("ALTER TABLE task ADD COLUMN owner TEXT")

    monkeypatch.setattr(schema, "SCHEMA_VERSION", schema.SCHEMA_VERSION + 1)
    monkeypatch.setitem(schema.MIGRATIONS, schema.SCHEMA_VERSION - 1, step)
    with pytest.raises(SchemaMismatch, match="warden migrate"):
        Ledger.open(ledger_path)
    assert warden(["status", "--ledger", ledger_path]) == 4
    assert "warden migrate" in capsys.readouterr().err
    assert warden(["migrate", "--ledger", ledger_path]) == 0
    assert "migrated schema" in capsys.readouterr().out
    assert calls == [1]  # ran inside the one write transaction
    led = Ledger.open(ledger_path)
    assert led.task("t").task_id == "t"
    led.close()
    assert "owner" in columns(ledger_path, "task")
    assert warden(["migrate", "--ledger", ledger_path]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_read_only_refuses_every_write(ledger_path):
    make(ledger_path)
    ro = Ledger.open(ledger_path, read_only=True)
    assert ro.task("t").task_id == "t"
    with pytest.raises(ReadOnly, match="read-only"):
        ro.create_task("u")
    with pytest.raises(ReadOnly):
        ro.claim("t", "w")
    with pytest.raises(ReadOnly):
        ro.add_node("t", "b")
    ro.close()
    rw = Ledger.open(ledger_path)
    assert [n.key for n in rw.graph("t").nodes] == ["a"] and rw.node("t", "a").status == "pending"
    rw.close()


def test_read_only_refuses_even_a_raw_write(ledger_path):
    make(ledger_path)
    ro = Ledger.open(ledger_path, read_only=True)
    with pytest.raises(Exception, match="readonly|read-only|query_only"):
        ro.db.execute_sql("UPDATE task SET title = 'x'")
    ro.close()


def test_a_corrupt_file_gives_one_clear_line(tmp_path, capsys):
    bad = tmp_path / "ledger.db"
    bad.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(LedgerUnavailable):
        Ledger.open(str(bad))
    assert warden(["status", "--ledger", str(bad)]) == 4
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert bad.read_bytes() == b"this is not a database at all" * 100


def test_a_foreign_sqlite_database_is_not_a_ledger(tmp_path, capsys):
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (id INTEGER)")
    con.commit()
    con.close()
    assert warden(["graph", "x", "--ledger", str(other)]) == 4
    assert "not a Warden ledger" in capsys.readouterr().err


def test_a_missing_ledger_is_not_created_by_the_cli(tmp_path, capsys):
    missing = tmp_path / "typo.db"
    for argv in (["status"], ["graph", "t"], ["events"], ["migrate"], ["export", "t", "--output", "x"]):
        assert warden([*argv, "--ledger", str(missing)]) == 4
    err = capsys.readouterr().err
    assert "warden demo" in err
    assert not missing.exists() and list(tmp_path.iterdir()) == []


def test_a_symlinked_ledger_is_refused(tmp_path, ledger_path):
    make(ledger_path)
    link = tmp_path / "link.db"
    link.symlink_to(ledger_path)
    with pytest.raises(LedgerUnavailable, match="symbolic link"):
        Ledger.open(str(link))


def test_sqlite_urls(tmp_path):
    p = tmp_path / "u.db"
    led = Ledger.open(f"sqlite:///{p}")
    led.create_task("t")
    led.close()
    assert Ledger.open(str(p), create=False).task("t").task_id == "t"
    with pytest.raises(LedgerUnavailable, match="scheme"):
        Ledger.open("mysql://x/y")


def test_usage_errors_exit_2(capsys):
    assert warden(["graph"]) == 2
    assert warden(["nonsense"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_a_schema_1_ledger_migrates_to_2_with_the_write_request_table(ledger_path, capsys):
    """Schema 2 adds ``write_request`` (idempotent writes across lost PostgreSQL connections):
    a ledger written by schema 1 (no such table) is refused until ``warden migrate`` adds it,
    with every row kept; then agent writes (which record request ids on PostgreSQL) work."""
    make(ledger_path)
    db = open_database(ledger_path)
    with db.atomic():
        db.execute_sql("DROP TABLE write_request")
    db.close()
    set_version(ledger_path, 1)
    with pytest.raises(SchemaMismatch, match="schema 1.*warden migrate"):
        Ledger.open(ledger_path)
    assert warden(["migrate", "--ledger", ledger_path]) == 0
    assert "migrated schema" in capsys.readouterr().out
    assert {"id", "at", "result"} <= set(columns(ledger_path, "write_request"))
    led = Ledger.open(ledger_path)
    assert [n.key for n in led.graph("t").nodes] == ["a"]
    c = led.claim("t", "w")
    led.commit(c, output={"ok": 1})
    assert led.task("t").status == "completed"
    led.close()


# ---------------------------------------------------------------------- the real steps: 1 → 2 → 3 → 4
# What each step adds: dropping it from a ledger made now gives the ledger that version wrote.
STEP_COLUMNS = {
    2: {"task": ["paused_s", "paused_since", "wake_state"],
        "effect": ["compensation_node_id", "compensated_at", "compensated_by", "compensation_note"]},
    3: {"node": ["beat_interval_s", "units_at", "wait_on", "wait_since", "wait_until"]},
}
STEP_COLUMNS[4] = {}  # schema 4's parts (store/storage/schema.py SCHEMA_4_PARTS) add theirs here
STEP_COLUMNS[4].setdefault("task", []).append("origin")  # part "origin": which integration made the task
STEP_COLUMNS[4].setdefault("task", []).append("mind")  # part "mind": the task's requirements and conclusions
STEP_COLUMNS[4].setdefault("node", []).extend(["serves", "removed_in", "removed_mode"])
STEP_COLUMNS[4].setdefault("observation", []).extend(["action", "result", "action_key", "content", "flags",
                                                      "concepts"])  # part "novelty"
STEP_COLUMNS[4].setdefault("node", []).extend(["progress_at", "beat_gaps", "beat_long_s", "paused_s"])  # "novelty"
STEP_COLUMNS[4].setdefault("node", []).extend(["step_deadline", "density", "repair"])  # seed rules
STEP_COLUMNS[4].setdefault("task", []).append("density_limit")  # seed rules
STEP_COLUMNS[5] = {"memory": ["source"],  # schema 5's parts (SCHEMA_5_PARTS): "quotas and people",
                  "event": ["observation_id"]}  # "one observation"
STEP_TABLES = {2: ["write_request"], 3: [], 4: [], 5: ["quota", "node_quota", "quota_draw", "confirm_kind"]}
STEP_COLUMNS[5]["node"] = ["healthy_at"]  # part "kind norms"
STEP_TABLES[5].append("kind_norm")
STEP_TABLES[4] += ["requirement", "conclusion", "plan_version", "memory"]  # part "mind"


def _shape(path: str) -> dict[str, set[str]]:
    db = open_database(path)
    try:
        return {t: {c.name for c in db.get_columns(t)} for t in db.get_tables()}
    finally:
        db.close()


def _stored_version(path: str) -> str:
    db = open_database(path)
    try:
        return db.execute_sql("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        db.close()


def _downgrade(path: str, to: int) -> None:
    db = open_database(path)
    with db.atomic():
        for step in range(schema.SCHEMA_VERSION, to, -1):
            for table in STEP_TABLES[step]:
                db.execute_sql(f"DROP TABLE {table}")
            for table, cols in STEP_COLUMNS[step].items():
                for col in cols:
                    db.execute_sql(f"ALTER TABLE {table} DROP COLUMN {col}")
        ph = "?" if is_sqlite(db) else "%s"
        db.execute_sql(f"UPDATE meta SET value = {ph} WHERE key = 'schema_version'", (str(to),))
    db.close()


def test_a_new_ledger_is_written_at_the_current_schema(ledger_path):
    make(ledger_path)
    assert schema.SCHEMA_VERSION == max(STEP_COLUMNS) == 5 and _stored_version(ledger_path) == "5"
    shape = _shape(ledger_path)
    for step in STEP_COLUMNS:
        for table, cols in STEP_COLUMNS[step].items():
            assert set(cols) <= shape[table]
        assert set(STEP_TABLES[step]) <= set(shape)


@pytest.mark.parametrize("start", [1, 2, 3, 4])
def test_migrate_takes_every_older_schema_to_the_current_one_with_every_column(ledger_path, clock, start, capsys):
    fresh = None
    with Ledger.open(ledger_path, clock=clock) as led:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec("a"), NodeSpec("b", deps=("a",))])
    fresh = _shape(ledger_path)
    _downgrade(ledger_path, start)
    assert _stored_version(ledger_path) == str(start)
    later = range(start + 1, schema.SCHEMA_VERSION + 1)
    assert (_shape(ledger_path) != fresh) == any(STEP_COLUMNS[v] or STEP_TABLES[v] for v in later)
    with pytest.raises(SchemaMismatch, match=f"schema {start}.*warden migrate"):
        Ledger.open(ledger_path)
    assert warden(["migrate", "--ledger", ledger_path]) == 0
    assert f"{start}" in capsys.readouterr().out
    assert _stored_version(ledger_path) == str(schema.SCHEMA_VERSION)
    assert _shape(ledger_path) == fresh  # exactly the tables and columns a new ledger has
    assert warden(["migrate", "--ledger", ledger_path]) == 0
    assert "nothing to do" in capsys.readouterr().out
    with Ledger.open(ledger_path, clock=clock) as led:  # both steps' columns are written and read
        c = led.claim("t", "w", lease_s=60)
        clock.advance(5)
        led.heartbeat(c, observation="polling ci", waiting_on="ci", wait_s=60)
        clock.advance(5)
        led.heartbeat(c, observation="polling ci", waiting_on="ci", wait_s=60)
        n = led.node("t", "a")
        assert n.wait_on == "ci" and n.wait_since == pytest.approx(clock() - 5)
        led.apply(led.plan_park("t", reason="hold", wake_on=["node:a"]), operator="op")
        t = led.task("t")
        assert t.status == "parked" and t.paused_since == pytest.approx(clock())


def test_a_ledger_of_the_previous_release_learns_kind_norms_after_migrate(ledger_path, clock, capsys):
    """Schema 4 (the last release's): migrated, its nodes' kinds learn their normal and an alarm can be
    marked healthy (part "kind norms": the ``kind_norm`` table, ``node.healthy_at``)."""
    with Ledger.open(ledger_path, clock=clock) as led:
        led.create_task("t")
        led.add_nodes("t", [NodeSpec("a", "watch"), NodeSpec("b", "watch")])
    _downgrade(ledger_path, 4)
    assert "kind_norm" not in _shape(ledger_path) and "healthy_at" not in _shape(ledger_path)["node"]
    assert warden(["migrate", "--ledger", ledger_path]) == 0
    capsys.readouterr()
    with Ledger.open(ledger_path, clock=clock) as led:
        c = led.claim("t", "w", lease_s=60, key="a")
        for i in range(3):
            clock.advance(5)
            led.heartbeat(c, action=f"poll {i}", result=f"state {i}")
        led.commit(c, output=1)
        c = led.claim("t", "w", lease_s=60, key="b")
        for _ in range(4):
            clock.advance(5)
            p = led.heartbeat(c, action="poll", result="queued")
        assert p.stall == "repeating"
        led.apply(led.plan("healthy", {"task_id": "t", "node": "b", "reason": "polls by design"}), operator="op")
        assert led.node("t", "b").healthy_at == clock()
    assert warden(["status", "--json", "--ledger", ledger_path]) == 0
    assert json.loads(capsys.readouterr().out)["marked_healthy"] == [{"kind": "watch", "marked": 1, "finished": 1}]

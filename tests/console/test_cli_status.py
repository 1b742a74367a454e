"""`warden status` and `warden graph`: the ETA and SIGNAL shapes, and the human output."""

from __future__ import annotations

import json

import pytest

from console.cli import main
from store import Ledger, ManualClock, NodeSpec

T0 = 1_800_000_000.0
ETA_KEYS = {"p50_s", "p80_s", "samples", "confidence", "why"}
SIGNAL_KEYS = {"kind", "task_id", "node", "since", "severity", "evidence"}


@pytest.fixture
def db(tmp_path, monkeypatch):
    """A history of 6 finished drafts, then a task whose running node loops; the CLI reads it
    on the same manual clock."""
    clock = ManualClock(T0)
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as ledger:
        ledger.create_task("done", title="history")
        for i in range(6):
            ledger.add_node("done", f"d{i}", kind="draft")
            c = ledger.claim("done", "w1", lease_s=600)
            clock.advance(100 + 10 * i)
            ledger.commit(c, output={})
        ledger.create_task("t", title="loop task")
        ledger.add_nodes("t", [NodeSpec("a", "draft"), NodeSpec("b", "draft", deps=("a",)),
                               NodeSpec("c", "review", deps=("b",), est_wall_s=60)])
        c = ledger.claim("t", "w1", lease_s=600)
        for _ in range(6):
            clock.advance(10)
            ledger.heartbeat(c, units_done=1, units_total=4, observation="searching the same folder")
    monkeypatch.setattr("store.storage.core.system_clock", clock)
    monkeypatch.chdir(tmp_path)
    return path


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_status_json_has_eta_and_signals(db, capsys):
    code, out, err = run(capsys, "status", "--json")
    assert code == 0, err
    tasks = {t["task_id"]: t for t in json.loads(out)["tasks"]}
    t = tasks["t"]
    assert set(t["eta"]) == ETA_KEYS
    assert t["eta"]["confidence"] == "none"  # the review step has no history (its est_wall_s stands in)
    assert t["eta"]["p80_s"] > t["eta"]["p50_s"] > 0
    assert [s["kind"] for s in t["signals"]] == ["no_new_info", "repeating"]
    assert all(set(s) == SIGNAL_KEYS for s in t["signals"])
    s = t["signals"][0]
    assert s == {"kind": "no_new_info", "task_id": "t", "node": "a", "since": "2027-01-15T08:12:50.000Z",
                 "severity": "alarm", "evidence": "last 5 observations added 0 new lines"}
    assert tasks["done"]["eta"] == {"p50_s": None, "p80_s": None, "samples": 0, "confidence": "none", "why": []}
    assert tasks["done"]["signals"] == []


def test_graph_json_has_node_eta_and_signals(db, capsys):
    code, out, err = run(capsys, "graph", "t", "--json")
    assert code == 0, err
    data = json.loads(out)
    nodes = {n["key"]: n for n in data["nodes"]}
    b = nodes["b"]["eta"]  # six drafts took 100-150 s: too few to have been checked, so "low"
    assert set(b) == ETA_KEYS and (b["samples"], b["confidence"]) == (6, "low") and 100 < b["p50_s"] < b["p80_s"]
    assert b["why"][0] == "6 samples of draft"
    assert nodes["a"]["eta"]["samples"] == 6 and nodes["a"]["eta"]["p80_s"] is not None
    assert [s["kind"] for s in nodes["a"]["signals"]] == ["no_new_info", "repeating"]
    assert nodes["b"]["signals"] == [] and nodes["c"]["signals"] == []
    assert data["task"]["eta"] == json.loads(run(capsys, "status", "--json")[1])["tasks"][1]["eta"]


def test_status_human_output_shows_p80_and_signal_count(db, capsys):
    code, out, err = run(capsys, "status")
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("t "))
    assert "(?)" in line and "⚠ 2" in line  # P80 with its confidence, and the stall mark with its count


def test_graph_human_output_lists_the_evidence(db, capsys):
    code, out, err = run(capsys, "graph", "t")
    assert code == 0, err
    assert "⚠ 2" in out  # node a's stall mark
    assert "⚠ alarm no_new_info a: last 5 observations added 0 new lines" in out
    # 5, not 6: the first heartbeat showed progress (units_done 0 → 1), and a loop is judged after progress
    assert "⚠ alarm repeating a: the same observation 5 times in a row" in out

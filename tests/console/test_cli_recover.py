"""`warden recover` and `warden verify-record`, driven through console.cli.main(argv)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from console.cli import main
from store.runs import SafeTree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
import runfactory as rf  # noqa: E402  (the run builder shared with tests/store)


@pytest.fixture
def proj(tmp_path: Path, monkeypatch) -> Path:
    """A project dir with runs/ in it; the cwd, so every default applies."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WARDEN_RUNS", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    rf.make_run(tmp_path / "runs", "resume-01")
    rf.make_run(tmp_path / "runs", "partial-01", case="partial")
    return tmp_path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_recover_reuse_exits_0_with_a_table(proj: Path, capsys) -> None:
    code, out, err = run(capsys, "recover", "resume-01")
    assert code == 0 and err == ""
    assert "reuse_existing_artifact (artifact_verified)" in out
    for name in ("layout", "context", "state", "artifact", "stable"):
        assert f"{name} " in out
    assert "✖" not in out and not (proj / "recovery-records").exists()


def test_recover_json_is_one_object_in_the_contract_shape(proj: Path, capsys) -> None:
    code, out, _ = run(capsys, "recover", "partial-01", "--json")
    assert code == 1
    (line,) = out.splitlines()
    j = json.loads(line)
    assert {"run", "decision", "reason", "checks", "export_replayed", "record"} <= j.keys()
    assert (j["decision"], j["reason"], j["record"]) == (
        "needs_human", "evidence_incomplete_or_invalid", None)
    assert [(c["name"], c["ok"]) for c in j["checks"]] == [
        ("layout", True), ("context", True), ("state", True), ("artifact", False),
        ("stable", False)]
    assert j["export_replayed"] is False


@pytest.mark.parametrize("run_name, case", [("resume-01", None), ("partial-01", None), ("empty-09", "empty"),
                                             ("changed-01", "changed")])
def test_every_decision_says_the_semantic_review_is_pending(proj: Path, capsys, run_name, case) -> None:
    """A check verifies evidence, never meaning — the review is still owed, in the JSON
    and in the text, whatever the decision (as in the record written for a reuse)."""
    if case == "empty":
        rf.make_run(proj / "runs", run_name, case="empty")
    elif case == "changed":
        rf.make_run(proj / "runs", run_name)
        (proj / "notes" / "source.md").write_text("edited since\n")
    code, out, _ = run(capsys, "recover", run_name, "--json")
    j = json.loads(out)
    assert j["semantic_review"] == "pending" and j["export_replayed"] is False
    assert code == (0 if j["decision"] == "reuse_existing_artifact" else 1)
    _, text, _ = run(capsys, "recover", run_name)
    assert "semantic review: pending" in text


@pytest.mark.parametrize("status, code", [("interrupted", 0), ("completed", 1)])
def test_recover_exit_code_follows_the_decision(proj: Path, capsys, status, code) -> None:
    rf.set_state(proj / "runs/resume-01", status=status)
    assert run(capsys, "recover", "resume-01", "--json")[0] == code


def test_invalid_run_name_refused_before_reading(proj: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(SafeTree, "open_child", lambda *a: pytest.fail("read a bad name"))
    code, out, err = run(capsys, "recover", "../runs/resume-01")
    assert code == 1 and out == ""
    assert err.startswith("warden: invalid run name") and err.count("\n") == 1


def test_unknown_run(proj: Path, capsys) -> None:
    code, _, err = run(capsys, "recover", "ghost")
    assert code == 3 and "no run named ghost" in err  # not found


def test_usage_errors_exit_2(proj: Path, capsys) -> None:
    assert run(capsys, "recover")[0] == 2
    assert run(capsys, "recover", "resume-01", "--task", "t", "--node", "k")[0] == 2
    assert run(capsys, "recover", "--task", "t")[0] == 2


def test_record_with_yes_writes_once(proj: Path, capsys) -> None:
    code, out, _ = run(capsys, "recover", "resume-01", "--record", "review-01", "--yes",
                       "--json", "--operator", "ana")
    assert code == 0
    j = json.loads(out)
    assert j["record"] == str(proj / "recovery-records/review-01")
    doc = json.loads((proj / "recovery-records/review-01/recovery.json").read_text())
    assert doc["operator"] == "ana" and doc["status"] == "needs_review"
    before = rf.snapshot(proj / "recovery-records")
    code, _, err = run(capsys, "recover", "resume-01", "--record", "review-01", "--yes")
    assert code == 1 and "review-01 already exists" in err
    assert rf.snapshot(proj / "recovery-records") == before


def test_record_without_yes_and_no_terminal_writes_nothing(proj: Path, capsys,
                                                           monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    code, out, err = run(capsys, "recover", "resume-01", "--record", "review-01")
    assert code == 1 and out == ""
    assert "would write" in err and "pass --yes" in err
    assert not (proj / "recovery-records").exists()


def test_record_dry_run_writes_nothing(proj: Path, capsys) -> None:
    code, out, _ = run(capsys, "recover", "resume-01", "--record", "review-01", "--dry-run",
                       "--yes")
    assert code == 0 and "dry run: would write" in out
    assert not (proj / "recovery-records").exists()


def test_record_refused_for_another_decision(proj: Path, capsys) -> None:
    code, out, err = run(capsys, "recover", "partial-01", "--record", "p", "--yes", "--json")
    assert code == 1
    assert json.loads(out)["decision"] == "needs_human"  # one object: the checks and the error
    assert json.loads(out)["error"]["code"] == "refused"
    assert "a record is written only for reuse_existing_artifact; nothing created" in err
    assert not (proj / "recovery-records").exists()


def test_illegal_record_name_refused(proj: Path, capsys) -> None:
    code, _, err = run(capsys, "recover", "resume-01", "--record", "../x", "--yes")
    assert code == 1 and "invalid record name" in err
    assert not (proj / "recovery-records").exists() and not (proj / "x").exists()


def test_verify_record_pass_then_fail(proj: Path, capsys) -> None:
    assert run(capsys, "recover", "resume-01", "--record", "r1", "--yes")[0] == 0
    code, out, _ = run(capsys, "verify-record", "r1", "--json")
    assert code == 0
    j = json.loads(out)
    assert {k: j[k] for k in ("result", "status", "original_status", "semantic_review",
                              "problems")} == {
        "result": "pass", "status": "needs_review", "original_status": "interrupted",
        "semantic_review": "pending", "problems": []}
    (proj / "runs/resume-01/artifact/review.md").write_text("changed\n")
    code, out, _ = run(capsys, "verify-record", "r1")
    assert code == 1 and "✖ fail" in out and "artifact/review.md: sha256 now" in out


def test_explicit_and_environment_dirs(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)
    proj = tmp_path / "p"
    rf.make_run(proj / "agent-runs", "resume-01")
    monkeypatch.setenv("WARDEN_RUNS", str(proj / "agent-runs"))
    assert run(capsys, "recover", "resume-01", "--record", "r1", "--yes")[0] == 0
    assert (proj / "recovery-records/r1/recovery.json").exists()  # <parent of runs>/recovery-records
    monkeypatch.delenv("WARDEN_RUNS")
    recs = tmp_path / "recs"
    assert run(capsys, "recover", "resume-01", "--runs", str(proj / "agent-runs"),
               "--project", str(proj), "--records", str(recs), "--record", "r2", "--yes")[0] == 0
    assert (recs / "r2/HANDOFF.md").exists()
    assert run(capsys, "verify-record", "r2", "--runs", str(proj / "agent-runs"),
               "--records", str(recs))[0] == 0


def test_agent_text_is_printed_literally(proj: Path, capsys) -> None:
    evil = "[blink]pwned \x1b[2J\u202e"  # no "/" possible in a file name
    (proj / "runs/resume-01/artifact" / evil).write_text("x")
    code, out, _ = run(capsys, "recover", "resume-01")
    assert code == 1
    assert "[blink]pwned \\x1b[2J\\u202e: not listed in the manifest" in out
    assert "\x1b" not in out and "\u202e" not in out
    code, out, _ = run(capsys, "recover", "resume-01", "--json")
    assert "\x1b" not in out and "\u202e" not in out
    assert json.loads(out)["checks"][3]["evidence"].startswith("artifact/[blink]pwned")


def _failed_node(ledger) -> None:
    ledger.create_task("t", inputs={})
    ledger.add_node("t", "b", retryable=False)
    c = ledger.claim("t", worker="w1")
    ledger.fail(c, error="\x1b[31mred[/]", failure_class="conclusion")


def test_recover_node_advice(tmp_path: Path, capsys) -> None:
    from store import Ledger, ManualClock

    ledger_path = str(tmp_path / "advice.db")  # its own ledger: independent of shared fixtures
    with Ledger.open(ledger_path, clock=ManualClock(1_800_000_000)) as ledger:
        _failed_node(ledger)
    code, out, _ = run(capsys, "recover", "--ledger", ledger_path, "--task", "t", "--node", "b",
                       "--json")
    assert code == 0
    j = json.loads(out)
    assert (j["recommendation"], j["reason"], j["node"]) == ("rewind", "conclusion_rejected", "b")
    code, out, _ = run(capsys, "recover", "--ledger", ledger_path, "--task", "t", "--node", "b")
    assert code == 0 and "recommend rewind" in out
    assert "\x1b" not in out and "\\x1b[31mred[/]" in out
    code, _, err = run(capsys, "recover", "--ledger", ledger_path, "--task", "t", "--node", "zz")
    assert code == 3 and err.startswith("warden: ")  # not found

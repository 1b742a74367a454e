"""store/recovery/: checks and decisions, records, independent verification, node advice."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import threading
import tracemalloc
from pathlib import Path

import pytest

from store import recovery as rv
from store.storage import sql
from store.recovery import checks as rv_checks, records as rv_records
from store.clock import ManualClock
from store.errors import NotFound, Refused
from tests.support.waiting import stretch
from store.recovery import (
    CHECK_NAMES,
    HANDOFF_SECTIONS,
    RecordRefused,
    check,
    record,
    record_digest,
    verify_record,
)
from store.runs import SafeTree
from tests.support.asks import ask

try:  # tests/ may or may not be a package
    from . import runfactory as rf
except ImportError:
    import runfactory as rf


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def records(tmp_path: Path) -> Path:
    return tmp_path / "recovery-records"


def finishes(fn, timeout: float = 10.0):
    out: dict = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "recovery blocked"
    if "error" in out:
        raise out["error"]
    return out["value"]


def failing(rec) -> tuple[str, str, str]:
    """(decision, name of the deciding check, its evidence), and the shape of the rest."""
    assert [c.name for c in rec.checks] == list(CHECK_NAMES)
    failed = [c for c in rec.checks if not c.ok]
    first = failed[0]
    assert first.ran
    after = rec.checks[CHECK_NAMES.index(first.name) + 1:]
    assert all(not c.ran and not c.ok and c.evidence.startswith("not run") for c in after)
    assert all(c.ok and c.ran for c in rec.checks[: CHECK_NAMES.index(first.name)])
    return rec.decision, first.name, first.evidence


# --------------------------------------------------------------------------- check


def test_complete_artifact_without_receipt_is_reused(runs: Path) -> None:
    rf.make_run(runs)
    rec = check(runs, "resume-01")
    assert (rec.decision, rec.reason) == ("reuse_existing_artifact", "artifact_verified")
    assert [(c.name, c.ok, c.ran) for c in rec.checks] == [(n, True, True) for n in CHECK_NAMES]
    assert rec.export_replayed is False and rec.original_status == "interrupted"
    assert rec.step == "export" and rec.task_id == "report-001" and rec.simulation
    run = runs / "resume-01"
    assert rec.fingerprints == {
        p: rf.sha256((run / p).read_bytes())
        for p in ("SIMULATION.json", "artifact/manifest.json", "artifact/review.md",
                  "context.json", "state.json")
    }
    assert rec.inputs == {p: rf.sha256(d) for p, d in rf.INPUTS.items()}
    j = rec.to_json()
    assert {"run", "decision", "reason", "checks", "export_replayed", "record"} <= j.keys()
    assert j["export_replayed"] is False and j["record"] is None
    assert j["checks"][0].keys() >= {"name", "ok", "evidence"}
    json.dumps(j)


def test_manifest_missing_needs_human(runs: Path) -> None:
    rf.make_run(runs, case="partial")
    rec = check(runs, "resume-01")
    assert rec.reason == "evidence_incomplete_or_invalid"
    assert failing(rec) == ("needs_human", "artifact",
                            "artifact/manifest.json missing: the artifact cannot be shown complete")


def test_no_artifact_needs_human(runs: Path) -> None:
    rf.make_run(runs, case="empty")
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("needs_human", "artifact")
    assert "no artifact/ directory" in evidence


def test_changed_input_is_context_changed(runs: Path, tmp_path: Path) -> None:
    rf.make_run(runs)
    (tmp_path / "agent/exporter.py").write_text("def export(): return 2\n")
    rec = check(runs, "resume-01")
    assert rec.reason == "inputs_changed"
    decision, name, evidence = failing(rec)
    assert (decision, name) == ("context_changed", "context")
    assert "agent/exporter.py: sha256 now" in evidence


def test_missing_or_linked_input_is_context_changed(runs: Path, tmp_path: Path) -> None:
    rf.make_run(runs)
    (tmp_path / "notes/source.md").unlink()
    (tmp_path / "agent/exporter.py").rename(tmp_path / "agent/real.py")
    (tmp_path / "agent/exporter.py").symlink_to(tmp_path / "agent/real.py")
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("context_changed", "context")
    assert "notes/source.md: missing" in evidence
    assert "agent/exporter.py: symlink, not followed" in evidence


def test_explicit_project_dir(runs: Path, tmp_path: Path) -> None:
    proj = tmp_path / "elsewhere"
    rf.make_project(proj)
    rf.make_run(runs, project=proj)
    assert not (tmp_path / "notes").exists()  # the default project (parent of runs) is empty
    assert check(runs, "resume-01").decision == "context_changed"
    assert check(runs, "resume-01", project_dir=proj).decision == "reuse_existing_artifact"


@pytest.mark.parametrize("status", ["completed", "failed", "running", "paused", "INTERRUPTED"])
def test_other_run_status_is_unsupported(runs: Path, status: str) -> None:
    rf.set_state(rf.make_run(runs), status=status)
    rec = check(runs, "resume-01")
    assert rec.reason == "state_not_recoverable"
    decision, name, evidence = failing(rec)
    assert (decision, name) == ("unsupported_state", "state")
    assert json.dumps(status) in evidence
    assert rec.original_status == status


@pytest.mark.parametrize("steps, expected", [
    ([{"name": "load", "status": "done"}, {"name": "export", "status": "done"}],
     "0 steps running"),
    ([{"name": "load", "status": "running"}, {"name": "export", "status": "running"}],
     "2 steps running"),
    ([{"name": "export", "status": "running", "receipt": "receipts/02-export.json"}],
     "names a receipt"),
    ([{"name": "export", "status": "half-done"}], "unknown status"),
])
def test_state_recovery_does_not_understand(runs: Path, steps, expected: str) -> None:
    rf.set_state(rf.make_run(runs), steps=steps)
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("unsupported_state", "state")
    assert expected in evidence


def test_running_step_with_a_receipt_file_is_unsupported(runs: Path) -> None:
    run = rf.make_run(runs)
    rf.write_json(run / "receipts/02-export.json", {"step": "export", "ok": True})
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("unsupported_state", "state")
    assert "receipts/02-export.json" in evidence


@pytest.mark.parametrize("content, expected", [
    (b'{"status": "interrupted",', "malformed JSON"),
    (b'{"status": "interrupted", "status": "completed"}', "duplicate key"),
    (b'["interrupted"]', "not a JSON object"),
    (b'{"run_id": "other", "status": "interrupted", "steps": []}', "is not this run"),
    (b'{"run_id": "resume-01", "status": 3, "steps": []}', "status missing or not a string"),
    (b'{"run_id": "resume-01", "status": "interrupted", "steps": {}}', "steps is not a list"),
    (b'{"run_id": "resume-01", "status": "interrupted", "steps": [{"name": 1}]}',
     "steps is not a list"),
])
def test_malformed_state_needs_human(runs: Path, content: bytes, expected: str) -> None:
    (rf.make_run(runs) / "state.json").write_bytes(content)
    rec = check(runs, "resume-01")
    assert rec.reason == "evidence_incomplete_or_invalid"
    decision, name, evidence = failing(rec)
    assert (decision, name) == ("needs_human", "state")
    assert expected in evidence


@pytest.mark.parametrize("content, expected", [
    (b"{bad", "malformed JSON"),
    (b'{"inputs": {}}', "inputs is empty"),
    (b'{"inputs": {"../etc/passwd": "' + b"0" * 64 + b'"}}', "not a safe relative path"),
    (b'{"inputs": {"a.txt": "not-a-digest"}}', "not a lowercase hex sha256"),
    (b'{"inputs": {"a.txt": NaN}}', "NaN"),
])
def test_malformed_context_fails_layout(runs: Path, content: bytes, expected: str) -> None:
    (rf.make_run(runs) / "context.json").write_bytes(content)
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("needs_human", "layout")
    assert expected in evidence


@pytest.mark.parametrize("missing", ["state.json", "context.json"])
def test_missing_state_or_context_fails_layout(runs: Path, missing: str) -> None:
    (rf.make_run(runs) / missing).unlink()
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name, evidence) == ("needs_human", "layout", f"{missing}: missing")


def test_tampered_artifact_needs_human(runs: Path) -> None:
    review = rf.make_run(runs) / "artifact/review.md"
    data = bytearray(review.read_bytes())
    data[3] ^= 1  # same size, different bytes
    review.write_bytes(bytes(data))
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("needs_human", "artifact")
    assert "artifact/review.md: sha256" in evidence and "manifest says" in evidence


def test_truncated_artifact_needs_human(runs: Path) -> None:
    review = rf.make_run(runs) / "artifact/review.md"
    review.write_bytes(review.read_bytes()[:5])
    _, name, evidence = failing(check(runs, "resume-01"))
    assert name == "artifact" and "artifact/review.md: 5 bytes, manifest says 30" in evidence


def test_unlisted_extra_file_needs_human(runs: Path) -> None:
    (rf.make_run(runs) / "artifact/notes.txt").write_text("extra")
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("needs_human", "artifact")
    assert evidence == "artifact/notes.txt: not listed in the manifest"


def test_listed_file_missing_needs_human(runs: Path) -> None:
    (rf.make_run(runs) / "artifact/review.md").unlink()
    _, name, evidence = failing(check(runs, "resume-01"))
    assert name == "artifact" and "artifact/review.md: listed in the manifest, missing" in evidence


def test_symlinked_file_needs_human_with_the_link_named(runs: Path, tmp_path: Path) -> None:
    run = rf.make_run(runs)
    copy = tmp_path / "copy.md"
    copy.write_bytes((run / "artifact/review.md").read_bytes())  # same bytes: only the link is wrong
    (run / "artifact/review.md").unlink()
    (run / "artifact/review.md").symlink_to(copy)
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("needs_human", "layout")
    assert "artifact/review.md: symlink, not followed" in evidence


def test_symlinked_artifact_dir_needs_human_with_the_link_named(runs: Path, tmp_path: Path) -> None:
    run = rf.make_run(runs)
    (run / "artifact").rename(tmp_path / "real-artifact")
    (run / "artifact").symlink_to(tmp_path / "real-artifact")
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("needs_human", "layout")
    assert evidence == "artifact: symlink, not followed"


def test_symlinked_run_dir_needs_human(runs: Path, tmp_path: Path) -> None:
    rf.make_run(tmp_path / "other", "resume-01")
    runs.mkdir()
    (runs / "resume-01").symlink_to(tmp_path / "other/resume-01")
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("needs_human", "layout")
    assert "resume-01: symlink, not followed" in evidence


@pytest.mark.parametrize("where", ["state.json", "artifact/review.md", "receipts/01-load.json"])
def test_fifo_in_place_of_a_file_needs_human_without_hanging(runs: Path, where: str) -> None:
    run = rf.make_run(runs)
    (run / where).unlink()
    os.mkfifo(run / where)
    decision, name, evidence = failing(finishes(lambda: check(runs, "resume-01")))
    assert (decision, name) == ("needs_human", "layout")
    assert f"{where}: a fifo, not a regular file" in evidence


def test_fifo_in_place_of_an_input_without_hanging(runs: Path, tmp_path: Path) -> None:
    rf.make_run(runs)
    (tmp_path / "notes/source.md").unlink()
    os.mkfifo(tmp_path / "notes/source.md")
    decision, name, evidence = failing(finishes(lambda: check(runs, "resume-01")))
    assert (decision, name) == ("context_changed", "context")
    assert "notes/source.md: a fifo" in evidence


def test_fifty_megabyte_artifact_is_checked_in_bounded_memory(runs: Path) -> None:
    run = rf.make_run(runs)
    big = run / "artifact/data.bin"
    digest = hashlib.sha256()
    chunk = os.urandom(1 << 20)
    with open(big, "wb") as f:
        for _ in range(50):
            f.write(chunk)
            digest.update(chunk)
    manifest = json.loads((run / "artifact/manifest.json").read_text())
    manifest["files"]["data.bin"] = {"sha256": digest.hexdigest(), "bytes": 50 << 20}
    rf.write_json(run / "artifact/manifest.json", manifest)
    del chunk
    tracemalloc.start()
    try:
        rec = check(runs, "resume-01")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rec.decision == "reuse_existing_artifact"
    assert rec.fingerprints["artifact/data.bin"] == digest.hexdigest()
    assert peak < 8 << 20, f"peak {peak} bytes for a 50 MB file"


def test_a_change_during_the_check_fails_stable(runs: Path, monkeypatch) -> None:
    run = rf.make_run(runs)
    original = rv_checks._Session.artifact

    def artifact_then_concurrent_write(self):
        out = original(self)
        (run / "artifact/review.md").write_text("# Review\n\nrewritten by a live agent\n")
        return out

    monkeypatch.setattr(rv_checks._Session, "artifact", artifact_then_concurrent_write)
    decision, name, evidence = failing(check(runs, "resume-01"))
    assert (decision, name) == ("needs_human", "stable")
    assert "artifact/review.md: content changed while checking" in evidence


def test_a_file_appearing_during_the_check_fails_stable(runs: Path, monkeypatch) -> None:
    run = rf.make_run(runs)
    original = rv_checks._Session.artifact

    def artifact_then_receipt(self):
        out = original(self)
        rf.write_json(run / "receipts/02-export.json", {"ok": True})
        return out

    monkeypatch.setattr(rv_checks._Session, "artifact", artifact_then_receipt)
    _, name, evidence = failing(check(runs, "resume-01"))
    assert name == "stable" and "receipts/02-export.json: appeared while checking" in evidence


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "../runs/resume-01", "", "x" * 65, "a b"])
def test_invalid_run_name_refused_before_anything_is_read(runs: Path, bad: str, monkeypatch) -> None:
    rf.make_run(runs)
    monkeypatch.setattr(SafeTree, "open_child", lambda *a: pytest.fail("read for a bad name"))
    with pytest.raises(Refused, match="invalid run name"):
        check(runs, bad)


def test_unknown_run_not_found(runs: Path) -> None:
    runs.mkdir()
    with pytest.raises(NotFound):
        check(runs, "nope")


def test_evidence_escapes_agent_chosen_names(runs: Path) -> None:
    (rf.make_run(runs) / "artifact/x\x1b[2J\u202e.md").write_text("hi")
    _, _, evidence = failing(check(runs, "resume-01"))
    assert evidence == "artifact/x\\x1b[2J\\u202e.md: not listed in the manifest"


# --------------------------------------------------------------------------- record


def test_record_is_written_once_with_the_contract_keys(runs: Path, records: Path) -> None:
    rf.make_run(runs)
    made = record(runs, "resume-01", "review-01", operator="ana@box",
                  clock=ManualClock(1_800_000_000))
    assert made.path == str(records / "review-01")
    assert sorted(os.listdir(made.path)) == ["HANDOFF.md", "recovery.json"]
    doc = json.loads((records / "review-01/recovery.json").read_text())
    assert doc["decision"] == "reuse_existing_artifact" and doc["reason"] == "artifact_verified"
    assert doc["action"] == "verification_only" and doc["export_replayed"] is False
    assert doc["status"] == "needs_review" and doc["semantic_review"] == "pending"
    assert doc["original_status"] == "interrupted"
    assert doc["operator"] == "ana@box" and doc["at"] == "2027-01-15T08:00:00.000Z"
    assert [c["name"] for c in doc["checks"]] == list(CHECK_NAMES)
    assert doc["fingerprints"] == made.recovery.fingerprints and len(doc["fingerprints"]) == 5
    assert doc["record_digest"] == record_digest(doc)
    handoff = (records / "review-01/HANDOFF.md").read_text()
    for section in HANDOFF_SECTIONS:
        assert section in handoff.splitlines()
    assert doc["handoff_sha256"] == rf.sha256(handoff.encode())
    assert not any(n.endswith(".tmp") for n in os.listdir(made.path))


def test_same_name_again_refused_first_record_intact(runs: Path, records: Path) -> None:
    rf.make_run(runs)
    rf.make_run(runs, "resume-02")
    record(runs, "resume-01", "review-01", operator="first")
    before = rf.snapshot(records)
    for run in ("resume-01", "resume-02"):
        with pytest.raises(Refused, match="review-01 already exists"):
            record(runs, run, "review-01", operator="second")
    assert rf.snapshot(records) == before


def test_record_refused_for_another_decision_creates_nothing(runs: Path, records: Path) -> None:
    rf.make_run(runs, case="partial")
    with pytest.raises(RecordRefused) as e:
        record(runs, "resume-01", "partial-review")
    assert e.value.recovery.decision == "needs_human"
    assert "needs_human (evidence_incomplete_or_invalid)" in str(e.value)
    assert not records.exists()


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "../escape", "x" * 65, "a b", "名"])
def test_illegal_record_names_refused(runs: Path, records: Path, tmp_path: Path, bad: str) -> None:
    rf.make_run(runs)
    before = rf.snapshot(tmp_path)
    with pytest.raises(Refused, match="invalid record name"):
        record(runs, "resume-01", bad)
    assert rf.snapshot(tmp_path) == before


def test_records_inside_the_run_refused(runs: Path) -> None:
    run = rf.make_run(runs)
    before = rf.snapshot(run)
    with pytest.raises(Refused, match="inside run resume-01"):
        record(runs, "resume-01", "r1", records_dir=run / "artifact")
    assert rf.snapshot(run) == before


def test_failure_after_mkdir_removes_what_was_created(runs: Path, records: Path,
                                                      monkeypatch) -> None:
    rf.make_run(runs)
    real = rv_records._write_atomic

    def fail_on_json(dir_fd, filename, data):
        if filename == "recovery.json":
            raise OSError(28, "No space left on device")
        return real(dir_fd, filename, data)

    monkeypatch.setattr(rv_records, "_write_atomic", fail_on_json)
    with pytest.raises(OSError, match="No space"):
        record(runs, "resume-01", "review-01")
    assert os.listdir(records) == []


def test_two_processes_racing_for_one_name_exactly_one_wins(runs: Path, records: Path) -> None:
    rf.make_run(runs)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [ctx.Process(target=rf.race_record,
                         args=(str(runs), "resume-01", "review-01", str(records), who,
                               barrier, results))
             for who in ("p1", "p2")]
    for p in procs:
        p.start()
    outcomes = dict(results.get(timeout=stretch(30)) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert sorted(v.split(":")[0] for v in outcomes.values()) == ["refused", "won"], outcomes
    winner = next(w for w, v in outcomes.items() if v == "won")
    loser = next(w for w, v in outcomes.items() if v != "won")
    assert "already exists" in outcomes[loser]
    doc = json.loads((records / "review-01/recovery.json").read_text())
    assert doc["operator"] == winner
    assert verify_record(records, "review-01", runs)["result"] == "pass"


def test_original_run_unchanged_by_check_record_and_verify(runs: Path, records: Path) -> None:
    run = rf.make_run(runs)
    before = rf.snapshot(run)
    stats = {p: os.lstat(run / p).st_mtime_ns for p in before}
    check(runs, "resume-01")
    record(runs, "resume-01", "review-01")
    verify_record(records, "review-01", runs)
    with pytest.raises(Refused):
        record(runs, "resume-01", "review-01")
    assert rf.snapshot(run) == before
    assert {p: os.lstat(run / p).st_mtime_ns for p in before} == stats


def test_recovery_never_calls_the_step_that_made_the_artifact(runs: Path, records: Path,
                                                              monkeypatch) -> None:
    rf.make_run(runs)
    calls_before = list(rf.EXPORT_CALLS)

    def exporter_must_not_run(*a, **k):
        raise AssertionError("recovery replayed the export step")

    monkeypatch.setattr(rf, "export_review", exporter_must_not_run)
    assert check(runs, "resume-01").decision == "reuse_existing_artifact"
    made = record(runs, "resume-01", "review-01")
    assert verify_record(records, "review-01", runs)["result"] == "pass"
    assert made.document["export_replayed"] is False
    assert rf.EXPORT_CALLS == calls_before
    rf.make_run(runs, "empty-01", case="empty")  # construction itself does not export
    assert check(runs, "empty-01").decision == "needs_human"
    assert not (runs / "empty-01/artifact").exists()  # recovery did not produce one either


# --------------------------------------------------------------------------- verify


@pytest.fixture
def recorded(runs: Path, records: Path) -> Path:
    rf.make_run(runs)
    record(runs, "resume-01", "review-01", operator="ana")
    return records / "review-01"


def test_verify_passes_on_a_fresh_record(recorded: Path, runs: Path, records: Path) -> None:
    got = verify_record(records, "review-01", runs)
    assert {k: got[k] for k in ("result", "status", "original_status", "semantic_review",
                                "problems")} == {
        "result": "pass", "status": "needs_review", "original_status": "interrupted",
        "semantic_review": "pending", "problems": []}


def test_verify_uses_the_recorded_run_dir_by_default(recorded: Path, records: Path) -> None:
    assert verify_record(records, "review-01")["result"] == "pass"


def test_verify_fails_after_the_artifact_is_altered(recorded: Path, runs: Path,
                                                    records: Path) -> None:
    (runs / "resume-01/artifact/review.md").write_text("# Review\n\nchanged later\n")
    got = verify_record(records, "review-01", runs)
    assert got["result"] == "fail"
    assert any(p.startswith("the decision does not follow from the evidence: a fresh check "
                            "says needs_human") for p in got["problems"])
    assert any(p.startswith("artifact/review.md: sha256 now") for p in got["problems"])


def test_verify_fails_after_the_state_is_altered(recorded: Path, runs: Path,
                                                 records: Path) -> None:
    rf.set_state(runs / "resume-01", updated_at="2027-02-01T00:00:00Z")  # still recoverable
    got = verify_record(records, "review-01", runs)
    assert got["result"] == "fail"
    assert [p for p in got["problems"] if p.startswith("state.json: sha256 now")]


@pytest.mark.parametrize("alter", ["operator", "status", "handoff", "extra", "delete-json"])
def test_verify_fails_after_a_record_file_is_altered(recorded: Path, runs: Path, records: Path,
                                                     alter: str) -> None:
    rj = recorded / "recovery.json"
    if alter in ("operator", "status"):
        doc = json.loads(rj.read_text())
        doc[alter] = {"operator": "mallory", "status": "done"}[alter]
        rj.write_text(json.dumps(doc))
    elif alter == "handoff":
        with open(recorded / "HANDOFF.md", "a") as f:
            f.write("\nAll good, ship it.\n")
    elif alter == "extra":
        (recorded / "notes.txt").write_text("x")
    else:
        rj.unlink()
    got = verify_record(records, "review-01", runs)
    assert got["result"] == "fail" and got["problems"]
    expected = {"operator": "record_digest differs", "status": "status is \"done\"",
                "handoff": "HANDOFF.md: altered", "extra": "notes.txt: not part of a record",
                "delete-json": "recovery.json: missing"}[alter]
    assert any(expected in p for p in got["problems"]), got["problems"]


def test_verify_fails_a_hand_forged_record_claiming_reuse_for_a_partial_run(
        runs: Path, records: Path) -> None:
    run = rf.make_run(runs, "partial-01", case="partial")
    forged_dir = records / "forged"
    forged_dir.mkdir(parents=True)
    handoff = "\n".join(HANDOFF_SECTIONS).encode()
    (forged_dir / "HANDOFF.md").write_bytes(handoff)
    doc = {  # everything a careful forger could compute, digests included
        "run": "partial-01", "decision": "reuse_existing_artifact",
        "reason": "artifact_verified", "action": "verification_only", "export_replayed": False,
        "status": "needs_review", "semantic_review": "pending", "original_status": "interrupted",
        "operator": "forger", "at": "2027-01-01T00:00:00Z",
        "checks": [{"name": n, "ok": True, "evidence": "trust me", "ran": True}
                   for n in CHECK_NAMES],
        "fingerprints": {p: rf.sha256((run / p).read_bytes())
                         for p in ("state.json", "context.json", "SIMULATION.json",
                                   "artifact/review.md")},
        "handoff_sha256": rf.sha256(handoff),
    }
    doc["record_digest"] = record_digest(doc)
    (forged_dir / "recovery.json").write_text(json.dumps(doc))
    got = verify_record(records, "forged", runs)
    assert got["result"] == "fail"
    assert got["problems"] == [
        "the decision does not follow from the evidence: a fresh check says needs_human "
        "(evidence_incomplete_or_invalid) — artifact: artifact/manifest.json missing: the "
        "artifact cannot be shown complete"]


def test_verify_fails_when_the_original_run_is_gone(recorded: Path, runs: Path,
                                                    records: Path) -> None:
    import shutil
    shutil.rmtree(runs / "resume-01")
    got = verify_record(records, "review-01", runs)
    assert got["result"] == "fail" and "original run: no run named resume-01" in got["problems"][0]


def test_verify_unknown_or_invalid_record(records: Path, runs: Path) -> None:
    records.mkdir()
    with pytest.raises(NotFound, match="no record named nope"):
        verify_record(records, "nope", runs)
    with pytest.raises(Refused, match="invalid record name"):
        verify_record(records, "../x", runs)


def test_verify_a_symlinked_record_fails(recorded: Path, runs: Path, records: Path) -> None:
    (records / "alias").symlink_to(recorded)
    got = verify_record(records, "alias", runs)
    assert got["result"] == "fail" and got["problems"] == ["record alias: alias: symlink, not followed"]


# --------------------------------------------------------------------------- ledger-node advice
# One constructed case per row of ADVICE_TABLE (docs/recovery.md), plus the refusals.


def _task(ledger, *, preconditions=None, node_pre=None, deps=False, retryable=False):
    ledger.create_task("t", title="advice", inputs={"doc": "v1"},
                       preconditions=preconditions or {})
    if deps:
        ledger.add_node("t", "a", kind="tool")
    ledger.add_node("t", "b", kind="tool", deps=["a"] if deps else [],
                    preconditions=node_pre, retryable=retryable)


def _claim(ledger, key="b"):
    c = ledger.claim("t", worker="w1", lease_s=30)
    assert c is not None and c.node_key == key
    return c


def _sql(ledger, text, *params):
    sql.execute(ledger.db, text, params)  # `?` → `%s` on PostgreSQL


def test_advice_row_effect_unconfirmed_beats_a_safe_failure_class(ledger) -> None:
    _task(ledger, retryable=True)  # (a node added irreversible asks a person before it intends anything)
    c = _claim(ledger)
    ledger.intend_effect(c, "pr:repo/fix:create", compensation="close the PR")
    ledger.fail(c, error="socket closed", failure_class="transient", retryable=False)
    a = rv.advise(ledger, "t", "b")
    assert (a.recommendation, a.reason) == ("needs_human", "effect_unconfirmed")
    assert a.evidence[0].startswith("may have happened: check the outside system")
    assert "effect pr:repo/fix:create: intended; compensation: close the PR" in a.evidence


def test_advice_row_blocked_on_a_handoff(ledger) -> None:
    _task(ledger)
    c = _claim(ledger)
    hid = ask(ledger, c, kind="confirm", question="Open the PR?",
                               options=[{"id": "yes"}, {"id": "no"}])
    a = rv.advise(ledger, "t", "b")
    assert (a.situation, a.recommendation, a.reason) == ("blocked", "needs_human", "awaiting_human")
    assert f"handoff {hid} open (confirm): Open the PR?" in a.evidence


def test_advice_row_out_of_scope(ledger) -> None:
    _task(ledger, preconditions={"scope": "core"}, node_pre={"scope": ["docs", "extras"]})
    ledger.fail(_claim(ledger), error="x", failure_class="transient")
    a = rv.advise(ledger, "t", "b")
    assert (a.recommendation, a.reason) == ("abandon", "out_of_scope")
    assert any('scope: node needs ["docs", "extras"], task now "core"' in e for e in a.evidence)


@pytest.mark.parametrize("failure_class, recommendation, reason", [
    ("irreversible_write", "needs_human", "irreversible_write"),
    ("spec", "needs_human", "spec_problem"),
    ("conclusion", "rewind", "conclusion_rejected"),
    ("transient", "retry", "safe_to_retry"),
    ("idempotent_write", "retry", "safe_to_retry"),
])
def test_advice_rows_by_failure_class(ledger, failure_class, recommendation, reason) -> None:
    _task(ledger)
    ledger.fail(_claim(ledger), error="it broke", failure_class=failure_class)
    a = rv.advise(ledger, "t", "b")
    assert (a.situation, a.recommendation, a.reason) == ("failed", recommendation, reason)
    assert a.target == "b"
    assert f"failure_class {failure_class}; error: it broke; marked not retryable" in a.evidence
    assert any(e.startswith("inputs unchanged since it ran") for e in a.evidence)


def test_advice_row_inputs_changed(ledger) -> None:
    _task(ledger, deps=True)
    ca = _claim(ledger, "a")
    ledger.commit(ca, output={"facts": 1})
    ledger.fail(_claim(ledger, "b"), error="x", failure_class="transient")
    assert rv.advise(ledger, "t", "b").reason == "safe_to_retry"
    # stands in for an operator rewind of a and a new commit with a different output
    _sql(ledger, "UPDATE node SET output_digest = ? WHERE task_id = ? AND key = ?",
         "f" * 64, "t", "a")
    a = rv.advise(ledger, "t", "b")
    assert (a.recommendation, a.reason) == ("rewind", "inputs_changed")
    assert any(e.startswith("inputs changed since it ran: input digest") for e in a.evidence)


def test_advice_row_orphaned(ledger, clock) -> None:
    _task(ledger, retryable=True)
    _claim(ledger)
    with pytest.raises(Refused, match="live lease held by w1 for 30s more"):
        rv.advise(ledger, "t", "b")
    clock.advance(30)  # lease_until <= now is expired
    a = rv.advise(ledger, "t", "b")
    assert (a.situation, a.recommendation, a.reason) == ("orphaned", "retry", "orphaned")
    assert any("lease held by w1 expired at 2027-01-15T08:00:30.000Z (0s ago)" in e
               for e in a.evidence)


def test_advice_row_not_retryable_agrees_before_and_after_the_ledger_judges(ledger, clock) -> None:
    _task(ledger)  # retryable=False
    _claim(ledger)
    clock.advance(30)
    a = rv.advise(ledger, "t", "b")  # orphaned, nobody has noticed yet
    assert (a.situation, a.recommendation, a.reason) == ("orphaned", "needs_human", "not_retryable")
    assert ledger.claim("t", "w2") is None  # the claim notices: failed, a human asked (not reclaimed)
    after = rv.advise(ledger, "t", "b")
    assert (after.situation, after.recommendation, after.reason) == ("failed", "needs_human", "not_retryable")
    [h] = ledger.handoffs(task_id="t")
    assert (h.context["advice"]["recommendation"], h.context["advice"]["reason"]) == ("needs_human", "not_retryable")
    assert h.context["advice"]["lead"] == a.evidence[0] == after.evidence[0]


def test_advice_row_unclassified_failure(ledger) -> None:
    _task(ledger)
    ledger.fail(_claim(ledger), error="?", failure_class="transient")
    _sql(ledger, "UPDATE node SET failure_class = NULL WHERE task_id = ? AND key = ?", "t", "b")
    a = rv.advise(ledger, "t", "b")
    assert (a.recommendation, a.reason) == ("needs_human", "failure_unclassified")


def test_every_advice_row_has_a_case() -> None:
    reasons = {r for _, _, r in rv.ADVICE_TABLE}
    assert reasons == {"effect_unconfirmed", "not_retryable", "awaiting_human", "out_of_scope",
                       "irreversible_write", "spec_problem", "inputs_changed",
                       "conclusion_rejected", "safe_to_retry", "orphaned",
                       "failure_unclassified"}


def test_advice_refuses_nodes_with_nothing_to_recover(ledger) -> None:
    _task(ledger)
    with pytest.raises(Refused, match="t/b is pending"):
        rv.advise(ledger, "t", "b")
    ledger.commit(_claim(ledger), output={"ok": True})
    with pytest.raises(Refused, match="t/b is succeeded"):
        rv.advise(ledger, "t", "b")
    with pytest.raises(NotFound):
        rv.advise(ledger, "t", "nope")


def test_input_digest_formula_matches_the_ledger(ledger) -> None:
    """advise() recomputes the claim-time input digest; a change of formula must show here."""
    _task(ledger, deps=True)
    ledger.commit(_claim(ledger, "a"), output={"facts": 1})
    _claim(ledger, "b")
    b, (a,) = ledger.node("t", "b"), ledger.nodes("t", ["a"])
    assert b.input_digest == rv.current_input_digest(ledger.task("t").inputs,
                                                     {"a": a.output_digest})


def test_advice_json_shape(ledger) -> None:
    _task(ledger)
    ledger.fail(_claim(ledger), error="x", failure_class="transient")
    j = rv.advise(ledger, "t", "b").to_json()
    assert j.keys() >= {"task_id", "node", "status", "recommendation", "reason", "evidence"}
    json.dumps(j)


# ---------------------------------------------------------------------- refusals are safe lines


def test_an_advice_refusal_shows_the_workers_name_escaped(ledger) -> None:
    _task(ledger)
    assert ledger.claim("t", worker="w\x1b]0;pwned\x07\u202e", lease_s=30) is not None
    with pytest.raises(Refused) as e:
        rv.advise(ledger, "t", "b")
    line = str(e.value)
    assert "held by w\\x1b]0;pwned\\x07\\u202e" in line
    assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line


def test_paths_in_refusals_are_shown_escaped(tmp_path: Path) -> None:
    evil = "\x1b]0;pwned\x07\u202e\x9b2J"
    runs = tmp_path / f"runs{evil}"
    rf.make_run(runs)
    records = tmp_path / f"records{evil}"
    lines = []
    with pytest.raises(NotFound) as e:
        check(runs, "nope")
    lines.append(str(e.value))
    record(runs, "resume-01", "r1", records_dir=records)
    with pytest.raises(Refused) as e:
        record(runs, "resume-01", "r1", records_dir=records)
    lines.append(str(e.value))
    with pytest.raises(Refused) as e:
        record(runs, "resume-01", "r2", records_dir=runs / "resume-01" / "artifact")
    lines.append(str(e.value))
    with pytest.raises(NotFound) as e:
        verify_record(records, "nope", runs)
    lines.append(str(e.value))
    for line in lines:
        assert "\\x1b]0;pwned\\x07\\u202e\\x9b2J" in line, line
        assert not any(c in line for c in "\x1b\x07\u202e\x9b\n"), ascii(line)

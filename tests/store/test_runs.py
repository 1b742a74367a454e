"""store/runs/: run directories are read safely, and every problem comes back as data."""

from __future__ import annotations

import json
import os
import stat
import threading
import tracemalloc
from pathlib import Path

import pytest

from store.errors import NotFound, Refused
from store.runs import (
    JSON_CAP,
    MAX_JSON_DEPTH,
    SafeTree,
    list_runs,
    parse_json,
    preview,
    printable,
    read_run,
    valid_name,
)

try:  # tests/ may or may not be a package
    from . import runfactory as rf
except ImportError:
    import runfactory as rf


def finishes(fn, timeout: float = 10.0):
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it blocks."""
    out: dict = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # re-raised below
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "the reader blocked"
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["resume-01", "a", "A.b_c-9", "x" * 64, "..."])
def test_valid_names(name: str) -> None:
    assert valid_name(name)


@pytest.mark.parametrize(
    "name", ["", ".", "..", "x" * 65, "a/b", "../x", "a b", "é", "a\x00", "a\n", None, 3]
)
def test_invalid_names(name: object) -> None:
    assert not valid_name(name)


def test_invalid_name_is_refused_before_reading(runs: Path, monkeypatch) -> None:
    rf.make_run(runs)

    def boom(*a, **k):
        raise AssertionError("read something for an invalid name")

    monkeypatch.setattr(SafeTree, "open_child", boom)
    with pytest.raises(Refused, match="invalid run name"):
        read_run(runs, "../runs/resume-01")


def test_unknown_run_is_not_found(runs: Path) -> None:
    runs.mkdir()
    with pytest.raises(NotFound, match="no run named ghost"):
        read_run(runs, "ghost")


# --------------------------------------------------------------------------- list_runs


def test_missing_runs_dir_is_empty_list(tmp_path: Path) -> None:
    assert list_runs(tmp_path / "nope") == []


def test_list_runs_summarises_each_run(runs: Path) -> None:
    rf.make_run(runs, "b-run")
    rf.make_run(runs, "a-run", status="completed")
    (runs / "README.txt").write_text("not a run")
    got = list_runs(runs)
    assert [r.name for r in got] == ["a-run", "b-run"]
    a, b = got
    assert a.status == "completed" and b.status == "interrupted"
    assert b.task_id == "report-001" and b.node_key == "export"
    assert b.updated_at == "2027-01-15T08:00:00.000Z"
    assert b.simulation is True and b.problems == ()
    with pytest.raises(AttributeError):
        b.status = "x"  # type: ignore[misc]  # frozen


def test_list_runs_reports_odd_entries_without_reading_them(runs: Path, tmp_path: Path) -> None:
    elsewhere = rf.make_run(tmp_path / "other", "real")
    runs.mkdir()
    (runs / "linked").symlink_to(elsewhere)
    (runs / "bad name").mkdir()
    got = {r.name: r for r in list_runs(runs)}
    assert got["linked"].status is None
    assert "symlink" in got["linked"].problems[0]
    assert got["bad name"].problems == ("invalid run name; not read",)


def test_run_without_simulation_marker(runs: Path) -> None:
    run = rf.make_run(runs)
    (run / "SIMULATION.json").unlink()
    (summary,) = list_runs(runs)
    assert summary.simulation is False


# --------------------------------------------------------------------------- strict JSON

MALFORMED = {
    "malformed": (b'{"status": ', "malformed JSON"),
    "non-utf8": (b'{"status": "interrupted \xff"}', "not UTF-8"),
    "nan": (b'{"status": "interrupted", "x": NaN}', "NaN is not JSON"),
    "infinity": (b'{"status": "interrupted", "x": Infinity}', "Infinity is not JSON"),
    "-infinity": (b'{"status": "interrupted", "x": -Infinity}', "-Infinity is not JSON"),
    "duplicate": (b'{"status": "completed", "status": "interrupted"}', 'duplicate key "status"'),
    "deep": (b'{"x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "nested deeper"),
    "bom": (b'\xef\xbb\xbf{"status": "interrupted"}', "byte-order mark"),
    "huge-int": (b'{"x": ' + b"9" * 5000 + b"}", "malformed JSON"),
    "overflow": (b'{"x": [1, -1e999]}', "number out of range"),
    "surrogate": (b'{"x": {"y": "\\ud800"}}', "lone surrogate"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_each_malformed_json_variant_is_reported(case: str, runs: Path) -> None:
    data, expected = MALFORMED[case]
    value, problem = parse_json(data)
    assert value is None and expected in problem
    run = rf.make_run(runs)
    (run / "state.json").write_bytes(data)
    (summary,) = list_runs(runs)  # never raises
    assert summary.status is None
    assert any(p.startswith("state.json: ") and expected in p for p in summary.problems)
    view = read_run(runs, "resume-01")
    assert any(expected in p for p in view.problems)


def test_oversized_json_is_not_parsed(runs: Path) -> None:
    run = rf.make_run(runs)
    (run / "state.json").write_bytes(b'{"status": "' + b"x" * JSON_CAP + b'"}')
    (summary,) = list_runs(runs)
    assert summary.status is None
    assert "over the 1048576-byte limit" in summary.problems[0]


def test_nesting_at_the_limit_parses_and_brackets_in_strings_do_not_count() -> None:
    ok = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert parse_json(ok)[1] is None
    assert parse_json(b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1))[1]
    value, problem = parse_json(json.dumps({"s": "[[[[{{{{" * 100, "t": "\\\"["}).encode())
    assert problem is None and value["s"].startswith("[[[[")


def test_state_with_odd_fields_is_reported(runs: Path) -> None:
    run = rf.make_run(runs)
    rf.set_state(run, status="paused", task_id=7)
    (summary,) = list_runs(runs)
    assert summary.status == "paused" and summary.task_id is None
    assert 'state.json: unknown status "paused"' in summary.problems
    assert "state.json: task_id is not a string" in summary.problems


# --------------------------------------------------------------------------- links and specials


def test_symlinked_state_is_not_followed(runs: Path, tmp_path: Path) -> None:
    run = rf.make_run(runs)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"status": "completed", "run_id": "resume-01"}))
    (run / "state.json").unlink()
    (run / "state.json").symlink_to(secret)
    (summary,) = list_runs(runs)
    assert summary.status is None  # the link target was not read
    assert summary.problems == ("state.json: symlink, not followed",)


def test_symlinked_directory_inside_a_run_is_not_followed(runs: Path, tmp_path: Path) -> None:
    run = rf.make_run(runs)
    real = tmp_path / "elsewhere"
    (run / "artifact").rename(real)
    (run / "artifact").symlink_to(real)
    p = preview(runs, "resume-01", "artifact/review.md")
    assert p.text == "" and p.problem == "artifact: symlink, not followed"
    view = read_run(runs, "resume-01")
    assert "artifact: symlink, not followed" in view.problems
    assert view.manifest == {}


@pytest.mark.parametrize("where", ["state.json", "SIMULATION.json", "artifact/review.md"])
def test_fifo_is_refused_without_blocking(runs: Path, where: str) -> None:
    run = rf.make_run(runs)
    (run / where).unlink()
    os.mkfifo(run / where)  # nobody ever writes to it: a blocking open would hang forever
    summaries = finishes(lambda: list_runs(runs))
    view = finishes(lambda: read_run(runs, "resume-01"))
    p = finishes(lambda: preview(runs, "resume-01", where))
    expected = f"{where}: a fifo, not a regular file; not read"
    assert expected in view.problems
    assert p.problem == expected
    if where != "artifact/review.md":
        assert expected in summaries[0].problems


def test_fifo_swapped_in_after_lstat_is_still_refused(runs: Path, monkeypatch) -> None:
    """The fstat after open catches a file replaced between lstat and open."""
    run = rf.make_run(runs)
    real_open = os.open

    def swapping_open(name, flags, *a, **k):
        if name == "state.json" and not flags & os.O_DIRECTORY:
            os.unlink(run / "state.json")
            os.mkfifo(run / "state.json")
        return real_open(name, flags, *a, **k)

    monkeypatch.setattr(os, "open", swapping_open)
    (summary,) = finishes(lambda: list_runs(runs))
    assert summary.status is None
    assert "state.json: changed while being opened; not read" in summary.problems


def test_device_is_refused(runs: Path) -> None:
    run = rf.make_run(runs)
    (run / "state.json").unlink()
    try:
        os.mknod(run / "state.json", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("cannot create a device node here")
    (summary,) = finishes(lambda: list_runs(runs))
    assert summary.problems == ("state.json: a device, not a regular file; not read",)


# --------------------------------------------------------------------------- read_run, preview


def test_read_run_gives_the_whole_picture(runs: Path) -> None:
    rf.make_run(runs)
    v = read_run(runs, "resume-01")
    assert v.status == "interrupted" and v.problems == ()
    assert [(s.name, s.status) for s in v.steps] == [
        ("load", "done"), ("export", "running"), ("verify", "pending")]
    assert set(v.inputs) == set(rf.INPUTS)
    assert set(v.manifest) == {"review.md"}
    assert v.receipts == ("01-load.json",)
    assert {e.path for e in v.entries} >= {"state.json", "artifact/review.md", "receipts"}
    assert v.simulation


def test_preview_is_capped(runs: Path) -> None:
    run = rf.make_run(runs)
    (run / "artifact" / "big.txt").write_bytes(b"a" * 10_000)
    p = preview(runs, "resume-01", "artifact/big.txt", limit=100)
    assert p.text == "a" * 100 and p.truncated and p.size == 10_000


def test_preview_refuses_unsafe_paths(runs: Path) -> None:
    rf.make_run(runs)
    assert "not a safe relative path" in preview(runs, "resume-01", "../resume-01/state.json").problem
    assert "not a safe relative path" in preview(runs, "resume-01", "/etc/passwd").problem


def test_fifty_megabyte_file_is_hashed_in_bounded_memory(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    chunk = os.urandom(1 << 20)
    with open(big, "wb") as f:
        for _ in range(50):
            f.write(chunk)
    tree, _ = SafeTree.open_root(str(tmp_path))
    assert tree is not None
    tracemalloc.start()
    try:
        with tree:
            r = tree.read("big.bin")
            capped = tree.read("big.bin", cap=4096)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.size == 50 << 20 and r.sha256 == rf.sha256(big.read_bytes())
    assert capped.truncated and len(capped.data) == 4096 and capped.sha256 == r.sha256
    assert peak < 8 << 20, f"peak {peak} bytes"


def test_printable_escapes_controls_bidi_and_zero_width() -> None:
    assert printable("ok name.md") == "ok name.md"
    assert printable("复习.md") == "复习.md"
    assert printable("a\x1b[31mb\u202ec\u200bd\ne") == "a\\x1b[31mb\\u202ec\\u200bd\\ne"


def test_problems_never_carry_raw_control_characters(runs: Path) -> None:
    run = rf.make_run(runs)
    (run / "artifact" / "evil\x1b]0;pwned\x07").symlink_to("/etc/passwd")
    view = read_run(runs, "resume-01")
    (problem,) = [p for p in view.problems if "evil" in p]
    assert problem == "artifact/evil\\x1b]0;pwned\\x07: symlink, not followed"


from hypothesis import given, settings, strategies as st  # noqa: E402

_JSONISH = st.lists(st.sampled_from(
    ['{', '}', '[', ']', '"', '\\', ':', ',', 'NaN', 'Infinity', '-', '1', '1e999', 'true',
     'null', '"a"', ' ', '\ufeff', '\x00', '\ud800', '"\\ud800"', 'é']), max_size=12
).map("".join)


@settings(max_examples=150, deadline=None, database=None)
@given(st.one_of(st.binary(max_size=200),
                 _JSONISH.map(lambda s: s.encode("utf-8", errors="surrogatepass"))))
def test_parse_json_never_raises(data: bytes) -> None:
    value, problem = parse_json(data)
    assert (problem is None) or (value is None and isinstance(problem, str))
    if problem is None:
        json.dumps(value, allow_nan=False)  # whatever parsed is plain, finite JSON

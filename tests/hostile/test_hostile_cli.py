"""The ``warden`` command under bad input: every failure is one clear line on stderr (escaped, no
traceback, never "internal error"), the documented exit code (0 ok, 1 refused or failed, 2 usage,
3 not found, 4 ledger unavailable), with ``--json`` exactly one ``{"error": {"code", "message"}}``
object on stdout, and the ledger file left exactly as it was by every command that only reads."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from console.cli import main as warden
from console.cli.common import GLOBALS
from console.cli.entry import build_parser
from console.cli.errors import CODES
from hostile_support import HOSTILE_TEXTS, assert_one_clear_line, fingerprint, foreign_sqlite, hostile_text
from store import Ledger, ManualClock
from store.text import safe_line
from tests.support.asks import ask

ROOT = Path(__file__).resolve().parents[2]
EXIT = {"usage": 2, "not_found": 3, "unavailable": 4, "schema": 4, "invalid": 1, "refused": 1, "stale": 1,
        "read_only": 1, "lease_lost": 1, "conflict": 1, "not_confirmed": 1, "failed": 1}


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    rc = warden(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_failure(rc: int, out: str, err: str, *, code: str | None = None, as_json: bool = False) -> None:
    assert rc in (1, 2, 3, 4), (rc, err)
    if code == "not_confirmed":  # the preview goes to stderr first (DESIGN), then the one line
        err = err.rstrip("\n").split("\n")[-1] + "\n"
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert_one_clear_line(err.rstrip("\n"))
    if as_json:
        obj = json.loads(out)  # exactly one object: json.loads refuses trailing data
        assert set(obj) == {"error"} and {"code", "message"} <= set(obj["error"]), obj  # DESIGN: {"error": {code, message}}
        assert obj["error"]["code"] in CODES and EXIT[obj["error"]["code"]] == rc
        assert_one_clear_line(obj["error"]["message"])
        if code is not None:
            assert obj["error"]["code"] == code, obj
    if code is not None:
        assert rc == EXIT[code], (rc, code, err)


@pytest.fixture
def led(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger.db")
    with Ledger.open(path, clock=ManualClock(1_800_000_000.0)) as ledger:
        ledger.create_task("t", title="T")
        ledger.add_node("t", "a")
        ledger.add_node("t", "b", deps=["a"])
        c = ledger.claim("t", "w", lease_s=10**9)
        ledger.commit(c, output={"ok": 1}, artifact=("\x1b]0;pwned\x07name\u202e\x9b.md", b"bytes"))
        c = ledger.claim("t", "w", lease_s=10**9)
        ask(ledger, c, kind="confirm", question="q", options=[{"id": "yes"}, {"id": "[/]"}])
    return path


# ---------------------------------------------------------------------- --version, flags
def test_version(capsys: Any) -> None:
    rc, out, err = run(capsys, "--version")
    assert rc == 0 and out.startswith("warden ") and len(out.split()) == 2 and not err


def _subparser(command: str) -> Any:
    parser = build_parser()
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its subparsers only here
        if getattr(action, "choices", None) and command in action.choices:
            return action.choices[command]
    raise KeyError(command)


def _honoured(command: str) -> frozenset[str]:
    return _subparser(command).get_default("_honours") or frozenset()


COMMANDS = sorted(build_parser().subcommand_names)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_subcommand_lists_and_takes_only_the_shared_flags_it_honours(command: str, capsys: Any) -> None:
    honoured = _honoured(command)
    # help and completion honour none (an empty set); None would mean the command never said
    assert _subparser(command).get_default("_honours") is not None, f"{command} does not say which shared flags it honours"
    assert warden([command, "--help"]) == 0
    help_text = capsys.readouterr().out
    for name, (flag, kwargs, _) in GLOBALS.items():
        listed = f" {flag}" in help_text or f"[{flag}" in help_text
        assert listed == (name in honoured), (command, flag)
        value = [] if kwargs.get("action") == "store_true" else ["v"]
        for argv in ([flag, *value, command], [command, flag, *value]):
            if name in honoured:
                continue  # taken (behaviour tested by each command's own tests)
            rc, out, err = run(capsys, *argv)
            assert_failure(rc, out, err, code="usage")
            assert flag in err and "does not apply" in err


@pytest.mark.parametrize("where", ["before", "after", "both"])
def test_shared_flags_go_before_or_after_the_subcommand(where: str, led: str, capsys: Any) -> None:
    first, second = (["--ledger", led], []) if where == "before" else ([], ["--ledger", led])
    if where == "both":
        first, second = ["--ledger", "/nonexistent/wrong.db"], ["--ledger", led]  # after wins
    rc, out, _ = run(capsys, *first, "--json", "status", *second)
    assert rc == 0 and json.loads(out)["tasks"][0]["task_id"] == "t"
    rc, out, _ = run(capsys, *first, "--operator", "alice", "--json", "--dry-run", "park", "t", "--reason", "r",
                     *second)
    assert rc == 0 and json.loads(out)["action"] == "park"
    rc, out, _ = run(capsys, "--operator", "alice", *first, "park", "t", "--reason", "r", "--yes", "--json", *second)
    assert rc == 0 and json.loads(out)["applied"]
    with Ledger.open(led, read_only=True) as ledger:
        assert ledger.actions()[0].operator == "alice"


# ---------------------------------------------------------------------- error codes
def test_every_error_code_with_json_is_one_object(led: str, tmp_path: Path, capsys: Any) -> None:
    foreign = tmp_path / "foreign.db"
    foreign_sqlite(foreign, wal=False)
    newer = tmp_path / "newer.db"
    with Ledger.open(newer):
        pass
    import sqlite3

    con = sqlite3.connect(newer)
    con.execute("UPDATE meta SET value = '999'")
    con.commit()
    con.close()
    cases = [
        (["status", "--bogus"], "usage"),
        (["graph"], "usage"),
        (["events", "--since", "x"], "usage"),
        (["graph", "nope", "--ledger", led], "not_found"),
        (["resolve", "999", "--option", "yes", "--yes", "--ledger", led], "not_found"),
        (["status", "--ledger", str(tmp_path / "missing.db")], "unavailable"),
        (["status", "--ledger", str(foreign)], "unavailable"),
        (["status", "--ledger", "postgresql://h:notaport/db"], "unavailable"),
        (["status", "--ledger", str(newer)], "schema"),
        (["park", "t", "--reason", "r", "--until", "nanh", "--yes", "--ledger", led], "invalid"),
        (["park", "t", "--reason", "", "--yes", "--ledger", led], "refused"),
        (["park", "t", "--reason", "r", "--ledger", led], "not_confirmed"),
        (["export", "t", "--output", str(tmp_path), "--ledger", led], "refused"),
    ]
    for argv, code in cases:
        before = fingerprint(led)
        rc, out, err = run(capsys, *argv, "--json")
        assert_failure(rc, out, err, code=code, as_json=True)
        rc2, out2, err2 = run(capsys, *argv)
        assert rc2 == rc and not out2.strip().startswith('{"error"'), argv
        assert_failure(rc2, out2, err2, code=code)
        assert fingerprint(led) == before, argv


def test_a_stale_plan_is_code_stale(led: str, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.cli import actions

    real = actions.run_action

    def racing(args: Any, make_plan: Any, **kw: Any) -> int:
        def plan_then_race(ledger: Any) -> Any:
            plan = make_plan(ledger)
            with Ledger.open(led) as other:  # another operator aborts it between preview and apply
                other.apply(other.plan_abort("t", reason="first"), operator="bob")
            return plan
        return real(args, plan_then_race, **kw)

    monkeypatch.setattr(actions, "run_action", racing)
    rc, out, err = run(capsys, "abort", "t", "--reason", "r", "--yes", "--json", "--ledger", led)
    assert_failure(rc, out, err, code="stale", as_json=True)


# ---------------------------------------------------------------------- hostile text on the way out
def test_export_shows_the_artifact_name_escaped(led: str, tmp_path: Path, capsys: Any) -> None:
    out_file = tmp_path / "out.md"
    rc, out, err = run(capsys, "export", "t", "--output", str(out_file), "--ledger", led)
    assert rc == 0 and out_file.read_bytes() == b"bytes"
    assert "\x1b" not in out and "\x9b" not in out and "\u202e" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07name\\u202e\\x9b.md" in out
    rc, out, _ = run(capsys, "export", "t", "--output", str(tmp_path / "o2"), "--json", "--ledger", led)
    assert rc == 0 and json.loads(out)["artifact"] == "\x1b]0;pwned\x07name\u202e\x9b.md" and "\x1b" not in out


@pytest.mark.parametrize("evil", HOSTILE_TEXTS[4:20], ids=range(16))
def test_the_ledger_path_is_echoed_escaped(evil: str, tmp_path: Path, capsys: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    if "\x00" in evil or "/" in evil:
        evil = evil.replace("\x00", "").replace("/", "")
    path = str(tmp_path / f"l{evil}.db")
    for argv in (["status", "--ledger", path], ["status", "--json", "--ledger", path]):
        rc, out, err = run(capsys, *argv)
        assert_failure(rc, out, err, code="unavailable", as_json="--json" in argv)
        assert safe_line(path) in err
    monkeypatch.setenv("WARDEN_LEDGER", path)
    rc, out, err = run(capsys, "graph", "t")
    assert_failure(rc, out, err, code="unavailable")
    assert safe_line(path) in err


# ---------------------------------------------------------------------- broken ledgers through the CLI
def _corrupt_middle(p: Path) -> None:
    """Garbage over pages past the schema (the second half of the file): the ledger opens, and
    the reads that reach those pages fail inside SQLite."""
    data = bytearray(p.read_bytes())
    for i in range(len(data) // 2, len(data) - 4096):
        data[i] = (i * 7919) & 0xFF
    p.write_bytes(bytes(data))


def _broken(kind: str, p: Path, led: str) -> None:
    if kind == "empty":
        p.write_bytes(b"")
    elif kind == "random":
        p.write_bytes(random.Random(5).randbytes(10_000))
    elif kind == "foreign":
        foreign_sqlite(p, wal=False)
    elif kind == "foreign-wal":
        foreign_sqlite(p, wal=True)
    elif kind == "truncated":
        p.write_bytes(Path(led).read_bytes()[:6000])
    elif kind == "garbage-version":
        p.write_bytes(Path(led).read_bytes())
        import sqlite3

        con = sqlite3.connect(p)
        con.execute("UPDATE meta SET value = 'abc'")
        con.commit()
        con.close()
    elif kind == "corrupt-middle":
        big = Ledger.open(p)
        big.create_task("t", title="T")
        for i in range(400):
            big.add_node("t", f"n{i}", title="x" * 500)
        big.close()
        _corrupt_middle(p)
    elif kind == "directory":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)


BROKEN = ["empty", "random", "foreign", "foreign-wal", "truncated", "garbage-version", "corrupt-middle",
          "directory", "fifo"]
EVERY_LEDGER_COMMAND = [["status"], ["graph", "t"], ["events"], ["events", "--task", "t"], ["handoffs"],
                        ["export", "t", "--output", "OUT"], ["recover", "--task", "t", "--node", "a"],
                        ["park", "t", "--reason", "r", "--yes"], ["abort", "t", "--reason", "r", "--yes"],
                        ["migrate"], ["report", "t"], ["compensated", "t", "fx", "--reason", "r", "--yes"],
                        ["check-wakes"], ["check-wakes", "--task", "t"]]


@pytest.mark.parametrize("kind", BROKEN)
def test_every_command_on_a_broken_ledger_is_one_line_and_changes_nothing(kind: str, led: str, tmp_path: Path,
                                                                          capsys: Any) -> None:
    p = tmp_path / "broken" / "ledger.db"
    p.parent.mkdir()
    _broken(kind, p, led)
    for argv in EVERY_LEDGER_COMMAND:
        argv = [str(tmp_path / "out.bin") if a == "OUT" else a for a in argv]
        before = {f: fingerprint(p.parent / f) for f in sorted(os.listdir(p.parent))}
        for as_json in (False, True):
            rc, out, err = run(capsys, *argv, "--ledger", str(p), *(["--json"] if as_json else []))
            if kind == "corrupt-middle" and rc == 0:
                continue  # the pages this command read were intact
            assert_failure(rc, out, err, as_json=as_json)
            assert rc in (1, 3, 4), (argv, rc, err)
            assert {f: fingerprint(p.parent / f) for f in sorted(os.listdir(p.parent))} == before, (kind, argv)
        assert not (tmp_path / "out.bin").exists()


# ---------------------------------------------------------------------- argv fuzz
WORDS = ["status", "graph", "events", "handoffs", "export", "migrate", "park", "resume", "narrow", "rewind", "abort",
         "resolve", "recover", "verify-record", "report", "compensated", "check-wakes", "--auto-resume", "t", "a", "b", "1", "999", "--json", "--yes", "--dry-run",
         "--read-only", "--ledger", "--runs", "--operator", "--reason", "--node", "--option", "--answer", "--until",
         "--wake-on", "--now", "--set", "--exclude", "--since", "--task", "--follow", "--output", "--record", "--all",
         "--help-me", "-x", "--", "=", "--reason=", "--set=k", "k=v", "nan", "-1", "1e999", "", " "]


SUBCOMMANDS = WORDS.index("--auto-resume")  # the words before it are subcommands


def _fuzz_argv(rng: random.Random, led: str, tmp: Path) -> list[str]:
    argv: list[str] = []
    for _ in range(rng.randrange(0, 9)):
        pick = rng.random()
        if pick < 0.7:
            argv.append(rng.choice(WORDS))
        elif pick < 0.9:
            argv.append(hostile_text(rng, size=rng.randrange(1, 4)).replace("\x00", ""))
        else:
            argv.append(rng.choice(["--ledger", "--output"]))
            argv.append(rng.choice([led, str(tmp / "missing.db"), str(tmp), "postgresql://[::1/x", "-"]))
    if "--follow" in argv:
        argv.remove("--follow")
    for danger in ("console", "demo", "serve"):  # would start a UI or a server
        while danger in argv:
            argv.remove(danger)
    if "--ledger" not in argv:
        argv += ["--ledger", led]
    if not any(w in argv for w in WORDS[:SUBCOMMANDS]):
        argv.insert(0, rng.choice(["status", "graph", "park", "recover"]))
    return argv


def test_argv_fuzz_is_always_one_clear_line_or_success(led: str, tmp_path: Path, capsys: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # no terminal: actions without --yes refuse
    rng = random.Random(1313)
    seen: dict[int, int] = {}
    for i in range(800):
        argv = _fuzz_argv(rng, led, tmp_path)
        rc, out, err = run(capsys, *argv)
        seen[rc] = seen.get(rc, 0) + 1
        assert rc in (0, 1, 2, 3, 4), (argv, rc, err)
        assert "Traceback" not in err and "internal error" not in err, (argv, err)
        assert safe_line(out.replace("\n", "")) == out.replace("\n", ""), (argv, out)  # nothing raw on stdout
        if rc != 0:
            lines = err.strip("\n").split("\n")
            assert_one_clear_line(lines[-1])  # an action's preview may precede its one-line refusal
            if "--json" in argv and "--" not in argv[: argv.index("--json")]:
                json.loads(out.strip().split("\n")[-1] if out.strip() else '{"error": {}}')
    assert seen.get(2, 0) > 50 and seen.get(0, 0) > 5 and seen.get(3, 0) + seen.get(1, 0) > 10, seen


def test_real_processes_never_print_a_traceback(led: str, tmp_path: Path) -> None:
    """The installed entry point in a real process (its own stdin, env and exit path)."""
    rng = random.Random(77)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("WARDEN_DEBUG", None)
    for _ in range(12):
        argv = _fuzz_argv(rng, led, tmp_path)
        p = subprocess.run([sys.executable, "-m", "console", *argv], capture_output=True, env=env, timeout=120,
                           stdin=subprocess.DEVNULL, cwd=tmp_path)
        err = p.stderr.decode("utf-8", "replace")
        assert p.returncode in (0, 1, 2, 3, 4), (argv, p.returncode, err)
        assert "Traceback" not in err and "internal error" not in err, (argv, err)
        for stream in (p.stdout, p.stderr):
            for line in stream.decode("utf-8", "replace").splitlines():
                assert safe_line(line) == line, (argv, line)  # no raw control or format character


# ---------------------------------------------------------------------- rows from elsewhere
ROW_DAMAGE = {
    "inputs not JSON": "UPDATE task SET inputs = '{not json'",
    "preconditions not JSON": "UPDATE node SET preconditions = '[1,'",
    "infinite estimate": "UPDATE node SET est_wall_s = 9e999",
    "infinite lease": "UPDATE node SET lease_until = 9e999 WHERE key = 'a'",
    "NaN-ish timestamps": "UPDATE event SET at = -9e999",
    "strange status": "UPDATE node SET status = 'zombie\x1b[6n' WHERE key = 'b'",
    "payload not JSON": "UPDATE event SET payload = 'x'",
}


@pytest.mark.parametrize("case", sorted(ROW_DAMAGE))
def test_damaged_rows_are_valid_json_or_one_line(case: str, led: str, capsys: Any) -> None:
    import sqlite3

    con = sqlite3.connect(led)
    con.execute(ROW_DAMAGE[case])
    con.commit()
    con.close()
    for argv in (["status"], ["graph", "t"], ["events"], ["handoffs"]):
        for as_json in (True, False):
            rc, out, err = run(capsys, *argv, "--ledger", led, *(["--json"] if as_json else []))
            if rc == 0:
                if as_json:
                    for line in out.splitlines():
                        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in {argv} JSON"))
                assert safe_line(out.replace("\n", "")) == out.replace("\n", "")
            else:
                assert_failure(rc, out, err, as_json=as_json)
                assert rc == 4, (case, argv, err)

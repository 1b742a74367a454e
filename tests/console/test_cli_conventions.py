"""The ``warden`` command behaves as a Unix command: piped output is never cut
to the terminal's width; ``warden status --watch`` redraws until Ctrl-C, piped or not, without a
traceback; ``warden completion bash|zsh|fish`` completes every subcommand and flag, generated from
the parser (driven here in the real shells: bash always; zsh and fish where installed, and CI
installs them)."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main as warden
from console.cli.entry import build_parser
from console.cli.meta import walk
from store import Ledger, NodeSpec
from tests.support.waiting import Deadline

ROOT = Path(__file__).resolve().parents[2]
LONG = "a title far longer than eighty columns " + "word " * 40 + "THE-END"
CI = bool(os.environ.get("CI"))


@pytest.fixture
def led(tmp_path):
    path = str(tmp_path / "l.db")
    with Ledger.open(path) as ledger:
        ledger.create_task("t1", title=LONG)
        ledger.add_nodes("t1", [NodeSpec(f"n{i}", "llm") for i in range(3)])
    return path


# ---------------------------------------------------------------------- piped output
@pytest.mark.parametrize("columns", ["80", "40", None])
def test_piped_output_is_never_cut(led, capsys, monkeypatch, columns):
    """capsys is not a terminal: the whole title and every event on one line, whatever $COLUMNS."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert warden(["status", "--ledger", led]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].startswith("t1") and lines[1].endswith("THE-END") and "…" not in out
    assert all(line == line.rstrip() for line in lines)  # no padding after the last column
    assert warden(["events", "--ledger", led]) == 0
    events = capsys.readouterr().out.splitlines()
    assert len(events) == 2  # task.created, graph.nodes_added: one line each
    assert events[0].split()[0] == "1" and events[0].endswith("THE-END")
    assert warden(["graph", "t1", "--ledger", led]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("THE-END")


def test_a_terminal_still_gets_a_fitted_table(led, capsys, monkeypatch):
    """On a terminal of 80 columns the title gives way (and the line fits); the id stays whole."""
    monkeypatch.setattr("console.cli.common.is_terminal", lambda stream: True)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert warden(["status", "--ledger", led]) == 0
    out = capsys.readouterr().out
    assert "THE-END" not in out and "…" in out


# ---------------------------------------------------------------------- status --watch
def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    env.pop("COLUMNS", None)
    return env


def _read_until(fd: int, buf: bytearray, pred, what: str, net_s: float = 60) -> None:
    """Read ``fd`` until ``pred`` holds (a safety net of ``net_s`` idle seconds stretched by the
    machine's load: tests/support/waiting.py)."""
    deadline = Deadline(net_s)
    while not pred(bytes(buf)):
        assert not deadline.expired(), f"timed out waiting for {what}; got {bytes(buf[-800:])!r}"
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # a pty whose child has gone
                chunk = b""
            assert chunk, f"the command ended before {what}: {bytes(buf[-800:])!r}"
            buf.extend(chunk)


def ctrl_c_heard() -> None:
    """In a child before exec: Ctrl-C's default back. A process started in the background by a
    shell without job control (a CI script's ``… &``) ignores SIGINT, and its children inherit
    the ignoring: the command under test would never hear the Ctrl-C the test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("as_json", [False, True])
def test_watch_piped_prints_a_snapshot_per_change_and_stops_quietly_on_ctrl_c(led, as_json):
    argv = [sys.executable, "-m", "console", "status", "--watch", "--ledger", led] + (["--json"] if as_json else [])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
                            preexec_fn=ctrl_c_heard)
    out = bytearray()
    try:
        _read_until(proc.stdout.fileno(), out, lambda b: b"THE-END" in b, "the first snapshot")
        with Ledger.open(led) as ledger:
            ledger.create_task("t2", title="second")
        _read_until(proc.stdout.fileno(), out, lambda b: b"second" in b, "the snapshot after a change")
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = (bytes(out) + rest).decode()
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and err.strip() == b"", err
    assert "\x1b" not in text  # piped: no screen redraws
    if as_json:
        import json

        snaps = [json.loads(line) for line in text.splitlines()]
        assert [[t["task_id"] for t in s["tasks"]] for s in snaps[:2]] == [["t1"], ["t1", "t2"]]
    else:
        snaps = re.split(r"^-- \d\d:\d\d:\d\d$", text, flags=re.M)
        assert snaps[0] == "" and len(snaps) >= 3
        assert all(s.count("THE-END") == 1 for s in snaps[1:])  # each snapshot whole, the title uncut
        assert "second" not in snaps[1] and "second" in snaps[2]


def test_watch_on_a_terminal_redraws_and_ctrl_c_ends_it_without_a_traceback(led):
    pid, fd = pty.fork()
    if pid == 0:
        ctrl_c_heard()
        os.execve(sys.executable, [sys.executable, "-m", "console", "status", "--watch", "--ledger", led], _env())
    out = bytearray()
    try:
        _read_until(fd, out, lambda b: b"Ctrl-C stops" in b and b"t1" in b, "the screen")
        assert b"\x1b[2J" in out  # the screen is cleared and redrawn, not scrolled
        os.kill(pid, signal.SIGINT)
        try:
            while chunk := os.read(fd, 65536):
                out.extend(chunk)
        except OSError:
            pass
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"Traceback" not in out and b"KeyboardInterrupt" not in out


def test_watch_of_a_missing_ledger_is_one_line(tmp_path, capsys):
    assert warden(["status", "--watch", "--ledger", str(tmp_path / "none.db")]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no ledger" in err


# ---------------------------------------------------------------------- completion
def _script(shell: str, capsys) -> str:
    assert warden(["completion", shell]) == 0
    return capsys.readouterr().out


def test_the_scripts_name_every_subcommand_and_flag(capsys):
    root = build_parser()
    for shell in ("bash", "zsh", "fish"):
        text = _script(shell, capsys)
        for path, parser in walk(root):
            for name in path:
                assert name in text, (shell, name)
            for a in parser._actions:
                for flag in a.option_strings:
                    if a.help != "==SUPPRESS==":
                        assert flag.lstrip("-") in text, (shell, path, flag)
        assert "--no-console" not in text  # a hidden flag stays hidden


def _bash(script: str, line: str) -> list[str]:
    """What bash completes for ``line`` (the word under the cursor is its last word, maybe empty)."""
    words = line.split(" ")
    prog = script + (
        "COMP_WORDS=(" + " ".join(f"'{w}'" for w in words) + f")\nCOMP_CWORD={len(words) - 1}\n"
        "_warden\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


CASES = [  # (line, must be offered, must not be offered)
    ("warden sta", {"status"}, {"graph"}),
    ("warden ", {"status", "park", "completion", "help", "serve"}, {"--json"}),
    ("warden status --", {"--json", "--watch", "--ledger"}, {"--yes", "--reason"}),
    ("warden --ledger x.db sta", {"status"}, set()),
    ("warden park t1 --re", {"--reason"}, {"--json-stream"}),
    ("warden completion ", {"bash", "zsh", "fish"}, {"status"}),
    ("warden help ", {"status", "park", "completion"}, set()),
    ("warden run --json-stream ", {"claude", "codex"}, {"--task"}),
    ("warden hook ", {"claude"}, set()),
    ("warden events --since ", set(), {"status", "--json"}),
]


@pytest.mark.parametrize("line, wanted, unwanted", CASES)
def test_bash_completes(capsys, line, wanted, unwanted):
    got = set(_bash(_script("bash", capsys), line))
    assert wanted <= got and not (unwanted & got), got


def test_bash_completes_file_names_for_a_path_flag(capsys, tmp_path):
    (tmp_path / "ledger-a.db").write_text("")
    got = _bash(_script("bash", capsys), f"warden status --ledger {tmp_path}/ledger-")
    assert got == [f"{tmp_path}/ledger-a.db"]


def _need(shell: str) -> None:
    if shutil.which(shell) is None:
        if CI:
            pytest.fail(f"{shell} is not installed (.ci/run installs it)")
        pytest.skip(f"{shell} is not installed")


ZSH_STUBS = r"""
_describe() { local a; for a in "${(@P)${@[-1]}}"; do print -r -- "${a%%:*}"; done }
compadd() { while [[ $1 == -* && $1 != -- ]]; do shift; done; [[ $1 == -- ]] && shift; print -rl -- "$@" }
_files() { print -r -- '<files>' }
compdef() { : }
"""


@pytest.mark.parametrize("line, wanted, unwanted", CASES)
def test_zsh_completes(capsys, line, wanted, unwanted):
    """zsh's completion functions stubbed to print what they are given; the script's own logic
    (where on the command line the cursor is, what may come there) runs in zsh."""
    _need("zsh")
    script = _script("zsh", capsys)
    words = line.split(" ")
    prog = (ZSH_STUBS + script + "words=(" + " ".join(f"'{w}'" for w in words) + f")\nCURRENT={len(words)}\n"
            "_warden\n")
    done = subprocess.run(["zsh", "-f", "-c", prog], capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    assert not done.stderr, done.stderr
    got = {w for w in done.stdout.splitlines() if w.startswith(words[-1])}
    assert wanted <= got and not (unwanted & got), got


def test_zsh_script_is_valid_zsh(capsys, tmp_path):
    _need("zsh")
    path = tmp_path / "_warden"
    path.write_text(_script("zsh", capsys))
    done = subprocess.run(["zsh", "-n", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("line, wanted, unwanted", CASES)
def test_fish_completes(capsys, line, wanted, unwanted, tmp_path):
    """fish's own ``complete -C``: the real completion machinery, not a stub."""
    _need("fish")
    path = tmp_path / "warden.fish"
    path.write_text(_script("fish", capsys))
    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               XDG_DATA_HOME=str(tmp_path / "data"))
    done = subprocess.run(["fish", "--no-config", "-c", f"source {path}; complete -C '{line}'"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    got = {w.split("\t")[0] for w in done.stdout.splitlines()}
    assert wanted <= got and not (unwanted & got), got

"""`warden serve` flags: what is refused (one line, the right exit status, nothing listening) and
what each accepted combination hands the server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from console.cli import main

pytest.importorskip("textual_serve", reason="warden serve needs the serve extra: pip install 'warden[serve]'")


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Replace the server's run with a recorder: the flags are checked, nothing listens."""
    from console.serve import server

    seen: list[Any] = []

    def run(self: Any) -> int:
        seen.append(self.config)
        return 0

    monkeypatch.setattr(server.WardenServer, "run", run)
    monkeypatch.delenv("WARDEN_SERVE_TOKEN", raising=False)
    return seen


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "192.168.0.10", "warden.example.org", ""])
def test_non_loopback_without_a_given_token_is_refused(host: str, ledger_path: Path, captured: list[Any],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--ledger", str(ledger_path), "--host", host]) == 2
    line = one_line(capsys.readouterr().err)
    assert "without a token given" in line and "--token" in line
    assert captured == []
    # --operator alone does not make a token
    assert main(["serve", "--ledger", str(ledger_path), "--host", host, "--operator", "alice"]) == 2
    assert captured == []


@pytest.mark.parametrize("args,fragment", [
    (["--token", "short"], "at least 16"),
    (["--token", "has spaces in the token"], "printable ASCII"),
    (["--operator", "bad name"], "an operator name"),
    (["--operator", "evil\x1b[31m"], "an operator name"),
    (["--port", "70000"], "not a port"),
    (["--port", "-1"], "not a port"),
    (["--port", "http"], "invalid int"),
    (["--max-sessions", "0"], "at least 1"),
    (["--tokens", "/nonexistent/tokens"], "No such file"),
    (["--tokens", "TOKENS", "--token", "x" * 20], "--tokens names"),
    (["--tokens", "TOKENS", "--operator", "alice"], "--tokens names"),
    (["--tokens", "EMPTY"], "no 'NAME TOKEN'"),
    (["--allow-actions", "--token", "x" * 15], "at least 16"),
])
def test_usage_errors(args: list[str], fragment: str, ledger_path: Path, tmp_path: Path, captured: list[Any],
                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tokens").write_text("alice " + "a" * 20 + "\n")
    (tmp_path / "empty").write_text("# nobody\n")
    args = [str(tmp_path / "tokens") if a == "TOKENS" else str(tmp_path / "empty") if a == "EMPTY" else a
            for a in args]
    assert main(["serve", "--ledger", str(ledger_path), *args]) == 2
    assert fragment in one_line(capsys.readouterr().err)
    assert captured == []


def test_env_token_is_checked_like_the_flag(ledger_path: Path, captured: list[Any], monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WARDEN_SERVE_TOKEN", "tiny")
    assert main(["serve", "--ledger", str(ledger_path)]) == 2
    assert "$WARDEN_SERVE_TOKEN" in one_line(capsys.readouterr().err)


def test_missing_ledger_is_refused_before_listening(tmp_path: Path, captured: list[Any],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope" / "ledger.db"
    assert main(["serve", "--ledger", str(missing)]) not in (0, 2)
    assert "warden" in one_line(capsys.readouterr().err)
    assert captured == [] and not missing.exists() and not missing.parent.exists()


def test_without_the_extra_says_so(ledger_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # as if not installed
    assert main(["serve", "--ledger", str(ledger_path)]) == 1
    line = one_line(capsys.readouterr().err)
    assert "pip install 'warden[serve]'" in line


def test_accepted_combinations(ledger_path: Path, tmp_path: Path, captured: list[Any],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    tok = "s3cret-token-for-the-team"
    assert main(["serve", "--ledger", str(ledger_path)]) == 0
    c = captured.pop()
    (cred,) = c.book.credentials
    assert c.host == "127.0.0.1" and c.port == 8000 and not c.allow_actions and c.print_token
    assert cred.name == f"web-{cred.fingerprint}" and len(cred.token) >= 43
    assert "--read-only" in c.session_argv(cred)

    assert main(["serve", "--ledger", str(ledger_path), "--host", "0.0.0.0", "--token", tok, "--allow-actions",
                 "--operator", "alice", "--port", "0"]) == 0
    c = captured.pop()
    (cred,) = c.book.credentials
    assert (c.host, c.port, c.allow_actions, c.print_token) == ("0.0.0.0", 0, True, False)
    assert (cred.name, cred.token) == ("alice", tok)
    argv = c.session_argv(cred)
    assert "--read-only" not in argv and argv[argv.index("--operator") + 1] == "alice"

    monkeypatch.setenv("WARDEN_SERVE_TOKEN", tok)
    assert main(["serve", "--ledger", str(ledger_path), "--host", "::"]) == 0
    c = captured.pop()
    assert c.book.credentials[0].token == tok and not c.print_token

    monkeypatch.delenv("WARDEN_SERVE_TOKEN")
    (tmp_path / "t").write_text("alice " + "a" * 20 + "\nbob " + "b" * 20 + "\n")
    assert main(["serve", "--ledger", str(ledger_path), "--host", "10.0.0.1", "--tokens", str(tmp_path / "t"),
                 "--runs", str(tmp_path / "runs"), "--project", str(tmp_path), "--records", str(tmp_path / "rec")]) == 0
    c = captured.pop()
    assert [x.name for x in c.book.credentials] == ["alice", "bob"] and not c.print_token
    argv = c.session_argv(c.book.credentials[1])
    for flag, value in (("--operator", "bob"), ("--runs", str(tmp_path / "runs")), ("--project", str(tmp_path)),
                        ("--records", str(tmp_path / "rec")), ("--ledger", str(ledger_path))):
        assert argv[argv.index(flag) + 1] == value


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--host", "--port", "--token", "--tokens", "--allow-actions", "--operator", "--ledger"):
        assert flag in out

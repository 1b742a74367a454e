"""`warden console --ledger A --ledger B` and the contexts file (console/ledgers.py): which ledgers
the console opens, under which short names; a wrong contexts file is one usage line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import app as app_mod
from console.cli.entry import main
from console.ledgers import ContextError, Named, resolve, short_name


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """What `warden console` would run the app with (the app itself is not started)."""
    calls: list[dict] = []
    monkeypatch.setattr(app_mod, "run_console", lambda **kw: calls.append(kw) or 0)
    monkeypatch.delenv("WARDEN_LEDGER", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    return calls


@pytest.fixture
def contexts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "console.toml"
    monkeypatch.setenv("WARDEN_CONSOLE_CONFIG", str(path))
    return path


def test_repeated_ledger_opens_each_sqlite_and_postgresql_mixed(opened, contexts):
    contexts.write_text("")
    url = "postgresql://warden@db.internal:5432/batch?sslmode=require"
    assert main(["console", "--ledger", "/srv/api/ledger.db", "--ledger", url, "--ledger", "other/ledger.db"]) == 0
    kw = opened[0]
    assert kw["ledger"] == "/srv/api/ledger.db" and kw["ledger_name"] == "ledger"
    assert kw["more"] == [("batch", url), ("ledger-2", "other/ledger.db")]


def test_one_ledger_is_the_one_ledger_console(opened, contexts):
    contexts.write_text("")
    assert main(["console", "--ledger", "x.db"]) == 0
    assert opened[0]["ledger"] == "x.db" and opened[0]["more"] == [] and opened[0]["ledger_name"] == ""
    assert main([]) == 0  # warden alone: ./ledger.db, as before
    assert opened[1]["ledger"] == "ledger.db" and opened[1]["more"] == []


def test_names_from_the_contexts_file_and_its_open_list(opened, contexts):
    contexts.write_text('open = ["api", "batch"]\n[ledgers]\napi = "/srv/api.db"\n'
                        'batch = "postgresql://warden@db/batch"\n')
    assert main(["console"]) == 0
    assert opened[0]["ledger"] == "/srv/api.db" and opened[0]["ledger_name"] == "api"
    assert opened[0]["more"] == [("batch", "postgresql://warden@db/batch")]
    assert main(["--ledger", "batch", "console", "--ledger", "./x.db"]) == 0
    assert opened[1]["ledger"] == "postgresql://warden@db/batch" and opened[1]["more"] == [("x", "./x.db")]


@pytest.mark.parametrize("text, says", [
    ("[ledgers]\n'bad name' = 'x.db'\n", "use 1-16 letters"),
    ("open = ['nope']\n[ledgers]\na = 'a.db'\n", "not in [ledgers]"),
    ("[ledgers\n", "console.toml"),
    ("colour = 1\n", "unknown key 'colour'"),
])
def test_a_wrong_contexts_file_is_one_usage_line(opened, contexts, capsys, text, says):
    contexts.write_text(text)
    assert main(["console"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert opened == []


def test_the_same_ledger_twice_is_refused(opened, contexts, capsys):
    contexts.write_text("")
    assert main(["console", "--ledger", "a.db", "--ledger", "a.db"]) == 2
    assert "given twice" in capsys.readouterr().err and opened == []


def test_short_names():
    assert short_name("/srv/team/ledger.db") == "ledger"
    assert short_name("postgresql://u:secret@db.internal/warden_api?sslmode=require") == "warden_api"
    assert short_name("postgresql://u@db.internal") == "db-internal"
    assert "secret" not in short_name("postgresql://u:secret@h/") and short_name("x.sqlite3") == "x"
    with pytest.raises(ContextError):
        resolve(["a.db", "a.db"], {"XDG_CONFIG_HOME": "/nonexistent"})
    assert resolve(["a.db", "b/a.db"], {"XDG_CONFIG_HOME": "/nonexistent"}) == [Named("a", "a.db"),
                                                                                 Named("a-2", "b/a.db")]


def test_several_ledgers_on_a_line_terminal_is_one_usage_line(opened, contexts, capsys, monkeypatch):
    """TERM=dumb shows one ledger (lines, no full screen): several --ledger is refused, nothing opened."""
    import console.cli.entry as entry

    contexts.write_text("")
    monkeypatch.setattr(entry, "terminal_kind", lambda: "lines")
    assert main(["console", "--ledger", "a.db", "--ledger", "b.db"]) == 2
    err = capsys.readouterr().err
    assert "shows one ledger" in err and err.count("\n") == 1 and "Traceback" not in err
    assert opened == []

"""Every ``warden`` subcommand explains itself: a one-line description, each
positional explained, an example that parses; ``warden help CMD`` is ``warden CMD --help``; an
unknown command is one line and exit 2.

The walk covers every parser under ``warden`` (nested ones too), so a subcommand added later
without its help fails here.
"""

from __future__ import annotations

import argparse
import json
import shlex

import pytest

from console.cli import main as warden
from console.cli.entry import build_parser, parse
from console.cli.errors import UsageError
from console.cli.meta import walk

PARSERS = [(path, p) for path, p in walk(build_parser()) if path]


def _name(item: tuple[tuple[str, ...], argparse.ArgumentParser]) -> str:
    return " ".join(item[0])


def _example_lines(parser: argparse.ArgumentParser) -> list[str]:
    """The command lines of a parser's examples: ``warden …`` up to a pipe, redirection or comment."""
    out = []
    for line in (parser.epilog or "").splitlines()[1:]:
        line = line.strip()
        at = line.find("warden ")
        if at < 0 and line != "warden":
            continue
        line = line[at:] if at >= 0 else line
        for stop in (" | ", " > ", "  #", ")"):
            line = line.split(stop)[0] if stop != ")" or line.count(")") > line.count("(") else line
        out.append(line.strip())
    return out


def test_the_walk_sees_every_subcommand():
    names = {_name(i) for i in PARSERS}
    assert {"status", "events", "park", "resolve", "serve", "run", "hook", "help", "completion"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize("item", PARSERS, ids=_name)
def test_every_subcommand_has_a_description_explained_positionals_and_an_example(item):
    path, parser = item
    name = " ".join(path)
    first = (parser.description or "").strip().splitlines()
    assert first and len(first[0]) > 10, f"warden {name}: no one-line description"
    for a in parser._actions:
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction):
            assert a.help and a.help != argparse.SUPPRESS, f"warden {name}: positional {a.metavar or a.dest} unexplained"
    examples = _example_lines(parser)
    assert parser.epilog and parser.epilog.split("\n")[0].startswith("example"), f"warden {name}: no example"
    assert any(e.startswith(f"warden {name}") or (name == "console" and e.startswith("warden")) for e in examples), \
        f"warden {name}: no example of itself: {examples}"


@pytest.mark.parametrize("item", PARSERS, ids=_name)
def test_every_example_parses(item):
    """An example that the parser refuses would teach a usage error."""
    for line in _example_lines(item[1]):
        argv = shlex.split(line)[1:]
        try:
            args = parse(argv)
        except UsageError as e:
            pytest.fail(f"{line!r}: {e}")
        assert args.func is not None


def test_the_help_command_is_the_subcommands_help(capsys):
    for name in ("status", "park", "completion", "help"):
        assert warden(["help", name]) == 0
        via_help = capsys.readouterr().out
        with pytest.raises(SystemExit):
            build_parser().parse_args([name, "--help"])
        assert capsys.readouterr().out == via_help
        assert "example" in via_help
    assert warden(["help"]) == 0
    top = capsys.readouterr().out
    assert "usage: warden" in top and "completion" in top and "status" in top
    assert warden(["help", "hook", "claude"]) == 0  # a positional's choice, not a parser of its own
    assert "Claude Code" in capsys.readouterr().out


@pytest.mark.parametrize("argv, shown", [
    (["help", "bogus"], "bogus"), (["help", "status", "extra"], "status extra"), (["help", "\x1b[31mx"], "\\x1b[31mx"),
])
def test_help_of_an_unknown_command_is_one_line_and_exit_2(capsys, argv, shown):
    assert warden(argv) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith(f"warden help: unknown command '{shown}'")
    assert "\x1b" not in out.err


@pytest.mark.parametrize("argv", [
    ["bogus"], ["bogus", "--json"], ["--ledger", "x.db", "bogus"], ["--ledger=x.db", "bogus", "status"],
    ["--read-only", "bogus"], ["Status"],
])
def test_an_unknown_command_is_named_in_one_line(capsys, argv):
    word = "Status" if "Status" in argv else "bogus"
    assert warden(argv) == 2
    out = capsys.readouterr()
    assert out.err.startswith(f"warden: unknown command '{word}'") and out.err.count("\n") == 1
    assert "unrecognized" not in out.err and "console" not in out.err
    if "--json" in argv:
        assert json.loads(out.out)["error"]["code"] == "usage"


def test_a_near_miss_suggests_the_command(capsys):
    assert warden(["stauts"]) == 2
    assert capsys.readouterr().err == "warden: unknown command 'stauts'; did you mean 'status'?\n"
    assert warden(["zzzz"]) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_flags_alone_still_mean_the_console():
    assert parse(["--ledger", "x.db", "--read-only"]).command == "console"
    assert parse([]).command == "console"
    with pytest.raises(UsageError, match="give a subcommand"):  # a command's name as a value: never the console
        parse(["--operator", "verify-record", "--ledger", "x.db"])

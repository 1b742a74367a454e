"""The command about the command: ``warden help [CMD …]`` and ``warden completion bash|zsh|fish``.

Both read the parser itself (:func:`walk`), so a new subcommand has its help page, its line in
``warden help`` and its completion without a line here. ``console.cli.entry.build_parser`` calls
:func:`register` last, with the whole parser.

Completion scripts are generated, not hand-written: the subcommands (nested ones too: ``warden
hook claude``), every flag (with its description for zsh and fish), the choices of a flag or
positional that has them (``--json-stream claude|codex``), file names after a flag whose value is a
path (``--ledger``, ``--output FILE``, ``--runs DIR``), the command names after ``warden help``.
Task ids and node keys are not completed (that would read the ledger on every Tab).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import Iterator

from ..text import safe_line
from .common import Subcommands, honours
from .errors import UsageError

SHELLS = ("bash", "zsh", "fish")

HELP_EXAMPLE = """examples:
  warden help status  # the same as warden status --help
  warden help hook claude"""

COMPLETION_EXAMPLE = """examples:
  source <(warden completion bash)                                  # in ~/.bashrc
  warden completion zsh > "${fpath[1]}/_warden"                      # or: source <(warden completion zsh)
  warden completion fish > ~/.config/fish/completions/warden.fish"""


def register(sub: Subcommands, root: argparse.ArgumentParser) -> None:
    """``help`` and ``completion``, which need the whole parser ``root``."""
    p = sub.add_parser("help", help="a command's help (warden help CMD is warden CMD --help)",
                       description="Print the help of a command: what it does, its arguments and an example.",
                       epilog=HELP_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topic", nargs="*", metavar="CMD", help="the command (and subcommand); none: the list of commands")
    honours(p)
    p.set_defaults(func=lambda args: cmd_help(root, args.topic))

    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                       description="Print the completion script of a shell for warden's commands and flags.",
                       epilog=COMPLETION_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    honours(p)
    p.set_defaults(func=lambda args: cmd_completion(root, args.shell))


# ---------------------------------------------------------------------- the parser's tree
def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """A parser's subcommands: name → (its line in the parent's help, its parser)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help or "" for c in action._choices_actions}
            return {name: (helps.get(name, ""), p) for name, p in action.choices.items()}
    return {}


def walk(parser: argparse.ArgumentParser,
         path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser under ``parser`` (itself first) with its subcommand path."""
    yield path, parser
    for name, (_, child) in subcommands(parser).items():
        yield from walk(child, (*path, name))


def find(root: argparse.ArgumentParser, path: list[str]) -> argparse.ArgumentParser | None:
    parser = root
    for i, word in enumerate(path):
        found = subcommands(parser).get(word)
        if found is None:  # warden help hook claude: a positional's choice names no parser of its own
            rest = path[i:]
            takes = [a for a in parser._actions if not a.option_strings and a.choices]
            return parser if len(rest) == 1 and any(word in a.choices for a in takes) else None  # type: ignore[operator]
        parser = found[1]
    return parser


# ---------------------------------------------------------------------- warden help
def cmd_help(root: argparse.ArgumentParser, topic: list[str]) -> int:
    parser = find(root, topic)
    if parser is None:
        shown = safe_line(" ".join(topic), limit=80)
        raise UsageError(f"warden help: unknown command '{shown}' (warden help lists the commands)")
    parser.print_help()
    return 0


# ---------------------------------------------------------------------- warden completion
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")  # what a completion script may hold unquoted
_PATHS = ("PATH", "FILE", "DIR")  # a metavar naming one of these: complete file names


@dataclass
class Option:
    flags: tuple[str, ...]
    help: str
    valued: bool
    choices: tuple[str, ...] = ()
    files: bool = False


@dataclass
class Level:
    """What may follow ``warden PATH``: subcommands, options, positional words."""

    path: tuple[str, ...]
    subs: list[tuple[str, str]] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    words: tuple[str, ...] = ()  # a positional's choices (completion's SHELL; help's CMD)


def levels(root: argparse.ArgumentParser) -> list[Level]:
    top = tuple(subcommands(root))
    out = []
    for path, parser in walk(root):
        level = Level(path, subs=[(n, _one_line(h)) for n, (h, _) in subcommands(parser).items()])
        for a in parser._actions:
            if a.help == argparse.SUPPRESS or isinstance(a, argparse._SubParsersAction):
                continue
            choices = tuple(str(c) for c in a.choices) if a.choices else ()
            if not a.option_strings:
                level.words += tuple(c for c in choices if _WORD.match(c))
                continue
            metavar = a.metavar if isinstance(a.metavar, str) else ""
            level.options.append(Option(
                flags=tuple(f for f in a.option_strings if _WORD.match(f.lstrip("-"))), help=_one_line(a.help or ""),
                valued=a.nargs != 0, choices=tuple(c for c in choices if _WORD.match(c)),
                files=any(w in metavar for w in _PATHS)))
        if path == ("help",):
            level.words = top
        out.append(level)
    return out


def _one_line(text: str) -> str:
    text = " ".join(str(text).split()).replace("%%", "%")
    return text if len(text) <= 70 else text[:69] + "…"


def cmd_completion(root: argparse.ArgumentParser, shell: str) -> int:
    print({"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[shell](levels(root)), end="")
    return 0


def _flags(level: Level, which: str) -> str:
    pick = {"all": lambda o: True, "valued": lambda o: o.valued, "files": lambda o: o.files}[which]
    return " ".join(f for o in level.options if pick(o) for f in o.flags)


def _choices(levels_: list[Level]) -> list[tuple[str, str, str]]:
    return [(" ".join(lv.path), f, " ".join(o.choices)) for lv in levels_ for o in lv.options if o.choices
            for f in o.flags]


BASH = r"""# bash completion for warden, generated by `warden completion bash` from warden's own parser.
# Load it with: source <(warden completion bash)   (in ~/.bashrc), or save it as
# ~/.local/share/bash-completion/completions/warden
_warden_spec() {
    # $1: the subcommand path ("" is warden itself) -> subs, opts, valued, files, words
    subs=""; opts=""; valued=""; files=""; words=""
    case "$1" in
%(spec)s
    esac
}
_warden_choices() {
    case "$1|$2" in
%(choices)s
    esac
}
_warden() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="" path="" w i skip=0
    local subs opts valued files words
    if (( COMP_CWORD > 0 )); then prev="${COMP_WORDS[COMP_CWORD-1]}"; fi
    if [[ "$prev" == "=" ]] && (( COMP_CWORD > 1 )); then prev="${COMP_WORDS[COMP_CWORD-2]}"; fi
    if [[ "$cur" == "=" ]]; then cur=""; fi
    _warden_spec ""
    for (( i = 1; i < COMP_CWORD; i++ )); do
        w="${COMP_WORDS[i]}"
        if (( skip )); then skip=0; [[ "$w" == "=" ]] && skip=1; continue; fi
        if [[ "$w" == "--" ]]; then COMPREPLY=( $(compgen -f -- "$cur") ); return 0; fi
        if [[ "$w" == -* ]]; then
            if [[ "$w" != *=* && " $valued " == *" $w "* ]]; then skip=1; fi
            continue
        fi
        if [[ " $subs " == *" $w "* ]]; then
            path="${path:+$path }$w"
            _warden_spec "$path"
        fi
    done
    if [[ " $valued " == *" $prev "* ]]; then
        local choices
        choices="$(_warden_choices "$path" "$prev")"
        if [[ -n "$choices" ]]; then
            COMPREPLY=( $(compgen -W "$choices" -- "$cur") )
        elif [[ " $files " == *" $prev "* ]]; then
            COMPREPLY=( $(compgen -f -- "$cur") )
        else
            COMPREPLY=()
        fi
        return 0
    fi
    if [[ "$cur" == -* ]]; then
        COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
    else
        COMPREPLY=( $(compgen -W "$subs $words" -- "$cur") )
    fi
    return 0
}
complete -F _warden warden
"""


def bash_script(levels_: list[Level]) -> str:
    spec = "\n".join(
        f'        "{" ".join(lv.path)}") subs="{" ".join(n for n, _ in lv.subs)}"; opts="{_flags(lv, "all")}"; '
        f'valued="{_flags(lv, "valued")}"; files="{_flags(lv, "files")}"; words="{" ".join(lv.words)}" ;;'
        for lv in levels_)
    choices = "\n".join(f'        "{p}|{f}") echo "{c}" ;;' for p, f, c in _choices(levels_))
    return BASH % {"spec": spec, "choices": choices}


ZSH = r"""#compdef warden
# zsh completion for warden, generated by `warden completion zsh` from warden's own parser.
# Load it with: source <(warden completion zsh)  (after compinit), or save it as _warden in a
# directory of $fpath.
_warden_spec() {
    # $1: the subcommand path ("" is warden itself) -> subs, opts (name:description), valued, files, extra
    subs=(); opts=(); valued=(); files=(); extra=()
    case "$1" in
%(spec)s
    esac
}
_warden_choices() {
    case "$1|$2" in
%(choices)s
    esac
}
_warden() {
    local -a subs opts valued files extra choices
    local cur="${words[CURRENT]}" prev="${words[CURRENT-1]}" p="" w
    integer i skip=0
    _warden_spec ""
    for (( i = 2; i < CURRENT; i++ )); do
        w="${words[i]}"
        if (( skip )); then skip=0; continue; fi
        if [[ "$w" == "--" ]]; then _files; return; fi
        if [[ "$w" == -* ]]; then
            if [[ "$w" != *=* ]] && (( ${valued[(Ie)$w]} )); then skip=1; fi
            continue
        fi
        if (( ${${subs[@]%%%%:*}[(Ie)$w]} )); then
            p="${p:+$p }$w"
            _warden_spec "$p"
        fi
    done
    if (( ${valued[(Ie)$prev]} )); then
        choices=( ${=$(_warden_choices "$p" "$prev")} )
        if (( ${#choices} )); then
            compadd -- "${choices[@]}"
        elif (( ${files[(Ie)$prev]} )); then
            _files
        fi
        return
    fi
    if [[ "$cur" == -* ]]; then
        _describe -t options 'option' opts
    else
        (( ${#subs} )) && _describe -t commands 'command' subs
        (( ${#extra} )) && compadd -- "${extra[@]}"
    fi
}
if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then
    _warden "$@"
else
    compdef _warden warden
fi
"""


def _zq(text: str) -> str:
    """A zsh single-quoted word."""
    return "'" + text.replace("'", "'\\''") + "'"


def zsh_script(levels_: list[Level]) -> str:
    lines = []
    for lv in levels_:
        subs = " ".join(_zq(f"{n}:{h}") for n, h in lv.subs)
        opts = " ".join(_zq(f"{f}:{o.help}") for o in lv.options for f in o.flags)
        lines.append(f'        ("{" ".join(lv.path)}") subs=({subs}); opts=({opts}); valued=({_flags(lv, "valued")}); '
                     f'files=({_flags(lv, "files")}); extra=({" ".join(lv.words)}) ;;')
    choices = "\n".join(f'        ("{p}|{f}") print -r -- "{c}" ;;' for p, f, c in _choices(levels_))
    return ZSH % {"spec": "\n".join(lines), "choices": choices}


FISH = r"""# fish completion for warden, generated by `warden completion fish` from warden's own parser.
# Save it as ~/.config/fish/completions/warden.fish (or: warden completion fish | source)
function __warden_spec --argument-names p what
    switch "$p"
%(spec)s
    end
end
function __warden_path --description 'the subcommand path of the command line being completed'
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l p ''
    set -l skip 0
    for t in $tokens
        if test $skip = 1
            set skip 0
            continue
        end
        if test "$t" = '--'
            echo -- '--'
            return
        end
        if string match -q -- '-*' $t
            if not string match -q -- '*=*' $t; and contains -- $t (__warden_spec "$p" valued)
                set skip 1
            end
            continue
        end
        if contains -- $t (__warden_spec "$p" subs)
            set p (string trim -- "$p $t")
        end
    end
    echo -- $p
end
function __warden_at --argument-names p
    test "$(__warden_path)" = "$p"
end
complete -c warden -f
complete -c warden -n '__warden_at --' -F
%(complete)s
"""


def _fq(text: str) -> str:
    """A fish single-quoted word."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_script(levels_: list[Level]) -> str:
    spec, complete = [], []
    for lv in levels_:
        p = " ".join(lv.path)
        subs = " ".join(n for n, _ in lv.subs)
        valued = _flags(lv, "valued")
        spec.append(f"        case {_fq(p)}\n"
                    f"            switch $what\n"
                    f"                case subs\n                    string split ' ' -- {_fq(subs)}\n"
                    f"                case valued\n                    string split ' ' -- {_fq(valued)}\n"
                    f"            end")
        at = _fq(f"__warden_at {_fq(p)}")
        for name, h in lv.subs:
            complete.append(f"complete -c warden -n {at} -a {name} -d {_fq(h)}")
        for w in lv.words:
            complete.append(f"complete -c warden -n {at} -a {w}")
        for o in lv.options:
            parts = []
            for f in o.flags:
                parts.append(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}")
            how = ""
            if o.choices:
                how = f" -x -a {_fq(' '.join(o.choices))}"
            elif o.files:
                how = " -r -F"
            elif o.valued:
                how = " -x"
            complete.append(f"complete -c warden -n {at} {' '.join(parts)}{how} -d {_fq(o.help)}")
    return FISH % {"spec": "\n".join(spec), "complete": "\n".join(complete)}


__all__ = ["SHELLS", "Level", "bash_script", "cmd_completion", "cmd_help", "find", "fish_script", "levels",
           "register", "subcommands", "walk", "zsh_script"]

"""A plain observation read as what the step did and what it learned (pure, no database).

An agent that sends its report as one ``observation=`` text often lays it out the way a terminal
or a tool log does: a line of its own words, the command it ran, then the command's output
(``$ npm run build`` / ``Ran `pytest -q`:`` / ``Tool call: …`` / ``[grep] …`` / ``cmd -> output``).
New information is what the step learned — the output — not what the agent said it would try, nor
the command it typed (docs/estimates.md "New information"). :func:`split_report` finds that layout
when the text shows one and returns the three parts, so a plain report is judged like a heartbeat
that sent ``observation=`` (the note), ``action=`` (the command) and ``result=`` (the output):

* a **command line** is a prompt (``$ x``, ``> x``, ``% x``, ``❯ x``), a tool call written as one
  (``Ran `x```, ``Tool call: x``, ``Calling x``, ``[tool] x``, ``tool(args)``), or — right after
  the note or first in a text that goes on — a line shaped like a command line (a lower-case
  program name, then arguments of which one is a flag, an assignment, a quoted string, a shell
  operator (or, after a note, a path to a file), and no word of prose);
* ``x -> y`` on one line is a command and its output;
* the **note** is a short line of prose (4–40 words, not shaped like a command) before the
  command; a note followed by two or more lines that are not prose, and no command, is the agent's
  words before what came back (judged like ``observation=`` beside a ``result=``: the lines after it are the output);
  without a note or a command, a text is judged whole (its first line may be its news);
* everything after the command (less an ``Output:`` label) is the **output**.

Anything else is judged as it is, whole. Only the first ``SCAN_LINES`` lines are looked at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCAN_LINES = 6  # the layout is looked for in the first lines only
NOTE_WORDS = (4, 40)

_PROMPT = re.compile(r"^\s*(?:\$|>|%|❯|»|PS [^>\n]{0,80}>)\s+(\S.*)$")
_RAN = re.compile(r"^\s*(?:Ran|Running|Executed|Executing|Calling|Called|Tool call:|Tool:|Command:|Invoking)\s+`?(.+?)`?\s*:?\s*$",
                  re.IGNORECASE)
_TAGGED = re.compile(r"^\s*\[([A-Za-z][\w.-]{0,30})\]\s+(\S.*)$")
_CALL = re.compile(r"^\s*[A-Za-z_][\w.]{0,40}\((?:.*)\)\s*$")
_JSON_CALL = re.compile(r"""^\s*\{\s*"(?:tool|name|function)"\s*:""")
_ARROW = re.compile(r"^(.{2,300}?)\s+(?:->|→|=>)\s+(.*)$")
_LABEL = re.compile(r"^\s*(?:output|result|stdout|response)\s*:\s*$", re.IGNORECASE)
_PROGRAM = re.compile(r"^[a-z][\w.+-]{0,30}(?:\s+[a-z][\w.+-]{0,30})?$")
_ARG = re.compile(r"""(?:^|\s)(?:-{1,2}[A-Za-z]|['"])|\S=\S|\d?>&\d|\s(?:\||&&|>|<)\s""")
_PATH_ARG = re.compile(r"\s[\w.-]*/[\w./:-]*\.\w+\b")
_FLAG = re.compile(r"(?:^|\s)--?[A-Za-z][\w-]*(?:=|\s|$)")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


@dataclass(frozen=True)
class Parts:
    note: str | None
    command: str | None
    output: str


def _command_of(line: str) -> str | None:
    """The command a line shows (its prompt or call form stripped), or None."""
    for pattern in (_PROMPT, _RAN):
        m = pattern.match(line)
        if m:
            return m.group(1).strip()
    m = _TAGGED.match(line)
    if m:
        return f"{m.group(1)} {m.group(2).strip()}"
    if _CALL.match(line) or _JSON_CALL.match(line):
        return line.strip()
    return None


_PROSE = frozenset("the a an in of to and for with on is was were are from at by it its this that then".split())


def looks_like_command(line: str, paths: bool = False) -> bool:
    """A line shaped like a command line: a program (one or two lower-case words), then arguments
    of which one is a flag, an assignment, a quoted string or a shell operator — and no word of
    prose (the, a, in, of, to, and …: "found x in src/a.py" is a sentence). ``paths``: a path to a
    file is argument enough (after the agent's note, where a command is expected)."""
    s = line.strip()
    if not s or len(s) > 300 or any(t in _PROSE for t in s.lower().split()):
        return False
    head = s.split()[:2]
    prog = head[0]
    if not _PROGRAM.match(prog):
        return False
    rest = s[len(prog):]
    return bool(rest.strip()) and bool(_ARG.search(rest) or paths and _PATH_ARG.search(rest))


def is_note(line: str) -> bool:
    """A short line of prose: 3–40 words, most of its tokens words, not a command."""
    s = line.strip()
    if not s or _command_of(s) is not None or looks_like_command(s) or _FLAG.search(s):
        return False
    m = _ARROW.match(s)
    if m and looks_like_command(m.group(1)):
        return False
    tokens = s.split()
    if not NOTE_WORDS[0] <= len(tokens) <= NOTE_WORDS[1]:
        return False
    words = sum(1 for t in tokens if _WORD.fullmatch(t.strip(".,;:!?…—–()\"'")))
    return words >= 0.6 * len(tokens) and s[0].isalpha()


def split_report(text: str) -> Parts | None:
    """The note, the command and the output of a plain report laid out as one (module doc), or
    None when the text shows no such layout."""
    lines = text.split("\n", SCAN_LINES)
    head = lines[:SCAN_LINES]
    rest = lines[SCAN_LINES] if len(lines) > SCAN_LINES else None
    idx = [i for i, line in enumerate(head) if line.strip()]
    if not idx:
        return None
    note_end = 0
    if len(idx) >= 2 and is_note(head[idx[0]]):
        note_end = 1
    note = head[idx[0]].strip() if note_end else None
    for pos in idx[note_end:note_end + 2]:
        line = head[pos]
        cmd = _command_of(line)
        bare = cmd is None and pos == idx[note_end] and looks_like_command(line, note is not None) and (
            pos != idx[-1] or rest is not None)
        if cmd is None and bare:
            cmd = line.strip()
        if cmd is None:
            m = _ARROW.match(line.strip())
            if m and pos == idx[note_end] and (looks_like_command(m.group(1)) or _command_of(m.group(1))):
                after = "\n".join(head[pos + 1:] + ([rest] if rest is not None else []))
                output = m.group(2) + ("\n" + after if after.strip() else "")
                return Parts(note, _command_of(m.group(1)) or m.group(1).strip(), output)
            continue
        if any(head[i].strip() for i in idx if idx[note_end] <= i < pos):
            break  # output before the command: no command in this layout
        tail = head[pos + 1:]
        while tail and (not tail[0].strip() or _LABEL.match(tail[0])):
            tail = tail[1:]
        output = "\n".join(tail + ([rest] if rest is not None else []))
        return Parts(note, cmd, output)
    if note is not None and len(idx) >= 3 and not is_note(head[idx[1]]):
        # the agent's words, then what came back — its command not shown: the output is judged
        output = "\n".join(head[idx[1]:] + ([rest] if rest is not None else []))
        return Parts(note, None, output)
    return None


__all__ = ["Parts", "is_note", "looks_like_command", "split_report"]

"""What ``warden run`` commits as a node's output, bounded whatever the command was given or
printed (docs/agents.md, "warden run"): the ledger refuses an output over 64 KiB, and a command
that succeeded must not lose its commit to the size of its own command line or last lines.

* ``command``: the command line as a list, each argument cut to ``ARG_CAP`` characters and all of
  them to ``COMMAND_CAP``; what was left out is one last element saying how much
  (``run/<name>/command.json`` in the run directory keeps the whole of it);
* the output as a whole fits ``OUTPUT_BUDGET`` bytes (as the ledger measures it): when it does
  not, the oldest of ``last_lines`` go first, then ``final`` is shortened, then the artifact
  listing (the run directory's manifest keeps all of them); what was cut is counted in
  ``left_out``.
"""

from __future__ import annotations

import errno
import os
from typing import Sequence

from store.jsontypes import JsonObject
from store.storage.models import dumps

__all__ = ["ARG_CAP", "COMMAND_CAP", "OUTPUT_BUDGET", "bounded_output", "command_summary", "exec_status", "failure_for"]

ARG_CAP = 200  # characters of one argument in the committed command
COMMAND_CAP = 2000  # characters of the committed command line in all
OUTPUT_BUDGET = 60 * 1024  # bytes of the committed output (the ledger's cap is 64 KiB)


def command_summary(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    used = 0
    for i, arg in enumerate(argv):
        a = arg if len(arg) <= ARG_CAP else arg[:ARG_CAP] + f"…[{len(arg) - ARG_CAP} more characters]"
        if used + len(a) > COMMAND_CAP and i > 0:
            rest = argv[i:]
            out.append(f"[{len(rest)} more argument{'s' if len(rest) != 1 else ''}, "
                       f"{sum(len(r) for r in rest)} characters, left out]")
            break
        out.append(a)
        used += len(a)
    return out


def _size(output: JsonObject) -> int:
    return len(dumps(output).encode("utf-8"))


def bounded_output(output: JsonObject) -> JsonObject:
    """``output`` cut to ``OUTPUT_BUDGET`` (see the module's docstring)."""
    if _size(output) <= OUTPUT_BUDGET:
        return output
    out = dict(output)
    left: JsonObject = {}
    lines = list(out.get("last_lines") or [])
    dropped = 0
    while lines and _size(out) > OUTPUT_BUDGET:
        lines.pop(0)
        dropped += 1
        out["last_lines"] = lines
    if dropped:
        left["last_lines"] = dropped
    final = out.get("final")
    if isinstance(final, str) and _size(out) > OUTPUT_BUDGET:
        keep = max(0, len(final) - (_size(out) - OUTPUT_BUDGET))
        while keep and _size({**out, "final": final[:keep] + "…"}) > OUTPUT_BUDGET:
            keep //= 2
        out["final"] = final[:keep] + "…"
        left["final_characters"] = len(final) - keep
    arts = list(out.get("artifacts") or [])
    n = len(arts)
    while arts and _size(out) > OUTPUT_BUDGET:
        arts = arts[: len(arts) // 2]
        out["artifacts"] = arts
    if len(arts) < n:
        left["artifacts"] = n - len(arts)
    out.pop("artifact_problems", None) if _size(out) > OUTPUT_BUDGET else None
    out["left_out"] = left
    return out


def exec_status(program: str, error: OSError) -> int:
    """The status a shell gives a command it cannot start: 127 when it is not found, 126 when it
    is found but cannot be executed (not executable, a directory, a bad interpreter)."""
    if error.errno in (errno.ENOENT, errno.ENOTDIR) and not ("/" in program and os.path.exists(program)):
        return 127
    return 126


def failure_for(code: int) -> tuple[str, bool]:
    """The failure class and retryability of an exit status (docs/agents.md "warden run"):

    * killed by a signal (``-N``), 75 EX_TEMPFAIL, 124 (``timeout``'s), 69/70/71/74 (sysexits:
      unavailable, software, os error, io error) → ``transient``, retryable;
    * 126 (not executable), 127 (not found), 64/65/66/78 (usage, bad data, no input, config) →
      ``spec``, not retryable: the same command would fail the same way;
    * anything else → ``transient``, retryable (the node's ``max_claims`` bounds the retries).
    """
    if code in (126, 127, 64, 65, 66, 78):
        return "spec", False
    return "transient", True

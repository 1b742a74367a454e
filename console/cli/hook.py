"""``warden hook claude|codex``: one Claude Code or Codex hook event on stdin, the answer the
client honours on stdout (store/adapters/claude_hooks.py does the work; docs/agents.md "Claude
Code hooks", "Codex hooks").

Claude Code runs it before and after every tool call, so it starts lean: ``warden hook claude …``
is dispatched here by ``console.cli.main`` without building the whole ``warden`` parser or loading
the console (:func:`fast_main`); the same :func:`add_arguments` defines its flags for ``warden
--help`` and for anything the lean path does not take (a flag before ``hook``, ``--help``, a usage
error), which goes through the full parser. Nothing here imports Textual or Rich.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from store import Ledger, validate
from store.adapters.claude_hooks import PAYLOAD_CAP, HookConfig, run_hook, safe_default
from store.adapters.sessions import SessionStore
from store.storage.db import CONNECT_TIMEOUT_S
from store.errors import InvalidValue
from store.text import safe_line

DESCRIPTION = ("Read one Claude Code or Codex hook event on stdin and answer as its hooks protocol\n"
               "expects: a prompt starts a turn, Pre/PostToolUse heartbeat it, PermissionRequest waits\n"
               "for the operator (deny when nobody answers), Notification raises an alert, Stop commits\n"
               "the turn (docs/agents.md, \"Claude Code hooks\" and \"Codex hooks\", has the settings).")
EXAMPLE = """example (.claude/settings.json runs it for each event; docs/agents.md has the whole snippet):
  echo '{"session_id": "s1", "hook_event_name": "SessionStart", "cwd": "."}' | warden hook claude"""
SESSIONS_HELP = ("where sessions are kept between processes (default $WARDEN_SESSIONS, else "
                 "$XDG_STATE_HOME/warden/sessions)")


def seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (0 < x <= 7 * 24 * 3600):
        raise argparse.ArgumentTypeError(f"must be above 0 and at most a week: {text!r}")
    return x


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("agent", choices=("claude", "codex"), metavar="AGENT",
                   help="whose hook protocol: claude (Claude Code) or codex (Codex CLI)")
    p.add_argument("--task", metavar="T", help="one task for every session (default: a task per session, "
                                               "claude-<session>)")
    p.add_argument("--lease", metavar="S", type=seconds, default=900.0,
                   help="a turn's lease between hook events, in seconds (default 900)")
    p.add_argument("--permission-wait", metavar="S", type=seconds, default=540.0,
                   help="how long a PermissionRequest waits for the operator before denying (default 540; keep it "
                        "under the hook's timeout in settings.json, 600 by default)")
    p.add_argument("--park-wait", metavar="S", type=seconds, default=540.0,
                   help="how long a tool call waits while the task is parked before stopping Claude (default 540)")
    p.add_argument("--sessions", metavar="DIR", help=SESSIONS_HELP)


def cmd_hook(args: argparse.Namespace) -> int:
    """One event in, one answer out; never a traceback: whatever fails gets the event's safe default."""
    if args.task:
        validate.task_id("--task", args.task)
    raw, unread = _read_stdin()
    # Claude Code tells its hooks how it runs: "cli" interactive, "sdk-cli" for claude -p (the
    # answer that stops it before a tool call differs: docs/agents.md "What each control does")
    interactive = os.environ.get("CLAUDE_CODE_ENTRYPOINT", "cli") == "cli"
    cfg = HookConfig(task=args.task, lease_s=args.lease, permission_wait_s=args.permission_wait,
                     park_wait_s=args.park_wait, client=args.agent, interactive=interactive)
    target = args.ledger or os.environ.get("WARDEN_LEDGER") or "ledger.db"  # as console.cli.common.ledger_target
    timeout = getattr(args, "connect_timeout", None) or CONNECT_TIMEOUT_S
    if unread is not None:  # no event to read: the safe default of an unknown event
        answer = safe_default(None, unread, args.agent)
    else:
        answer = run_hook(lambda: Ledger.open(target, application_name="warden-hook", connect_timeout_s=timeout),
                          SessionStore(args.sessions), cfg, raw)
    if answer.output is not None:
        sys.stdout.write(json.dumps(answer.output, ensure_ascii=True) + "\n")
        sys.stdout.flush()
    if answer.message:
        print(safe_line(answer.message, limit=500), file=sys.stderr)
    return answer.exit_code


def _read_stdin() -> tuple[bytes, str | None]:
    """The event's bytes (at most one past the cap), or why there are none: stdin closed (``exec
    0<&-``), a directory, unreadable."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        return b"", "no hook input: stdin is closed"
    try:
        return stream.read(PAYLOAD_CAP + 1), None
    except (OSError, ValueError) as e:
        return b"", f"the hook input cannot be read ({safe_line(getattr(e, 'strerror', None) or e, limit=80)})"


def _connect_timeout(text: str) -> float:
    x = float(text)
    if not (0 < x <= 3600):  # as console.cli.common.seconds (NaN too)
        raise ValueError(text)
    return x


class _Lean(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


def fast_main(argv: Sequence[str]) -> int | None:
    """``warden hook …`` without the full parser; None when the lean path does not take these
    arguments (the caller then runs the full ``warden`` parser, which says what is wrong)."""
    p = _Lean(prog="warden hook", add_help=False)
    p.add_argument("--ledger")
    p.add_argument("--runs")  # the workspace pair every --ledger subcommand takes; unused here
    p.add_argument("--connect-timeout", type=_connect_timeout)  # out of range: the full parser says so
    add_arguments(p)
    try:
        args = p.parse_args(list(argv))
    except ValueError:
        return None
    try:
        return cmd_hook(args)
    except InvalidValue as e:
        print(f"warden: {safe_line(str(e), limit=500)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


__all__ = ["DESCRIPTION", "EXAMPLE", "add_arguments", "cmd_hook", "fast_main"]

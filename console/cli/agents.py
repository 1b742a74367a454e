"""The agent side of the ``warden`` command: ``warden run``, ``warden mcp``, ``warden hook claude``
(docs/agents.md, "Which integration"). Thin: each parses its flags, opens (or creates) the ledger
as an agent would, and hands over to its adapter in ``store.adapters``.

``warden run`` exits with the command's own status when it ran to its end (128 + N when signal N
ended it), 1 when Warden stopped it or nothing was started (one line on stderr says which), 130
when it was interrupted.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
from types import FrameType
import sys
import time

from store import Ledger, validate
from store.adapters.command import RunSpec, Supervisor
from store.adapters.sessions import SessionStore

from ..text import safe_line
from . import hook
from .common import Subcommands, connect_timeout, flags, honours, ledger_target, print_json, runs_dir
from .errors import UsageError

RUN_EXAMPLE = """examples:
  warden run --task nightly -- make test
  warden run --task fix-42 --json-stream claude -- claude -p "fix the failing test" --output-format stream-json --verbose
  warden run --task build --artifacts dist -- ./build.sh"""

MCP_EXAMPLE = """example (a client's mcpServers entry runs this command):
  warden mcp --ledger /srv/warden/ledger.db --task fix-42 --worker claude-fix-42"""


JSON_STREAMS = ("claude", "codex")


_seconds = hook.seconds


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    shared = ("ledger", "runs", "json")
    p = sub.add_parser(
        "run", parents=flags(*shared), formatter_class=argparse.RawDescriptionHelpFormatter,
        help="supervise any command as one node: heartbeats, output, park/abort/rewind signals",
        description="Run CMD as one ledger node: stdin on /dev/null, its output recorded as observations.\n"
                    "park stops every process it started (never inside a ledger write), resume continues\n"
                    "them, abort → SIGTERM then SIGKILL to all of them, rewind → restart with\n"
                    "$WARDEN_REWIND_REASON; if warden run dies, its keeper ends the command. Exit 0\n"
                    "commits; any other status fails the node (docs/agents.md, \"warden run\").",
        epilog=RUN_EXAMPLE)
    p.add_argument("--task", metavar="T", help="the task (made, origin 'run', when missing; default: a new one "
                                               "named after the command)")
    p.add_argument("--node", metavar="K", default="main", help="the node to run as (added when missing; default main)")
    p.add_argument("--kind", metavar="K", default="command", help="the node's kind when it is added (default command)")
    p.add_argument("--lease", metavar="S", type=_seconds, default=30.0,
                   help="lease in seconds; a heartbeat every third of it (default 30)")
    p.add_argument("--json-stream", choices=JSON_STREAMS, metavar="claude|codex",
                   help="read the output as Claude Code's stream-json or Codex's exec --json events")
    p.add_argument("--artifacts", metavar="DIR", help="on success, take the files in DIR as the node's artifacts")
    p.add_argument("--grace", metavar="S", type=_seconds, default=10.0,
                   help="seconds between SIGTERM and SIGKILL when the command is ended (default 10)")
    p.add_argument("--worker", metavar="NAME", help="who holds the lease (default run:USER@HOST:PID)")
    p.add_argument("--title", metavar="TEXT", help="the task's and node's title (default: the command line)")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...",
                   help="the command to run and its arguments, after --")
    honours(p, *shared)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "mcp", parents=flags("ledger"), formatter_class=argparse.RawDescriptionHelpFormatter,
        help="serve the ledger to an MCP client over stdio: claim, heartbeat, ask a human, commit",
        description="A Model Context Protocol server on stdin/stdout for an agent (Claude Code, Codex, any MCP\n"
                    "client): tools claim_next, heartbeat, commit, fail, intend_effect, confirm_effect,\n"
                    "ask_human, wait_for_human, report. It holds the lease between calls and answers\n"
                    "parked / aborted / rewound: <reason> when the operator acts (docs/agents.md, \"warden mcp\").",
        epilog=MCP_EXAMPLE)
    p.add_argument("--task", metavar="T", help="the task to work on (else the client's first claim_next names it)")
    p.add_argument("--worker", metavar="NAME",
                   help="who holds the leases; the same name after a reconnect goes on with the same claim "
                        "(default mcp:USER@HOST)")
    p.add_argument("--node", metavar="K", default="main", help="the node made when the task is new (default main)")
    p.add_argument("--kind", metavar="K", default="agent", help="that node's kind (default agent)")
    p.add_argument("--kinds", metavar="K,K", help="claim only nodes of these kinds (comma separated)")
    p.add_argument("--lease", metavar="S", type=_seconds, default=60.0, help="lease in seconds (default 60)")
    p.add_argument("--ask-wait", metavar="S", type=_seconds, default=50.0,
                   help="how long ask_human waits before answering pending (default 50)")
    p.add_argument("--sessions", metavar="DIR", help=hook.SESSIONS_HELP)
    honours(p, "ledger")
    p.set_defaults(func=cmd_mcp)

    p = sub.add_parser("hook", parents=flags("ledger"), formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="answer one agent hook event (JSON on stdin): Claude Code's hooks",
                       description=hook.DESCRIPTION, epilog=hook.EXAMPLE)
    hook.add_arguments(p)
    honours(p, "ledger")
    p.set_defaults(func=hook.cmd_hook)


def default_worker(prefix: str) -> str:
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "user"
    return f"{prefix}:{user}@{socket.gethostname()}:{os.getpid()}"


def _default_task(argv: list[str]) -> str:
    """``run-<command>-<UTC time>-<pid>``: a new task for each run that names none."""
    base = "".join(c if c.isalnum() or c in "._-" else "-" for c in os.path.basename(argv[0]))[:24] or "cmd"
    return f"run-{base}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"


def cmd_run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("warden run: give the command after --, e.g. warden run -- make test")
    # the values are checked before the ledger is opened: a typo must not leave a new ledger behind
    validate.task_id("--task", args.task or "x")
    validate.node_key("--node", args.node)
    validate.name("--kind", args.kind, limit=validate.KIND_MAX)
    spec = RunSpec(argv=tuple(argv), task_id=args.task or _default_task(argv), node_key=args.node, kind=args.kind,
                   lease_s=args.lease, worker=args.worker or default_worker("run"), json_stream=args.json_stream,
                   artifacts=args.artifacts, runs=runs_dir(args), grace_s=args.grace, title=args.title or "")
    os.makedirs(spec.runs, exist_ok=True)
    with Ledger.open(ledger_target(args), application_name="warden-run", connect_timeout_s=connect_timeout(args)) as ledger:
        sup = Supervisor(ledger, spec)

        def stop(signum: int, _frame: FrameType | None) -> None:
            sup.stop_requested = f"received {signal.Signals(signum).name}"

        def suspend(_signum: int, _frame: FrameType | None) -> None:
            sup.suspend_requested = True  # acted on between ledger writes (a stopped writer holds the lock)

        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        old[signal.SIGTSTP] = signal.signal(signal.SIGTSTP, suspend)
        try:
            outcome = sup.run()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
    where = f"{safe_line(spec.task_id)}/{safe_line(spec.node_key)}"
    if args.json:
        print_json({"status": outcome.status, "task_id": spec.task_id, "node": spec.node_key,
                    "exit_code": outcome.exit_code, "run": outcome.run, "attempts": outcome.attempts,
                    "detail": outcome.detail})
    if outcome.status == "committed":
        print(f"warden run: {where} committed (run {outcome.run})", file=sys.stderr)
        return 0
    print(f"warden run: {where} {outcome.status}: {safe_line(outcome.detail, limit=300)}", file=sys.stderr)
    if outcome.status == "failed" and outcome.exit_code is not None:
        code = outcome.exit_code
        return code if 0 < code < 256 else 128 - code if code < 0 else 1
    if outcome.status == "interrupted":
        return 130
    return 1


def cmd_mcp(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        print("warden mcp: needs the mcp extra (the MCP Python SDK): pip install 'warden[mcp]'", file=sys.stderr)
        return 1
    from store.adapters.agent_session import AgentSession, SessionConfig
    from store.adapters.mcp_server import serve

    if args.task:
        validate.task_id("--task", args.task)
    validate.node_key("--node", args.node)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip()) if args.kinds else None
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "user"
    cfg = SessionConfig(worker=args.worker or f"mcp:{user}@{socket.gethostname()}", task=args.task, node=args.node,
                        kind=args.kind, lease_s=args.lease, kinds=kinds, ask_wait_s=args.ask_wait)
    with Ledger.open(ledger_target(args), application_name="warden-mcp", connect_timeout_s=connect_timeout(args)) as ledger:
        session = AgentSession(ledger, SessionStore(args.sessions), cfg)
        serve(session)
    return 0


__all__ = ["default_worker", "register"]

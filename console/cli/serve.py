"""`warden serve`: flags and checks; the server itself is ``console.serve`` (the ``serve`` extra).

Private by default: it listens on 127.0.0.1 and every request needs a token. Without one given
(``--token``, ``$WARDEN_SERVE_TOKEN`` or ``--tokens FILE``) a random token is made and printed in
the URL, as Jupyter does. Listening on any other address without a token given is refused (exit
2). The served console is read-only unless ``--allow-actions``; what a session does is recorded
under the token's name (``--operator NAME`` or, for ``--tokens``, the name on the token's line),
else ``web-<fingerprint of the token>``, never under the server's ``$USER@host``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from store.notify.config import state_setting
from store.notify.state import default_path

from .common import Subcommands, UsageError, command, flags, honours, ledger_target, open_ledger, runs_dir

EXTRA_MODULES = ("textual_serve", "aiohttp")
TOKEN_ENV = "WARDEN_SERVE_TOKEN"


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = command(sub, "serve", parents=flags("ledger", "runs", "project", "records", "operator"),
                help="the console in a browser: a private URL with a token",
                examples=("warden serve  # http://127.0.0.1:8000/?token=… (read-only)",
                          "warden serve --host 0.0.0.0 --tokens tokens.txt --allow-actions"))
    p.add_argument("--host", default="127.0.0.1", metavar="ADDR",
                   help="address to listen on (default 127.0.0.1; any other needs a token given)")
    p.add_argument("--port", type=int, default=8000, metavar="N", help="port (default 8000; 0 = any free port)")
    p.add_argument("--token", metavar="T",
                   help=f"the token (at least 16 characters; default ${TOKEN_ENV}, else a random one, printed)")
    p.add_argument("--tokens", metavar="FILE",
                   help="one 'NAME TOKEN' per line: a token per person, each acting as its NAME")
    p.add_argument("--allow-actions", action="store_true",
                   help="let sessions act (park, rewind, …); without it the console is read-only")
    p.add_argument("--max-sessions", type=int, default=16, metavar="N", help="open sessions at most (default 16)")
    honours(p, "ledger", "runs", "project", "records", "operator")
    p.set_defaults(func=cmd_serve)


def serve_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in EXTRA_MODULES)


def usage(line: str) -> UsageError:
    return UsageError(f"warden serve: {line}")


def cmd_serve(args: argparse.Namespace) -> int:
    """Check the flags, the extra and the ledger, then serve until Ctrl+C (or SIGTERM)."""
    if not serve_available():
        print("warden serve: needs the serve extra (textual-serve): pip install 'warden[serve]'", file=sys.stderr)
        return 1
    from ..serve.auth import Credential, TokenBook, TokenError, check_name, check_token, is_loopback, new_token, \
        parse_tokens_file

    if not 0 <= args.port <= 65535:
        raise usage(f"--port {args.port}: not a port (0-65535)")
    if args.max_sessions < 1:
        raise usage("--max-sessions must be at least 1")
    given = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    try:
        if args.tokens:
            if given is not None or args.operator:
                raise usage("--tokens names every token's operator; give it without --token, "
                             f"${TOKEN_ENV} or --operator")
            try:
                with open(args.tokens, encoding="utf-8") as f:
                    creds = parse_tokens_file(f.read(), where=args.tokens)
            except OSError as e:
                raise usage(f"--tokens {args.tokens}: {e.strerror}")
        else:
            token = check_token(given, where="--token" if args.token is not None else f"${TOKEN_ENV}") \
                if given is not None else new_token()
            name = check_name(args.operator) if args.operator else None
            cred = Credential(name or "", token)
            creds = [Credential(name or f"web-{cred.fingerprint}", token)]
    except TokenError as e:
        raise usage(str(e))
    if not is_loopback(args.host) and given is None and not args.tokens:
        raise usage(f"refusing to listen on {args.host} (not loopback) without a token given: "
                     f"pass --token, ${TOKEN_ENV} or --tokens FILE")
    open_ledger(args, read_only=True).close()  # a missing or unreadable ledger: one line, before anything listens
    from ..serve.server import ServeConfig, ServeError, WardenServer

    config = ServeConfig(
        ledger=ledger_target(args), runs=runs_dir(args), book=TokenBook(creds), host=args.host, port=args.port,
        allow_actions=args.allow_actions, project=args.project, records=args.records,
        max_sessions=args.max_sessions, print_token=given is None and not args.tokens,
        connect_timeout_s=args.connect_timeout,
        links_state=default_path(ledger_target(args), state_setting()),
    )
    try:
        return WardenServer(config).run()
    except ServeError as e:
        print(f"warden serve: {e}", file=sys.stderr)
        return 1


__all__ = ["register", "cmd_serve", "serve_available", "TOKEN_ENV"]

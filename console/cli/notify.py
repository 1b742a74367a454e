"""`warden notify`: push what an operator acts on to the services people use (apprise URLs).

    warden notify --follow --to URL [--to URL …] [--link-base URL]   follow the ledger, send, retry
    warden notify --test URL [--link-base URL]                       one sample message, now
    warden notify --status [--json]                                  what was sent, what is owed

Routes, severities, task patterns and quiet times come from the configuration file
(``store/notify/config.py``; docs/operations.md "Answering from anywhere"). The notifier and its
state are ``store/notify/``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from typing import TYPE_CHECKING

from store.clock import iso
from store.errors import WardenError
from store.jsontypes import JsonObject
from store.notify.config import ConfigError, NotifyConfig, check_url, load, masked, with_cli
from store.notify.state import State, StateError, default_path
from store.text import safe_line

from ..glyphs import SERVED_ENV
if TYPE_CHECKING:
    from store.notify.follow import Background

from .common import Subcommands, UsageError, command, flags, honours, ledger_target, print_json, until_stopped

EXTRA = "apprise"


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = command(sub, "notify", parents=flags("ledger", "json"),
                help="push handoffs, alarms and failures to ntfy, Slack, e-mail, … (apprise URLs)",
                description="Push what an operator acts on (a handoff opened, an alarm, a budget gate, a task "
                            "failed or finished) to the services people use, through apprise URLs: grouped "
                            "into one message per burst, each with a link to answer, delivered durably "
                            "(retried, never sent twice). Routes per task pattern and severity come from the "
                            "configuration file (docs/operations.md, \"Answering from anywhere\").",
                examples=("warden notify --follow --to ntfys://ntfy.example.com/warden "
                          "--link-base https://warden.example.com:8000",
                          "warden notify --test 'json://127.0.0.1:9000/hook'",
                          "warden notify --status"))
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--follow", action="store_true", help="follow the ledger and send until stopped (Ctrl+C)")
    what.add_argument("--test", metavar="URL", help="send one sample message to URL and say whether it went")
    what.add_argument("--status", action="store_true", help="what was sent, what waits or is retried, what failed")
    p.add_argument("--to", action="append", default=[], metavar="URL",
                   help="an apprise URL that hears every event (repeat for more; routes: the configuration)")
    p.add_argument("--link-base", metavar="URL",
                   help="warden serve's address as a phone reaches it: messages link to its handoffs page")
    p.add_argument("--config", metavar="FILE",
                   help="the configuration (default $WARDEN_NOTIFY_CONFIG, else ~/.config/warden/notify.toml)")
    honours(p, "ledger", "json")
    p.set_defaults(func=cmd_notify)


def usage(line: str) -> UsageError:
    return UsageError(f"warden notify: {line}")


def cmd_notify(args: argparse.Namespace) -> int:
    if importlib.util.find_spec(EXTRA) is None:
        print("warden notify: needs the notify extra (apprise): pip install 'warden[notify]'", file=sys.stderr)
        return 1
    if args.to and not args.follow:
        raise usage("--to goes with --follow (--test takes its URL)")
    try:
        cfg = with_cli(load(args.config), args.to, args.link_base)
    except ConfigError as e:
        raise usage(str(e)) from None
    try:
        if args.test is not None:
            return _test(args.test, cfg.link_base)
        if args.status:
            return _status(args, cfg.state)
        if not cfg.routes:
            raise usage("nobody to tell: give --to URL, or routes in the configuration file")
        return _follow(args, cfg)
    except StateError as e:
        print(f"warden notify: {e}", file=sys.stderr)
        return 1


def _test(url: str, link_base: str | None) -> int:
    from store.notify.deliver import send  # apprise: the notify extra

    try:
        url = check_url(url, "--test")
    except ConfigError as e:
        raise usage(str(e)) from None
    body = ("A test message from warden notify: if you read this, Warden can reach you here.\n"
            + (f"   handoffs: {link_base}/m/\n" if link_base else "")
            + "✋ example-task · deploy asks (permission): Allow Claude Code to use Bash? npm test")
    error = send(url, "Warden: test message", body, click=f"{link_base}/m/" if link_base else None)
    if error is not None:
        print(f"warden notify: could not send to {masked(url)}: {error}", file=sys.stderr)
        return 1
    print(f"sent a test message to {masked(url)}")
    return 0


def _status(args: argparse.Namespace, configured: str | None) -> int:
    path = default_path(ledger_target(args), configured)
    state = State(path, create=False)
    try:
        with state.follower() as mine:
            following = not mine
        counts = state.counts()
        rows = state.deliveries(limit=50)
        doc: JsonObject = {
            "state": str(path), "following": following, "cursor": state.cursor(), "waiting": state.waiting_count(),
            "counts": dict(counts),
            "deliveries": [{"id": d.id, "route": d.route, "to": d.shown, "state": d.state, "attempts": d.attempts,
                            "next_at": iso(d.next_at) if d.state in ("pending", "retrying") else None,
                            "sent_at": iso(d.sent_at), "error": d.last_error} for d in rows],
        }
    finally:
        state.close()
    if args.json:
        print_json(doc)
        return 0
    print(f"notifier state: {path}")
    print("following: " + ("yes (a warden notify holds it)" if following else "no notifier running"))
    order = ("sent", "pending", "retrying", "sending", "uncertain", "failed", "dropped")
    print("deliveries: " + (", ".join(f"{counts[s]} {s}" for s in order if counts.get(s)) or "none yet")
          + f"; {doc['waiting']} notice{'s' if doc['waiting'] != 1 else ''} waiting for their burst to end")
    for d in rows[:20]:
        when = (f"next try {iso(d.next_at)}" if d.state in ("pending", "retrying")
                else f"sent {iso(d.sent_at)}" if d.sent_at else "")
        error = f" — {safe_line(d.last_error, limit=160)}" if d.last_error and d.state != "sent" else ""
        print(f"  #{d.id:<5} {d.state:<9} {d.route:<10} {d.shown}  tries {d.attempts}  {when}{error}")
    return 0


def _follow(args: argparse.Namespace, cfg: NotifyConfig) -> int:
    from store.notify.follow import Notifier  # apprise: the notify extra
    target = ledger_target(args)
    state = State(default_path(target, cfg.state))

    def say(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    try:
        with state.follower() as mine:
            if not mine:
                print(f"warden notify: another notifier follows this ledger already (its state: {state.path})",
                      file=sys.stderr)
                return 1
            notifier = Notifier(target, cfg, state, say=say)
            routes = ", ".join(f"{r.name} ({len(r.to)} destination{'s' if len(r.to) != 1 else ''})" for r in cfg.routes)
            say(f"warden notify: following {notifier.display} for {routes}; state {state.path}")
            if not cfg.link_base:
                say("no --link-base: messages name `warden resolve` instead of a link to answer")

            until_stopped(notifier.run)
            say("warden notify: stopped")
            return 0
    finally:
        state.close()


__all__ = ["register"]


def in_console(target: str) -> Background | None:
    """``warden console`` runs the notifier too when the configuration says ``console = true`` (and
    names routes): started here, stopped when the console ends (``stop()``). Not in a console that
    `warden serve` runs for a browser (the server's own machine is not the operator's)."""
    if os.environ.get(SERVED_ENV) or importlib.util.find_spec(EXTRA) is None:
        return None
    try:
        cfg = load(None)
    except ConfigError as e:
        print(f"warden console: the notifier is off: {e}", file=sys.stderr)
        return None
    if not cfg.console or not cfg.routes:
        return None
    from store.notify.follow import Background as Running  # apprise: the notify extra

    try:
        background = Running(target, cfg, State(default_path(target, cfg.state)))
    except (StateError, WardenError) as e:
        print(f"warden console: the notifier is off: {e}", file=sys.stderr)
        return None
    return background if background.start() else None

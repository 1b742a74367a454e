"""`warden otel`: Warden in an OpenTelemetry observability stack (Jaeger, Langfuse, Phoenix, Honeycomb, …).

    warden otel export [--follow] [--endpoint URL]    the journal as GenAI spans over OTLP/HTTP
    warden otel receive [--port 4318]                 GenAI spans from an instrumented agent → a task

The spans and their ids are ``store/adapters/otel/spans.py``; the SDK and the exporter
``store/adapters/otel/export.py`` (the otel extra). docs/deployment.md "Warden and your
observability stack" says what is sent and how to point it at a collector.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import threading
import time
from urllib.parse import urlsplit

from .common import CliParser, Subcommands, UsageError, command, flags, honours, ledger_target, until_stopped

EXTRA = "opentelemetry.exporter.otlp.proto.http"
TOKEN_ENV = "WARDEN_OTEL_TOKEN"


def register(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = command(sub, "otel", parents=flags("ledger"),
                help="OpenTelemetry: the journal as GenAI spans to your collector (Jaeger, Langfuse, Phoenix, …)",
                description="Send what the ledger knows to an OpenTelemetry collector over OTLP/HTTP: a task is "
                            "a trace (invoke_workflow), each attempt of a node a span (invoke_agent or "
                            "execute_tool) with its heartbeats, handoffs and operator actions as events "
                            "(docs/deployment.md, \"Warden and your observability stack\").",
                examples=("warden otel export --endpoint http://127.0.0.1:4318",
                          "OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 warden otel export --follow"))
    honours(p, "ledger")
    p.set_defaults(func=lambda args: _no_subcommand())
    what = p.add_subparsers(dest="otel_command", metavar="export|receive", parser_class=CliParser)
    e = command(what, "export", parents=flags("ledger"),
                help="the journal as spans over OTLP/HTTP: once, or --follow as it grows",
                description="Send the ledger's journal as OpenTelemetry spans under the GenAI semantic "
                            "conventions, over OTLP/HTTP. Once: every task so far (running work as pending "
                            "spans), then exit. --follow: keep sending as work starts and ends, with a cursor "
                            "kept beside the ledger, so a restart resumes where it stopped. The ids come from "
                            "the ledger: sending twice sends the same spans, not new ones.",
                examples=("warden otel export --endpoint http://127.0.0.1:4318",
                          "warden otel export --follow --ledger postgresql://warden@db/warden"))
    e.add_argument("--follow", action="store_true", help="keep sending as the journal grows, until stopped (Ctrl+C)")
    e.add_argument("--endpoint", metavar="URL",
                   help="the collector's OTLP/HTTP address (/v1/traces is added unless given); "
                        "default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT")
    honours(e, "ledger")
    e.set_defaults(func=cmd_export)
    r = command(what, "receive", parents=flags("ledger"),
                help="an OTLP/HTTP receiver: GenAI spans of an instrumented agent become a task and nodes",
                description="Listen for OpenTelemetry traces (POST /v1/traces, protobuf or JSON) from an agent "
                            "already instrumented (OpenAI Agents SDK, OpenInference, Logfire, …) and turn its "
                            "GenAI spans into a task and nodes: agents as nodes, tool calls as observations, "
                            "tokens as cost — so stalls, estimates and budget gates work on it. Watching "
                            "only: parking such an agent needs a controlling integration (warden run, "
                            "warden hook, the Python API).",
                examples=("warden otel receive  # http://127.0.0.1:4318/v1/traces",
                          "WARDEN_OTEL_TOKEN=… warden otel receive --host 0.0.0.0 --port 4318"))
    r.add_argument("--port", type=int, default=4318, metavar="N", help="the port (default 4318, OTLP/HTTP's)")
    r.add_argument("--host", default="127.0.0.1", metavar="ADDR",
                   help="address to listen on (default 127.0.0.1; any other needs a token)")
    r.add_argument("--token", metavar="T",
                   help=f"the bearer token senders give (at least 16 characters; default ${TOKEN_ENV})")
    honours(r, "ledger")
    r.set_defaults(func=cmd_receive)


def _no_subcommand() -> int:
    raise UsageError("warden otel: say what: warden otel export [--follow] [--endpoint URL] | "
                     "warden otel receive [--port 4318]")


def usage(line: str) -> UsageError:
    return UsageError(f"warden otel export: {line}")


def _check_endpoint(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise usage(f"--endpoint must be an http:// or https:// URL (got {url!r})")
    return url


def _no_extra() -> bool:
    if importlib.util.find_spec("opentelemetry") is None or importlib.util.find_spec(EXTRA) is None:
        print("warden otel: needs the otel extra (the OpenTelemetry SDK): pip install 'warden[otel]'", file=sys.stderr)
        return True
    return False


def cmd_receive(args: argparse.Namespace) -> int:
    if _no_extra():
        return 1
    from store import Ledger
    from store.adapters.otel.intake_state import IntakeState, state_path
    from store.adapters.otel.receive import Intake, make_server
    from store.errors import WardenError

    from ..serve.auth import TokenError, check_token, is_loopback

    def bad(line: str) -> UsageError:
        return UsageError(f"warden otel receive: {line}")

    if not 0 < args.port < 65536:
        raise bad(f"--port must be 1-65535 (got {args.port})")
    given = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    if given is not None:
        try:
            check_token(given, where="--token" if args.token is not None else f"${TOKEN_ENV}")
        except TokenError as e:
            raise bad(str(e)) from None
    if not is_loopback(args.host) and given is None:
        raise bad(f"refusing to listen on {args.host} (not loopback) without a token: pass --token or ${TOKEN_ENV}")
    target = ledger_target(args)
    ledger = Ledger.open(target, application_name="warden-otel")
    state = IntakeState(state_path(target))  # its claims outlive a restart (kill -9 included)
    try:
        try:
            state.open(ledger)
        except WardenError as e:
            print(f"warden otel receive: {e}", file=sys.stderr)
            return 1
        try:
            server = make_server(Intake(ledger, state), args.host, args.port, given)
        except OSError as e:
            print(f"warden otel receive: cannot listen on {args.host}:{args.port}: {e.strerror}", file=sys.stderr)
            return 1
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"{time.strftime('%H:%M:%S')} warden otel receive: http://{host}:{server.server_address[1]}/v1/traces "
              f"→ {ledger.display}" + (" (bearer token required)" if given else ""), flush=True)
        stop = threading.Event()

        def quit_(signum: int, frame: object) -> None:
            stop.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGINT, quit_)
        signal.signal(signal.SIGTERM, quit_)
        server.serve_forever(poll_interval=0.5)
        server.server_close()
        print(f"{time.strftime('%H:%M:%S')} warden otel receive: stopped", flush=True)
        return 0
    finally:
        state.close()
        ledger.close()


def cmd_export(args: argparse.Namespace) -> int:
    if _no_extra():
        return 1
    from store.adapters.otel.export import endpoint_from_env, exporter_for  # the otel extra

    endpoint = args.endpoint
    if endpoint is not None:
        _check_endpoint(endpoint)
    elif endpoint_from_env() is None:
        raise usage("where to? give --endpoint URL or set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4318)")
    else:
        _check_endpoint(str(endpoint_from_env()))
    exporter = exporter_for(endpoint)
    shown = endpoint or str(endpoint_from_env())
    if args.follow:
        return _follow(args, exporter, shown)
    from store.adapters.otel.export import export_once

    try:
        finished, pending = export_once(ledger_target(args), exporter)
    finally:
        exporter.shutdown()
    print(f"sent {finished} finished span{'s' if finished != 1 else ''} and {pending} pending "
          f"(running work) to {shown}")
    return 0


def _follow(args: argparse.Namespace, exporter: object, shown: str) -> int:
    from store.adapters.otel.export import Follower, StateFile, state_path

    target = ledger_target(args)
    state = StateFile(state_path(target))

    def say(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    if not state.hold():
        print(f"warden otel export: another exporter follows this ledger already (its state: {state.path})",
              file=sys.stderr)
        return 1
    try:
        follower = Follower(target, exporter, state, say=say)  # type: ignore[arg-type]
        say(f"warden otel export: following {follower.display} to {shown}; state {state.path}")

        until_stopped(follower.run)
        say("warden otel export: stopped")
        return 0
    finally:
        state.release()


__all__ = ["register"]

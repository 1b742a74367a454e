"""`warden serve`: the console in a browser, one `warden console` process per browser session.

Built on textual-serve: its ``Server`` (subclassed here for the routes, the page and the session
bookkeeping; its websocket message relay is reused as is), its ``AppService`` (see
``session.py``) and its browser terminal (``textual.js``, xterm.js inside, and ``xterm.css``),
served from its own package. The page itself, its glue script and the fonts are Warden's
(``static/``). Nothing on the page comes from another host: the Content-Security-Policy says so
to the browser as well.
"""

from __future__ import annotations

import asyncio
import html
import os
import signal
import socket
import string
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable, TextIO

import textual_serve
from aiohttp import web
from textual_serve.server import Server

from ..glyphs import SERVED_ENV
from ..text import safe_line
from .auth import Credential, TokenBook, cookie_name, is_loopback, request_token, same_origin
from .handoffs import LINK_PATHS, HandoffDesk
from .handoffs import routes as handoff_routes
from .session import SessionService

STATIC = Path(__file__).parent / "static"
TEXTUAL_SERVE_STATIC = Path(textual_serve.__file__).parent / "static"
# The files of textual-serve's package the page uses (nothing else of its static folder is served).
TEXTUAL_SERVE_FILES = (
    "js/textual.js",
    "css/xterm.css",
    "fonts/RobotoMono-VariableFont_wght.ttf",
    "fonts/RobotoMono-Italic-VariableFont_wght.ttf",
)
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; font-src 'self'; "
       "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
SESSION_STOP_S = 5.0
# The handoffs page's own files (no token: a notification's link opens it).
PHONE_FILES = ("handoffs.js", "handoffs.css", "fonts/noto-emoji-fallback.woff2", "fonts/dejavu-sans-mono-fallback.woff2")


class ServeError(Exception):
    """The server cannot start (the port is taken, say); one line for the operator."""


@dataclass(frozen=True)
class ServeConfig:
    """What `warden serve` was asked for; ``book`` holds the tokens and their operator names."""

    ledger: str
    runs: str
    book: TokenBook
    host: str = "127.0.0.1"
    port: int = 8000
    allow_actions: bool = False
    project: str | None = None
    records: str | None = None
    max_sessions: int = 16
    print_token: bool = True  # a generated token is printed in the URL; one the operator chose is not
    title: str = "Warden"
    connect_timeout_s: float | None = None  # passed on to each session's console (--connect-timeout)
    links_state: Path | None = None  # the notifier's state file, where its links to handoffs are checked

    def session_argv(self, cred: Credential) -> list[str]:
        """The command line of a session's console: read-only unless actions are allowed, and
        acting (when it may) as the token's operator, never as the server's user."""
        argv = [sys.executable, "-m", "console", "console", "--ledger", self.ledger, "--runs", self.runs,
                "--operator", cred.name]
        if self.project:
            argv += ["--project", self.project]
        if self.records:
            argv += ["--records", self.records]
        if not self.allow_actions:
            argv.append("--read-only")
        if self.connect_timeout_s is not None:
            argv += ["--connect-timeout", f"{self.connect_timeout_s:g}"]
        return argv


def url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


class WardenServer(Server):
    """textual-serve's server with tokens, Warden's page and one console per websocket."""

    def __init__(self, config: ServeConfig, *, out: TextIO | None = None) -> None:
        super().__init__("warden console", host=config.host, port=config.port, title=config.title)
        self.config = config
        self.out = out or sys.stdout
        self.sessions: dict[int, SessionService] = {}
        self.session_count = 0
        self.bound_port = config.port
        self.page = string.Template((STATIC / "page.html").read_text(encoding="utf-8"))
        self.desk = HandoffDesk(config.ledger, config.links_state, allow_actions=config.allow_actions,
                                clock=time.time)

    # ------------------------------------------------------------------ the web application
    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard], client_max_size=64 * 1024)
        app.add_routes([
            *handoff_routes(self.desk),
            *(web.get(f"/m/assets/{name}", self.file_handler(STATIC / name)) for name in PHONE_FILES),
            web.get("/", self.handle_index),
            web.get("/ws", self.handle_session),
            *(web.get(f"/static/{name}", self.file_handler(TEXTUAL_SERVE_STATIC / name))
              for name in TEXTUAL_SERVE_FILES),
            web.static("/assets", STATIC, show_index=False, follow_symlinks=False),
        ])
        app.on_shutdown.append(self.close_sessions)
        app.on_cleanup.append(self.close_desk)
        return app

    async def close_desk(self, app: web.Application) -> None:
        await asyncio.to_thread(self.desk.close)

    @staticmethod
    def file_handler(path: Path) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(request: web.Request) -> web.StreamResponse:
            return web.FileResponse(path)

        return handler

    @web.middleware
    async def guard(self, request: web.Request,
                    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Every request: same origin, a known token; a token in the page's URL is set as a cookie."""
        if not same_origin(request.headers.get("Origin"), request.host):
            return refusal(403, "warden serve: refused: a request from another site")
        if request.path.startswith(LINK_PATHS):  # a notification's link: checked by the handoffs page itself
            resp = await handler(request)
            secure_headers(resp, cache=False)
            return resp
        cookie = cookie_name(self.bound_port)
        token, where = request_token(request.query, request.cookies, request.headers, cookie)
        cred = self.config.book.lookup(token)
        if cred is None:
            if token is None:
                return refusal(401, "warden serve: a token is needed: open the URL that warden serve "
                                    "printed (…/?token=…)")
            return refusal(403, "warden serve: wrong token")
        request["credential"] = cred
        try:
            resp = await handler(request)
        except web.HTTPException as exc:
            secure_headers(exc, cache=False)
            raise
        if isinstance(resp, web.WebSocketResponse):
            return resp
        secure_headers(resp, cache=request.path != "/" and not request.path.startswith("/m/"))
        if where == "query" and request.path in ("/", "/m/"):
            # Remember the token in a cookie so the websocket, the assets and reloads carry it;
            # page.js then takes it out of the address bar (history.replaceState).
            resp.set_cookie(cookie, token or "", path="/", httponly=True, samesite="Strict",
                            secure=request.secure or request.headers.get("X-Forwarded-Proto") == "https")
        return resp

    async def handle_index(self, request: web.Request) -> web.Response:
        try:
            size = min(40, max(8, int(request.query.get("fontsize", "16"))))
        except ValueError:
            size = 16
        body = self.page.substitute(title=html.escape(self.config.title), font_size=size)
        return web.Response(text=body, content_type="text/html")

    async def handle_session(self, request: web.Request) -> web.StreamResponse:
        """The websocket of one browser session: a console process of its own, read-only unless allowed."""
        cred: Credential = request["credential"]
        if len(self.sessions) >= self.config.max_sessions:
            return refusal(503, f"warden serve: {self.config.max_sessions} sessions are open; "
                                "close one first")
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=1 << 20)
        await websocket.prepare(request)
        width = bounded(request.query.get("width"), 80, 20, 1000)
        height = bounded(request.query.get("height"), 24, 5, 500)
        self.session_count += 1
        number = self.session_count
        service = SessionService(
            self.config.session_argv(cred), write_bytes=websocket.send_bytes, write_str=websocket.send_str,
            close=websocket.close, download_manager=self.download_manager, env={SERVED_ENV: "1"},
        )
        self.sessions[number] = service
        try:
            await service.start(width, height)
            mode = "actions allowed" if self.config.allow_actions else "read-only"
            self.say(f"session {number} started for {cred.name} (pid {service.pid}, {mode})")
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a malformed message from the page, say: end this session only
            self.say(f"session {number}: stopped on {type(e).__name__}: {safe_line(str(e), limit=200)}")
        finally:
            await service.shutdown(SESSION_STOP_S)
            self.sessions.pop(number, None)
            if not websocket.closed:
                await websocket.close()
            self.say(f"session {number} ended (console exit status {service.exit_status})")
        return websocket

    async def close_sessions(self, app: web.Application) -> None:
        for service in self.sessions.values():
            service.end_note = "The server stopped (warden serve was stopped on the server)."
        await asyncio.gather(*(s.shutdown(SESSION_STOP_S) for s in list(self.sessions.values())),
                             return_exceptions=True)

    # ------------------------------------------------------------------ running
    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def url(self, port: int) -> str:
        token = self.config.book.credentials[0].token if self.config.print_token else "…"
        return f"http://{url_host(self.config.host)}:{port}/?token={token}"

    async def serve_until(self, stop: asyncio.Event) -> None:
        runner = web.AppRunner(self.make_app(), handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.config.host, self.config.port, shutdown_timeout=SESSION_STOP_S)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            if isinstance(e, socket.gaierror):  # a --host name that does not resolve
                why = e.strerror or str(e)
            else:
                why = os.strerror(e.errno).lower() if e.errno else str(e)
            raise ServeError(f"cannot listen on {self.config.host}:{self.config.port}: {why}") from None
        self.bound_port = int(runner.addresses[0][1])
        self.announce()
        try:
            await stop.wait()
        finally:
            self.say("warden serve: stopping (closing every session)")
            await runner.cleanup()

    def announce(self) -> None:
        c = self.config
        mode = "actions allowed" if c.allow_actions else "read-only"
        names = ", ".join(cred.name for cred in c.book.credentials)
        self.say(f"warden serve: the console on {c.ledger} ({mode}); sessions act as: {names}")
        if not is_loopback(c.host):
            self.say(f"warden serve: listening on {c.host} (reachable from other machines: put TLS in "
                     "front, see docs/deployment.md)")
        self.say("open this URL in a browser (the token is the password):")
        self.say(f"    {self.url(self.bound_port)}")
        self.say(f"handoffs on a phone: {self.url(self.bound_port).replace('/?token=', '/m/?token=')}"
                 + ("" if c.allow_actions else " (read-only: shown, not answered)"))
        if not c.print_token:
            self.say("    (with your token after ?token=)")
        self.say("Ctrl+C stops the server and every session.")

    def run(self) -> int:
        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, stop.set)
                except (NotImplementedError, RuntimeError):
                    pass
            await self.serve_until(stop)

        asyncio.run(main())
        return 0


def bounded(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return min(high, max(low, int(value))) if value is not None else default
    except ValueError:
        return default


def refusal(status: int, text: str) -> web.Response:
    resp = web.Response(status=status, text=text + "\n", content_type="text/plain")
    if status == 401:
        resp.headers["WWW-Authenticate"] = 'Bearer realm="warden"'
    secure_headers(resp, cache=False)
    return resp


def secure_headers(resp: web.StreamResponse, *, cache: bool) -> None:
    headers = resp.headers
    headers["Content-Security-Policy"] = CSP
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Referrer-Policy"] = "no-referrer"
    headers["X-Frame-Options"] = "DENY"
    headers["Cache-Control"] = "private, max-age=3600" if cache else "no-store"


__all__ = ["ServeConfig", "ServeError", "WardenServer", "CSP"]

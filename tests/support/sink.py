"""A local HTTP sink for notifications: what apprise's ``json://`` webhooks and ``ntfy://`` send, on 127.0.0.1.

Every POST is recorded (path, headers, the JSON body). It answers as told: ``fail(n, status)``
makes the next ``n`` requests fail; ``hold()`` keeps the next request waiting (recorded first, so a
test knows the message reached the service) until ``release()``; ntfy's JSON publish (a POST to
``/`` with ``topic``, ``title``, ``message``) is answered with ntfy's own JSON shape. Tests wait on
:meth:`wait_for` (a condition), never on sleeps.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from tests.support.waiting import Deadline


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def text(self) -> str:
        """The message's text, whichever service shape it came in."""
        return str(self.body.get("message") or self.body.get("body") or "")

    @property
    def title(self) -> str:
        return str(self.body.get("title") or "")


@dataclass
class Sink:
    server: ThreadingHTTPServer
    received: list[Received] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)
    failing: list[int] = field(default_factory=list)
    holding: bool = False
    released: threading.Event = field(default_factory=threading.Event)
    held: int = 0

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, scheme: str = "json", path: str = "hook") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/{path}"

    def fail(self, n: int = 1, status: int = 500) -> None:
        with self.cond:
            self.failing.extend([status] * n)

    def hold(self) -> None:
        with self.cond:
            self.holding = True
            self.released.clear()

    def release(self) -> None:
        with self.cond:
            self.holding = False
        self.released.set()

    def wait_for(self, pred: Callable[[list[Received]], bool], timeout: float = 30.0) -> list[Received]:
        deadline = Deadline(timeout)
        with self.cond:
            while not pred(self.received):
                left = deadline.left()
                if left <= 0:
                    raise AssertionError(f"the sink never saw it; received: {[r.body for r in self.received]}")
                self.cond.wait(left)
            return list(self.received)

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


def start_sink() -> Sink:
    sink: Sink

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(min(n, 1 << 20))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"raw": raw.decode("utf-8", "replace")}
            with sink.cond:
                status = sink.failing.pop(0) if sink.failing else 200
                hold = sink.holding and status == 200
                if status == 200:
                    sink.received.append(Received(self.path, dict(self.headers.items()), body))
                    sink.held += hold
                sink.cond.notify_all()
            if hold:
                sink.released.wait(120)
            reply = {"id": f"m{len(sink.received)}", "time": int(time.time()), "event": "message",
                     "topic": body.get("topic", ""), "message": body.get("message", "")} if status == 200 else \
                {"code": status * 100 + 1, "http": status, "error": "the sink was told to fail"}
            data = json.dumps(reply).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the sender went away (killed mid-send)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    sink = Sink(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return sink

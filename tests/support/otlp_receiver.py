"""A real OTLP/HTTP trace receiver on 127.0.0.1 for the tests: ``POST /v1/traces`` in protobuf.

It decodes each request with the OpenTelemetry protocol's own messages (``opentelemetry-proto``)
and keeps every span as a plain dict (ids in hex, attributes as Python values, events, links, the
resource), in arrival order. ``fail(n, status)`` answers the next ``n`` requests with an error.
Tests wait on :meth:`wait_for` (a condition), never on sleeps.
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                      ExportTraceServiceResponse)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def any_value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


def decode(body: bytes) -> list[dict[str, Any]]:
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    out: list[dict[str, Any]] = []
    for rs in req.resource_spans:
        resource = {kv.key: any_value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append({
                    "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                    "parent_id": s.parent_span_id.hex() or None, "name": s.name,
                    "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                    "attrs": {kv.key: any_value(kv.value) for kv in s.attributes},
                    "events": [{"name": e.name, "at": e.time_unix_nano,
                                "attrs": {kv.key: any_value(kv.value) for kv in e.attributes}} for e in s.events],
                    "links": [{"trace_id": ln.trace_id.hex(), "span_id": ln.span_id.hex(),
                               "attrs": {kv.key: any_value(kv.value) for kv in ln.attributes}} for ln in s.links],
                    "status": {"code": s.status.code, "message": s.status.message},
                    "scope": ss.scope.name, "resource": resource,
                })
    return out


@dataclass
class Receiver:
    server: ThreadingHTTPServer
    spans: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)
    failing: list[int] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def fail(self, n: int = 1, status: int = 400) -> None:
        with self.cond:
            self.failing.extend([status] * n)

    def wait_for(self, pred: Callable[[list[dict[str, Any]]], bool], timeout: float = 60.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self.spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the receiver never saw it; spans: {[s['name'] for s in self.spans]}")
                self.cond.wait(left)
            return list(self.spans)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_receiver() -> Receiver:
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            r = holder["r"]
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with r.cond:
                status = r.failing.pop(0) if r.failing else 200
            if self.path != "/v1/traces" or "protobuf" not in (self.headers.get("Content-Type") or ""):
                status = 404 if self.path != "/v1/traces" else 415
            spans = decode(body) if status == 200 else []
            with r.cond:  # recorded before the answer: a sender that got its answer finds it here
                r.requests += 1
                r.spans.extend(spans)
                r.cond.notify_all()
            reply = ExportTraceServiceResponse().SerializeToString() if status == 200 else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["r"] = Receiver(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return holder["r"]

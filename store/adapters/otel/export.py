"""``warden otel export``: the journal's spans (``spans.py``) through the OpenTelemetry SDK, over OTLP/HTTP.

The SDK builds every span: a :class:`TracerProvider` whose id generator hands out the ids the
ledger decided (:class:`_Planned`), a span processor that keeps what ended (:class:`_Kept`), and the
OTLP/HTTP exporter (``opentelemetry-exporter-otlp-proto-http``) that sends it — its endpoint,
headers, compression and timeout from the standard ``OTEL_EXPORTER_OTLP_*`` variables unless the
caller gives one. Sending is checked: ``--follow`` moves its cursor only after the collector took
the batch, so a batch that failed is sent again (with the same ids) rather than lost.

The ledger is only read (opened read-only).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Callable, Iterator, Sequence

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from store.errors import LedgerUnavailable, WardenError
from store.reading.feed import Feed, passes
from store.runs.write import write_atomic
from store.storage.beside import hold_lock, kept_beside
from store.storage.db import parse_target
from store.text import safe_line

from .spans import PENDING_PARENT, SPAN_TYPE, Mapper, SpanRecord, TaskInfo

READ_BATCH = 1000
SEND_CHUNK = 64  # spans per request: far below the request limits of collectors (4 MiB by default)
RETRY_S = (1.0, 30.0)  # after a failed send: the first wait, the longest (doubling in between)
SCOPE = "warden"


def _ns(t: float) -> int:
    return int(round(t * 1e9))


class _Planned(IdGenerator):
    """Hands out the ids the ledger decided for the span being started."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


class _Kept(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


class Builder:
    """Span records → the SDK's spans (``ReadableSpan``), ready for any SDK exporter."""

    def __init__(self, ledger: str) -> None:
        self.ids = _Planned()
        self.kept = _Kept()
        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "warden",
                                    "service.instance.id": hashlib.sha256(ledger.encode()).hexdigest()[:16],
                                    "warden.ledger": ledger})
        self.provider = TracerProvider(resource=resource, sampler=ALWAYS_ON, id_generator=self.ids)
        self.provider.add_span_processor(self.kept)
        self.tracer = self.provider.get_tracer(SCOPE)

    def build(self, done: Sequence[SpanRecord], pending: Sequence[SpanRecord]) -> list[ReadableSpan]:
        self.kept.spans = []
        for r in pending:
            self._pending(r)
        for r in done:
            self._final(r)
        out, self.kept.spans = self.kept.spans, []
        return out

    def _context(self, trace_id: int, parent: int | None) -> object:
        if parent is None:
            return None
        ctx = trace.SpanContext(trace_id, parent, is_remote=False, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
        return trace.set_span_in_context(trace.NonRecordingSpan(ctx))

    def _start(self, r: SpanRecord, span_id: int, parent: int | None, attrs: dict[str, object],
               links: list[trace.Link]) -> trace.Span:
        self.ids.trace_id, self.ids.span_id = r.trace_id, span_id
        kind = trace.SpanKind.INTERNAL
        return self.tracer.start_span(r.name, context=self._context(r.trace_id, parent),  # type: ignore[arg-type]
                                      kind=kind, attributes=attrs, links=links,  # type: ignore[arg-type]
                                      start_time=_ns(r.start), record_exception=False,
                                      set_status_on_exception=False)

    def _final(self, r: SpanRecord) -> None:
        links = [trace.Link(trace.SpanContext(ln.trace_id, ln.span_id, is_remote=False,
                                              trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)), ln.attrs)
                 for ln in r.links]
        span = self._start(r, r.span_id, r.parent_id, dict(r.attrs), links)
        for ev in r.events:
            span.add_event(ev.name, ev.attrs, timestamp=_ns(ev.at))
        if r.error is not None:
            span.set_status(trace.Status(trace.StatusCode.ERROR, r.error))
        elif r.end is not None:
            span.set_status(trace.Status(trace.StatusCode.OK))
        span.end(end_time=_ns(r.end if r.end is not None else r.start))

    def _pending(self, r: SpanRecord) -> None:
        attrs: dict[str, object] = dict(r.attrs)
        attrs[SPAN_TYPE] = "pending_span"
        attrs[PENDING_PARENT] = f"{r.parent_id or 0:016x}"
        span = self._start(r, r.pending_id, r.span_id, attrs, [])
        span.end(end_time=_ns(r.start))


def exporter_for(endpoint: str | None, timeout_s: float | None = None) -> OTLPSpanExporter:
    """The SDK's OTLP/HTTP exporter: ``endpoint`` is a base URL (``/v1/traces`` appended, as the
    standard variable is) or the full traces URL; None takes the ``OTEL_EXPORTER_OTLP_*`` variables."""
    if endpoint is None:
        return OTLPSpanExporter(timeout=timeout_s)
    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    return OTLPSpanExporter(endpoint=url, timeout=timeout_s)


def endpoint_from_env(env: dict[str, str] | None = None) -> str | None:
    e = dict(os.environ) if env is None else env
    return e.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or e.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None


class _LastWords(logging.Handler):
    """What the SDK's exporter last logged (why a send failed), kept for the one line we print."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


_WORDS = _LastWords()
_SDK_LOG = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
_SDK_LOG.addHandler(_WORDS)
_SDK_LOG.propagate = False  # its retries are told in our own words, once, not as log lines


def send(exporter: SpanExporter, spans: Sequence[ReadableSpan]) -> None:
    """Send in chunks of SEND_CHUNK; raises :class:`ExportFailed` (with the SDK's reason) when the
    collector did not take one."""
    for i in range(0, len(spans), SEND_CHUNK):
        chunk = spans[i: i + SEND_CHUNK]
        _WORDS.last = None
        if exporter.export(chunk) != SpanExportResult.SUCCESS:
            why = f": {safe_line(_WORDS.last, limit=300)}" if _WORDS.last else ""
            left = len(spans) - i
            raise ExportFailed(f"the collector did not take {left} span{'s' if left != 1 else ''}{why}")


def _readers(feed: Feed) -> tuple[Callable[[str], TaskInfo], Callable[[str, str], str]]:
    tasks: dict[str, TaskInfo] = {}
    kinds: dict[tuple[str, str], str] = {}

    def task_info(task_id: str) -> TaskInfo:
        if task_id not in tasks:
            t = feed.read(lambda led: led.task(task_id))
            tasks[task_id] = (t.created_at, t.workflow, t.title)
        return tasks[task_id]

    def kind_of(task_id: str, node: str) -> str:
        if (task_id, node) not in kinds:
            found = feed.read(lambda led: led.nodes(task_id, [node]))
            kinds[(task_id, node)] = found[0].kind if found else "tool"
        return kinds[(task_id, node)]

    return task_info, kind_of


def open_feed(target: str) -> Feed:
    return Feed(target, read_only=True, application_name="warden-otel")


def mapper_for(feed: Feed, display: str) -> Mapper:
    info, kind = _readers(feed)
    return Mapper(info, kind, ledger=display)


def export_once(target: str, exporter: SpanExporter) -> tuple[int, int]:
    """The whole journal, once: every finished span, and the running ones as pending spans.
    Returns (finished, pending) counts; raises :class:`ExportFailed` when the collector refused."""
    display = parse_target(target).display
    feed = open_feed(target)
    try:
        mapper = mapper_for(feed, display)
        builder = Builder(display)
        cursor, finished = 0, 0
        while True:
            delta = feed.since(cursor, limit=READ_BATCH)
            cursor = delta.cursor
            done, _ = mapper.feed(delta.events)
            send(exporter, builder.build(done, []))
            finished += len(done)
            if not delta.more:
                break
        pending = mapper.open_spans()
        send(exporter, builder.build([], pending))
        return finished, len(pending)
    finally:
        feed.close()


class ExportFailed(WardenError):
    pass


# ---------------------------------------------------------------------- --follow: the cursor kept
def state_path(target: str, env: dict[str, str] | None = None) -> Path:
    """Beside a SQLite ledger; under the user's state directory for a PostgreSQL one."""
    return kept_beside(target, "otel.json", env)


class StateFile:
    """The follower's cursor and open spans, replaced atomically after each batch the collector took."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_fd: int | None = None

    def hold(self) -> bool:
        """Take the one-follower lock (False: another exporter follows this ledger)."""
        self._lock_fd = hold_lock(self.path)
        return self._lock_fd is not None

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def load(self, mapper: Mapper) -> bool:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return False
        except (OSError, ValueError) as e:
            raise WardenError(f"cannot read the exporter's state {self.path}: {e}") from None
        try:
            mapper.load(doc)
        except (KeyError, TypeError, ValueError, AssertionError) as e:
            raise WardenError(f"the exporter's state {self.path} is damaged ({e!r}): move it away to export "
                              "again from the start (the same ids are sent)") from None
        return True

    def save(self, mapper: Mapper) -> None:
        write_atomic(self.path, json.dumps(mapper.to_json()).encode("utf-8"))


class Follower:
    """Follows one ledger's journal and sends its spans as they start and end."""

    def __init__(self, target: str, exporter: SpanExporter, state: StateFile, *,
                 say: Callable[[str], None] | None = None, fallback_poll_s: float = 2.0) -> None:
        self.display = parse_target(target).display
        self.feed = Feed(target, read_only=True, application_name="warden-otel", fallback_poll_s=fallback_poll_s)
        self.exporter = exporter
        self.state = state
        self.say = say or (lambda line: None)
        self.mapper = mapper_for(self.feed, self.display)
        self.builder = Builder(self.display)
        self.failures = 0
        self.unavailable = False

    def begin(self) -> None:
        if self.state.load(self.mapper):
            self.say(f"resuming after journal event {self.mapper.cursor}")

    def step(self) -> float:
        """Send what is new; the seconds to wait before the next pass (0: more is waiting)."""
        try:
            for _ in self._batches():
                pass
            if self.unavailable:
                self.say("the ledger answers again")
                self.unavailable = False
        except LedgerUnavailable as e:
            if not self.unavailable:
                self.say(f"cannot read the ledger ({safe_line(str(e), limit=200)}): trying again")
            self.unavailable = True
            return RETRY_S[0] * 5
        except ExportFailed as e:
            self.failures += 1
            wait = min(RETRY_S[1], RETRY_S[0] * 2 ** (self.failures - 1))
            self.say(f"{e}: again in {wait:.0f}s (nothing is skipped)")
            return wait
        self.failures = 0
        return 60.0

    def _batches(self) -> Iterator[int]:
        while True:
            saved = self.mapper.to_json()
            delta = self.feed.since(self.mapper.cursor, limit=READ_BATCH)
            if not delta.events:
                return
            done, started = self.mapper.feed(delta.events)
            self.mapper.cursor = max(self.mapper.cursor, delta.cursor)
            try:
                send(self.exporter, self.builder.build(done, started))
            except ExportFailed:
                self.mapper.load(saved)  # the batch is mapped again, the same ids, next time
                raise
            self.state.save(self.mapper)
            if done or started:
                said = [f"{n} {what}{'s' if n != 1 else ''}" for n, what in
                        ((len(done), "finished span"), (len(started), "pending span")) if n]
                self.say(f"sent {' and '.join(said)} (journal event {self.mapper.cursor})")
            yield len(done)
            if not delta.more:
                return

    async def run(self, stop: asyncio.Event) -> None:
        # after a failed send, or while the ledger cannot be read, the back-off holds
        try:
            await passes(self.feed, stop, self.begin, self.step, hold=lambda: bool(self.failures or self.unavailable))
        finally:
            self.exporter.shutdown()


__all__ = ["Builder", "Follower", "StateFile", "ExportFailed", "export_once", "exporter_for", "endpoint_from_env",
           "state_path", "send"]

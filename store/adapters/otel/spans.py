"""The ledger's journal as OpenTelemetry spans, under the GenAI semantic conventions (no SDK here).

A task is a trace whose root span is the workflow (``invoke_workflow``); each attempt of a node is a
span under it — ``execute_tool`` for a node of kind ``tool``, ``invoke_agent`` for every other kind
— from its claim to its commit, failure, rewind or loss of its lease. Heartbeats, handoffs, notes,
signals the ledger journals and operator actions on the node are events of the attempt (who and
why as attributes); a task-level event is an event of the workflow span. A node's next attempt
links to its previous one, the link saying why there is a next one (``retry``, ``rewind`` with the
operator and the reason, ``reclaimed`` after a lost lease, ``repair``).

Ids are derived from the ledger — the trace from the task's id and creation time, a span from its
node and attempt — so exporting the same journal twice sends the same ids, and a collector (or a
trace UI) sees one span, not two. Work that is running is sent as a *pending span* when it starts,
in the shape Logfire uses: a zero-length child of the real span carrying
``logfire.span_type = "pending_span"`` and ``logfire.pending_parent_id`` (the real span's parent);
the real span (``logfire.span_type = "span"``) follows when the work ends, with the same id.

:class:`Mapper` keeps what is open between batches; :meth:`Mapper.to_json` / :meth:`Mapper.from_json`
carry it across restarts (``warden otel export --follow`` keeps it beside its cursor).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Iterable

from store.jsontypes import JsonObject
from store.storage.events import (NodeAbandoned, NodeClaimed, NodeCommitted, NodeDiscarded, NodeFailed, NodeHeartbeat,
                                  NodeRepair, OperatorActed, TaskCompleted, TaskCreated, TaskFailed, payload_of)
from store.storage.payloads import Payload
from store.views import EventView

# The GenAI semantic conventions' names (tests check them against opentelemetry-semantic-conventions).
OPERATION = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
WORKFLOW_NAME = "gen_ai.workflow.name"
CONVERSATION_ID = "gen_ai.conversation.id"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
ERROR_TYPE = "error.type"

SPAN_TYPE = "logfire.span_type"
PENDING_PARENT = "logfire.pending_parent_id"

MAX_EVENTS = 128  # the SDK's default span event limit: more would be dropped there anyway
MAX_VALUE = 1024  # characters of one attribute value (agent text is kept literally, cut here)

Attrs = dict[str, "str | int | float | bool"]
TaskInfo = tuple[float, str, str]  # (created_at, workflow, title)


@dataclass
class SpanEvent:
    name: str
    at: float
    attrs: Attrs


@dataclass
class SpanLink:
    trace_id: int
    span_id: int
    attrs: Attrs


@dataclass
class SpanRecord:
    """One span to send: ``end`` None is a pending span (sent as Logfire's pending shape)."""

    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start: float
    end: float | None
    attrs: Attrs
    events: list[SpanEvent] = field(default_factory=list)
    links: list[SpanLink] = field(default_factory=list)
    error: str | None = None  # the span's status: None ok (or unset while pending), else the error

    @property
    def pending_id(self) -> int:
        return _id64(f"pending\0{self.trace_id:032x}\0{self.span_id:016x}")


def _digest(text: str, n: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:n], "big")
    return value or 1  # an all-zero id is invalid in OpenTelemetry


def _id64(text: str) -> int:
    return _digest(text, 8)


def trace_id_of(task_id: str, created_at: float) -> int:
    """The task's trace id: the same for the same task of the same ledger, whoever exports it."""
    return _digest(f"warden-trace\0{task_id}\0{created_at!r}", 16)


def workflow_span_id(trace_id: int) -> int:
    return _id64(f"workflow\0{trace_id:032x}")


def attempt_span_id(trace_id: int, node: str, attempt: int) -> int:
    return _id64(f"attempt\0{trace_id:032x}\0{node}\0{attempt}")


def value(text: object) -> str:
    """An attribute value from anything an agent wrote: literal, valid UTF-8, at most MAX_VALUE."""
    s = text if isinstance(text, str) else str(text)
    s = s.encode("utf-8", "replace").decode("utf-8")
    return s if len(s) <= MAX_VALUE else s[: MAX_VALUE - 1] + "…"


def _number(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


@dataclass
class _Open:
    """A span being built (the workflow or one attempt)."""

    record: SpanRecord
    tokens: float = 0.0
    dropped: int = 0

    def add(self, event: SpanEvent) -> None:
        if len(self.record.events) < MAX_EVENTS:
            self.record.events.append(event)
        else:
            self.dropped += 1

    def close(self, at: float, outcome: str, error: str | None) -> SpanRecord:
        r = self.record
        r.end = max(at, r.start)
        r.error = error
        r.attrs["warden.outcome"] = outcome
        if self.tokens:
            r.attrs[INPUT_TOKENS] = int(self.tokens)
            r.attrs["warden.tokens"] = int(self.tokens)
        if self.dropped:
            r.attrs["warden.events_dropped"] = self.dropped
        if error is not None:
            r.attrs[ERROR_TYPE] = outcome
        return r


# How an attempt ends, by event kind: (outcome, is an error).
_ENDS = {
    NodeCommitted.KIND: ("succeeded", False),
    NodeFailed.KIND: ("failed", True),
    NodeDiscarded.KIND: ("discarded", False),
    NodeAbandoned.KIND: ("abandoned", False),
}
# Operator actions that end the open attempts of the nodes they change.
_ENDING_ACTIONS = {"rewind": "rewound", "abort": "aborted", "narrow": "excluded"}
_TASK_ENDS = {TaskCompleted.KIND: ("completed", False), TaskFailed.KIND: ("failed", True)}


class Mapper:
    """Journal events in id order → finished span records, plus the pending ones still open.

    ``task_info(task_id)`` gives ``(created_at, workflow, title)``, ``kind_of(task_id, node)`` the
    node's kind: the two facts the journal's events do not carry (both never change).
    """

    def __init__(self, task_info: Callable[[str], TaskInfo], kind_of: Callable[[str, str], str],
                 ledger: str = "") -> None:
        self.task_info = task_info
        self.kind_of = kind_of
        self.ledger = ledger
        self.traces: dict[str, int] = {}
        self.workflows: dict[str, _Open] = {}
        self.attempts: dict[tuple[str, str], _Open] = {}
        self.last: dict[str, tuple[int, int, str]] = {}  # "task\0node" → (attempt, span id, how it ended)
        self.why_next: dict[str, Attrs] = {}  # "task\0node" → the link attributes of its next attempt
        self.cursor = 0

    # ------------------------------------------------------------------ ids
    def trace(self, task_id: str) -> int:
        t = self.traces.get(task_id)
        if t is None:
            created_at, _, _ = self.task_info(task_id)
            t = self.traces[task_id] = trace_id_of(task_id, created_at)
        return t

    # ------------------------------------------------------------------ the mapping
    def feed(self, events: Iterable[EventView]) -> tuple[list[SpanRecord], list[SpanRecord]]:
        """Map events; returns (the spans that ended, the spans that started and are still open)."""
        done: list[SpanRecord] = []
        started: list[int] = []
        for e in events:
            self.cursor = max(self.cursor, e.id)
            if e.task_id is None:
                continue
            self._one(e, done, started)
        ended = {r.span_id for r in done}
        still = [o.record for o in (*self.workflows.values(), *self.attempts.values())
                 if o.record.span_id in started and o.record.span_id not in ended]
        return done, still

    def open_spans(self) -> list[SpanRecord]:
        """Every span still open (``warden otel export`` once sends them as pending)."""
        return [o.record for o in (*self.workflows.values(), *self.attempts.values())]

    def _one(self, e: EventView, done: list[SpanRecord], started: list[int]) -> None:
        task = str(e.task_id)
        p = payload_of(e)
        wf = self.workflows.get(task)
        if e.kind == TaskCreated.KIND:
            wf = self._start_workflow(task, e)
            started.append(wf.record.span_id)
            return
        if e.kind in _TASK_ENDS:
            outcome, bad = _TASK_ENDS[e.kind]
            self._end_task(task, e, outcome, bad, done)
            return
        if e.kind == NodeClaimed.KIND and e.node:
            rec = self._start_attempt(task, e, p if isinstance(p, NodeClaimed) else None, done)
            started.append(rec.span_id)
            return
        if e.kind in _ENDS and e.node:
            outcome, bad = _ENDS[e.kind]
            failed = p if isinstance(p, NodeFailed) else None
            self._end_attempt(task, e.node, e, outcome, failed.error if bad and failed else None, done,
                              retry=bool(failed and failed.retry), spent=_tokens(p))
            return
        if e.kind == NodeRepair.KIND and e.node:
            for key in (list(p.nodes) if isinstance(p, NodeRepair) else []) or [e.node]:
                self.why_next[f"{task}\0{key}"] = {"warden.link.reason": "repair", "warden.actor": value(e.actor)}
        if e.kind.startswith("operator."):
            self._operator(task, e, p if isinstance(p, OperatorActed) else None, done)
            return
        event = SpanEvent(_event_name(e), e.at, self._event_attrs(e))
        att = self.attempts.get((task, e.node)) if e.node else None
        if att is not None:
            att.tokens += _tokens(p) if isinstance(p, NodeHeartbeat) else 0.0
            att.add(event)
        elif wf is not None:
            wf.add(event)

    def _start_workflow(self, task: str, e: EventView) -> _Open:
        trace = self.trace(task)
        _, workflow, title = self.task_info(task)
        name = workflow or title or task
        attrs: Attrs = {OPERATION: "invoke_workflow", WORKFLOW_NAME: value(name), CONVERSATION_ID: value(task),
                        "warden.task_id": value(task), SPAN_TYPE: "span"}
        if title:
            attrs["warden.task.title"] = value(title)
        if self.ledger:
            attrs["warden.ledger"] = self.ledger
        rec = SpanRecord(trace, workflow_span_id(trace), None, f"invoke_workflow {value(name)}", e.at, None, attrs)
        o = self.workflows[task] = _Open(rec)
        return o

    def _start_attempt(self, task: str, e: EventView, claimed: NodeClaimed | None, done: list[SpanRecord]) -> SpanRecord:
        node = str(e.node)
        attempt = claimed.attempt if claimed is not None and claimed.attempt else 1
        prior = self.attempts.get((task, node))
        if prior is not None:  # its lease was lost, or the journal never said how it ended
            reclaimed = claimed is not None and claimed.reclaimed
            self._end_attempt(task, node, e, "lease lost" if reclaimed else "superseded",
                              "its lease expired and it was reclaimed" if reclaimed else None, done)
        trace = self.trace(task)
        kind = self.kind_of(task, node)
        worker = value((claimed.worker if claimed is not None else "") or e.actor)
        if kind == "tool":
            name = f"execute_tool {value(node)}"
            attrs: Attrs = {OPERATION: "execute_tool", TOOL_NAME: value(node),
                            TOOL_CALL_ID: value(f"{task}/{node}#{attempt}")}
        else:
            name = f"invoke_agent {value(node)}"
            attrs = {OPERATION: "invoke_agent", AGENT_NAME: value(node), AGENT_ID: value(f"{task}/{node}")}
        attrs.update({CONVERSATION_ID: value(task), "warden.task_id": value(task), "warden.node": value(node),
                      "warden.node.kind": value(kind), "warden.attempt": attempt, "warden.worker": worker,
                      SPAN_TYPE: "span"})
        rec = SpanRecord(trace, attempt_span_id(trace, node, attempt), workflow_span_id(trace), name, e.at, None, attrs)
        ref = f"{task}\0{node}"
        before = self.last.get(ref)
        if before is not None:
            why: Attrs = {"warden.link.reason": _link_reason(before[2]), "warden.previous_attempt": before[0]}
            why.update(self.why_next.pop(ref, {}))
            rec.links.append(SpanLink(trace, before[1], why))
        self.attempts[(task, node)] = _Open(rec)
        return rec

    def _end_attempt(self, task: str, node: str, e: EventView, outcome: str, error: object,
                     done: list[SpanRecord], *, retry: bool = False, spent: float = 0.0) -> None:
        o = self.attempts.pop((task, node), None)
        if o is None:
            return
        o.tokens += spent
        rec = o.close(e.at, outcome, None if error is None else value(error))
        self.last[f"{task}\0{node}"] = (int(rec.attrs.get("warden.attempt", 1)), rec.span_id,
                                        "retry" if retry or outcome == "failed" else outcome)
        done.append(rec)

    def _end_task(self, task: str, e: EventView, outcome: str, bad: bool, done: list[SpanRecord]) -> None:
        for (t, node) in [k for k in self.attempts if k[0] == task]:
            self._end_attempt(t, node, e, f"task {outcome}", None, done)
        wf = self.workflows.pop(task, None)
        if wf is not None:
            done.append(wf.close(e.at, outcome, value(e.summary) if bad else None))

    def _operator(self, task: str, e: EventView, acted: OperatorActed | None, done: list[SpanRecord]) -> None:
        action = e.kind.split(".", 1)[1]
        reason = acted.reason if acted is not None else None
        attrs = self._event_attrs(e)
        changed = list(acted.nodes) if acted is not None else []
        targets = set(changed) | ({e.node} if e.node else set())
        ending = _ENDING_ACTIONS.get(action)
        for node in sorted(targets):
            ref = f"{task}\0{node}"
            if action in ("rewind", "narrow") and node in changed:
                link: Attrs = {"warden.link.reason": action, "warden.operator": value(e.actor)}
                if isinstance(reason, str):
                    link["warden.reason"] = value(reason)
                self.why_next[ref] = link
            att = self.attempts.get((task, node))
            if att is None:
                continue
            att.add(SpanEvent(f"operator.{action}", e.at, dict(attrs)))
            if ending and node in changed:
                self._end_attempt(task, node, e, ending, None, done)
        wf = self.workflows.get(task)
        if wf is not None:
            wf.add(SpanEvent(f"operator.{action}", e.at, attrs))
            status = acted.task_status if acted is not None else []
            if status and status[-1] == "aborted":
                for (t, node) in [k for k in self.attempts if k[0] == task]:
                    self._end_attempt(t, node, e, "aborted", None, done)
                self.workflows.pop(task, None)
                done.append(wf.close(e.at, "aborted", value(f"aborted by {e.actor}: {reason}")))

    def _event_attrs(self, e: EventView) -> Attrs:
        a: Attrs = {"warden.event_id": e.id, "warden.kind": e.kind, "warden.layer": e.layer,
                    "warden.actor": value(e.actor), "warden.summary": value(e.summary)}
        if e.kind.startswith("operator."):
            a["warden.operator"] = value(e.actor)
        p = e.payload
        for key in ("reason", "action", "result", "question", "kind", "handoff", "error", "waiting_on"):
            v = p.get(key)
            if isinstance(v, (str, int, float)) and not isinstance(v, bool):
                a[f"warden.{key}"] = value(v) if isinstance(v, str) else v
        for key in ("tokens", "units_done", "units_total", "new_units"):
            n = _number(p.get(key))
            if n is not None:
                a[f"warden.{key}"] = n
        return a

    # ------------------------------------------------------------------ across restarts
    def to_json(self) -> JsonObject:
        return {"cursor": self.cursor, "traces": dict(self.traces),
                "workflows": {k: _open_json(o) for k, o in self.workflows.items()},
                "attempts": [[t, n, _open_json(o)] for (t, n), o in self.attempts.items()],
                "last": {k: list(v) for k, v in self.last.items()},
                "why_next": {k: dict(v) for k, v in self.why_next.items()}}

    def load(self, doc: JsonObject) -> None:
        self.cursor = int(doc["cursor"])
        self.traces = {str(k): int(v) for k, v in doc["traces"].items()}
        self.workflows = {str(k): _open_from(v) for k, v in doc["workflows"].items()}
        self.attempts = {(str(t), str(n)): _open_from(o) for t, n, o in doc["attempts"]}
        self.last = {str(k): (int(v[0]), int(v[1]), str(v[2])) for k, v in doc["last"].items()}
        self.why_next = {str(k): dict(v) for k, v in doc["why_next"].items()}


def _tokens(p: Payload) -> float:
    """The tokens an event says an attempt spent: a heartbeat's, or its commit's (committed,
    discarded, a repair round, a refused repair)."""
    if isinstance(p, NodeHeartbeat):
        return float(p.tokens or 0)
    if isinstance(p, (NodeCommitted, NodeDiscarded, NodeRepair, NodeFailed)) and p.commit is not None:
        return float(p.commit.tokens or 0)
    return 0.0


def _link_reason(ended: str) -> str:
    return {"lease lost": "reclaimed", "rewound": "rewind", "excluded": "narrow"}.get(ended, ended)


def _event_name(e: EventView) -> str:
    return "heartbeat" if e.kind == NodeHeartbeat.KIND else e.kind


def _open_json(o: _Open) -> JsonObject:
    r = o.record
    return {"trace": f"{r.trace_id:032x}", "span": f"{r.span_id:016x}",
            "parent": None if r.parent_id is None else f"{r.parent_id:016x}", "name": r.name, "start": r.start,
            "attrs": dict(r.attrs), "events": [[ev.name, ev.at, dict(ev.attrs)] for ev in r.events],
            "links": [[f"{ln.trace_id:032x}", f"{ln.span_id:016x}", dict(ln.attrs)] for ln in r.links],
            "tokens": o.tokens, "dropped": o.dropped}


def _open_from(d: object) -> _Open:
    assert isinstance(d, dict)
    rec = SpanRecord(int(d["trace"], 16), int(d["span"], 16), None if d["parent"] is None else int(d["parent"], 16),
                     str(d["name"]), float(d["start"]), None, dict(d["attrs"]),
                     [SpanEvent(str(n), float(at), dict(a)) for n, at, a in d["events"]],
                     [SpanLink(int(t, 16), int(s, 16), dict(a)) for t, s, a in d["links"]])
    return _Open(rec, float(d["tokens"]), int(d["dropped"]))


__all__ = ["Mapper", "SpanRecord", "SpanEvent", "SpanLink", "trace_id_of", "workflow_span_id",
           "attempt_span_id", "value", "MAX_EVENTS"]

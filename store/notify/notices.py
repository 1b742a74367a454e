"""What is worth a message, and the message: journal events and alarms → notices → one text per batch.

An operator is told what they act on, never each heartbeat:

======================  ==============================================  ==========
event                   from                                            severity
======================  ==============================================  ==========
``handoff``             ``handoff.opened`` (an agent asks a person)      warn (an exception: alarm)
``alarm``               a signal at ``alarm`` (stall, loop, lease…),     alarm
                        once per node while it stays in alarm
``budget``              a budget gate reached (soft, hard, stop),        soft warn, else alarm
                        once per gate, again only when it rises
``failed``              ``task.failed``                                  alarm
``finished``            ``task.completed``                               info
======================  ==============================================  ==========

A node whose alarm ended is told again only after it stayed quiet for ``REARM_S`` (a signal that
flickers is one message). Agent text is shown literally (``store/text.py``) and cut to a line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from store.jsontypes import JsonMapping
from store.notify.config import NotifyConfig
from store.notify.state import Notice, NoticeRow
from store.storage.events import HandoffOpened, TaskCompleted, TaskFailed, payload_of
from store.reading.signals import Signal
from store.text import safe_line
from store.views import EventView, HandoffView

REARM_S = 300.0
LINE_CAP = 240
BATCH_LINES = 12  # notices listed in one message; the rest is one "and N more" line
GLYPH = {"handoff": "✋", "alarm": "⚠", "budget": "$", "failed": "✖", "finished": "✔"}
WORD = {"handoff": "asks", "alarm": "alarm", "budget": "budget", "failed": "failed", "finished": "finished"}


@dataclass(frozen=True)
class Fact:
    """Something that happened, before the routes say who hears it."""

    event: str
    severity: str
    task_id: str | None
    node: str | None
    handoff_id: str | None
    handoff_kind: str | None
    line: str


def _short(value: object, cap: int = LINE_CAP) -> str:
    text = " ".join(safe_line(value, limit=cap * 2).split())
    return text if len(text) <= cap else text[: cap - 1] + "…"


def handoff_fact(h: HandoffView) -> Fact:
    question = str(h.question).split("\n", 1)[0]
    what = f"{h.kind}: {question}"
    ctx: JsonMapping = h.context or {}
    if h.kind == "permission" and ctx.get("tool"):
        what = f"permission for {ctx.get('tool')}: {ctx.get('input') or question}"
    ids = [str(o.get("id")) for o in h.options if isinstance(o, dict) and o.get("id") is not None]
    if ids and h.kind != "permission":
        what += f" [{' | '.join(ids[:6])}{' | …' if len(ids) > 6 else ''}]"
    severity = "alarm" if h.kind == "exception" else "warn"
    return Fact("handoff", severity, h.task_id, h.node, h.id, h.kind,
                _short(f"{h.task_id} · {h.node} {what}"))


def event_fact(e: EventView) -> Fact | None:
    """A fact from a journal event other than a handoff (those need the handoff's row: :func:`handoff_fact`)."""
    if e.kind == TaskFailed.KIND:
        return Fact("failed", "alarm", e.task_id, e.node, None, None, _short(f"{e.task_id} failed: {e.summary}"))
    if e.kind == TaskCompleted.KIND:
        return Fact("finished", "info", e.task_id, e.node, None, None, _short(f"{e.task_id} finished: {e.summary}"))
    return None


def opened_handoff(e: EventView) -> str | None:
    said = payload_of(e)
    return said.handoff if isinstance(said, HandoffOpened) else None


GATES = ("budget_soft", "budget_hard", "budget_stop")


def family(s: Signal) -> str | None:
    """Which watch a signal belongs to: ``budget`` for a gate, ``alarm`` for any alarm, else none."""
    if s.kind in GATES:
        return "budget"
    if s.severity == "alarm" and s.kind != "handoff_waiting":
        return "alarm"
    return None


def signal_fact(s: Signal) -> Fact:
    fam = family(s) or "alarm"
    severity = "warn" if s.kind == "budget_soft" else "alarm"
    where = f"{s.task_id} · {s.node}" if s.node else f"{s.task_id}"
    return Fact(fam, severity, s.task_id, s.node, None, None, _short(f"{where} {s.kind}: {s.evidence}"))


Watched = dict[tuple[str, str, str], tuple[str, float | None]]


def signal_changes(signals: Iterable[Signal], tasks: Iterable[str], watched: Watched, now: float
                   ) -> tuple[list[Fact], list[tuple[str, str, str, str, float]], list[tuple[str, str, str, float]]]:
    """Alarms and gates of ``tasks`` against what was already told: the facts to tell, the watch rows
    to write (task, node, family, kind, at), and the ones gone (task, node, family, at)."""
    facts: list[Fact] = []
    seen: list[tuple[str, str, str, str, float]] = []
    now_on: set[tuple[str, str, str]] = set()
    best: dict[tuple[str, str, str], Signal] = {}
    for s in signals:
        fam = family(s)
        if fam is None:
            continue
        key = (s.task_id, s.node or "", fam)
        old = best.get(key)
        if old is None or (fam == "budget" and GATES.index(s.kind) > GATES.index(old.kind)):
            best[key] = s
    for key, s in best.items():
        now_on.add(key)
        before = watched.get(key)
        if before is None:
            tell = True
        else:
            kind, gone_at = before
            if key[2] == "budget":
                tell = kind in GATES and GATES.index(s.kind) > GATES.index(kind) or (
                    gone_at is not None and now - gone_at >= REARM_S)
            else:
                tell = gone_at is not None and now - gone_at >= REARM_S
            if not tell and gone_at is None and kind == s.kind:
                continue  # unchanged: nothing to write
        if tell:
            facts.append(signal_fact(s))
        seen.append((key[0], key[1], key[2], s.kind, now))
    task_set = set(tasks)
    gone = [(t, n, f, now) for (t, n, f), (_k, gone_at) in watched.items()
            if t in task_set and gone_at is None and (t, n, f) not in now_on]
    return facts, seen, gone


def route(facts: Iterable[Fact], cfg: NotifyConfig, now: float) -> list[Notice]:
    """Each fact, once for each route that takes it."""
    out: list[Notice] = []
    for f in facts:
        for r in cfg.routes:
            if r.takes(f.event, f.handoff_kind, f.task_id, f.severity):
                out.append(Notice(r.name, now, f.event, f.severity, f.task_id, f.node, f.handoff_id, f.line))
    return out


def burst_over(notices: Sequence[NoticeRow], cfg: NotifyConfig, last_batch: float | None, quiet_s: float,
               now: float) -> float | None:
    """When a route's waiting notices become a batch: None if now, else the time to look again."""
    first, last = notices[0].at, notices[-1].at
    ready = min(last + cfg.group_s, first + cfg.group_max_s)
    if last_batch is not None:
        ready = max(ready, last_batch + quiet_s)
    return None if now >= ready else ready


def render(notices: Sequence[NoticeRow], links: dict[str, str], *, ledger: str, list_link: str | None
           ) -> tuple[str, str]:
    """One batch's title and body (plain text): a line per notice, its link under it."""
    asks = sum(1 for n in notices if n.event == "handoff")
    alarms = sum(1 for n in notices if n.severity == "alarm")
    tasks = sorted({n.task_id for n in notices if n.task_id})
    head = []
    if asks:
        head.append(f"{asks} need{'s' if asks == 1 else ''} you")
    if alarms:
        head.append(f"{alarms} alarm{'s' if alarms != 1 else ''}")
    if not head:
        head.append(f"{len(notices)} update{'s' if len(notices) != 1 else ''}")
    title = _short(f"Warden: {', '.join(head)} ({', '.join(tasks[:3])}{', …' if len(tasks) > 3 else ''})", 120)
    lines: list[str] = []
    for n in notices[:BATCH_LINES]:
        lines.append(f"{GLYPH.get(n.event, '•')} {n.line}")
        if n.handoff_id is not None:
            link = links.get(n.handoff_id)
            lines.append(f"   answer: {link}" if link else f"   answer: warden resolve {n.handoff_id} --option ID")
    if len(notices) > BATCH_LINES:
        lines.append(f"… and {len(notices) - BATCH_LINES} more" + (f": {list_link}" if list_link else ""))
    lines.append(f"(ledger {ledger})")
    return title, "\n".join(lines)


__all__ = ["Fact", "handoff_fact", "event_fact", "opened_handoff", "signal_changes", "route", "burst_over",
           "render", "family", "REARM_S"]

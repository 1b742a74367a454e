"""What the console explains, as text (no Textual widgets): a node's signals and the action each
suggests, an estimate and why, observations with identical consecutive ones collapsed, a failure as
the failure itself recorded it.

Everything here is built from what the store computed (``store.reading.signals``, ``store.estimation.estimates``'
``why``, the ``node.failed`` event); nothing is re-judged. Every agent-written string goes through
``safe``/``safe_line`` into a ``rich.text.Text``, never into markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from rich.text import Text

from store.clock import iso
from store.storage.events import NodeFailed, payload_of
from store.views import EventView, NodeView, ObservationView

from .glyphs import MARKS, age_label, duration_label
from .model import EtaJson, SignalJson, signal_text
from .text import safe, safe_line

SEVERITY_STYLES = {"alarm": "red", "warn": "yellow"}  # the word is always there too (NO_COLOR, monochrome)
EVIDENCE_LIMIT = 2000  # the evidence is shown in full (the store keeps it short); this only bounds a hostile one


def section(out: Text, title: str) -> None:
    out.append("\n" + title + "\n", style="bold underline")


def field(out: Text, name: str, value: str | Text, style: str = "") -> None:
    out.append(f"  {name:<14}", style="dim")
    if isinstance(value, Text):
        out.append_text(value)
        out.append("\n")
    else:
        out.append(value + "\n", style=style)


# ---------------------------------------------------------------------- signals and their actions
@dataclass(frozen=True)
class Suggestion:
    """The action a signal suggests: ``action`` is an action dialog's name (``rewind``, ``park``,
    ``escalate``, ``resume``, ``narrow``) or ``resolve`` (the node's open handoff)."""

    action: str
    label: str  # what the operator reads: "rewind, the evidence as the reason"
    reason: str  # the dialog's reason, prefilled


# Why each: a loop or a dead agent is best sent back with the evidence as the rejection reason (the
# agent sees it next time); an agent that runs without moving or spends out of all proportion is
# held for a person; a wait past its time is parked; a met wake condition or an old park is resumed.
SUGGESTED_ACTIONS: dict[str, tuple[str, str]] = {
    "no_new_info": ("rewind", "rewind, the evidence as the reason"),
    "repeating": ("rewind", "rewind, the evidence as the reason"),
    "orphaned": ("rewind", "rewind (a retry), the evidence as the reason"),
    "heartbeat_stale": ("escalate", "ask a human (the agent is stopped)"),
    "no_progress": ("escalate", "ask a human (the agent is stopped)"),
    "overdue": ("park", "park it"),
    "cost_density": ("park", "park it (stop the spending)"),
    "handoff_waiting": ("resolve", "answer the handoff"),
    "park_expired": ("resume", "resume (or park again with a new until)"),
    "wake": ("resume", "resume"),
    "budget_insufficient": ("narrow", "narrow the task without this node"),
    # the task's mind (store/mind/signals.py): work that serves no requirement is cut by narrowing;
    # an alignment check a person answers is a handoff
    "drift_suspected": ("narrow", "narrow the task to what serves its requirements (m: its mind)"),
    "alignment_due": ("resolve", "answer the alignment check"),
    # siblings failing the same way (store/mind/patterns.py): the agent replans; the operator can
    # cut the failing branch meanwhile
    "failure_pattern": ("narrow", "narrow the task without the failing siblings (or let the agent replan)"),
}


def suggestion(sig: SignalJson) -> Suggestion | None:
    got = SUGGESTED_ACTIONS.get(str(sig.get("kind")))
    if got is None:
        return None
    action, label = got
    reason = f"{sig.get('kind')}: {sig.get('evidence')}"
    return Suggestion(action, label, safe_line(reason, limit=500))


def parse_iso(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def signal_keys(i: int) -> str:
    """The keys that act on the ``i``-th signal (0-based) of the node detail."""
    return f"s or {i + 1}" if i == 0 else (str(i + 1) if i < 9 else "")


def signals_section(out: Text, signals: Sequence[SignalJson] | None, now: float, wait: str | None = None) -> None:
    """Each signal: kind, severity, since when, its evidence (the same text as ``warden graph
    --json``), the action it suggests and the key that opens it. ``None``: not computed yet."""
    if signals is None:
        section(out, "Signals")
        out.append("  computing…\n", style="dim")
        return
    section(out, f"Signals ({len(signals)})")
    if wait:
        field(out, "declared wait", safe_line(wait))
    if not signals:
        out.append("  none: nothing stalled, looping or waiting on the operator\n", style="dim")
    for i, s in enumerate(signals):
        sev = str(s.get("severity") or "warn")
        style = SEVERITY_STYLES.get(sev, "")
        out.append(f"  {i + 1} " if i < 9 else "    ", style="bold")
        out.append(f"{MARKS['signal']} {safe_line(s.get('kind'))}", style=f"bold {style}".strip())
        out.append(f"  {safe_line(sev)}", style=style)
        since = s.get("since")
        ts = parse_iso(since) if isinstance(since, str) else since
        if ts is not None:
            out.append(f"  since {iso(ts)} ({age_label(now - ts)})", style="dim")
        out.append("\n")
        out.append("    " + safe(s.get("evidence"), limit=EVIDENCE_LIMIT) + "\n")
        sug = suggestion(s)
        keys = signal_keys(i)
        if sug is not None:
            out.append(f"    → {sug.label}" + (f": press {keys}" if keys else "") + "\n", style="dim")


# ---------------------------------------------------------------------- estimates
def eta_figures(eta: EtaJson | None) -> str:
    """'P50 2m10s  P80 4m05s  (low confidence, 3 samples)' or '—'."""
    if not eta or eta.get("p80_s") is None:
        return MARKS["dash"]
    n = int(eta.get("samples") or 0)
    conf = safe_line(eta.get("confidence") or "none")
    # The label `none` reads as "no confidence" in a sentence (docs/estimates.md: no sample of the kind).
    said = "no confidence" if conf == "none" else f"{conf} confidence"
    return (f"P50 {duration_label(eta.get('p50_s'))}  P80 {duration_label(eta.get('p80_s'))}  "
            f"({said}, {n} sample{'s' if n != 1 else ''})")


def estimate_section(out: Text, eta: EtaJson | None, status: str) -> None:
    """The node's P50 / P80, samples, confidence and why (``store.estimation.estimates``' reasons, as they are)."""
    section(out, "Estimate (remaining time)")
    if eta is None:
        out.append("  computing…\n", style="dim")
        return
    if status in ("succeeded", "abandoned"):
        out.append("  — (finished)\n", style="dim")
        return
    field(out, "figures", eta_figures(eta))
    why = [w for w in (eta.get("why") or ()) if w]
    if not why and eta.get("p80_s") is None:
        why = ["nothing known: no history of its kind and no est_wall_s"]
    for i, w in enumerate(why):
        field(out, "why" if i == 0 else "", safe_line(w, limit=300))


def task_estimate_text(eta: EtaJson | None, signals: Sequence[SignalJson] = ()) -> Text:
    """The graph's explanation panel: the task's P50 / P80, samples, confidence, why (the nodes that
    weigh most among them), and its signals."""
    out = Text(no_wrap=False)
    out.append("estimate ", style="bold")
    out.append(eta_figures(eta) + "\n")
    why = [w for w in ((eta or {}).get("why") or ()) if w]
    for w in why:
        out.append("  why: " if w is why[0] else "       ", style="dim")
        out.append(safe_line(w, limit=300) + "\n")
    if signals:
        out.append(f"signals ({len(signals)})\n", style="bold")
        for s in signals:
            out.append("  " + signal_text(s, limit=300) + "\n")
    out.rstrip()
    return out


# ---------------------------------------------------------------------- observations
@dataclass(frozen=True)
class ObservationRun:
    """Consecutive observations of one attempt with the same digest (the normalised content that
    stall detection compares): shown once, with a count and the first and last time."""

    first: ObservationView
    last: ObservationView
    count: int
    new_units: int
    texts_differ: bool  # identical after normalisation, not byte for byte (the newest is shown)


def collapse_observations(observations: Sequence[ObservationView]) -> list[ObservationRun]:
    """Oldest first, like the observations."""
    runs: list[ObservationRun] = []
    for o in observations:
        if runs:
            r = runs[-1]
            if r.last.digest == o.digest and r.last.attempt == o.attempt:
                runs[-1] = ObservationRun(r.first, o, r.count + 1, r.new_units + o.new_units,
                                          r.texts_differ or o.text != r.last.text)
                continue
        runs.append(ObservationRun(o, o, 1, o.new_units, False))
    return runs


def _wait_window(node: NodeView) -> tuple[float, float, str] | None:
    """The node's declared wait (its last: the node keeps one) as (since, until, what)."""
    since, until, what = (getattr(node, "wait_since", None), getattr(node, "wait_until", None),
                          getattr(node, "wait_on", None))
    if since is None or until is None or not what:
        return None
    return float(since), float(until), str(what)


def observations_section(out: Text, observations: Sequence[ObservationView], sparkline: str, shown: int = 5,
                         node: NodeView | None = None) -> None:
    """Identical consecutive observations collapsed (``×38``, first and last time); those made
    during the node's declared wait say so (they are expected to repeat and raise no signal)."""
    section(out, f"Observations ({len(observations)})")
    if not observations:
        return
    wait = _wait_window(node) if node is not None else None
    field(out, "new info", sparkline + f"  (last: +{observations[-1].new_units})")
    runs = collapse_observations(observations)
    for r in runs[-shown:][::-1]:
        o = r.last
        if r.count == 1:
            out.append(f"  {iso(o.at)} #{o.attempt} +{o.new_units} new, {o.lines} lines\n", style="dim")
        else:
            out.append(f"  ×{r.count}", style="bold")
            out.append(f" {iso(r.first.at)} … {iso(o.at)} #{o.attempt} +{r.new_units} new, {o.lines} lines"
                       + (" (same once normalised; newest shown)" if r.texts_differ else "") + "\n", style="dim")
        if wait is not None and wait[0] <= o.at <= wait[1] and o.attempt == getattr(node, "attempt", o.attempt):
            out.append(f"    during the declared wait on {safe_line(wait[2], limit=60)}\n", style="dim italic")
        for line in safe(o.text, limit=600).splitlines()[:6]:
            out.append("    " + line + "\n")
    if len(runs) > shown:
        out.append(f"  … {len(runs) - shown} older\n", style="dim")


# ---------------------------------------------------------------------- failures
@dataclass(frozen=True)
class FailureFacts:
    failure_class: str
    retryable: bool | None  # the failure's own flag (None: not recorded, an old journal entry)
    exhausted: bool
    message: str
    attempt: int | None
    at: float | None


def failure_facts(node: NodeView, failure: EventView | None) -> FailureFacts | None:
    """The node's last failure as ``fail()`` recorded it (its ``node.failed`` event), not the node's
    declared ``retryable``; from the node's columns when the event is gone."""
    if failure is not None:
        decoded = payload_of(failure)
        p = decoded if isinstance(decoded, NodeFailed) else NodeFailed()
        retryable = p.retryable
        exhausted = bool(p.exhausted)
        if retryable is None:  # written before the flag was journalled: the summary says it
            if p.retry:
                retryable = True
            elif "retries exhausted" in (failure.summary or ""):
                retryable, exhausted = True, True
            elif "not retryable" in (failure.summary or ""):
                retryable = False
        return FailureFacts(p.failure_class or node.failure_class or "—", retryable, exhausted,
                            p.error if p.error is not None else node.error or "", p.attempt, failure.at)
    if node.error or node.failure_class:
        return FailureFacts(node.failure_class or "—", None, False, node.error or "", None, None)
    return None


def failure_section(out: Text, node: NodeView, failure: EventView | None, now: float) -> None:
    f = failure_facts(node, failure)
    if f is None:
        return
    current = node.status in ("failed", "pending") and (f.attempt is None or f.attempt == node.attempt)
    title = "Failure" if current else "Last failure"
    where = f" (attempt {f.attempt}, {age_label(now - f.at)})" if f.attempt is not None and f.at is not None else ""
    section(out, title + where)
    field(out, "class", safe_line(f.failure_class))
    if f.retryable is None:
        field(out, "retryable", "? (not recorded)")
    else:
        field(out, "retryable", ("yes" if f.retryable else "no")
              + (" (retries exhausted)" if f.exhausted else "")
              + (f"  — the node declares {'yes' if node.retryable else 'no'}"
                 if f.retryable != node.retryable else ""))
    field(out, "message", safe_line(f.message or "—", limit=500), "bold")
    if node.status == "pending" and node.next_retry_at:
        field(out, "next retry", f"{iso(node.next_retry_at)} ({age_label(now - node.next_retry_at)})")
    elif node.status == "failed":
        field(out, "next retry", "none: " + ("retries exhausted" if f.exhausted else "not retryable"
                                             if f.retryable is False else "failed for good"))
    elif not current:
        field(out, "next retry", f"retried: attempt {node.attempt} is {safe_line(node.status)}")


__all__ = [
    "EVIDENCE_LIMIT", "FailureFacts", "ObservationRun", "SUGGESTED_ACTIONS", "Suggestion", "collapse_observations",
    "estimate_section", "eta_figures", "failure_facts", "failure_section", "field", "observations_section",
    "parse_iso", "section", "signal_keys", "signals_section", "suggestion", "task_estimate_text",
]

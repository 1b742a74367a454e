"""A heartbeat's bookkeeping: what its report brings, the node's own heartbeat figures, its declared
wait, and its clocks standing still under a park. The judgement itself is pure
(``store/judges/novelty.py``, ``store/judges/concepts.py``); this module keeps its memory in the ledger and
bounds the work done inside the write transaction.

* **What the step did and learned** (``observation``, ``action``, ``result``). Judged *before* the
  write transaction (:func:`judge_report`): the attempt's last ``novelty.RECENT`` observations
  are read (their stored concepts; the text of the newest ``RECENT_TEXT``), the report is
  normalised and compared (pure work capped by ``novelty.MAX_LINES`` / ``MAX_LINE_CHARS`` /
  ``MAX_COMPARISONS`` / ``CONCEPT_LINES``), and the digests it depends on are looked up in
  ``seen_line`` (lines, concept words, concept sets and their one-word edits, all attempt-scoped,
  so a retry starts afresh). Only the lease holder writes a node's heartbeats, so this read is
  current; inside the transaction only the new digests are inserted (a conflict is skipped) with
  one ``observation`` row (:func:`record_observation`).
* **Heartbeat figures** (node columns, reset by every claim — :data:`ATTEMPT_RESET`):
  ``beat_interval_s``, a log-scale moving average of the gaps between this attempt's heartbeats;
  ``beat_gaps`` (the last ``GAPS_KEPT``) and ``beat_long_s``, the node's *usual long gap* — a high
  rank of those gaps, or the decayed longest gap seen, whichever is longer — the rhythm
  ``heartbeat_stale`` judges by (bursts then long work are one rhythm); ``units_at``, when
  ``units_done`` last changed; ``progress_at``, when the attempt last showed progress
  (``units_done`` rose, or a number in its report moved toward its stated total).
* **Declared wait** (``waiting_on``, ``wait_s``): the same wait declared again keeps its start, so
  polling cannot push its deadline; a heartbeat that brings new information without declaring a
  wait ends it (``wait_on`` cleared, ``wait_until`` = the end); the window stays on the node so the
  wait's own observations never count as a loop.
* **Parks** (:func:`pause_clocks`, called when a park is resumed): the time a running node spent
  under its task's park does not count against its lease, its silence or its declared wait —
  each moves on by the parked part of it, and ``paused_s`` adds it up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Collection, Mapping, NamedTuple

import peewee as pw

from store.judges import novelty
from store.storage import sql
from store.errors import InvalidValue
from store.storage.tables import NodeRecord
from store.storage.core import LedgerCore
from store.storage.events import NodeHeartbeat, WaitJson
from store import views

OBSERVATION_TEXT_CAP = 4096  # characters of an observation (and of an action, a result) kept for display
DEFAULT_WAIT_S = 600.0  # a wait declared without wait_s
WAIT_ON_CAP = 200
BEAT_ALPHA = 0.25  # weight of the newest gap in the heartbeat interval's moving average
BEAT_CLIP = math.log(4.0)
GAPS_KEPT = 16  # heartbeat gaps a node keeps for its rhythm
GAPS_LEARNED = 8  # gaps before the rhythm says anything (before: only the lease speaks)
LONG_DECAY = 0.97  # per heartbeat: a long gap seen long ago weighs less and less
FLAG_PROGRESS = views.FLAG_PROGRESS  # the observation flags: store/views.py
FLAG_PARKED = views.FLAG_PARKED
FLAG_RESULT = views.FLAG_RESULT
FLAG_UNITS_ONLY = views.FLAG_UNITS_ONLY
FLAG_FAILED = views.FLAG_FAILED

ATTEMPT_RESET: Mapping[str, object] = {"beat_interval_s": None, "units_at": None, "wait_on": None, "wait_since": None,
                                    "wait_until": None, "progress_at": None, "beat_gaps": None, "beat_long_s": None,
                                    "paused_s": None, "healthy_at": None}


def check_wait(waiting_on: str | None, wait_s: float | None) -> tuple[str, float] | None:
    """A declared wait as (what, seconds), or None. Each value was checked at the API boundary
    (store/checked.py: ``waiting_on`` one line, ``wait_s`` in (0, 7 days]); what is left
    here is the pair: ``wait_s`` alone says nothing about what is awaited."""
    if waiting_on is None:
        if wait_s is not None:
            raise InvalidValue("heartbeat: wait_s needs waiting_on: say what the node is waiting on", "wait_s")
        return None
    what = " ".join(waiting_on.split())[:WAIT_ON_CAP]
    return what, DEFAULT_WAIT_S if wait_s is None else float(wait_s)


@dataclass(frozen=True)
class Report:
    """What one heartbeat said (any of the three may be None) and how it was judged."""

    observation: str | None
    action: str | None
    result: str | None
    prepared: novelty.Prepared
    verdict: novelty.Verdict
    # a rising units_done beside this report counts as progress: the node reports by its counter (its
    # reports brought nothing new since its first), or this report measured something the last ones
    # did not (a loss, a count) — not the same step getting the same result again
    units_count: bool = True


def _cap(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= OBSERVATION_TEXT_CAP else text[:OBSERVATION_TEXT_CAP] + "…[truncated]"


def judge_report(core: LedgerCore, task_id: str, key: str, attempt: int, observation: str | None,
                 action: str | None, result: str | None, units_done: float | None = None) -> Report | None:
    """Outside the write transaction: the report compared with the attempt's last observations and
    judged against its memory (module doc). None when the heartbeat reports nothing."""
    if observation is None and action is None and result is None:
        return None
    node_id = sql.scalar(core.db, "SELECT id FROM node WHERE task_id = ? AND key = ?", [task_id, key])
    node_id = -1 if node_id is None else int(node_id)
    rows = sql.fetch_all(core.db, "SELECT text, action, result, digest, content, concepts, action_key, new_units "
                                  "FROM observation WHERE node_id = ? AND attempt = ? ORDER BY id DESC LIMIT ?",
                         [node_id, attempt, novelty.RECENT])
    recent = []
    cache: dict[str, str] = {}  # raw line → normalised: a growing log repeats its lines
    for i, (text, act, res, digest, content, stored, key_, _) in enumerate(reversed(rows)):
        newest = i >= len(rows) - novelty.RECENT_TEXT
        said = text if text or act is None else None
        parts = novelty.judged_parts(said, act, res)
        lines = novelty.judged_lines(parts, cache) if newest or not stored else ()
        recent.append(novelty.decode_concepts(digest, content, stored, lines, novelty.progress_of(said, act, res), key_))
    p = novelty.prepare(observation, attempt, recent, action=action, result=result, cache=cache)
    seen: set[str] = set()
    for chunk in sql.chunks(p.lookups()):
        seen.update(r[0] for r in sql.fetch_all(
            core.db, f"SELECT digest FROM seen_line WHERE node_id = ? AND digest IN ({sql.marks(len(chunk))})",
            [node_id, *chunk]))
    v = novelty.judge(p, seen)
    counts = True
    if units_done is not None and rows and not v.new_units:
        # the attempt's first observation is the oldest row only while fewer than RECENT were read
        news = [r[7] for r in (rows[:-1] if len(rows) < novelty.RECENT else rows)]
        if any(n for n in news):
            mine = novelty.measures_of(observation, action, result)
            counts = all(c != v.content or novelty.measures_of(t if t or a is None else None, a, r) != mine
                         for t, a, r, _, c, *_ in rows)
    return Report(observation, action, result, p, v, counts)


def record_observation(core: LedgerCore, node_id: int, attempt: int, report: Report, flags: int, now: float) -> int:
    """Inside the write transaction: remember what the report added, store it (its one place: the
    heartbeat's event names it). Returns its id."""
    v, p = report.verdict, report.prepared
    for chunk in sql.chunks(list(v.remember), 400):
        values = ", ".join(["(?, ?)"] * len(chunk))
        sql.execute(core.db, f"INSERT INTO seen_line (node_id, digest) VALUES {values} ON CONFLICT DO NOTHING",
                    [x for h in chunk for x in (node_id, h)])
    cur = sql.execute(core.db, "INSERT INTO observation (node_id, at, attempt, text, digest, new_units, lines, action, "
                               "result, action_key, content, flags, concepts) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                      [node_id, now, attempt, _cap(report.observation) or "", v.digest, v.new_units, p.examined,
                       _cap(report.action), _cap(report.result), p.action, v.content, flags,
                       novelty.encode_concepts(p)])
    return int(cur.fetchone()[0])


# ---------------------------------------------------------------------- heartbeat figures
def _gaps(text: str | None) -> list[float]:
    out = []
    for x in (text or "").split():
        try:
            out.append(float(x))
        except ValueError:
            continue
    return out


def long_gap(gaps: list[float], previous: float | None) -> float | None:
    """The node's usual long gap: a high rank of its recent gaps (the second or third longest), or
    the longest gap seen, decayed by ``LONG_DECAY`` a heartbeat — whichever is longer. One long
    outlier raises it for a while (``heartbeat_stale`` comes later, never falsely); a rhythm of
    bursts then long work keeps it at the work's length. None before ``GAPS_LEARNED`` gaps."""
    if len(gaps) < GAPS_LEARNED:
        return None
    ranked = sorted(gaps)
    high = ranked[len(ranked) - 1 - len(ranked) // 8]
    # the longest gap, decayed per heartbeat, carried from one heartbeat to the next (the rank alone
    # forgets a rhythm whose long gaps are fewer than its bursts' beats: 5 quick beats, 1 long one)
    carried = max(gaps) if previous is None else max(previous * LONG_DECAY, gaps[-1])
    return max(high, carried)


def observation_flags(beat: Mapping[str, object], parked: bool, report: Report | None) -> int:
    """The flags an observation row carries (``FLAG_*``), from the node columns the heartbeat moved."""
    progress = "progress_at" in beat
    text = report is not None and report.prepared.text_progress
    counted = text or report is None or report.units_count
    return ((FLAG_PROGRESS if progress else 0) | (FLAG_PARKED if parked else 0)
            | (FLAG_RESULT if report is not None and report.prepared.result else 0)
            | (FLAG_UNITS_ONLY if progress and not counted else 0)
            | (FLAG_FAILED if report is not None and any(report.prepared.failed) else 0))


def beat_fields(row: NodeRecord, now: float, units_done: float | None, wait: tuple[str, float] | None,
                new_units: int | None, text_progress: bool = False) -> dict[str, object]:
    """The node columns this heartbeat moves (interval, rhythm, units_at, progress_at, wait), from
    the row before it."""
    out: dict[str, object] = {}
    prev = row.heartbeat_at
    interval = row.beat_interval_s
    # the gap from the claim to the first heartbeat says nothing about the agent's rhythm
    if prev is not None and now > prev and (interval is not None or prev > (row.claimed_at or prev)):
        gap = now - prev
        if interval is None or interval <= 0:
            out["beat_interval_s"] = gap
        else:
            step = max(-BEAT_CLIP, min(BEAT_CLIP, math.log(gap / interval)))
            out["beat_interval_s"] = interval * math.exp(BEAT_ALPHA * step)
        gaps = (_gaps(row.beat_gaps) + [gap])[-GAPS_KEPT:]
        out["beat_gaps"] = " ".join(f"{g:.2f}" for g in gaps)
        out["beat_long_s"] = long_gap(gaps, row.beat_long_s)
    this_attempt = row.units_at is not None
    before = row.units_done if this_attempt else None
    if units_done is not None and (not this_attempt or before is None or float(units_done) != float(before)):
        out["units_at"] = now
    rose = units_done is not None and float(units_done) > float(before if before is not None else 0.0)
    if rose or text_progress:
        out["progress_at"] = now
    current = row.wait_on if (row.wait_since or 0) >= (row.claimed_at or 0) else None
    if wait is not None:
        what, seconds = wait
        since = row.wait_since if current == what and row.wait_since is not None else now
        until = since + seconds
        if current == what and row.wait_until is not None:
            until = max(until, row.wait_until)  # a park moved it on: the paused time stays off the clock
        out.update(wait_on=what, wait_since=since, wait_until=until)
    elif current and new_units:
        out.update(wait_on=None, wait_until=now)  # new information ends the wait; its window stays
    return out


def beat_payload(row: NodeRecord, fields: Mapping[str, object], *, lease_until: float, units_done: float | None,
                 units_total: float | None, tokens: int | None, report: Report | None) -> NodeHeartbeat:
    """The heartbeat's event: the figures it moved, the node's own heartbeat figures after it (so a
    reader — the console's ``TaskAnalysis`` — follows the node without reading it again) and what
    its judgement left out; what its report brought is its observation row (``record_observation``),
    which the event names."""
    def after(col: str) -> float | None:
        v = fields.get(col, getattr(row, col))
        return float(v) if isinstance(v, (int, float)) else None

    wait_on = fields.get("wait_on", row.wait_on)
    wait = None
    if "wait_on" in fields or wait_on:
        wait = WaitJson(on=None if wait_on is None else str(wait_on), since=after("wait_since"), until=after("wait_until"))
    paraphrases = unexamined = cut = None
    if report is not None:
        v, p = report.verdict, report.prepared
        paraphrases = v.paraphrases or None
        if novelty.left_out(p):
            unexamined, cut = p.dropped_lines, p.cut_lines
    return NodeHeartbeat(lease_until=lease_until, units_done=units_done, units_total=units_total, tokens=tokens,
                         beat_interval_s=after("beat_interval_s"), units_at=after("units_at"),
                         progress_at=after("progress_at"), beat_long_s=after("beat_long_s"), wait=wait,
                         paraphrases=paraphrases, unexamined_lines=unexamined, cut_lines=cut)


# ---------------------------------------------------------------------- parks
class _Clocks(NamedTuple):
    """A running node's clocks, as :func:`pause_clocks` moves them on."""

    id: int
    key: str
    lease_until: float
    heartbeat_at: float | None
    claimed_at: float | None
    wait_on: str | None
    wait_since: float | None
    wait_until: float | None
    paused_s: float | None


def pause_clocks(db: pw.Database, task_id: str, parked_at: float | None, now: float,
                 keys: Collection[str] | None = None) -> None:
    """A park of the task since ``parked_at`` ends now: for each node still running under it,
    the parked part of its lease, its silence and its declared wait does not count. Each clock
    moves on by the time it ran under the park: ``lease_until`` and ``heartbeat_at`` by ``now -
    max(parked_at, heartbeat_at)`` (a heartbeat during the park counts as one at the resume),
    a wait that had not ended by ``now - max(parked_at, wait_since)``; ``paused_s`` adds the part
    of the park this attempt lived through. Inside the resume's write transaction."""
    if parked_at is None or now <= parked_at:
        return
    for r in sql.fetch_rows(db, _Clocks, f"SELECT {sql.columns(_Clocks)} FROM node WHERE task_id = ? "
                                         "AND status = 'running' AND lease_until IS NOT NULL", [task_id]):
        if keys is not None and r.key not in keys:
            continue
        start = max(parked_at, r.claimed_at or parked_at)
        if r.lease_until <= parked_at or start >= now:
            continue  # its lease had ended before the park: not this park's doing
        last = max(start, r.heartbeat_at or start)
        fields: dict[str, object] = {"lease_until": r.lease_until + (now - last),
                                  "paused_s": (r.paused_s or 0.0) + now - start}
        if r.heartbeat_at is not None:
            fields["heartbeat_at"] = r.heartbeat_at + (now - last)
        if r.wait_on and r.wait_until is not None and r.wait_until > start:
            fields["wait_until"] = r.wait_until + (now - max(start, r.wait_since or start))
        sets = ", ".join(f"{k} = ?" for k in fields)
        sql.execute(db, f"UPDATE node SET {sets} WHERE id = ?", [*fields.values(), r.id])

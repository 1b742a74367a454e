"""A heartbeat's bookkeeping: what its observation brings, the node's own heartbeat figures and
its declared wait. The judgement itself is pure (``store/novelty.py``); this module keeps its
memory in the ledger and bounds the work done inside the write transaction.

* **Observation.** Normalised and compared with the attempt's last observations *before* the write
  transaction (:func:`prepare_observation`: two small reads, pure work capped by
  ``novelty.MAX_LINES`` / ``MAX_LINE_CHARS`` / ``MAX_COMPARISONS``); inside it only the lookup and
  insert of at most ``MAX_LINES`` line digests in ``seen_line`` (attempt-scoped digests: a retry
  starts afresh without a schema change) and one ``observation`` row (:func:`record_observation`).
* **Heartbeat figures** (node columns, reset by every claim — :data:`ATTEMPT_RESET`):
  ``beat_interval_s``, a log-scale moving average of the gaps between this attempt's heartbeats
  (each gap clipped to ¼-4× the average, so one silence does not redefine "usual");
  ``units_at``, when ``units_done`` last changed.
* **Declared wait** (``waiting_on``, ``wait_s``): the same wait declared again keeps its start, so
  polling cannot push its deadline; a heartbeat that brings new information without declaring a
  wait ends it (``wait_on`` cleared, ``wait_until`` = the end); the window stays on the node so the
  wait's own observations never count as a loop.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from .. import novelty, sql
from ..errors import InvalidValue
from .core import LedgerCore

OBSERVATION_TEXT_CAP = 4096  # characters of an observation kept for display
DEFAULT_WAIT_S = 600.0  # a wait declared without wait_s
WAIT_ON_CAP = 200
BEAT_ALPHA = 0.25  # weight of the newest gap in the heartbeat interval's moving average
BEAT_CLIP = math.log(4.0)

ATTEMPT_RESET: Mapping[str, Any] = {"beat_interval_s": None, "units_at": None, "wait_on": None, "wait_since": None,
                                    "wait_until": None}


def check_wait(waiting_on: str | None, wait_s: float | None) -> tuple[str, float] | None:
    """A declared wait as (what, seconds), or None. Each value was checked at the API boundary
    (store/ledger/checked.py: ``waiting_on`` one line, ``wait_s`` in (0, 7 days]); what is left
    here is the pair: ``wait_s`` alone says nothing about what is awaited."""
    if waiting_on is None:
        if wait_s is not None:
            raise InvalidValue("heartbeat: wait_s needs waiting_on: say what the node is waiting on", "wait_s")
        return None
    what = " ".join(waiting_on.split())[:WAIT_ON_CAP]
    return what, DEFAULT_WAIT_S if wait_s is None else float(wait_s)


def prepare_observation(core: LedgerCore, task_id: str, key: str, attempt: int, text: str) -> novelty.Prepared:
    """Outside the write transaction: the observation normalised and compared with the attempt's
    last ``novelty.RECENT`` observations (their stored text; a stale read only weakens a near-copy
    judgement, never the fence)."""
    rows = sql.fetch_all(core.db, "SELECT o.text, o.digest FROM observation o JOIN node n ON n.id = o.node_id "
                                  "WHERE n.task_id = ? AND n.key = ? AND o.attempt = ? ORDER BY o.id DESC LIMIT ?",
                         [task_id, key, attempt, novelty.RECENT])
    recent = [novelty.Recent(digest, tuple(novelty.normalise_lines(t or ""))) for t, digest in reversed(rows)]
    return novelty.prepare(text, attempt, recent)


def record_observation(core: LedgerCore, node_id: int, attempt: int, text: str, p: novelty.Prepared,
                       now: float) -> tuple[int, str]:
    """Inside the write transaction: look up and remember the observation's line digests, store it.
    Returns (new lines, the observation's identity)."""
    seen: set[str] = set()
    for chunk in sql.chunks(p.line_digests):
        seen.update(r[0] for r in sql.fetch_all(
            core.db, f"SELECT digest FROM seen_line WHERE node_id = ? AND digest IN ({sql.marks(len(chunk))})",
            [node_id, *chunk]))
    fresh = [d for d in p.line_digests if d not in seen]
    for chunk in sql.chunks(fresh, 400):
        values = ", ".join(["(?, ?)"] * len(chunk))
        sql.execute(core.db, f"INSERT INTO seen_line (node_id, digest) VALUES {values}",
                    [x for h in chunk for x in (node_id, h)])
    new_units = len(p.new_digests(seen))
    digest = p.digest(new_units)
    capped = text if len(text) <= OBSERVATION_TEXT_CAP else text[:OBSERVATION_TEXT_CAP] + "…[truncated]"
    sql.execute(core.db, "INSERT INTO observation (node_id, at, attempt, text, digest, new_units, lines) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)", [node_id, now, attempt, capped, digest, new_units, len(p.lines)])
    return new_units, digest


def beat_fields(row: Mapping[str, Any], now: float, units_done: float | None, wait: tuple[str, float] | None,
                new_units: int | None) -> dict[str, Any]:
    """The node columns this heartbeat moves (interval, units_at, wait), from the row before it."""
    out: dict[str, Any] = {}
    prev = row["heartbeat_at"]
    interval = row["beat_interval_s"]
    # the gap from the claim to the first heartbeat says nothing about the agent's rhythm
    if prev is not None and now > prev and (interval is not None or prev > (row["claimed_at"] or prev)):
        gap = now - prev
        if interval is None or interval <= 0:
            out["beat_interval_s"] = gap
        else:
            step = max(-BEAT_CLIP, min(BEAT_CLIP, math.log(gap / interval)))
            out["beat_interval_s"] = interval * math.exp(BEAT_ALPHA * step)
    if units_done is not None and (row["units_at"] is None or row["units_done"] is None
                                   or float(units_done) != float(row["units_done"])):
        out["units_at"] = now
    current = row["wait_on"] if (row["wait_since"] or 0) >= (row["claimed_at"] or 0) else None
    if wait is not None:
        what, seconds = wait
        since = row["wait_since"] if current == what else now
        out.update(wait_on=what, wait_since=since, wait_until=since + seconds)
    elif current and new_units:
        out.update(wait_on=None, wait_until=now)  # new information ends the wait; its window stays
    return out


def beat_payload(row: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """What the heartbeat event carries of these figures, so a reader (the console's
    ``TaskAnalysis``) can follow the node without re-reading it."""
    merged = {k: fields.get(k, row[k]) for k in ATTEMPT_RESET}
    out: dict[str, Any] = {}
    if merged["beat_interval_s"] is not None:
        out["beat_interval_s"] = merged["beat_interval_s"]
    if merged["units_at"] is not None:
        out["units_at"] = merged["units_at"]
    if "wait_on" in fields or merged["wait_on"]:
        out["wait"] = {"on": merged["wait_on"], "since": merged["wait_since"], "until": merged["wait_until"]}
    return out

"""What a heartbeat tells the agent of its own stall (``Pulse.stall``): the loop alarms judged on the spot.

Right after a heartbeat's write, the node's attempt is judged exactly as the ``no_new_info`` and
``repeating`` signals judge it (``store/judges/loops.py``, the same thresholds, the same last
``observations_per_node`` observations, against the same norm of its kind: ``store/judges/norms.py``), so the agent hears it is looping or bringing nothing new on
the heartbeat that shows it, and can change course before a person must. One read: the node's last
observations (the index on (node, id)), after the heartbeat's write (on PostgreSQL still inside the
request's transaction, whose recorded result — the Pulse — a lost connection's re-run returns).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from store.estimation import evidence
from store.judges.loops import DEFAULT_THRESHOLDS, Activity, Obs, Signal, Thresholds
from store.judges.norms import loop_alarms, pick
from store.ledger.norms import read_norms
from store.storage.core import LedgerCore
from store.storage.tables import NodeRecord


def after_beat(row: NodeRecord, now: float, beat: Mapping[str, object]) -> NodeRecord:
    """The node row as the heartbeat's write left it, as far as the loop judgement reads it: the
    columns a heartbeat moves (``observe.beat_fields``) that the loop judgement reads."""
    def when(column: str, was: float | None) -> float | None:
        v = beat.get(column, was)
        return v if v is None or isinstance(v, (int, float)) else was

    wait_on = beat.get("wait_on", row.wait_on)
    return replace(row, heartbeat_at=now, progress_at=when("progress_at", row.progress_at),
                   wait_on=wait_on if wait_on is None or isinstance(wait_on, str) else row.wait_on,
                   wait_since=when("wait_since", row.wait_since), wait_until=when("wait_until", row.wait_until),
                   units_at=when("units_at", row.units_at), healthy_at=when("healthy_at", row.healthy_at))


def judge_stall(core: LedgerCore, row: NodeRecord, worker: str | None,
                thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Signal | None:
    """The node's loop alarm as of ``row`` (read after the heartbeat's write): ``repeating`` when it
    holds, else ``no_new_info``; None when neither does. Judged against its kind's norm
    (``judges/norms.loop_alarms``), which is read only when the defaults find a loop: a norm only
    ever widens the thresholds, so a heartbeat of a node that is not looping costs no more."""
    obs = [Obs.seen(o.seen, o.at, o.attempt)
           for o in evidence.last_observations(core, [row.id], thresholds.observations_per_node)]
    act = Activity.of(row)
    found = loop_alarms(row.task_id, row, act, obs, thresholds)
    if found:
        norm = pick(read_norms(core, [row.kind]), row.kind, worker)
        if norm is not None:
            found = loop_alarms(row.task_id, row, act, obs, thresholds, norm)
    return next((s for s in found if s.kind == "repeating"), found[0] if found else None)


__all__ = ["after_beat", "judge_stall"]

"""Is a running node looping or bringing nothing new? Judged on its attempt's observations (pure).

The same judgement raises the ``no_new_info`` and ``repeating`` signals (``store/reading/signals.py``,
which re-exports everything here) and answers the agent's heartbeat (``Pulse.stall``,
``store/ledger/stall.py``): it lives below both. Here too are what both speak: a :class:`Signal`, the
:class:`Thresholds` of every signal, an observation as the judgement reads it (:class:`Obs`) and a
running node's own figures (:class:`Activity`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from store.judges.novelty import Repeat, excerpt, judge_sequence
from store.judges.sequence import is_rhythm, retried_cycle, same_action_run, usual_news
from store.views import FLAG_FAILED, FLAG_PARKED, FLAG_PROGRESS, FLAG_UNITS_ONLY, NodeColumns, Observed


@dataclass(frozen=True)
class Signal:
    kind: str
    task_id: str
    node: str | None
    since: float | None
    severity: str  # info | warn | alarm
    evidence: str


@dataclass(frozen=True)
class Thresholds:
    """Every threshold in one place. Defaults and their reasons are in docs/estimates.md."""

    no_new_info_observations: int = 5  # the last 5 observations added nothing new → alarm
    no_new_info_results: int = 4  # … or the last 4 results (``heartbeat(result=)``) did → alarm
    repeating_observations: int = 3  # the same observation 3 times in a row → alarm
    cycle_max_period: int = 8  # a cycle over 2..8 observations …
    cycle_repeats: int = 2  # … whose newest 2 observations each repeat the one a period before → alarm
    cycle_repeats_long: int = 2  # … (the same from a period of 5: a cycle is caught at its period + 2)
    failure_recurs: int = 3  # the same failed result this many times since the last progress, other steps between → alarm
    heartbeat_stale_factor: float = 3.0  # silent for > 3 × the node's usual long gap …
    heartbeat_stale_min_s: float = 10.0  # … and at least 10 s …
    heartbeat_stale_lease_fraction: float = 0.5  # … or past the lease's renewal point (half of it), whichever is sooner …
    heartbeat_stale_floor: float = 2.0  # … but never within 2 × its usual long gap
    no_progress_min_s: float = 300.0  # units_done unchanged for 5 minutes …
    no_progress_heartbeats: int = 8  # … and for 8 of its own heartbeat intervals, while it beats → warn
    overdue_margin: float = 0.5  # running longer than 1.5 × its kind's P80 → warn
    overdue_min_samples: int = 5  # … when the kind has at least 5 durations
    overdue_estimate_factor: float = 2.0  # without history: longer than 2 × est_wall_s → info
    cost_density_factor: float = 5.0  # tokens per unit over 5 × the task's norm → warn
    cost_density_min_nodes: int = 5  # the norm needs 5 succeeded nodes that reported units
    cost_density_min_tokens: int = 5_000  # and the node has spent at least this much
    handoff_warn_s: float = 3600.0  # an open handoff is info, warn after an hour
    park_expiry_s: float = 48 * 3600.0  # a park without an until asks to be re-confirmed after 48 h
    observations_per_node: int = 24  # read bound per running node (a cycle of 8 needs 2 × 8 + 2)
    heartbeats_per_node: int = 12  # no longer read: a node's own heartbeat figures are its columns (kept for callers)


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Obs:
    at: float
    attempt: int
    digest: str
    new_units: int
    flags: int = 0  # store/views.py FLAG_*: progress (by units_done alone: not counted), parked, a result, failed
    content: str | None = None  # the result's identity (None: no result)
    result: str | None = None  # the result as evidence shows it (≤ 80 characters)
    action: str | None = None  # the action as evidence shows it (≤ 80 characters)
    action_key: str | None = None

    @classmethod
    def seen(cls, o: Observed, at: float, attempt: int) -> Obs:
        """An observation as every reader reads it (``storage/rows.observed``: a heartbeat event's,
        the evidence's)."""
        return cls(at, attempt, o.digest, o.new_units, o.flags, o.content if o.result is not None else None,
                   o.result, o.action, o.action_key)


@dataclass(frozen=True)
class Activity:
    """What a running node's own heartbeats say (its columns, kept by every heartbeat): its usual
    interval, since when its units_done has not moved, and its declared wait."""

    interval_s: float | None = None
    units_at: float | None = None  # when units_done last changed (None: not reported this attempt)
    wait_on: str | None = None  # None once the wait ended (its window stays, for the observations)
    wait_since: float | None = None
    wait_until: float | None = None
    progress_at: float | None = None  # when the attempt last showed progress
    long_s: float | None = None  # its usual long gap between heartbeats (None: not learned yet)
    paused_s: float = 0.0  # seconds this attempt spent under a park (its clocks stood still)

    @classmethod
    def of(cls, node: NodeColumns) -> "Activity":
        since = getattr(node, "wait_since", None)
        if since is not None and node.claimed_at is not None and since < node.claimed_at:
            since = None  # a wait of an earlier attempt
        return cls(getattr(node, "beat_interval_s", None), getattr(node, "units_at", None),
                   getattr(node, "wait_on", None) if since is not None else None, since,
                   getattr(node, "wait_until", None) if since is not None else None,
                   getattr(node, "progress_at", None), getattr(node, "beat_long_s", None),
                   float(getattr(node, "paused_s", None) or 0.0))


def one_line(text: str, cap: int = 60) -> str:
    """Agent text as evidence quotes it: one line, at most ``cap`` characters (``novelty.excerpt``)."""
    return excerpt(text, cap) or ""


def loop_start(node: NodeColumns, act: Activity, observations: Sequence[Obs]) -> float:
    """When the attempt last showed progress, as far as a loop is concerned. A number moving toward
    its total in what the node reports always counts. ``units_done`` rising counts when it is how
    the node reports (its reports have brought nothing new since its first: a status line beside a
    counter), or beside a report that measured something new (a loss, a count); beside the same
    step getting the same result again it does not (``FLAG_UNITS_ONLY``): a counter that
    rises while the same actions repeat with the same results does not hide the loop."""
    mine = [o for o in observations if o.attempt == node.attempt]
    if act.progress_at is None:
        return float("-inf")
    if not any(o.new_units > 0 for o in mine[1:]):
        return act.progress_at  # the counter is the report
    counted = [o.at for o in mine if o.flags & FLAG_PROGRESS and not o.flags & FLAG_UNITS_ONLY]
    return max(counted) if counted else float("-inf")


def loop_signals(task_id: str, node: NodeColumns, act: Activity, observations: Sequence[Obs], th: Thresholds) -> list[Signal]:
    """``no_new_info`` and ``repeating`` from the attempt's observations since it last showed
    progress (:func:`loop_start`) — none made during a declared wait or while the task was parked."""
    start = loop_start(node, act, observations)
    obs = [o for o in observations if o.attempt == node.attempt and o.at > start and not o.flags & FLAG_PARKED
           and not _in_wait(o.at, act)]
    out: list[Signal] = []
    i = len(obs)
    while i > 0 and obs[i - 1].new_units == 0:
        i -= 1
    stretch = obs[i:]
    results = [o for o in stretch if o.content is not None]
    need = th.no_new_info_results
    if stretch and need > 1 and usual_news(o for o in observations if o.attempt == node.attempt and o.at < stretch[0].at) >= 4:
        need -= 1  # a node whose steps usually bring several new lines: one result fewer says it
    if stretch and (len(stretch) >= th.no_new_info_observations > 0
                    or len(results) == len(stretch) >= need > 0):
        what = f"last {len(stretch)} observations added 0 new lines"
        if results:
            counts: dict[str, int] = {}
            for o in results:
                counts[o.content or ""] = counts.get(o.content or "", 0) + 1
            top = max(counts, key=lambda c: counts[c])
            shown = next(o.result for o in reversed(results) if o.content == top)
            actions = len({o.action_key for o in results})
            noun = "results" if len(results) == len(stretch) else f"observations ({len(results)} results)"
            what = (f"last {len(stretch)} {noun} added nothing new: {one_line(shown or '', 60)!r} "
                    f"{counts[top]} times, from {actions} different action{'s' if actions != 1 else ''}")
        out.append(Signal("no_new_info", task_id, node.key, stretch[0].at, "alarm", what))
    if not out:
        run = same_action_run(obs)
        before = [o for o in observations if o.attempt == node.attempt and run and o.at < run[0].at and not o.flags & FLAG_PARKED]
        out += _little_new(task_id, node.key, before, run, th)
    rep = judge_sequence([o.digest for o in obs], min_repeat=th.repeating_observations,
                         max_period=th.cycle_max_period, min_cycle_run=th.cycle_repeats,
                         long_cycle_run=th.cycle_repeats_long)
    if rep is not None and (any(o.new_units > 0 for o in obs[len(obs) - rep.run:]) or is_rhythm(obs, rep)):
        rep = None
    by_result = False
    if rep is None and len(obs) > 2:
        # the same results coming round again by other actions (the same pages re-read with new
        # tracking ids, two fixes that each bring back the other's error): a cycle of outcomes
        again = judge_sequence([o.content or o.digest for o in obs], min_repeat=len(obs) + 1,
                               max_period=th.cycle_max_period, min_cycle_run=th.cycle_repeats,
                               long_cycle_run=th.cycle_repeats_long)
        if again is not None and all(o.new_units == 0 for o in obs[len(obs) - max(again.run, again.period):]):
            rep, by_result = again, True
    if rep is None and th.failure_recurs > 0:
        rep, by_result = _recurring_failure(obs, th.failure_recurs), True
    retried = None
    if rep is None:
        retried = retried_cycle(obs, th.cycle_max_period, th.cycle_repeats)
        rep, by_result = retried, False
    if rep is not None:
        first = obs[rep.start]
        last = obs[-1]
        # a run that reaches back to the first observation read, when the read was cut at its
        # bound, began earlier: its count is a floor
        times = (f"at least {rep.observations}" if first is observations[0]
                 and len(observations) >= th.observations_per_node else str(rep.observations))
        if rep.period == 1 and last.action is not None and last.result is not None:
            what = (f"the same action got the same result {times} times in a row: "
                    f"{one_line(last.action, 40)!r} → {one_line(last.result, 40)!r}")
        elif rep.period == 1:
            what = f"the same observation {times} times in a row (digest {first.digest[:8]})"
        elif retried is not None:
            failed = next(o for o in reversed(obs) if o.flags & FLAG_FAILED)
            what = (f"the same {rep.period} steps again, {rep.observations} in a row, and the same failure: "
                    f"{one_line(failed.result or failed.digest[:8], 60)!r}")
        elif by_result and rep.period == 0:
            last = obs[-1] if obs[-1].flags & FLAG_FAILED else next(o for o in reversed(obs) if o.flags & FLAG_FAILED)
            between = len(obs) - rep.start - rep.run
            what = (f"the same failure came back {rep.run} times since the last progress, with {between} other "
                    f"step{'s' if between != 1 else ''} between: {one_line(last.result or last.digest[:8], 60)!r}")
        elif by_result:
            shown = "; ".join(one_line(o.result or o.digest[:8], 30) for o in obs[len(obs) - rep.period:])
            what = (f"the same {rep.period} results come round again, {rep.observations} in a row, from other "
                    f"actions: {shown}")
        else:
            cycle = ", ".join(o.digest[:8] for o in obs[len(obs) - rep.period:])
            what = f"a cycle of {rep.period} observations, {rep.observations} in a row (digests {cycle})"
        out.append(Signal("repeating", task_id, node.key, first.at, "alarm", what))
    return out


def _recurring_failure(obs: Sequence[Obs], times: int) -> Repeat | None:
    """The same failed result coming back at a steady beat — every 2nd to 4th step, ``times`` times
    in a row in the stretch — with other steps between (fixes tried that change nothing): a
    ``Repeat`` of period 0 whose ``run`` is the count and ``start`` the first occurrence. Only while
    the newest observation is one of them or follows the last one."""
    counts: dict[str, list[int]] = {}
    for i, o in enumerate(obs):
        if o.flags & FLAG_FAILED and o.content is not None:
            counts.setdefault(o.content, []).append(i)
    for where in counts.values():
        if len(where) < times or where[-1] < len(obs) - 2:
            continue
        last = where[-times:]
        gaps = {b - a for a, b in zip(last, last[1:])}
        if len(gaps) == 1 and 2 <= gaps.pop() <= 4:
            return Repeat(0, times, last[0])
    return None


def _little_new(task_id: str, key: str, before: Sequence[Obs], run: Sequence[Obs], th: Thresholds) -> list[Signal]:
    """``no_new_info`` against the node's own normal: the same action taken again and again
    (``no_new_info_results`` times after its first), each time bringing next to nothing new — at most
    a quarter of what this node's steps usually bring (the median of what its steps brought in
    this attempt before, when they brought something) — while its first showed what it does."""
    need = th.no_new_info_results
    if need <= 0 or len(run) < need + 1 or any(o.content is None for o in run):
        return []
    usual = usual_news([*before, *run[:1]])
    little = max(1, usual // 4)
    tail = run[-need:]
    if usual < 4 or any(o.new_units > little for o in tail):
        return []
    last = tail[-1]
    return [Signal("no_new_info", task_id, key, tail[0].at, "alarm",
                   f"the same action {len(tail)} times, each bringing at most {little} new "
                   f"line{'s' if little != 1 else ''} where this node's steps bring ~{usual}: "
                   f"{one_line(last.action or '', 30)!r} → {one_line(last.result or '', 40)!r}")]


def _in_wait(at: float, act: Activity) -> bool:
    return act.wait_since is not None and act.wait_until is not None and act.wait_since <= at <= act.wait_until

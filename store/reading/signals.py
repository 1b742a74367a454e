"""Stall signals and budget gates, each with the evidence that fired it.

Per running node: ``no_new_info``, ``repeating``, ``heartbeat_stale``, ``orphaned``,
``no_progress``, ``overdue``, ``cost_density``. Per task: ``budget_soft``, ``budget_hard``,
``budget_stop``, ``handoff_waiting`` (one per open handoff, on its node), ``park_expired`` (the
task, or a parked node, past its ``until``); and from ``store/reading/task_level.py``: ``wake`` (a park's
wake condition is met), ``budget_insufficient`` (a ready node's estimate does not fit in what is
left) and ``park_expired`` for a park without an until after ``Thresholds.park_expiry_s``. A
parked task raises no node signal at all (stall and timeout signals are suppressed while it
waits); parked and blocked nodes are not running, so they raise none either; resuming restores them because nothing is stored — every signal is
computed from the ledger as it is now.

The thresholds live in :class:`Thresholds` (defaults documented there and in
``docs/estimates.md``). The pure functions :func:`node_signals` and :func:`task_signals` take
plain values, so the one-shot readers below (``warden status`` / ``warden graph``) and the
incremental :class:`store.reading.analysis.TaskAnalysis` (the console) compute exactly the same thing.

What a heartbeat reports is judged when it is written (``store/judges/novelty.py``: results before
narratives, volatile tokens normalised, lines new within the attempt, near copies and paraphrases);
here the attempt's observations since it last showed progress are read for a stretch that added
nothing, a repeat or a cycle (period 2-8). Progress (``units_done`` rising, or a number moving
toward its stated total) ends any such stretch: progress is never a loop. A node's own heartbeat
rhythm, when its units last moved or progressed, its declared wait and its paused time are node
columns kept by each heartbeat, so no neighbour's chatter can hide them.

Reading is bounded: the last ``observations_per_node`` observations of every running node in one
statement (a ``UNION ALL`` of per-node ``ORDER BY id DESC LIMIT n`` arms on the (node, id) index).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from store.judges import budget as budget_mod
from store.reading import task_level
from store.clock import duration_text, iso
from store.estimation.estimates import DurationHistory, kind_p80
from store.views import Observed
from store.facade import Ledger
from store.jsontypes import JsonObject
from store.estimation import evidence
from store.storage.core import LedgerCore
from store.judges.novelty import Repeat, judge_sequence
from store.judges.sequence import is_rhythm, retried_cycle, same_action_run, usual_news
from store.views import GraphRow, GraphView, HandoffView, NodeView, TaskView

SEVERITIES = ("info", "warn", "alarm")
STALL_KINDS = ("no_new_info", "repeating", "heartbeat_stale", "orphaned", "no_progress", "overdue", "cost_density")
TASK_KINDS = ("budget_soft", "budget_hard", "budget_stop", "handoff_waiting", "park_expired", "wake",
              "budget_insufficient", "drift_suspected", "alignment_due", "failure_pattern")


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
    flags: int = 0  # store/ledger/observe.py FLAG_*: 1 progress (8: by units_done alone, not counted), 2 parked, 4 a result, 16 failed
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
    def of(cls, node: NodeView) -> "Activity":
        since = getattr(node, "wait_since", None)
        if since is not None and node.claimed_at is not None and since < node.claimed_at:
            since = None  # a wait of an earlier attempt
        return cls(getattr(node, "beat_interval_s", None), getattr(node, "units_at", None),
                   getattr(node, "wait_on", None) if since is not None else None, since,
                   getattr(node, "wait_until", None) if since is not None else None,
                   getattr(node, "progress_at", None), getattr(node, "beat_long_s", None),
                   float(getattr(node, "paused_s", None) or 0.0))


def wait_text(node: NodeView, now: float) -> str | None:
    """'waiting on ci (4m left)' / 'waiting on ci (2m over)' for a running node's declared wait."""
    activity = Activity.of(node)
    if node.status != "running" or not activity.wait_on or activity.wait_until is None:
        return None
    left = activity.wait_until - now
    what = _one_line(activity.wait_on, 40)
    return f"waiting on {what} ({dur(left)} left)" if left >= 0 else f"waiting on {what} ({dur(-left)} over)"


def wait_json(node: NodeView, now: float | None) -> JsonObject | None:
    """A running node's declared wait for the graph JSON (``None`` without one): what it waits on
    (agent text: show it escaped), since and until when, seconds left (negative: overdue) and the
    line the console shows ("waiting on ci (4m left)")."""
    activity = Activity.of(node)
    if node.status != "running" or not activity.wait_on or activity.wait_until is None:
        return None
    return {"on": activity.wait_on, "since": iso(activity.wait_since), "until": iso(activity.wait_until),
            "left_s": None if now is None else round(activity.wait_until - now, 1),
            "text": None if now is None else wait_text(node, now)}


# ---------------------------------------------------------------------- formatting
def dur(seconds: float) -> str:
    return duration_text(seconds)


def _units(v: float | None) -> str:
    if v is None:
        return "?"
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _plural(v: float | None, word: str) -> str:
    """"1 unit", "2 units", "0.5 units" (only exactly one is singular)."""
    return word if v is not None and float(v) == 1 else word + "s"


def _one_line(text: str, cap: int = 60) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= cap else t[: cap - 1] + "…"


# ---------------------------------------------------------------------- per node (pure)
def node_signals(
    task_id: str,
    node: NodeView,
    observations: Sequence[Obs],
    now: float,
    *,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    kind_p80: tuple[float | None, int] = (None, 0),
    token_norm: float | None = None,
    task_status: str = "active",
) -> list[Signal]:
    """Signals of one node (a NodeView). Observations oldest first; only those of the current
    attempt count, and none made during a declared wait. The node's own heartbeat figures come
    from its columns (:class:`Activity`). Nothing for a node that is not running or whose task is
    parked. No ``token_norm``: no ``cost_density`` (no norm yet, or the ledger's verdict stands in)."""
    th = thresholds
    if node.status != "running" or task_status == "parked":
        return []
    claimed = node.claimed_at
    act = Activity.of(node)
    out: list[Signal] = []
    key = node.key
    waiting = bool(act.wait_on) and act.wait_until is not None and now <= act.wait_until

    # orphaned / heartbeat_stale
    if node.lease_until is not None and node.lease_until <= now:
        out.append(Signal("orphaned", task_id, key, node.lease_until, "alarm",
                          f"lease of {_one_line(node.lease_owner or '?', 40)} expired {dur(now - node.lease_until)} ago; "
                          "nobody reclaimed it"))
    else:
        out.extend(stale_signal(task_id, node, act, now, th))
    out.extend(loop_signals(task_id, node, act, observations, th))

    # no_progress: units_done unchanged for long, in its own heartbeats' terms, while it beats
    if node.units_done is not None and act.units_at is not None and not waiting:
        interval = act.interval_s or 0.0
        limit = max(th.no_progress_min_s, th.no_progress_heartbeats * interval)
        still = now - act.units_at
        if still >= limit and node.heartbeat_at is not None and node.heartbeat_at > act.units_at:
            total = f"/{_units(node.units_total)}" if node.units_total else ""
            every = f", heartbeats every {dur(interval)}" if interval else ""
            out.append(Signal("no_progress", task_id, key, act.units_at, "warn",
                              f"units_done {_units(node.units_done)}{total} unchanged for {dur(still)}{every}"))

    # overdue: a declared wait past its deadline; past its kind's P80 by a margin
    if act.wait_on and act.wait_until is not None and act.wait_since is not None and now > act.wait_until:
        out.append(Signal("overdue", task_id, key, act.wait_until, "warn",
                          f"waiting on {_one_line(act.wait_on, 40)} for {dur(now - act.wait_since)}, past its "
                          f"declared {dur(act.wait_until - act.wait_since)}"))
    elif claimed is not None:
        elapsed = now - claimed - act.paused_s  # time under a park is not running time
        p80, samples = kind_p80
        if p80 is not None and samples >= th.overdue_min_samples:
            limit = (1 + th.overdue_margin) * p80
            if elapsed > limit:
                out.append(Signal("overdue", task_id, key, claimed + limit, "warn",
                                  f"running {dur(elapsed)}, past {1 + th.overdue_margin:g} × its kind's P80 "
                                  f"({dur(p80)}, {samples} samples)"))
        elif node.est_wall_s:
            limit = th.overdue_estimate_factor * node.est_wall_s
            if elapsed > limit:
                out.append(Signal("overdue", task_id, key, claimed + limit, "info",
                                  f"running {dur(elapsed)}, past {th.overdue_estimate_factor:g} × its estimate "
                                  f"({dur(node.est_wall_s)}; no history)"))

    # cost_density: tokens per unit of progress far above the task's norm
    if token_norm and node.tokens_used >= th.cost_density_min_tokens:
        units = float(node.units_done or 0)
        density = node.tokens_used / max(units, 1.0)
        if density > th.cost_density_factor * token_norm:
            out.append(Signal("cost_density", task_id, key, node.heartbeat_at, "warn",
                              f"{node.tokens_used:,} tokens for {_units(units)} {_plural(units, 'unit')}: {density / token_norm:.1f}× "
                              f"the task's norm ({token_norm:,.0f} tokens/unit)"))
    return out


def stale_signal(task_id: str, node: NodeView, act: Activity, now: float, th: Thresholds) -> list[Signal]:
    """``heartbeat_stale``: silent for clearly longer than the node's usual long gap (× the
    factor, at least ``heartbeat_stale_min_s``), or past the lease's renewal point (a fraction of
    the lease its last heartbeat took) when that comes sooner — yet never within 2 × its usual
    long gap (a node whose rhythm outruns its renewal point is judged by its rhythm): stale on the
    node's own clock. Before the node's rhythm is learned (``observe.GAPS_LEARNED`` gaps) only the
    lease speaks: nothing until it ends (then ``orphaned``)."""
    if node.heartbeat_at is None or node.lease_until is None or act.long_s is None:
        return []
    lease_s = max(0.0, node.lease_until - node.heartbeat_at)
    renewal = th.heartbeat_stale_lease_fraction * lease_s
    own = max(th.heartbeat_stale_factor * act.long_s, th.heartbeat_stale_min_s)
    # never below 2 × its usual long gap: a node whose own rhythm outruns its renewal point is read by it
    limit = max(min(own, renewal), th.heartbeat_stale_floor * act.long_s)
    silent = now - node.heartbeat_at
    if limit >= lease_s or silent <= limit:
        return []
    return [Signal("heartbeat_stale", task_id, node.key, node.heartbeat_at, "warn",
                   f"no heartbeat for {dur(silent)} (its long gaps ~{dur(act.long_s)}); "
                   f"lease ends in {dur(node.lease_until - now)}")]


def loop_start(node: NodeView, act: Activity, observations: Sequence[Obs]) -> float:
    """When the attempt last showed progress, as far as a loop is concerned. A number moving toward
    its total in what the node reports always counts. ``units_done`` rising counts when it is how
    the node reports (its reports have brought nothing new since its first: a status line beside a
    counter), or beside a report that measured something new (a loss, a count); beside the same
    step getting the same result again it does not (``observe.FLAG_UNITS_ONLY``): a counter that
    rises while the same actions repeat with the same results does not hide the loop."""
    mine = [o for o in observations if o.attempt == node.attempt]
    if act.progress_at is None:
        return float("-inf")
    if not any(o.new_units > 0 for o in mine[1:]):
        return act.progress_at  # the counter is the report
    counted = [o.at for o in mine if o.flags & 1 and not o.flags & 8]
    return max(counted) if counted else float("-inf")


def loop_signals(task_id: str, node: NodeView, act: Activity, observations: Sequence[Obs], th: Thresholds) -> list[Signal]:
    """``no_new_info`` and ``repeating`` from the attempt's observations since it last showed
    progress (:func:`loop_start`) — none made during a declared wait or while the task was parked."""
    start = loop_start(node, act, observations)
    obs = [o for o in observations if o.attempt == node.attempt and o.at > start and not o.flags & 2
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
            what = (f"last {len(stretch)} {noun} added nothing new: {_one_line(shown or '', 60)!r} "
                    f"{counts[top]} times, from {actions} different action{'s' if actions != 1 else ''}")
        out.append(Signal("no_new_info", task_id, node.key, stretch[0].at, "alarm", what))
    if not out:
        run = same_action_run(obs)
        before = [o for o in observations if o.attempt == node.attempt and run and o.at < run[0].at and not o.flags & 2]
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
        if rep.period == 1 and last.action is not None and last.result is not None:
            what = (f"the same action got the same result {rep.observations} times in a row: "
                    f"{_one_line(last.action, 40)!r} → {_one_line(last.result, 40)!r}")
        elif rep.period == 1:
            what = f"the same observation {rep.observations} times in a row (digest {first.digest[:8]})"
        elif retried is not None:
            failed = next(o for o in reversed(obs) if o.flags & 16)
            what = (f"the same {rep.period} steps again, {rep.observations} in a row, and the same failure: "
                    f"{_one_line(failed.result or failed.digest[:8], 60)!r}")
        elif by_result and rep.period == 0:
            last = obs[-1] if obs[-1].flags & 16 else next(o for o in reversed(obs) if o.flags & 16)
            between = len(obs) - rep.start - rep.run
            what = (f"the same failure came back {rep.run} times since the last progress, with {between} other "
                    f"step{'s' if between != 1 else ''} between: {_one_line(last.result or last.digest[:8], 60)!r}")
        elif by_result:
            shown = "; ".join(_one_line(o.result or o.digest[:8], 30) for o in obs[len(obs) - rep.period:])
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
        if o.flags & 16 and o.content is not None:
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
                   f"{_one_line(last.action or '', 30)!r} → {_one_line(last.result or '', 40)!r}")]


def _in_wait(at: float, act: Activity) -> bool:
    return act.wait_since is not None and act.wait_until is not None and act.wait_since <= at <= act.wait_until


# ---------------------------------------------------------------------- per task (pure)
def task_signals(task: TaskView, handoffs: Iterable[HandoffView], now: float, *, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                 parked_nodes: Iterable[GraphRow] = ()) -> list[Signal]:
    """Budget gates, open handoffs with their age, parks past their ``until``."""
    th = thresholds
    out: list[Signal] = []
    tid = task.task_id
    if task.status in ("active", "parked"):
        ratio_t = task.tokens_used / task.token_cap if task.token_cap else 0.0
        ratio_w = task.wall_used_s / task.wall_cap_s if task.wall_cap_s else 0.0
        ratio = budget_mod.usage_ratio(task.tokens_used, task.token_cap, task.wall_used_s, task.wall_cap_s)
        gate = budget_mod.gate(ratio, task.soft_ratio)
        if gate != "ok":
            sev = {"soft": "info", "hard": "warn", "stop": "alarm"}[gate]
            what = {"soft": "agents should economise", "hard": "only closing (always_admit) nodes are claimable",
                    "stop": "only closing (always_admit) nodes are claimable: deliver and stop"}[gate]
            if ratio_w >= ratio_t and task.wall_cap_s and task.started_at is not None:
                threshold = {"soft": task.soft_ratio, "hard": budget_mod.HARD_RATIO, "stop": budget_mod.STOP_RATIO}[gate]
                # when wall_used crossed the threshold (the clock stands still while the task waits)
                ref = task.paused_since if task.paused_since is not None else (task.finished_at or now)
                since = ref - (task.wall_used_s - threshold * task.wall_cap_s)
                used = f"wall clock {dur(task.wall_used_s)} of {dur(task.wall_cap_s)}"
            else:
                since = None
                used = f"tokens {task.tokens_used:,} of {task.token_cap:,}"
            out.append(Signal(f"budget_{gate}", tid, None, since, sev, f"{used} ({ratio * 100:.0f} %): {what}"))
    if task.status in ("active", "parked"):
        for h in handoffs:
            if h.status != "open":
                continue
            age = now - h.opened_at
            sev = "warn" if age > th.handoff_warn_s else "info"
            out.append(Signal("handoff_waiting", tid, h.node, h.opened_at, sev,
                              f"{h.kind} handoff {h.id} open for {dur(age)}: {_one_line(h.question)}"))
    if task.status == "parked" and task.park_until is not None and task.park_until <= now:
        out.append(Signal("park_expired", tid, None, task.park_until, "warn",
                          f"parked past its until ({iso(task.park_until)}, {dur(now - task.park_until)} ago): "
                          "re-confirm the park or resume"))
    for n in parked_nodes:
        if n.status == "parked" and n.park_until is not None and n.park_until <= now:
            out.append(Signal("park_expired", tid, n.key, n.park_until, "warn",
                              f"node parked past its until ({iso(n.park_until)}, {dur(now - n.park_until)} ago): "
                              "re-confirm the park or resume"))
    return out


def sort_signals(signals: Iterable[Signal]) -> list[Signal]:
    order = {"alarm": 0, "warn": 1, "info": 2}
    return sorted(signals, key=lambda s: (order.get(s.severity, 3), s.node or "", s.kind))


# ---------------------------------------------------------------------- reading the ledger (bounded)
def read_observations(ledger: LedgerCore, node_ids: Sequence[int], per_node: int) -> dict[int, list[Obs]]:
    """The last ``per_node`` observations of each node, oldest first (store/estimation/evidence.py)."""
    out: dict[int, list[Obs]] = {}
    for o in evidence.last_observations(ledger, node_ids, per_node):
        out.setdefault(o.node_id, []).append(Obs.seen(o.seen, o.at, o.attempt))
    return out


def token_norm(ledger: LedgerCore, task_id: str, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> float | None:
    """Tokens per unit over the task's succeeded nodes that reported units (None: too few)."""
    totals = evidence.unit_totals(ledger, task_id)
    if not totals.nodes or totals.nodes < thresholds.cost_density_min_nodes or not totals.units:
        return None
    return totals.tokens / totals.units


def density_acted(extra: Iterable[Signal]) -> set[str]:
    """The nodes whose cost density the ledger acted on (``task_level.extra``'s ``cost_density``): that
    signal stands in for the norm-based warning, so :func:`node_signals` gets no ``token_norm``."""
    return {s.node for s in extra if s.kind == "cost_density" and s.node is not None}


def kind_p80s(history: DurationHistory, nodes: Iterable[GraphRow]) -> dict[str, tuple[float | None, int]]:
    return {n.key: kind_p80(history, n.kind, n.est_wall_s, history.params) for n in nodes}


def _signals_for_nodes(ledger: Ledger, task: TaskView, running: Sequence[NodeView], parked: Sequence[NodeView],
                       now: float,
                       thresholds: Thresholds, history: DurationHistory | None) -> list[Signal]:
    # the task view counts its open handoffs: read them only when there are some
    handoffs = ledger.handoffs(task_id=task.task_id, status="open") if getattr(task, "handoffs_open", 1) else []
    out = task_signals(task, handoffs, now, thresholds=thresholds, parked_nodes=parked)
    extra = [Signal(*s) for s in task_level.extra(ledger, task, now, thresholds)]  # wake, budget_insufficient, …
    out += extra
    acted = density_acted(extra)
    if running and task.status != "parked":
        obs = read_observations(ledger, [n.id for n in running], thresholds.observations_per_node)
        if history is None:
            history = DurationHistory()
        history.load_kinds(ledger, {n.kind for n in running})
        p80s = kind_p80s(history, running)
        norm = None
        if any(n.tokens_used >= thresholds.cost_density_min_tokens for n in running):
            norm = token_norm(ledger, task.task_id, thresholds)
        for n in running:
            out.extend(node_signals(task.task_id, n, obs.get(n.id, ()), now, thresholds=thresholds,
                                    kind_p80=p80s[n.key], token_norm=None if n.key in acted else norm,
                                    task_status=task.status))
    return sort_signals(out)


def signals_for_graph(ledger: Ledger, graph: GraphView, *, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                      history: DurationHistory | None = None, now: float | None = None) -> list[Signal]:
    """Every signal of a task whose graph is already loaded (``warden graph``)."""
    now = ledger.now() if now is None else now
    running = [n for n in graph.nodes if n.status == "running"]
    parked = [n for n in graph.nodes if n.status == "parked" and n.park_until is not None]
    return _signals_for_nodes(ledger, graph.task, running, parked, now, thresholds, history)


def signals_for_task(ledger: Ledger, task: TaskView, *, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                     history: DurationHistory | None = None, now: float | None = None) -> list[Signal]:
    """Every signal of a task without loading its graph (``warden status``): only the running
    and parked nodes are read (index on task, status)."""
    now = ledger.now() if now is None else now
    running: list[NodeView] = []
    parked: list[NodeView] = []
    counts = task.counts or {}
    want = [s for s in ("running", "parked") if counts.get(s)]
    if want and task.status in ("active", "parked"):
        for n in ledger.nodes(task.task_id, evidence.keys_in(ledger, task.task_id, want)):
            (running if n.status == "running" else parked).append(n)
    return _signals_for_nodes(ledger, task, running, parked, now, thresholds, history)


def signals_for_node(ledger: Ledger, task: TaskView, node: NodeView, *, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                     history: DurationHistory | None = None, now: float | None = None) -> list[Signal]:
    """The signals of one node (a NodeView) — exactly those :func:`signals_for_graph` gives that
    node (``warden graph --json``), read without the rest of the graph: the node's own if it runs,
    and the task-level ones that name it (an open handoff on it, its park, its budget)."""
    now = ledger.now() if now is None else now
    running = [node] if node.status == "running" else []
    parked = [node] if node.status == "parked" and node.park_until is not None else []
    return [s for s in _signals_for_nodes(ledger, task, running, parked, now, thresholds, history)
            if s.node == node.key]

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

from typing import Callable, Iterable, Sequence

from store.judges import budget as budget_mod
from store.judges.loops import (DEFAULT_THRESHOLDS, Activity, Obs, Signal, Thresholds, one_line,
                                loop_signals as loop_signals)
from store.judges.norms import KindNorm, loop_alarms, pick
from store.ledger.norms import read_norms
from store.reading import task_level
from store.clock import duration_text as dur, iso
from store.estimation.estimates import DurationHistory, kind_p80
from store.facade import Ledger
from store.jsontypes import JsonObject
from store.estimation import evidence
from store.storage.core import LedgerCore
from store.views import GraphRow, GraphView, HandoffView, NodeView, TaskView

SEVERITIES = ("info", "warn", "alarm")
LOOP_KINDS = ("no_new_info", "repeating")  # the loop alarms, judged against the kind's norm
STALL_KINDS = ("no_new_info", "repeating", "heartbeat_stale", "orphaned", "no_progress", "overdue", "cost_density")
TASK_KINDS = ("budget_soft", "budget_hard", "budget_stop", "handoff_waiting", "park_expired", "wake",
              "budget_insufficient", "drift_suspected", "alignment_due", "failure_pattern")


def wait_text(node: NodeView, now: float) -> str | None:
    """'waiting on ci (4m left)' / 'waiting on ci (2m over)' for a running node's declared wait."""
    activity = Activity.of(node)
    if node.status != "running" or not activity.wait_on or activity.wait_until is None:
        return None
    left = activity.wait_until - now
    what = one_line(activity.wait_on, 40)
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
def _units(v: float | None) -> str:
    if v is None:
        return "?"
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _plural(v: float | None, word: str) -> str:
    """"1 unit", "2 units", "0.5 units" (only exactly one is singular)."""
    return word if v is not None and float(v) == 1 else word + "s"



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
    norm: KindNorm | None = None,
) -> list[Signal]:
    """Signals of one node (a NodeView). Observations oldest first; only those of the current
    attempt count, and none made during a declared wait. The node's own heartbeat figures come
    from its columns (:class:`Activity`). Nothing for a node that is not running or whose task is
    parked. No ``token_norm``: no ``cost_density`` (no norm yet, or the ledger's verdict stands in).
    ``norm``: what healthy nodes of its kind normally do (``store/judges/norms.py``; ``pick``)."""
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
                          f"lease of {one_line(node.lease_owner or '?', 40)} expired {dur(now - node.lease_until)} ago; "
                          "nobody reclaimed it"))
    else:
        out.extend(stale_signal(task_id, node, act, now, th))
    out.extend(loop_alarms(task_id, node, act, observations, th, norm))

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
                          f"waiting on {one_line(act.wait_on, 40)} for {dur(now - act.wait_since)}, past its "
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
                              f"{h.kind} handoff {h.id} open for {dur(age)}: {one_line(h.question)}"))
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


class KindNorms:
    """The norms of the running nodes' kinds, for one pass over their signals: read once, and only
    when a node raises a loop alarm by the defaults (a norm only ever widens them, so a pass where
    nothing loops reads none)."""

    def __init__(self, ledger: LedgerCore, kinds: Iterable[str]) -> None:
        self.ledger = ledger
        self.kinds = set(kinds)
        self._read: dict[tuple[str, str], KindNorm] | None = None

    def judged(self, node: NodeView, judge: Callable[[KindNorm | None], list[Signal]]) -> list[Signal]:
        """``judge`` (the node's signals, given its norm) by the defaults, and again against the
        node's norm when the defaults find a loop and its kind has one."""
        found = judge(None)
        if any(s.kind in LOOP_KINDS for s in found):
            if self._read is None:
                self._read = read_norms(self.ledger, self.kinds)
            own = pick(self._read, node.kind, node.lease_owner)
            if own is not None:
                found = judge(own)
        return found


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
        kinds = KindNorms(ledger, {n.kind for n in running})
        for n in running:
            out.extend(kinds.judged(n, lambda own: node_signals(
                task.task_id, n, obs.get(n.id, ()), now, thresholds=thresholds, kind_p80=p80s[n.key],
                token_norm=None if n.key in acted else norm, task_status=task.status, norm=own)))
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

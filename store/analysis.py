"""Incremental estimates and signals for one task: what the console's view model keeps.

``TaskAnalysis(ledger, task_id)`` reads the task once (its graph, the duration history of its
kinds, the last observations of its running nodes, its open handoffs, its recent
claims). After that the console feeds it what the change feed delivers:

```python
for event in delta.events:                      # journal events, id order
    changed = ledger.nodes(task_id, keys_named_by(event))   # the nodes the event names
    analysis.apply_event(event, changed)
eta = analysis.estimate()                          # GraphEstimate, same shape as estimates.estimate_graph
sigs = analysis.signals()                          # list[Signal], same as signals.signals_for_graph
```

``apply_event`` touches only the nodes it is given and the event's own payload (a heartbeat's
lease, units, tokens, its own interval and declared wait, observation digest and new-line count — a
heartbeat needs no re-read of its
node; a commit's duration): no query, except one for the open
handoffs after a ``handoff.*`` event and one for the task row after a task-level event when the
caller does not pass the task view. ``estimate()`` recomputes the distributions of the running
nodes (they depend on the clock) and of nodes whose kind history moved; the task figure is the
same seeded Monte Carlo as the one-shot path for up to ``mc_max_nodes`` unfinished nodes, and the
moment approximation from per-(kind, est_wall_s) counts kept up to date by ``apply_event`` above
that. ``signals()`` visits the running nodes, the open handoffs and the parked nodes only.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import replace
from typing import Any, Sequence

from .estimates import (
    DEFAULT_PARAMS,
    FINISHED,
    NO_ESTIMATE,
    DurationHistory,
    Estimate,
    EstimateParams,
    GraphEstimate,
    NodeDist,
    NodeState,
    approximate_estimate,
    base_dist,
    dist_estimate,
    kind_p80,
    node_dist,
    task_estimate,
)
from . import task_signals as round2
from .signals import (
    DEFAULT_THRESHOLDS,
    Obs,
    Signal,
    Thresholds,
    node_signals,
    read_observations,
    sort_signals,
    task_signals,
)

TASK_EVENT_PREFIXES = ("task.", "operator.", "graph.", "budget.")


def beat_columns(payload: Any) -> dict[str, Any]:
    """The node's own heartbeat figures a heartbeat event carries (``ledger/observe.beat_payload``)."""
    out: dict[str, Any] = {}
    for col in ("beat_interval_s", "units_at"):
        if payload.get(col) is not None:
            out[col] = float(payload[col])
    wait = payload.get("wait")
    if isinstance(wait, dict):
        out.update(wait_on=wait.get("on"), wait_since=wait.get("since"), wait_until=wait.get("until"))
    return out


class TaskAnalysis:
    def __init__(self, ledger: Any, task_id: str, *, history: DurationHistory | None = None,
                 params: EstimateParams = DEFAULT_PARAMS, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> None:
        from .models import Event

        self.ledger = ledger
        self.task_id = task_id
        self.params = params
        self.thresholds = thresholds
        graph = ledger.graph(task_id)
        self.task = graph.task
        self.nodes: dict[str, Any] = {n.key: n for n in graph.nodes}
        self._order: list[str] | None = None
        self.history = history if history is not None else DurationHistory(params.history_cap, params)
        self.history.load_kinds(ledger, {n.kind for n in graph.nodes})
        running = [n for n in graph.nodes if n.status == "running"]
        th = thresholds
        self.obs: dict[str, deque[Obs]] = {}
        by_id = read_observations(ledger, [n.id for n in running], th.observations_per_node)
        for n in running:
            self.obs[n.key] = deque(by_id.get(n.id, ()), maxlen=th.observations_per_node)
        self.handoffs = list(ledger.handoffs(task_id=task_id, status="open"))
        self.claims: dict[str, float] = {}
        q = (Event.select(Event.actor, Event.at).where((Event.task_id == task_id) & (Event.kind == "node.claimed"))
             .order_by(Event.id.desc()).limit(500))
        for actor, at in ledger.tuple_rows(q):
            if actor and actor not in self.claims:
                self.claims[actor] = at
        # aggregates kept up to date by apply_event
        self._live: Counter[tuple[str, float | None]] = Counter()  # unfinished, not running
        self._norm = [0.0, 0.0, 0]  # tokens, units, nodes over succeeded nodes that reported units
        self._running_set: set[str] = set()
        self._parked_set: set[str] = set()
        for n in graph.nodes:
            self._count(n, +1)
        self._est_cache: dict[str, tuple[Any, Estimate, NodeDist | None]] = {}
        self.cursor = ledger.last_event_id()

    # ------------------------------------------------------------------ bookkeeping
    def _count(self, n: Any, sign: int) -> None:
        for bucket, member in ((self._running_set, n.status == "running"),
                               (self._parked_set, n.status == "parked" and n.park_until is not None)):
            if member:
                (bucket.add if sign > 0 else bucket.discard)(n.key)
        if n.status not in FINISHED and n.status != "running":
            self._live[(n.kind, n.est_wall_s)] += sign
            if self._live[(n.kind, n.est_wall_s)] <= 0:
                del self._live[(n.kind, n.est_wall_s)]
        if n.status == "succeeded" and n.units_done and n.units_done > 0:
            self._norm[0] += sign * n.tokens_used
            self._norm[1] += sign * float(n.units_done)
            self._norm[2] += sign

    def _update_node(self, n: Any) -> None:
        old = self.nodes.get(n.key)
        if old is not None:
            self._count(old, -1)
        else:
            self._order = None
        self.nodes[n.key] = n
        self._count(n, +1)
        if n.status != "running":
            self.obs.pop(n.key, None)
        if n.kind not in self.history.loaded:
            self.history.load_kinds(self.ledger, [n.kind])

    def apply_event(self, event: Any, changed_nodes: Sequence[Any] = (), *, task: Any = None) -> set[str]:
        """Apply one journal event and the fresh views of the nodes it changed. Returns the keys
        whose estimate or signals may have moved (a task-level change returns every key)."""
        if event.task_id is not None and event.task_id != self.task_id:
            return set()
        fresh = event.id > self.cursor
        if not fresh and not changed_nodes:
            return set()
        self.cursor = max(self.cursor, event.id)
        changed: set[str] = set()
        for n in changed_nodes:
            self._update_node(n)
            changed.add(n.key)
        key = event.node
        p = event.payload or {}
        kind = event.kind
        if kind == "node.claimed":
            if event.actor:
                self.claims[event.actor] = event.at
            if key:
                self.obs[key] = deque(maxlen=self.thresholds.observations_per_node)
        elif kind == "node.heartbeat" and key in self.nodes:
            n = self.nodes[key]
            if not changed_nodes and fresh and n.status == "running" and (
                    n.heartbeat_at is None or n.heartbeat_at < event.at):
                # A heartbeat changes only these columns: no need to re-read the node. (A view read
                # after this heartbeat already shows it: its heartbeat_at is not older.)
                upd: dict[str, Any] = {"heartbeat_at": event.at}
                if "lease_until" in p:
                    upd["lease_until"] = p["lease_until"]
                for col in ("units_done", "units_total"):
                    if p.get(col) is not None:
                        upd[col] = float(p[col])
                if p.get("tokens"):
                    upd["tokens_used"] = n.tokens_used + int(p["tokens"])
                upd.update(beat_columns(p))
                self.nodes[key] = replace(n, **upd)
                changed.add(key)
            if "digest" in p:
                self.obs.setdefault(key, deque(maxlen=self.thresholds.observations_per_node)).append(
                    Obs(event.at, self.nodes[key].attempt, p["digest"], int(p.get("new_units") or 0)))
        elif kind == "node.committed" and key in self.nodes and fresh:
            # The memory learns the duration once per commit event: from the node's own row when
            # it still shows this commit (exact), else from the event (rounded to the millisecond).
            n = self.nodes[key]
            if n.status == "succeeded" and n.finished_at == event.at and n.claimed_at is not None:
                self.history.add(n.kind, n.finished_at - n.claimed_at, self.task_id, n.position)
            elif "wall_s" in p:
                self.history.add(n.kind, float(p["wall_s"]), self.task_id, n.position)
        elif kind.startswith("handoff."):
            self.handoffs = list(self.ledger.handoffs(task_id=self.task_id, status="open"))
        if task is not None:
            self.task = task
        elif key is None or kind.startswith(TASK_EVENT_PREFIXES):
            self.task = self.ledger.task(self.task_id)
        if key is None or kind.startswith(TASK_EVENT_PREFIXES):
            return set(self.nodes)
        if key:
            changed.add(key)
        return changed

    # ------------------------------------------------------------------ figures
    def _ordered(self) -> list[Any]:
        if self._order is None:
            self._order = [n.key for n in sorted(self.nodes.values(), key=lambda n: n.position)]
        return [self.nodes[k] for k in self._order]

    def _dist(self, n: Any, now: float) -> NodeDist | None:
        if n.status in FINISHED:
            return None
        time_bound = n.status == "running" or (n.next_retry_at is not None and n.next_retry_at > now)
        stamp = (n.version, n.status, n.units_done, n.units_total, n.est_wall_s, self.history.version(n.kind))
        hit = self._est_cache.get(n.key)
        if hit is not None and hit[0] == stamp and not time_bound:
            return hit[2]
        pooled = self.history.pooled_model() if not self.history.count(n.kind) and not n.est_wall_s else None
        d = node_dist(NodeState.of(n), now, self.history, self.params, pooled, task_id=self.task_id)
        if not time_bound:
            self._est_cache[n.key] = (stamp, dist_estimate(d) if d is not None else NO_ESTIMATE, d)
        return d

    def workers(self, now: float) -> int:
        window = now - self.params.worker_window_s
        who = {w for w, at in self.claims.items() if at >= window}
        who.update(self.nodes[k].lease_owner for k in self._running_set if self.nodes[k].lease_owner)
        return max(1, len(who))

    def estimate(self, now: float | None = None) -> GraphEstimate:
        now = self.ledger.now() if now is None else now
        nodes = self._ordered()
        dists: dict[str, NodeDist | None] = {}
        per_node: dict[str, Estimate] = {}
        unfinished = 0
        for n in nodes:
            if n.status in FINISHED:
                continue
            unfinished += 1
            d = self._dist(n, now)
            dists[n.key] = d
            hit = self._est_cache.get(n.key)
            per_node[n.key] = hit[1] if hit is not None and hit[2] is d else (dist_estimate(d) if d is not None else NO_ESTIMATE)
        if self.task.status not in ("active", "parked"):
            return GraphEstimate(NO_ESTIMATE, per_node)
        workers = self.workers(now)
        if unfinished <= self.params.mc_max_nodes:
            states = [NodeState.of(n) for n in nodes if n.status not in FINISHED]
            return GraphEstimate(task_estimate(states, dists, workers, self.params), per_node)
        return GraphEstimate(self._approx(now, workers), per_node)

    def task_estimate(self, now: float | None = None) -> Estimate:
        """Only the task's figure: O(kinds + running nodes) on a large graph."""
        now = self.ledger.now() if now is None else now
        if self.task.status not in ("active", "parked"):
            return NO_ESTIMATE
        unfinished = sum(self._live.values()) + len(self._running_set)
        if unfinished == 0:
            return Estimate(0.0, 0.0, 0, "none")
        if unfinished <= self.params.mc_max_nodes:
            return self.estimate(now).task
        return self._approx(now, self.workers(now))

    def _running(self) -> list[Any]:
        return [self.nodes[k] for k in sorted(self._running_set)]

    def _approx(self, now: float, workers: int) -> Estimate:
        pooled = None
        groups = []
        for (kind, est), count in self._live.items():
            if not self.history.count(kind) and not est and pooled is None:
                pooled = self.history.pooled_model()
            d = base_dist(kind, est, self.history, self.params, pooled, self.task_id)
            if d is None:
                return NO_ESTIMATE
            groups.append((d, count))
        running = []
        for n in self._running():
            d = self._dist(n, now)
            if d is None:
                return NO_ESTIMATE
            running.append(d)
        return approximate_estimate(groups, running, workers)

    def signals(self, now: float | None = None) -> list[Signal]:
        now = self.ledger.now() if now is None else now
        parked = [self.nodes[k] for k in sorted(self._parked_set)]
        out = task_signals(self.task, self.handoffs, now, thresholds=self.thresholds, parked_nodes=parked)
        out += [Signal(*s) for s in round2.extra(self.ledger, self.task, now, self.thresholds)]
        if self.task.status != "parked":
            tokens, units, count = self._norm
            norm = tokens / units if count >= self.thresholds.cost_density_min_nodes and units > 0 else None
            for n in self._running():
                p80 = kind_p80(self.history, n.kind, n.est_wall_s, self.params)
                out.extend(node_signals(self.task_id, n, list(self.obs.get(n.key, ())),
                                        now, thresholds=self.thresholds, kind_p80=p80, token_norm=norm,
                                        task_status=self.task.status))
        return sort_signals(out)

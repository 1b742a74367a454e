"""What a healthy node of a kind (and of an agent) normally does, learnt from finished history (pure).

Every node that finishes well (committed) folds its final attempt into its kind's **norm**, once
for its kind and agent and once for its kind over every agent (``store/ledger/norms.py`` keeps the
counters):

* how many observations it made and how many brought news — the kind's news rate;
* its **longest quiet stretch** (observations in a row that brought nothing new, counted as the
  loop alarms count them: a stretch ends at progress) and its **longest repeat** (the same
  observation in a row), each into a small histogram.

An operator who marks a loop alarm healthy (the ``healthy`` action) folds that alarm's stretch in as
a healthy one of its kind.

The norm moves the loop alarms (:func:`loop_alarms`): a kind whose healthy nodes go quiet longer
than the default threshold (a watcher that polls without declaring a wait, a crawler between finds)
gets ``no_new_info`` and ``repeating`` only past what ``QUANTILE`` of its healthy nodes did (at most
``MAX_WIDEN`` × the default; nothing before ``MIN_NODES`` nodes or marks). It never makes an alarm
come earlier than the defaults: healthy work of any style must not raise one. An alarm's evidence
says how far the node is from its kind's normal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from store.judges.loops import Activity, Obs, Signal, Thresholds, loop_signals, loop_start
from store.views import FLAG_PARKED, FLAG_PROGRESS, FLAG_UNITS_ONLY, NodeColumns

BUCKETS = 33  # stretches 0..31 counted one by one, the last bucket: 32 or more
MIN_NODES = 5  # a norm speaks from this many healthy nodes (or marks)
QUANTILE = 0.95
MAX_WIDEN = 4  # a kind's threshold is at most this many times the default
ANY_AGENT = ""  # the worker of the norm over every agent of a kind
WHATS = ("nodes", "observations", "news", "marked", "quiet", "repeat")


@dataclass(frozen=True)
class Folded:
    """What one finished attempt (or one marked stretch) adds to its kind's norm."""

    observations: int
    news: int
    quiet: int  # its longest stretch without news
    repeat: int  # its longest run of one observation


def fold(observations: Iterable[tuple[int, int, str]]) -> Folded:
    """Observations oldest first, as (new_units, flags, digest) → what they add to the kind's norm."""
    n = news = quiet = repeat = run = same = 0
    last: str | None = None
    for new_units, flags, digest in observations:
        if flags & FLAG_PARKED:
            continue
        n += 1
        if new_units > 0:
            news += 1
        if flags & FLAG_PROGRESS and not flags & FLAG_UNITS_ONLY or new_units > 0:
            run = 0
        else:
            run += 1
            quiet = max(quiet, run)
        same = same + 1 if digest == last else 1
        repeat = max(repeat, same)
        last = digest
    return Folded(n, news, quiet, repeat)


def bucket(length: int) -> int:
    return max(0, min(BUCKETS - 1, int(length)))


def _quantile(hist: Sequence[int], q: float) -> int:
    total = sum(hist)
    seen = 0
    for length, count in enumerate(hist):
        seen += count
        if total and seen >= q * total:
            return length
    return 0


@dataclass(frozen=True)
class KindNorm:
    """A kind's norm (for one agent, or ``ANY_AGENT``): module doc."""

    kind: str
    worker: str
    nodes: int = 0
    observations: int = 0
    news: int = 0
    marked: int = 0  # loop alarms an operator marked healthy
    quiet: tuple[int, ...] = (0,) * BUCKETS  # nodes (and marks) by their longest quiet stretch
    repeats: tuple[int, ...] = (0,) * BUCKETS  # … by their longest repeat

    @property
    def samples(self) -> int:
        return self.nodes + self.marked

    @property
    def news_rate(self) -> float | None:
        return self.news / self.observations if self.observations else None

    @property
    def usual_quiet(self) -> int:
        """The quiet stretch ``QUANTILE`` of its healthy nodes stayed within."""
        return _quantile(self.quiet, QUANTILE)

    @property
    def usual_repeat(self) -> int:
        return _quantile(self.repeats, QUANTILE)

    def rules(self, base: Thresholds) -> Thresholds:
        """``base`` widened to what this kind's healthy nodes do (module doc); never narrowed."""
        if self.samples < MIN_NODES:
            return base
        q, r = self.usual_quiet, self.usual_repeat

        def widen(default: int, usual: int) -> int:
            return default if default <= 0 else min(MAX_WIDEN * default, max(default, usual + 1))

        return replace(base, no_new_info_observations=widen(base.no_new_info_observations, q),
                       no_new_info_results=widen(base.no_new_info_results, q),
                       repeating_observations=widen(base.repeating_observations, r),
                       failure_recurs=widen(base.failure_recurs, r))

    def evidence(self, kind: str, node: Folded | None = None) -> str:
        """How far the node is from its kind's normal, for a loop alarm's evidence ('' before the norm
        speaks): the node's own figures since it last moved on (``node``), then its kind's."""
        if self.samples < MIN_NODES:
            return ""
        own = ""
        if node is not None and node.observations:
            own = (f"; this node: {node.quiet} without news, {node.repeat} alike in a row, news in "
                   f"{node.news / node.observations:.0%} of its {node.observations} observations since it last moved on")
        who = f"healthy {self.kind} nodes" + (f" of {self.worker}" if self.worker else "")
        usual = (f"go at most {self.usual_quiet} observations without news" if kind == "no_new_info"
                 else f"repeat one observation at most {self.usual_repeat} time{'s' if self.usual_repeat != 1 else ''} "
                      "in a row")
        rate = self.news_rate
        parts = ([f"news in {rate:.0%} of their observations"] if rate is not None else []) + [
            f"{self.nodes} finished"] + ([f"{self.marked} marked healthy"] if self.marked else [])
        return f"{own}; {who} {usual} ({', '.join(parts)})"


def pick(norms: dict[tuple[str, str], KindNorm], kind: str, worker: str | None) -> KindNorm | None:
    """The norm that speaks for a node: its kind by its agent once that has enough samples, else its
    kind over every agent (None: no finished node nor mark of its kind yet)."""
    own = norms.get((kind, worker or ANY_AGENT))
    if own is not None and own.samples >= MIN_NODES:
        return own
    return norms.get((kind, ANY_AGENT))


def loop_alarms(task_id: str, node: NodeColumns, act: Activity, observations: Sequence[Obs], th: Thresholds,
                norm: KindNorm | None = None) -> list[Signal]:
    """``no_new_info`` and ``repeating`` (``loops.loop_signals``) judged against the node's own normal:
    only its observations since an operator marked its alarm healthy, with the thresholds its kind's
    norm widened them to, each alarm's evidence saying how far the node is from that norm."""
    healthy = node.healthy_at
    if healthy is not None:
        observations = [o for o in observations if o.at > healthy]
    found = loop_signals(task_id, node, act, observations, th if norm is None else norm.rules(th))
    if norm is None or not found:
        return found
    since = loop_start(node, act, observations)
    mine = fold((o.new_units, o.flags, o.digest) for o in observations if o.attempt == node.attempt and o.at > since)
    return [replace(s, evidence=s.evidence + norm.evidence(s.kind, mine)) for s in found]


__all__ = ["ANY_AGENT", "BUCKETS", "Folded", "KindNorm", "MAX_WIDEN", "MIN_NODES", "QUANTILE", "WHATS", "bucket",
           "fold", "loop_alarms", "pick"]

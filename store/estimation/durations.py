"""The estimator's memory: each kind's durations in the order they finished, with the task each ran
in, the newest ``history_cap`` kept; the model of a kind (``store/estimation/kindmodel.py``) is built from them
on first use and rebuilt when they change.

A kind's history is the wall time of the **last attempt** of each succeeded node of that kind,
``finished_at - claimed_at``, across the whole ledger.
"""

from __future__ import annotations

import math
from bisect import bisect_right, insort
from collections import deque
from collections.abc import Hashable
from typing import Callable, Iterable, NamedTuple, Sequence, TypeVar

from store.storage import sql
from store.storage.core import LedgerCore
from store.estimation.kindmodel import (  # noqa: F401  (re-exported: the estimator's shared names)
    DEFAULT_PARAMS,
    LABELS,
    Z80,
    EstimateParams,
    KindModel,
    convolve,
    kind_model,
    lognormal_grid,
    lowest,
    prior_model,
    quantile,
)
from store.estimation.tasklevel import TaskLevel, task_level  # noqa: F401  (re-exported)


# ---------------------------------------------------------------------- the memory
_T = TypeVar("_T")


class _Run(NamedTuple):
    """A succeeded run of a kind, as the history loads it."""

    kind: str
    finished_at: float
    wall_s: float  # finished_at - claimed_at
    task_id: str | None
    position: int | None


class DurationHistory:
    """Per-kind durations in the order they finished, the newest ``cap`` kept, and their models.

    ``add`` is what the incremental analysis calls on a ``node.committed`` event; ``version(kind)``
    moves whenever a kind's samples change, and the kind's model is rebuilt on the next use.
    """

    def __init__(self, cap: int = DEFAULT_PARAMS.history_cap, params: EstimateParams = DEFAULT_PARAMS) -> None:
        self.cap = cap
        self.params = params
        self._recent: dict[str, deque[tuple[float, str | None, int | None]]] = {}
        self._sorted: dict[str, list[float]] = {}
        self._version: dict[str, int] = {}
        self._models: dict[str, KindModel] = {}
        self._pooled: KindModel | None = None
        self.cache: dict[Hashable, object] = {}  # derived figures keyed with the kind's version
        self.loaded: set[str] = set()
        self.all_loaded = False

    def add(self, kind: str, duration: float, task_id: str | None = None, position: int | None = None) -> None:
        """One more finished run of a kind (the task it ran in and its node position there, when known)."""
        d = max(0.0, float(duration))
        rec = self._recent.setdefault(kind, deque())
        srt = self._sorted.setdefault(kind, [])
        rec.append((d, task_id, position))
        insort(srt, d)
        if len(rec) > self.cap:
            old = rec.popleft()[0]
            del srt[bisect_right(srt, old) - 1]
        self._version[kind] = self._version.get(kind, 0) + 1
        self._models.pop(kind, None)
        self._pooled = None

    def extend_oldest_first(self, kind: str, durations: Iterable[float | tuple[float, str | None, int | None]]) -> None:
        for d in durations:
            if isinstance(d, tuple):
                self.add(kind, *d)
            else:
                self.add(kind, d)

    def samples(self, kind: str) -> list[float]:
        """Sorted durations of a kind."""
        return self._sorted.get(kind, [])

    def in_order(self, kind: str) -> list[float]:
        """Durations of a kind, oldest first."""
        return [r[0] for r in self._recent.get(kind, ())]

    def remember(self, key: Hashable, make: Callable[[], _T], kind: type[_T]) -> _T:
        """A derived figure of type ``kind``, cached under ``key`` (which should include the kind's
        version and say what the figure is: the cache holds figures of several types)."""
        got = self.cache.get(key)
        if isinstance(got, kind):
            return got
        if len(self.cache) > 4096:
            self.cache.clear()
        made = make()
        self.cache[key] = made
        return made

    def own(self, kind: str, task_id: str | None, model: KindModel | None = None) -> list[float]:
        """Durations of a kind that ran in this task, oldest first (as if at the kind's centre
        position, when its durations follow the position in ``model``, the kind's by default)."""
        if task_id is None:
            return []
        runs = self._own_runs(kind, task_id)
        m = self.model(kind) if model is None and runs else model
        if m is None or not m.pos_slope:
            return [d for d, _ in runs]
        return [d * math.exp(-m.pos_slope * (p - m.pos_centre)) if p is not None else d for d, p in runs]

    def _own_runs(self, kind: str, task_id: str) -> list[tuple[float, int | None]]:
        return self.remember(("own", kind, self.version(kind), task_id),
                             lambda: [(d, p) for d, t, p in self._recent.get(kind, ()) if t == task_id], list)

    def model_for(self, kind: str, task_id: str | None) -> KindModel:
        """The kind's model as a task with its own finished runs of it should see it: from the
        kind's runs in *other* tasks, when there are ``task_others_min`` of them (the task's own
        runs then speak through its speed, ``tasklevel.task_level``, not as the kind's newest
        samples: a task 3× slower than its history would otherwise read as the kind drifting);
        else the kind's whole history."""
        if task_id is None or not self._own_runs(kind, task_id):
            return self.model(kind)

        def make() -> KindModel:
            rec = [r for r in self._recent.get(kind, ()) if r[1] != task_id]
            if len(rec) < self.params.task_others_min:
                return self.model(kind)
            return kind_model(kind, [r[0] for r in rec], self.params, [r[1] for r in rec], [r[2] for r in rec])

        return self.remember(("without", kind, self.version(kind), task_id), make, KindModel)

    def level(self, kind: str, task_id: str | None, prior_mu: float, prior_var: float,
              running: Sequence[float] = ()) -> TaskLevel:
        """Where this task's runs of the kind lie (``tasklevel.task_level``; ``running``: the
        elapsed times of its running nodes of the kind) against the kind's runs in other tasks; no
        own runs (or too few runs elsewhere to judge them by): the prior. Cached per version and
        running set: a task's running nodes of a kind share one (its hundreds of running rows in
        ``estimate_task`` would each re-read every other's censored run)."""
        running = tuple(running)

        def make() -> TaskLevel:
            model = self.model_for(kind, task_id)
            own = self.own(kind, task_id, model) if model.samples < self.count(kind) else []  # (else: the whole history)
            return task_level(model, own, prior_mu, prior_var, self.params, running)

        return self.remember(("level", kind, self.version(kind), task_id, prior_mu, prior_var, running), make,
                             TaskLevel)

    def count(self, kind: str) -> int:
        return len(self._sorted.get(kind, ()))

    def version(self, kind: str) -> int:
        return self._version.get(kind, 0)

    def kinds(self) -> list[str]:
        return [k for k, v in self._sorted.items() if v]

    def pooled(self) -> list[float]:
        out: list[float] = []
        for v in self._sorted.values():
            out.extend(v)
        out.sort()
        return out

    def model(self, kind: str) -> KindModel:
        got = self._models.get(kind)
        if got is None:
            rec = self._recent.get(kind, ())
            got = self._models[kind] = kind_model(kind, [r[0] for r in rec], self.params, [r[1] for r in rec],
                                                  [r[2] for r in rec])
        return got

    def pooled_model(self) -> KindModel | None:
        """Every kind's durations as one (for a kind with neither history nor est_wall_s): label none."""
        if self._pooled is None:
            pooled = self.pooled()
            if not pooled:
                return None
            m = kind_model("all kinds", pooled, self.params)
            self._pooled = KindModel(m.kind, 0, m.n_eff, m.mean, m.sigma, m.sample_var, m.offsets, 0, 0, 0.0, "none")
        return self._pooled

    @classmethod
    def load(cls, ledger: LedgerCore, kinds: Iterable[str] | None = None, cap: int = DEFAULT_PARAMS.history_cap) -> "DurationHistory":
        """The newest ``cap`` durations of each kind (all kinds when None)."""
        h = cls(cap)
        h.load_kinds(ledger, kinds)
        return h

    def load_kinds(self, ledger: LedgerCore, kinds: Iterable[str] | None) -> None:
        """The newest ``cap`` durations of these kinds (every kind when None) that are not loaded yet."""
        if kinds is None:
            if self.all_loaded:
                return
            kinds = [r[0] for r in sql.fetch_all(ledger.db, "SELECT DISTINCT kind FROM node")]
            self.all_loaded = True
        todo = sorted(set(kinds) - self.loaded)
        if not todo:
            return
        cols = (f"SELECT {sql.columns(_Run, computed={'wall_s': 'finished_at - claimed_at'})} FROM node "
                "WHERE status = 'succeeded' AND claimed_at IS NOT NULL AND finished_at IS NOT NULL AND ")
        got: dict[str, list[_Run]] = {k: [] for k in todo}
        # One walk down the newest rows for all kinds; a kind still short of `cap` when the walk
        # was cut by its limit gets its own walk.
        limit = self.cap * len(todo)
        rows = sql.fetch_rows(ledger.db, _Run, cols + f"kind IN ({sql.marks(len(todo))}) ORDER BY id DESC LIMIT ?",
                              [*todo, limit])
        for r in rows:
            if len(got[r.kind]) < self.cap:
                got[r.kind].append(r)
        if len(rows) == limit:
            for kind in todo:
                if len(got[kind]) < self.cap:
                    got[kind] = sql.fetch_rows(ledger.db, _Run, cols + "kind = ? ORDER BY id DESC LIMIT ?",
                                               [kind, self.cap])
        for kind in todo:
            ds = sorted(got[kind], key=lambda r: r.finished_at)  # the order they finished in
            self._bulk(kind, [(max(0.0, float(r.wall_s)), r.task_id, r.position) for r in ds])
            self.loaded.add(kind)

    def _bulk(self, kind: str, rows: list[tuple[float, str | None, int | None]]) -> None:
        """Many runs at once, oldest first (what ``add`` does one by one)."""
        rec = self._recent.setdefault(kind, deque())
        rec.extend(rows)
        while len(rec) > self.cap:
            rec.popleft()
        self._sorted[kind] = sorted(r[0] for r in rec)
        self._version[kind] = self._version.get(kind, 0) + 1
        self._models.pop(kind, None)
        self._pooled = None

"""Instruments for the shipped console app, kept on the test side (the app carries no test hooks).

:class:`ConsoleProbes` wraps one app instance's feed hub (``app.hub.apply``, a plain method of a
plain object: the wrapper is an attribute of that instance only) and watches the graph screen's
``pages``. It measures what the old ``paint_probe`` / ``load_probe`` / ``graph_probe`` attributes
of the app measured:

* **first frame**: the refresh after the first delta (every task, the journal's tail) was applied;
* **painted**: for each event, the refresh after the delta that carried it was applied — the
  screens apply a delta while the hub publishes it (``FeedHub.subscribe`` is immediate), so when
  ``hub.apply`` returns every subscribed screen has its rows;
* **graph first rows**: the refresh after a graph screen applied its first page;
* **UI time applying deltas** (``apply_seconds``, per change with ``applied_changes``).

Used by tests/bench/bench_console.py (headless part) and tested in tests/console/test_probes.py.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from console.follow import Pending


class ConsoleProbes:
    def __init__(self, app: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.clock = clock
        self.t0 = clock()
        self.first_frame: float | None = None  # seconds after the probes were attached
        self.painted: dict[int, float] = {}  # event id → clock() when its delta was on screen
        self.apply_seconds = 0.0
        self.applied_changes = 0
        self.graph_first_rows: float | None = None
        hub = app.hub
        real_apply = hub.apply

        def apply(p: Pending) -> bool:
            t = time.perf_counter()
            first = real_apply(p)
            self.apply_seconds += time.perf_counter() - t
            self.applied_changes += len(p.events)
            if first:
                app.call_after_refresh(self._first_frame)
            if p.events:
                app.call_after_refresh(self._painted, list(p.events))
            return first

        hub.apply = apply

    def _first_frame(self) -> None:
        if self.first_frame is None:
            self.first_frame = self.clock() - self.t0

    def _painted(self, events: list[Any]) -> None:
        t = self.clock()
        for e in events:
            self.painted.setdefault(e.id, t)

    def watch_graph(self, screen: Any) -> None:
        """``screen`` (a TaskGraphScreen, pushed and not yet mounted): note when its first rows
        are on screen, measured from now."""
        t0 = self.clock()

        def pages(n: int) -> None:
            if n >= 1 and self.graph_first_rows is None:
                self.app.call_after_refresh(self._graph_rows, t0)

        screen.watch(screen, "pages", pages, init=False)

    def _graph_rows(self, t0: float) -> None:
        if self.graph_first_rows is None:
            self.graph_first_rows = self.clock() - t0


__all__ = ["ConsoleProbes"]


class AlertLog:
    """Every alert one app raised, and how often it rang the bell — read from the outside: it wraps
    that instance's ``app.alerts.watch.events`` / ``.signals`` (what they return is what the desk
    delivers) and ``app.bell``. Attach it before the app runs to see its startup too."""

    def __init__(self, app: Any) -> None:
        self.delivered: list[Any] = []
        self.bells = 0
        watch = app.alerts.watch
        for name in ("events", "signals"):
            setattr(watch, name, self._keeping(getattr(watch, name)))
        real_bell = app.bell

        def bell() -> None:
            self.bells += 1
            real_bell()

        app.bell = bell

    def _keeping(self, raise_alerts: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
        def wrapped(*args: Any, **kwargs: Any) -> list[Any]:
            new = raise_alerts(*args, **kwargs)
            self.delivered.extend(new)
            return new

        return wrapped

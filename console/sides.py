"""Several ledgers in one console: one :class:`LedgerSide` for each ledger beyond the first.

The app itself is the first ledger's side (its ``feed``, ``follower``, ``hub``, ``analyst`` and
``analysis``, as with one ledger: that path is unchanged). Each further ledger gets a side of its
own with the same parts — its own feed (its own connections: a PostgreSQL ledger's stay bound to
it), its follower and cursor, its feed hub and models, its analysis worker and scheduler — and the
app runs each side's follower as a worker of its own and applies each side's deltas with the same
pacing (``WardenApp.ledger_changed``). One ledger down or slow never holds another: nothing is
shared between sides but the UI thread.

A screen is bound to the side it was opened for (``WardenApp.push_screen`` stamps it); what it
reaches as ``host_of(self)`` is then that side's :class:`SideHost` — the app, with that ledger's
feed, hub and models — so a graph, a node's detail, and every dialog and action reads and writes
the ledger of the row it was opened from. The all-ledgers task list (``console.screens.all_tasks``)
reads every side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from store.reading.feed import Feed

from .alerts import AlertDesk
from .analysis import GraphRequest, RunRequest, RunResult
from .analysis_client import AnalysisWorker
from .analysis_runs import AnalysisRuns
from .event_log import EventLogModel
from .follow import LedgerFollower
from .hub import FeedHub
from .tasklist import TaskListModel

if TYPE_CHECKING:
    from textual.app import App


class SideParts:
    """One ledger's parts, built and read the same way for the first (the app) and each further one
    (a :class:`LedgerSide`): its feed (its own connections: a PostgreSQL ledger's stay bound to it),
    its follower (cursor, watches, pending delta), its hub (the shared models and the screens'
    signals, console/hub.py), its analysis worker and scheduler (console/analysis_client.py,
    console/analysis_runs.py), its alerts (console/alerts.py: a journal cursor of its own — task
    ids may be the same in two ledgers), and the pacing state of its deltas
    (``WardenApp.ledger_changed``)."""

    ledger_name: str
    feed: Feed
    follower: LedgerFollower
    hub: FeedHub
    analyst: AnalysisWorker
    analysis: AnalysisRuns
    alerts: AlertDesk

    def open_parts(self, app: "App[int]", target: str, *, read_only: bool, clock: Callable[[], float] | None,
                   now: Callable[[], float], fallback_poll_s: float, connect_timeout_s: float, spacing_s: float,
                   deliver: Callable[[RunRequest, RunResult], object], report: Callable[[str], object],
                   bell: bool, hook: Sequence[str] | None) -> None:
        self.feed = Feed(target, read_only=read_only, clock=clock, fallback_poll_s=fallback_poll_s,
                         application_name="warden-console", connect_timeout_s=connect_timeout_s, spacing_s=spacing_s)
        self.follower = LedgerFollower(self.feed, spacing_s=spacing_s)
        self.hub = FeedHub(app, self.follower, now)
        self.failed: str | None = None
        self.analyst = AnalysisWorker(target, deliver=deliver, report=report, connect_timeout_s=connect_timeout_s)
        self.analysis = AnalysisRuns(self)  # type: ignore[arg-type]  # the app, or a LedgerSide
        self.alerts = AlertDesk(app, bell=bell, hook=hook,  # type: ignore[arg-type]  # WardenApp
                                ledger=self.ledger_name or None)
        self._applied_at: float | None = None  # monotonic() of the last delta applied
        self._applied_before: float | None = None  # and of the one before it
        self._apply_held = False  # a burst's next delta is held for a later() call

    # what AnalysisRuns, the screens (ConsoleHost) and the all-ledgers list read of a ledger: loaded
    # (every task and the journal's tail read and applied), unavailable (why it cannot be read now,
    # one escaped line, or None), reconnected_at (monotonic(), back after an outage), live
    # (following changes; False: a snapshot), cursor (the last journal id read)
    @property
    def loaded(self) -> bool:
        return self.hub.loaded

    @property
    def unavailable(self) -> str | None:
        return self.hub.unavailable

    @property
    def reconnected_at(self) -> float | None:
        return self.hub.reconnected_at

    @property
    def live(self) -> bool:
        return self.follower.live

    @property
    def cursor(self) -> int:
        return self.follower.cursor

    @property
    def tasks_model(self) -> TaskListModel:
        return self.hub.tasks

    @property
    def events_model(self) -> EventLogModel:
        return self.hub.events


class LedgerSide(SideParts):
    """One more ledger's feed, follower, hub and analysis (see the module's docstring)."""

    def __init__(self, app: "App[int]", name: str, target: str, *, read_only: bool, clock: Callable[[], float] | None,
                 now: Callable[[], float], fallback_poll_s: float, connect_timeout_s: float, spacing_s: float,
                 analysis: bool, deliver: Callable[..., object], report: Callable[[str], object],
                 bell: bool = True, hook: Sequence[str] | None = None) -> None:
        self.app = app
        self.ledger_name = name
        self.ledger_target = target
        self.analysis_enabled = analysis
        self._now = now
        self.open_parts(app, target, read_only=read_only, clock=clock, now=now, fallback_poll_s=fallback_poll_s,
                        connect_timeout_s=connect_timeout_s, spacing_s=spacing_s,
                        deliver=lambda req, res: deliver(req, res, self), report=report, bell=bell, hook=hook)

    def later(self, delay: float, callback: Callable[[], object]) -> None:
        self.app.later(delay, callback)  # type: ignore[attr-defined]  # WardenApp.later

    def call_after_refresh(self, callback: Callable[[], object]) -> bool:
        return self.app.call_after_refresh(callback)

    def start_analysis(self, req: GraphRequest | None, task_ids: list[str], parts: frozenset[str], kind: str,
                       must_eta: int | None = None) -> None:
        self.analyst.run(RunRequest(self._now(), req, tuple(task_ids), parts, kind, must_eta))


#: what a SideHost takes from its side rather than from the app
SIDE_PARTS = frozenset({"feed", "follower", "hub", "analyst", "analysis", "ledger_target", "ledger_name", "loaded",
                        "unavailable", "reconnected_at", "live", "cursor", "tasks_model", "events_model", "failed"})


class SideHost:
    """The app as the screens bound to one further ledger see it: that side's parts, the app's rest."""

    def __init__(self, app: object, side: LedgerSide) -> None:
        self._app = app
        self._side = side

    @property
    def ledger_label(self) -> str:
        return self._side.ledger_name

    def __getattr__(self, name: str) -> object:  # (read as a ConsoleHost: console/host.py)
        if name in SIDE_PARTS:
            return getattr(self._side, name)
        return getattr(self._app, name)


class EverySide(Protocol):
    """The app as :class:`AllHost` reads it."""

    def every_side(self) -> Sequence[SideParts]: ...


class AllHost:
    """The app as the all-ledgers task list sees it: every ledger's state in one (the status bar
    names each ledger that is down), the app's rest."""

    ledger_label = ""  # (the list's title names the ledgers it shows)

    def __init__(self, app: EverySide) -> None:
        self._app = app

    def _sides(self) -> Sequence[SideParts]:
        return self._app.every_side()

    @property
    def loaded(self) -> bool:
        return all(s.loaded or s.unavailable for s in self._sides())

    @property
    def live(self) -> bool:
        return all(s.live for s in self._sides())

    @property
    def unavailable(self) -> str | None:
        down = [f"{s.ledger_name}: {s.unavailable}" for s in self._sides() if s.unavailable]
        return "; ".join(down) or None

    @property
    def reconnected_at(self) -> float | None:
        back = [s.reconnected_at for s in self._sides() if s.reconnected_at is not None]
        return max(back) if back else None

    def __getattr__(self, name: str) -> object:  # (read as a ConsoleHost: console/host.py)
        return getattr(self._app, name)


__all__ = ["AllHost", "EverySide", "LedgerSide", "SIDE_PARTS", "SideHost", "SideParts"]

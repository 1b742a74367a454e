"""The Warden console: a Textual app that tails the ledger.

Data flow (one way): ``store.reading.feed`` wake-ups → the feed worker (``console.follow``) reads the
journal after the cursor and exactly the rows the screens watch, in worker threads → merges them
into a pending delta and posts a coalescing ``LedgerChanged`` → the UI-thread handler here hands
the delta to the feed hub (``console.hub``), which applies it to the shared models (the task list,
the event log) and publishes it on its signals. Screens subscribe on mount to what they show and
are forgotten on unmount: a graph screen owns its graph (loaded in pages from one snapshot, then
patched node by node from ``nodes_changed``), a node detail its detail. The app owns the feed and
nothing screen-specific; a keypress never waits on the database. Estimates and signals are
computed in a worker process of their own, never on the interpreter the UI draws with
(``console.analysis_worker``, driven from ``console.analysis_client``, scheduled by
``console.analysis_runs``).

Operator actions go the other way: a key (p/u/n/r/a/c/R) or the command palette → a dialog
(``console.dialogs``, or the recovery advice in ``console.screens.advice``) → a plan → apply, in
the dialog's workers; the views follow from the feed.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from time import monotonic  # what spaces the deltas applied
from typing import Callable, Sequence

from textual import on, work
from textual.app import App
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from store.storage.db import CONNECT_TIMEOUT_S
from store.errors import WardenError
from store.reading.feed import FALLBACK_POLL_S, Feed

from .action_keys import ACTION_KEYS
from .alerts import AlertDesk
from .analysis import GraphRequest, RunRequest, RunResult
from .app_nav import Navigation
from .commands import WardenCommands
from .follow import LedgerFollower, Pending, Status
from .glyphs import ascii_on
from .hub import TasksChanged
from .messages import AnalysisReady, LedgerChanged, LedgerStatus
from .plainterm import font_of, plain_driver
from .screens import LedgerErrorScreen, TaskGraphScreen, TaskListScreen
from .screens.all_tasks import AllTasksScreen, SIDE_ATTR
from .screens.base import WardenScreen
from .sides import AllHost, LedgerSide, SideHost, SideParts
from .text import safe_line
from .typeahead import TypeAheadApp
from .widgets.statusbar import RECONNECTED_SHOWN_S

WAKES_EVERY_S = 15.0  # parks' at:/file: wake conditions need somebody to look (store/parks/wake.py)
# Ledger changes are applied (and drawn) at most this often: a change after a quiet spell at once,
# a burst's in frames this far apart (docs/console.md "How often the screen moves").
LIVE_APPLY_S = 1 / 30
RETRY_OPEN_S = 2.0  # several ledgers: one that could not be opened is tried again this often


class WardenApp(SideParts, TypeAheadApp, Navigation, App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "warden"
    COMMANDS = App.COMMANDS | {WardenCommands}
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("e", "events", "Events", id="events"),
        Binding("h", "handoffs", "Handoffs", id="handoffs"),
        Binding("g", "runs", "Runs", id="runs"),
        *(Binding(k.key, f"operator({k.action!r})", k.label, id=k.action, show=False) for k in ACTION_KEYS),
        Binding("o", "report", "Report", id="report", show=False),
        Binding("m", "mind", "Mind", id="mind", show=False),
        Binding("M", "memories", "Memory inbox", id="memories", show=False),
    ]

    def __init__(
        self,
        ledger_target: str,
        runs_dir: str = "runs",
        *,
        read_only: bool = False,
        operator: str = "",
        project: str | None = None,
        records: str | None = None,
        clock: Callable[[], float] | None = None,
        fallback_poll_s: float = FALLBACK_POLL_S,
        analysis: bool = True,
        bell: bool = True,
        on_alert: Sequence[str] | None = None,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        ledger_name: str = "",
        more: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__()
        self.ledger_target = ledger_target
        self.ledger_name = ledger_name  # with several ledgers, this first one's short name
        self.runs_dir = runs_dir
        self.read_only = read_only
        self.operator = operator
        self.project = project
        self.records = records
        self.clock = clock or time.time
        self.analysis_enabled = analysis
        # the first ledger's parts (console/sides.py), as each further ledger's side has its own
        self.open_parts(self, ledger_target, read_only=read_only, clock=clock, now=self.now,
                        fallback_poll_s=fallback_poll_s, connect_timeout_s=connect_timeout_s, spacing_s=LIVE_APPLY_S,
                        deliver=self._analysed, report=self._analysis_trouble, bell=bell, hook=on_alert)
        # Several ledgers (console/sides.py): the app is the first one's side; each other one has its own.
        self.sides: list[LedgerSide] = [
            LedgerSide(self, name, target, read_only=read_only, clock=clock, now=self.now,
                       fallback_poll_s=fallback_poll_s, connect_timeout_s=connect_timeout_s, spacing_s=LIVE_APPLY_S,
                       analysis=analysis, deliver=self._analysed, report=self._analysis_trouble, bell=bell,
                       hook=on_alert)
            for name, target in more]
        self._hosts = {id(s): SideHost(self, s) for s in self.sides}
        self._all_host = AllHost(self)
        self.acting_for: LedgerSide | None = None  # the side the next pushed screen is bound to (one push)

    def now(self) -> float:
        return float(self.clock())

    # ------------------------------------------------------------------ several ledgers (console/sides.py)
    @property
    def several(self) -> bool:
        """More than one ledger is open."""
        return bool(self.sides)

    @property
    def ledger_label(self) -> str:
        """The ledger the status bar names (the first one's name; "" with one ledger)."""
        return self.ledger_name if self.sides else ""

    def every_side(self) -> "list[WardenApp | LedgerSide]":
        """The first ledger's side (the app itself), then the others."""
        return [self, *self.sides]

    def push_screen(self, screen, callback=None, wait_for_dismiss=False):  # type: ignore[override]
        """With several ledgers, a screen is bound to the ledger it is opened for: the side the
        all-ledgers list acts for (``acting_for``), else that of the screen on top."""
        if self.sides and getattr(screen, SIDE_ATTR, None) is None and not isinstance(screen, AllTasksScreen):
            side: WardenApp | LedgerSide | None = self.acting_for
            if side is None and self.screen_stack:
                side = self.side_of(self.screen_stack[-1])
            setattr(screen, SIDE_ATTR, side or self)
        self.acting_for = None
        return super().push_screen(screen, callback, wait_for_dismiss)

    def side_of(self, screen: object) -> "WardenApp | LedgerSide | None":
        """The ledger side ``screen`` is bound to (the all-ledgers list: the side of its selected row)."""
        side = getattr(screen, SIDE_ATTR, None)
        if isinstance(side, (WardenApp, LedgerSide)):
            return side
        chosen = getattr(screen, "selected_side", None)
        return chosen() if callable(chosen) else None

    def alerts_here(self) -> AlertDesk:
        """The alerts of the ledger the screen on top shows (console/app_nav.py)."""
        side = self.side_of(self.screen_stack[-1]) if self.sides and self.screen_stack else None
        return side.alerts if side is not None else self.alerts

    def show_ledger(self, name: str | None) -> None:
        """`:ctx`: the task list of one ledger (by name) or of all (None) — back on the task list
        (the command palette's "Ledger: …" entries; ``l`` on the list steps through them)."""
        base = next((s for s in self.screen_stack if isinstance(s, AllTasksScreen)), None)
        if base is None:
            self.notify("one ledger is open: start warden console with several --ledger to switch",
                        severity="warning", markup=False)
            return
        while self.screen is not base and len(self.screen_stack) > 2:
            self.pop_screen()
        if not base.show_ledger(name):
            self.notify(f"no ledger named {safe_line(name or '')}", severity="warning", markup=False)

    def open_task_in(self, side: "WardenApp | LedgerSide", task_id: str) -> None:
        """A task's graph in a given ledger (the palette's "Open task X in NAME" with several
        ledgers: task ids may be the same in two ledgers, so the entry names its own)."""
        side.alerts.seen(task_id)
        screen = TaskGraphScreen(task_id)
        setattr(screen, SIDE_ATTR, side)
        self.push_screen(screen)

    def host_for(self, node: object) -> object:
        """What ``node`` sees as the app (console/host.py): the app, or its screen's side's host."""
        if not self.sides:
            return self
        try:
            screen = node if isinstance(node, Screen) else getattr(node, "screen", None)
        except Exception:  # noqa: BLE001 - not mounted yet: the app's
            return self
        if isinstance(screen, AllTasksScreen):
            return self._all_host
        side = getattr(screen, SIDE_ATTR, None)
        return self._hosts.get(id(side), self)

    def get_key_display(self, binding: Binding) -> str:
        """Keys in the footer and help: their names where the terminal draws ASCII only (⏎ → enter)."""
        shown = super().get_key_display(binding)
        return binding.key.split(",")[0] if ascii_on() and not shown.isascii() else shown

    # ------------------------------------------------------------------ what screens read (ConsoleHost)
    @property
    def open_alerts(self) -> int:
        """Alerts the operator has not seen yet (the header counts them)."""
        return self.alerts.open_count + sum(s.alerts.open_count for s in self.sides)

    @property
    def waiting_alerts(self) -> int:
        """Alerts held back while a dialog is open (console/alerts.py; the header counts them)."""
        return self.alerts.waiting + sum(s.alerts.waiting for s in self.sides)

    def settled(self) -> bool:
        """Loaded, nothing asked for or read and not yet applied, every screen's own reads done
        (tests, screenshots: wait for this, then for the workers)."""
        return self.loaded and self.follower.idle() and not self.taking_keys() and all(
            s.settled() for s in self.screen_stack if isinstance(s, WardenScreen))

    def later(self, delay: float, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the app's message loop ``delay`` seconds from now (once).

        Not Textual's ``set_timer``: its one-shot Timer reads the clock twice before it sleeps,
        and when the clock moved on by more than the delay in between (this thread lost the
        interpreter or the CPU that long: a worker holding the GIL, a loaded machine) it "skips"
        its only tick and never fires. A re-arming chain (the tick, the analysis timer, the
        alerts' next notification, a held burst) then stops for good — the console froze under
        a fleet's load. asyncio's ``call_later`` has no such skip."""
        asyncio.get_running_loop().call_later(max(0.0, delay), self.call_next, callback)

    # ------------------------------------------------------------------ lifecycle
    def on_mount(self) -> None:
        self.push_screen(AllTasksScreen() if self.sides else TaskListScreen())
        self.follow_ledger()
        for side in self.sides:
            self.follow_side(side)
        self.later(1.0, self._tick)
        if self.analysis_enabled:
            self.run_worker(self.analyst.serve(), group="analyst", exit_on_error=False,
                            description="the analysis worker")
            self.analysis.start()
            for side in self.sides:
                self.run_worker(side.analyst.serve(), group=f"analyst-{side.ledger_name}", exit_on_error=False,
                                description=f"the analysis worker of {side.ledger_name}")
                side.analysis.start()
        if not self.read_only:
            self.later(WAKES_EVERY_S, self._wakes_timer)

    async def on_unmount(self) -> None:
        """The app is stopping: so does its analysis worker (console/analysis_client.py)."""
        await self.analyst.close()
        for side in self.sides:
            await side.analyst.close()

    def _wakes_timer(self) -> None:
        """Every WAKES_EVERY_S: look at the parks' wake conditions (time passing and files changing
        write nothing to the ledger, so somebody has to look; the console is somebody). A met one is
        journalled and an auto-resume applied; the feed then shows both."""
        if self.loaded and not self.unavailable:
            self.check_wakes()
        for side in self.sides:
            if side.loaded and not side.unavailable:
                self.run_worker(lambda feed=side.feed: self._check_wakes_of(feed), thread=True, exclusive=True,
                                exit_on_error=False, group=f"wakes-{side.ledger_name}")
        self.later(WAKES_EVERY_S, self._wakes_timer)

    @work(thread=True, exclusive=True, exit_on_error=False, group="wakes")
    def check_wakes(self) -> None:
        self._check_wakes_of(self.feed)

    @staticmethod
    def _check_wakes_of(feed: Feed) -> None:
        feed.read(lambda ledger: (ledger.check_wakes(), ledger.check_expired(actor="console")))

    def _tick(self) -> None:
        """Once a second: time-based figures (lease countdowns, ages) on the screen on top only."""
        screen = self.screen_stack[-1] if self.screen_stack else None
        loaded = self.loaded or any(s.loaded for s in self.sides)  # (several ledgers: the first may be down)
        if isinstance(screen, WardenScreen) and loaded and self.is_running and screen.is_mounted:
            screen.tick()
        self.later(1.0, self._tick)  # re-armed after the work, so ticks never pile up

    # ------------------------------------------------------------------ the feed (console/follow.py)
    @work(exclusive=True, group="feed", exit_on_error=False)
    async def follow_ledger(self) -> None:
        await self.follower.run(lambda: self.post_message(LedgerChanged()))

    def follow_side(self, side: LedgerSide) -> None:
        """A further ledger's follower, as a worker of its own (console/sides.py)."""
        self.run_worker(side.follower.run(lambda: self.post_message(LedgerChanged(side))), exclusive=True,
                        group=f"feed-{side.ledger_name}", exit_on_error=False,
                        description=f"the feed of {side.ledger_name}")

    @on(LedgerChanged)
    def ledger_changed(self, msg: LedgerChanged | None = None) -> None:
        """The follower has something new: applied now unless the last two deltas were applied
        within two spacings of each other (a burst) and the last less than LIVE_APPLY_S ago; then
        when that time is up (the follower keeps merging into the same pending delta
        meanwhile). Under a fleet's writes the models, the rows and the frames move at most
        1 / LIVE_APPLY_S times a second, whatever the write rate; an isolated change waits for
        nothing."""
        side = self if msg is None or not isinstance(msg.side, LedgerSide) else msg.side
        if side._apply_held:
            return
        last, before = side._applied_at, side._applied_before
        # held only in a burst: the last two applications within two spacings of each other (a lone
        # one — maybe a delta that changed nothing on screen — never delays the next)
        wait = 0.0
        if last is not None and before is not None and 0 <= last - before < 2 * LIVE_APPLY_S:
            wait = last + LIVE_APPLY_S - monotonic()
        if wait <= 0 or wait > LIVE_APPLY_S:  # (a clock that went back applies now)
            self.apply_pending(side)
        else:
            side._apply_held = True
            self.later(wait, lambda: self._apply_now(side))

    def _apply_now(self, side: "WardenApp | LedgerSide | None" = None) -> None:
        """The held burst's time is up (run by the app's message loop, as a message would be)."""
        side = side or self
        side._apply_held = False
        self.apply_pending(side)

    def apply_pending(self, side: "WardenApp | LedgerSide | None" = None) -> None:
        """The follower's pending delta, applied on the UI thread: the hub's models and signals
        (console/hub.py), the alerts. (The analysis worker follows the journal itself.)"""
        side = side or self
        side._applied_before, side._applied_at = side._applied_at, monotonic()
        p = side.follower.take_pending()
        if side.follower.loaders:  # a graph loading waits until this change is drawn
            self.call_after_refresh(side.follower.settled)
        else:
            side.follower.settled()
        if p.status is not None and p.status.fatal:
            if self.sides:  # several ledgers: that one's outage, and it is tried again (the others go on)
                self._not_opened(side, p)
                return
            self.failed = p.status.error
            self.push_screen(LedgerErrorScreen(p.status.error or "cannot open the ledger", target=self.ledger_target))
            return
        hub = side.hub
        was_unavailable = hub.unavailable
        first = hub.apply(p)
        if was_unavailable and hub.unavailable is None:  # the header says "reconnected" for a while
            self.later(RECONNECTED_SHOWN_S + 0.05, lambda: hub.status_changed.publish(None))
        if p.all_tasks is not None:
            side.follower.analysis_dirty.update(t.task_id for t in p.all_tasks)
            if first and self.analysis_enabled:
                side.analysis.run_analysis()
            if first:  # each ledger's rows, once read (a further ledger's come later than the first's)
                self.call_after_refresh(settle_heap)
        side.alerts.took(p)

    def _not_opened(self, side: "WardenApp | LedgerSide", p: Pending) -> None:
        """With several ledgers, one that cannot be opened is that ledger's outage (the others go
        on), and its follower starts again after RETRY_OPEN_S."""
        error = p.status.error if p.status is not None else None
        side.hub.apply(Pending(status=Status(error or "cannot open the ledger")))
        # (the follower keeps the error: its first successful read says the ledger is back)

        def again() -> None:
            if side is self:
                self.follow_ledger()
            elif isinstance(side, LedgerSide):
                self.follow_side(side)
        self.later(RETRY_OPEN_S, again)

    @on(LedgerStatus)
    def ledger_status(self, msg: LedgerStatus) -> None:
        """A screen's own read found the ledger unavailable: the follower says so (and says when a
        read succeeds again)."""
        follower = msg.follower if isinstance(msg.follower, LedgerFollower) else self.follower
        follower.report(msg.error)

    def alerts_changed(self) -> None:
        """The open-alert count moved (console/alerts.py): every status bar shows it."""
        self.hub.status_changed.publish(None)

    def retry_open(self) -> None:
        if isinstance(self.screen, LedgerErrorScreen):
            self.pop_screen()
        self.failed = None
        self.follow_ledger()

    # ------------------------------------------------------------------ estimates and signals
    def start_analysis(self, req: GraphRequest | None, task_ids: list[str], parts: frozenset[str], kind: str,
                       must_eta: int | None = None) -> None:
        """One run, sent to the analysis worker (console/analysis_client.py); its result comes back
        through ``_analysed``."""
        self.analyst.run(RunRequest(self.now(), req, tuple(task_ids), parts, kind, must_eta))

    def _analysed(self, req: RunRequest, result: RunResult, side: LedgerSide | None = None) -> None:
        """A run's result (on the app's loop): its figures go out as ``AnalysisReady``; a run that
        failed is over too, and the tasks it was to compute wait for the next one. (``side``: a
        further ledger's run, console/sides.py.)"""
        if result.error is None:
            ready = AnalysisReady(result.tasks, result.graph, parts=result.parts, kind=result.kind)
            ready.side = side
            self.post_message(ready)
            return
        of: WardenApp | LedgerSide = side or self
        of.analysis.done(result.kind)
        if "eta" in req.parts or "signals" in req.parts:
            of.follower.analysis_dirty.update(req.task_ids)
        if not result.lost:  # (a worker that stopped was reported as such)
            self.notify(safe_line(result.error, limit=300), title="error", severity="error", timeout=8, markup=False)

    def _analysis_trouble(self, text: str) -> None:
        """The analysis worker stopped (it is started again) or could not start."""
        self.notify(safe_line(text, limit=300), title="estimates", severity="warning", timeout=8, markup=False)

    @on(AnalysisReady)
    def analysis_ready(self, msg: AnalysisReady) -> None:
        side = msg.side if isinstance(msg.side, LedgerSide) else self
        side.analysis.done(msg.kind)
        model = side.hub.tasks
        results = []
        for tid, (eta, sigs) in msg.tasks.items():
            i = model.index.get(tid)
            if i is None:
                continue
            row = model.rows[i]
            if "eta" in msg.parts:
                side.analysis.took(tid, eta is not None)
            if eta is None:
                eta = row.eta
            results.append((tid, eta, row.signals if sigs is None else sigs))
        paint = model.set_analyses(results)
        if paint.changed or paint.reshaped:
            side.hub.tasks_changed.publish(TasksChanged(paint.rows, paint.reshaped, paint.changed, analysis=True,
                                                        span=paint.span))
        side.alerts.analysed(msg.tasks)
        side.hub.analysed.publish(msg)  # the open graph's part goes to its screen

    @on(Worker.StateChanged)
    def worker_failed(self, event: Worker.StateChanged) -> None:
        """One place turns worker errors into a notification; the app keeps running."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            err = event.worker.error
            msg = str(err) if isinstance(err, WardenError) else f"{type(err).__name__}: {err}"
            self.notify(safe_line(msg, limit=300), title="error", severity="error", timeout=8, markup=False)


def settle_heap() -> None:
    """The console has drawn its first screen: what it holds now — its code, Textual's widgets and
    styles, the task list — lives as long as it does. Python's full garbage collections walk every
    object they track, and a Textual app's frames promote enough short-lived objects to run one
    every few seconds while the screen moves: over the ~100k objects a console holds (mostly the
    imported code), each took 54–74 ms of CPU and held the UI 235–412 ms at load 20; after the freeze
    11–18 ms of CPU (docs/console.md "The garbage collector": measured without it, and with other
    thresholds). Moved out of the collector's walks here (``gc.freeze``), once a ledger is read (each
    ledger of several: a further one is read later), a full collection walks what changed since. (A graph's rows need nothing of the kind: ``console.model.Rows``.)"""
    gc.freeze()


def console_app(*, ledger: str, runs: str = "runs", read_only: bool = False, operator: str = "",
                project: str | None = None, records: str | None = None, bell: bool = True,
                on_alert: Sequence[str] | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                ledger_name: str = "", more: Sequence[tuple[str, str]] = ()) -> WardenApp:
    """The app exactly as `warden console` runs it (the benchmark drives this one); ``more``:
    further ledgers, (short name, target) each, shown in one list with the first (``ledger_name``)."""
    return WardenApp(ledger, runs, read_only=read_only, operator=operator, project=project, records=records,
                     bell=bell, on_alert=on_alert, connect_timeout_s=connect_timeout_s, ledger_name=ledger_name,
                     more=more)


def run_console(*, ledger: str, runs: str = "runs", read_only: bool = False, operator: str = "",
                project: str | None = None, records: str | None = None, bell: bool = True,
                on_alert: Sequence[str] | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                ledger_name: str = "", more: Sequence[tuple[str, str]] = ()) -> int:
    """`warden console`: run the app; exit 4 when the ledger could not be opened (with several
    ledgers, one that cannot be opened is shown as that ledger's outage instead)."""
    app = console_app(ledger=ledger, runs=runs, read_only=read_only, operator=operator, project=project,
                      records=records, bell=bell, on_alert=on_alert, connect_timeout_s=connect_timeout_s,
                      ledger_name=ledger_name, more=more)
    if ascii_on():  # a plain terminal: only what its font draws reaches it (console/plainterm.py)
        app.driver_class = plain_driver(app.driver_class, font_of())
    app.run()
    if app.failed:  # the ledger could not be opened: exit 4, "ledger unavailable" (console/cli/errors.py)
        print(f"warden: {safe_line(app.failed)}", file=sys.stderr)
        return 4
    return int(app.return_code or 0)


__all__ = ["WardenApp", "console_app", "run_console"]

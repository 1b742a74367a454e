"""The Warden console: a Textual app that tails the ledger.

Data flow (one way): ``store.feed`` wake-ups → the feed worker (``console.follow``) reads the
journal after the cursor and exactly the nodes / tasks the new events name, in worker threads →
merges them into a pending delta and posts a coalescing ``LedgerChanged`` → the UI-thread handler
here applies the delta to the view models (``console.model``) and repaints only the rows on
screen. A keypress never waits on the database. The graph is loaded once when opened (in the same
snapshot as the journal id it reflects) and patched node by node afterwards; it is never
re-queried per change. Estimates and signals are computed off the UI thread
(``console.analysis``).

Operator actions go the other way: a key (p/u/n/r/a/c/R) or the command palette → a dialog
(``console.dialogs``, or the recovery advice in ``console.screens.advice``) → a plan → apply, in
the dialog's workers; the views follow from the feed.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any, Callable, Sequence

from textual import on, work
from textual.app import App
from textual.binding import Binding
from textual.worker import Worker, WorkerState, get_current_worker

from store.db import CONNECT_TIMEOUT_S
from store.errors import WardenError
from store.feed import FALLBACK_POLL_S, Feed
from store.views import EventView, GraphView, NodeDetail, TaskView

from .action_keys import ACTION_KEYS
from .alerts import AlertDesk
from .analysis import Analyst, GraphRequest
from .analysis_runs import AnalysisRuns
from .app_nav import Navigation
from .commands import WardenCommands
from .follow import LedgerFollower, Pending
from .glyphs import ascii_on
from .plainterm import font_of, plain_driver
from .messages import AnalysisReady, GraphPageReady, LedgerChanged, LedgerStatus, Loaded
from .event_log import EventLogModel
from .model import GraphModel
from .screens import (
    EventLogScreen,
    HandoffInboxScreen,
    LedgerErrorScreen,
    NodeDetailScreen,
    RunsScreen,
    TaskGraphScreen,
    TaskListScreen,
)
from .screens.base import WardenScreen
from .screens.mind import MemoryInboxScreen, MindScreen
from .screens.report import TaskReportScreen
from .tasklist import TaskListModel
from .text import safe_line
from .typeahead import TypeAheadApp
from .widgets.statusbar import RECONNECTED_SHOWN_S

SWITCH_INTERVAL_S = 0.001  # how long a busy worker thread may keep the interpreter from the UI thread
WAKES_EVERY_S = 15.0  # parks' at:/file: wake conditions need somebody to look (store/wake.py)


class WardenApp(TypeAheadApp, AnalysisRuns, Navigation, App[int]):
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
    ) -> None:
        super().__init__()
        self.ledger_target = ledger_target
        self.runs_dir = runs_dir
        self.read_only = read_only
        self.operator = operator
        self.project = project
        self.records = records
        self.clock = clock or time.time
        self.analysis_enabled = analysis
        self.feed = Feed(ledger_target, read_only=read_only, clock=clock, fallback_poll_s=fallback_poll_s,
                         application_name="warden-console", connect_timeout_s=connect_timeout_s)
        self.follower = LedgerFollower(self.feed)  # the feed side: cursor, requests, pending delta
        self.tasks_model = TaskListModel(self.now)
        self.events_model = EventLogModel()
        self.graph_model: GraphModel | None = None
        self.detail: NodeDetail | None = None
        self.loaded = False
        self.unavailable: str | None = None
        self.reconnected_at: float | None = None  # time.monotonic() the ledger came back after an outage
        self.failed: str | None = None
        self._early_nodes: dict[str, tuple[Any, int]] = {}  # graph rows that arrived before its first page
        self.graph_pages_applied = 0  # (tests and the benchmark)
        self._analysed_once: set[str] = set()
        self.analyst = Analyst(self.feed, rows=self.follower.tally.view)  # the analysis worker's memory (console/analysis.py)
        self.init_analysis_runs()
        self.alerts = AlertDesk(self, bell=bell, hook=on_alert)  # console/alerts.py
        # Instrumentation (tests and the benchmark): UI time spent applying deltas.
        self.applied_changes = 0
        self.apply_seconds = 0.0
        self.paint_probe: Callable[[list[EventView]], None] | None = None
        self.load_probe: Callable[[], None] | None = None
        self.graph_probe: Callable[[], None] | None = None

    def now(self) -> float:
        return float(self.clock())

    def get_key_display(self, binding: Binding) -> str:
        """Keys in the footer and help: their names where the terminal draws ASCII only (⏎ → enter)."""
        shown = super().get_key_display(binding)
        return binding.key.split(",")[0] if ascii_on() and not shown.isascii() else shown

    @property
    def live(self) -> bool:
        """Following changes as they happen (False: a snapshot, e.g. a read-only copy)."""
        return self.follower.live

    @property
    def cursor(self) -> int:
        """The last journal id the console has read."""
        return self.follower.cursor

    def settled(self) -> bool:
        """Loaded, nothing requested or read and not yet applied, no graph still loading (tests,
        screenshots: wait for this, then for the workers)."""
        g = self.graph_model
        graph_loading = self.follower.graph_task is not None and (g is None or not g.complete)
        return self.loaded and self.follower.idle() and not graph_loading and not self.taking_keys()

    # ------------------------------------------------------------------ lifecycle
    def on_mount(self) -> None:
        self.push_screen(TaskListScreen())
        self.follow_ledger()
        self.set_timer(1.0, self._tick)
        if self.analysis_enabled:
            self.set_timer(1.0, self._analysis_timer)
        if not self.read_only:
            self.set_timer(WAKES_EVERY_S, self._wakes_timer)

    def _wakes_timer(self) -> None:
        """Every WAKES_EVERY_S: look at the parks' wake conditions (time passing and files changing
        write nothing to the ledger, so somebody has to look; the console is somebody). A met one is
        journalled and an auto-resume applied; the feed then shows both."""
        if self.loaded and not self.unavailable:
            self.check_wakes()
        self.set_timer(WAKES_EVERY_S, self._wakes_timer)

    @work(thread=True, exclusive=True, exit_on_error=False, group="wakes")
    def check_wakes(self) -> None:
        self.feed.read(lambda ledger: (ledger.check_wakes(), ledger.check_expired(actor="console")))

    def _tick(self) -> None:
        """Once a second: time-based figures (lease countdowns, ages) on the visible rows only."""
        screen = self.screen_stack[-1] if self.screen_stack else None
        if isinstance(screen, WardenScreen) and self.loaded and self.is_running and screen.is_mounted:
            screen.tick()
        self.set_timer(1.0, self._tick)  # re-armed after the work, so ticks never pile up

    # ------------------------------------------------------------------ the feed (console/follow.py)
    def request(self, kind: str, arg: Any) -> None:
        self.follower.request(kind, arg)

    @work(exclusive=True, group="feed", exit_on_error=False)
    async def follow_ledger(self) -> None:
        await self.follower.run(self)

    # ------------------------------------------------------------------ applying deltas (UI thread)
    def _screens(self, kind: type) -> list[Any]:
        """The screens of ``kind`` on the stack that can take an update: none once the app is
        shutting down (its screens are being taken apart); a popped screen is off the stack."""
        if not self.is_running:
            return []
        return [s for s in self.screen_stack if isinstance(s, kind) and s.is_mounted]

    @on(LedgerChanged)
    def apply_pending(self) -> None:
        t0 = time.perf_counter()
        p: Pending = self.follower.take_pending()
        if p.all_tasks is not None:
            self.tasks_model.load(p.all_tasks)
            self.tasks_model.agents.seed(p.leases or ())
            for s in self._screens(TaskListScreen):
                s.data_changed([], True)
            self.follower.analysis_dirty.update(t.task_id for t in p.all_tasks)
            first = not self.loaded
            self.loaded = True
            if first:
                if self.load_probe is not None:
                    self.call_after_refresh(self.load_probe)
                if self.analysis_enabled:
                    self.run_analysis()
        if p.tail is not None:
            self.events_model.events.clear()
            self.events_model.extend(p.tail)
            for s in self._screens(EventLogScreen):
                s.data_changed(0, True)
        if self.analysis_enabled and (p.events or p.nodes):
            self.analyst.graph.delta(p.events, p.nodes)  # the open graph's incremental analysis
        if p.events:
            self.tasks_model.agents.saw(p.events)  # the summary's agents alive
            if any(e.kind == "node.committed" for e in p.events):
                self.analyst.forget_history()  # a duration was added: the estimates re-read them
            added, reshaped = self.events_model.extend(p.events)
            if added or reshaped:
                for s in self._screens(EventLogScreen):
                    s.data_changed(added, reshaped)
            if any(e.kind.startswith("handoff.") for e in p.events) and self._screens(HandoffInboxScreen):
                self.load_handoffs()
        if p.nodes and self.follower.graph_task is not None:
            if self.graph_model is None:  # its first page is on the way: keep them for it
                for k, v in p.nodes.items():
                    if k[0] == self.follower.graph_task:
                        self._early_nodes[k[1]] = (v, p.as_of.get(k[1], 0))
            else:
                rows, reshaped = self.graph_model.apply(p.nodes.values(), p.as_of)
                for s in self._screens(TaskGraphScreen):
                    if s.task_id == self.graph_model.task_id:
                        s.data_changed(rows, reshaped)
        if p.tasks:
            self._apply_tasks(p.tasks)
        if p.detail is not None and self.follower.detail_key == (p.detail.node.task_id, p.detail.node.key):
            self.detail = p.detail
            for s in self._screens(NodeDetailScreen):
                if (s.task_id, s.key) == self.follower.detail_key:
                    s.show_detail(p.detail)
        self.alerts.took(p)
        self.apply_seconds += time.perf_counter() - t0
        self.applied_changes += len(p.events)
        if self.paint_probe is not None and p.events:
            events = p.events
            self.call_after_refresh(self.paint_probe, events)

    # ------------------------------------------------------------------ opening a graph
    @work(thread=True, exclusive=True, exit_on_error=False, group="graph")
    def load_graph(self, task_id: str) -> None:
        """The open task's graph, page by page from one snapshot (``LedgerFollower.read_graph``)."""
        worker = get_current_worker()
        self.follower.read_graph(task_id, self.post_message, lambda: worker.is_cancelled)

    @on(GraphPageReady)
    def graph_page(self, msg: GraphPageReady) -> None:
        if msg.ack is not None:
            self.call_after_refresh(msg.ack.set)
        t0 = time.perf_counter()
        page = msg.page
        if msg.task_id != self.follower.graph_task:
            return
        if page is None:
            self.notify(f"task {safe_line(msg.task_id)} is not in the ledger", severity="error", markup=False)
            return
        self.graph_pages_applied += 1
        g = self.graph_model
        if page.start == 0:
            g = self.graph_model = GraphModel(GraphView(task=page.task, nodes=page.nodes), self.now,
                                              loaded_at=page.at, total=page.total, complete=False)
            early, self._early_nodes = self._early_nodes, {}
            if early:
                g.apply([v for v, _ in early.values()], {k: at for k, (_, at) in early.items()})
            if page.last:
                g.extend((), last=True)
            for s in self._screens(TaskGraphScreen):
                if s.task_id == g.task_id:
                    s.model_ready()
            if self.graph_probe is not None:
                self.call_after_refresh(self.graph_probe)
            if self.analysis_enabled and not self._analysis_busy:
                self.call_after_refresh(self.run_node_window)  # the first screen's P80s, at once
        elif g is not None and g.task_id == msg.task_id and not g.complete:
            g.extend(page.nodes, last=page.last)
            for s in self._screens(TaskGraphScreen):
                if s.task_id == g.task_id:
                    s.rows_arrived()
        else:
            return
        if page.last:
            # The model's 100k rows live as long as the graph is open: out of the collector's way.
            # A full collection walked them all and stalled the UI for 250-300 ms, several times a
            # minute while agents wrote (measured with bench_console.py --stall-trace).
            gc.freeze()
            self.follower.analysis_dirty.add(msg.task_id)
            if self.analysis_enabled:
                self.analyst.graph.seed(g.task, g.nodes)
                self.run_analysis()
        self.apply_seconds += time.perf_counter() - t0

    def _apply_tasks(self, tasks: dict[str, TaskView]) -> None:
        paint = self.tasks_model.update(tasks.values())
        for s in self._screens(TaskListScreen):
            s.tasks_changed(paint)
        g = self.graph_model
        if g is not None and g.task_id in tasks:
            g.set_task(tasks[g.task_id])
            for s in self._screens(TaskGraphScreen):
                s.update_summary()
        for r in self._screens(TaskReportScreen):
            if r.task_id in tasks:
                r.reload()
        for m in self._screens(MindScreen):  # the task's mind changed with it (console/screens/mind.py)
            if m.task_id in tasks:
                m.reload()
        for inbox in self._screens(MemoryInboxScreen):
            inbox.reload()

    @on(LedgerStatus)
    def ledger_status(self, msg: LedgerStatus) -> None:
        if msg.fatal:
            self.failed = msg.error
            self.push_screen(LedgerErrorScreen(msg.error or "cannot open the ledger", target=self.ledger_target))
            return
        error = safe_line(msg.error) if msg.error else None
        if error == self.unavailable:
            return
        if error is None:  # back after an outage: the header says "reconnected" for a while
            self.reconnected_at = time.monotonic()
            self.set_timer(RECONNECTED_SHOWN_S + 0.05, self._refresh_statuses)
        self.unavailable = error
        self._refresh_statuses()

    def _refresh_statuses(self) -> None:
        for s in self.screen_stack:
            if isinstance(s, WardenScreen):
                s.refresh_status()

    def retry_open(self) -> None:
        if isinstance(self.screen, LedgerErrorScreen):
            self.pop_screen()
        self.failed = None
        self.follow_ledger()

    # ------------------------------------------------------------------ estimates and signals
    # A description, so that Textual does not repr() the arguments (a request held thousands of
    # rows: 17 ms of the UI thread and megabytes of garbage per run, bench_console.py under cProfile)
    @work(thread=True, exit_on_error=False, group="analysis", description="estimates and signals")
    def _analyse(self, req: GraphRequest | None, task_ids: list[str], parts: frozenset[str], kind: str) -> None:
        """Estimates and signals (console/analysis.py) off the UI thread."""
        try:
            msg = self.analyst.run(self.now(), req, task_ids, parts=parts, kind=kind)
        except BaseException:
            try:
                self.call_from_thread(self._analysis_done, kind)
            except RuntimeError:
                pass  # the app is closing
            raise
        self.post_message(msg)

    @on(AnalysisReady)
    def analysis_ready(self, msg: AnalysisReady) -> None:
        self._analysis_done("full" if "eta" in msg.parts else ("signals" if msg.signals_only else "nodes"))
        results = []
        for tid, (eta, sigs) in msg.tasks.items():
            i = self.tasks_model.index.get(tid)
            if i is None:
                continue
            row = self.tasks_model.rows[i]
            if eta is None:
                eta = row.eta
            else:
                self._analysed_once.add(tid)
            results.append((tid, eta, row.signals if sigs is None else sigs))
        paint = self.tasks_model.set_analyses(results)
        if paint.changed or paint.reshaped:
            for s in self._screens(TaskListScreen):
                s.tasks_changed(paint, analysis=True)
        self.alerts.analysed(msg.tasks)
        g = self.graph_model
        if msg.graph is not None and g is not None and msg.graph[0] == g.task_id:
            _, eta, node_etas, sigs = msg.graph
            g.update_analysis(eta, node_etas, sigs)
            for s in self._screens(TaskGraphScreen):
                s.update_summary()
                s.row_list.refresh_visible()

    @on(Worker.StateChanged)
    def worker_failed(self, event: Worker.StateChanged) -> None:
        """One place turns worker errors into a notification; the app keeps running."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            err = event.worker.error
            msg = str(err) if isinstance(err, WardenError) else f"{type(err).__name__}: {err}"
            self.notify(safe_line(msg, limit=300), title="error", severity="error", timeout=8, markup=False)

    # ------------------------------------------------------------------ navigation
    def open_graph(self, task_id: str) -> None:
        if self.follower.graph_task != task_id:
            self.graph_model = None
            self._early_nodes = {}
        self.follower.graph_task = task_id
        self.alerts.seen(task_id)
        self.push_screen(TaskGraphScreen(task_id))
        if self.graph_model is None or not self.graph_model.complete:
            self.graph_model = None
            self.load_graph(task_id)

    def graph_closed(self, task_id: str) -> None:
        if self.follower.graph_task == task_id and not any(
                s.task_id == task_id for s in self._screens(TaskGraphScreen) if s.is_attached):
            self.follower.graph_task = None
            self.graph_model = None

    def open_node(self, task_id: str, key: str) -> None:
        self.follower.detail_key = (task_id, key)
        if self.detail is not None and (self.detail.node.task_id, self.detail.node.key) != self.follower.detail_key:
            self.detail = None
        self.alerts.seen(task_id, key)
        self.push_screen(NodeDetailScreen(task_id, key))
        self.request("detail", (task_id, key))

    def pop_screen(self):  # type: ignore[override]
        screen = self.screen
        result = super().pop_screen()
        if isinstance(screen, TaskGraphScreen):
            if not any(s is not screen and s.task_id == screen.task_id for s in self._screens(TaskGraphScreen)):
                self.follower.graph_task = None
                self.graph_model = None
        elif isinstance(screen, NodeDetailScreen):
            rest = [s for s in self._screens(NodeDetailScreen) if s is not screen]
            self.follower.detail_key = (rest[-1].task_id, rest[-1].key) if rest else None
        return result

    @work(thread=True, exit_on_error=False, group="ledger")
    def _load(self, what: str, fn: Callable[[], Any]) -> None:
        self.post_message(Loaded(what, fn()))

    @on(Loaded)
    def loaded_data(self, msg: Loaded) -> None:
        kind = {"handoffs": HandoffInboxScreen, "runs": RunsScreen}.get(msg.what)
        if kind is not None:
            for s in self._screens(kind):
                s.show(msg.data)


def console_app(*, ledger: str, runs: str = "runs", read_only: bool = False, operator: str = "",
                project: str | None = None, records: str | None = None, bell: bool = True,
                on_alert: Sequence[str] | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> WardenApp:
    """The app exactly as `warden console` runs it (the benchmark drives this one)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)  # the UI thread waits at most this for the interpreter
    return WardenApp(ledger, runs, read_only=read_only, operator=operator, project=project, records=records,
                     bell=bell, on_alert=on_alert, connect_timeout_s=connect_timeout_s)


def run_console(*, ledger: str, runs: str = "runs", read_only: bool = False, operator: str = "",
                project: str | None = None, records: str | None = None, bell: bool = True,
                on_alert: Sequence[str] | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> int:
    """`warden console`: run the app; exit 4 when the ledger could not be opened."""
    app = console_app(ledger=ledger, runs=runs, read_only=read_only, operator=operator, project=project,
                      records=records, bell=bell, on_alert=on_alert, connect_timeout_s=connect_timeout_s)
    if ascii_on():  # a plain terminal: only what its font draws reaches it (console/plainterm.py)
        app.driver_class = plain_driver(app.driver_class, font_of())
    app.run()
    if app.failed:  # the ledger could not be opened: exit 4, "ledger unavailable" (console/cli/errors.py)
        print(f"warden: {safe_line(app.failed)}", file=sys.stderr)
        return 4
    return int(app.return_code or 0)


__all__ = ["WardenApp", "console_app", "run_console"]

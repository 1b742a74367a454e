"""A task's graph: every node in topological order, indented by depth, deps beside it.

The screen owns its graph (``console.model.GraphModel``): on mount it watches the task's nodes on
the feed hub, then reads the graph in pages from one snapshot in its own thread worker (the first
rows paint after one small page; the rest stream in while the list is already usable); from then on
it patches the rows the hub's ``nodes_changed`` brings. Closing the screen drops the watch and the
model with it.
"""

from __future__ import annotations

import threading
from typing import Iterable

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.reactive import var
from textual.widget import Widget
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from store.errors import LedgerUnavailable, NotFound
from store.reading.feed import graph_pages
from store.reading.cli_json import budget_json
from store.views import GraphRow

from ..explain import task_estimate_text
from ..glyphs import NODE_GLYPHS, budget_label, duration_label, eta_label, node_status_label, pause_label
from ..glyphs import MARKS, signals_label, task_status_label
from ..hub import NodesChanged, TasksChanged
from ..messages import AnalysisReady, GraphPageReady, LedgerStatus
from ..model import GRAPH_COLUMNS, GraphModel, progress_text, signal_text
from ..text import safe_line
from ..widgets import InfoLine, RowList
from .base import ListScreen

# The rows of a page the loading thread reads after the first (the first: the rows on screen). The
# thread builds each row in Python (about 6 µs of CPU a row, holding the interpreter the UI draws
# with) and the UI appends the page to the model (2 µs a row) before the thread reads the next: at
# 2,000 rows a page each turn held the UI up to 12 + 4 ms of CPU, five to ten times that on a busy
# machine, and a commit that landed meanwhile waited for it. 500 rows a page keep each turn a
# quarter of that (docs/console.md "A big graph while it loads").
LOAD_PAGE = 500
# Between pages the thread waits, at most this long, while a change of the ledger is on its way to
# the screen (from the feed's wake-up until the change is drawn: ``LedgerFollower.quiet``), so a
# commit's read, application and frame never share the interpreter with a page being built.
LIVE_FIRST_S = 0.05


class TaskGraphScreen(ListScreen):
    list_id = "graph"

    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("enter", "open", "Open", id="open"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("x", "explain", "Explain", id="explain"),
        Binding("m", "app.mind", "Mind", id="mind-open"),  # the task's mind (console/screens/mind.py)
    ]

    #: pages of the graph applied (the first one makes the rows appear; tests and the benchmark watch it)
    pages: var[int] = var(0, init=False)

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.header = f"task {safe_line(task_id)}"
        self.graph: GraphModel | None = None  # made on mount; the rows arrive in pages
        self.missing = False  # the task is not in the ledger
        self._generation = 0  # the graph's loads (a replaced ledger file loads it again)

    def compose_body(self) -> Iterable[Widget]:
        self.graph = GraphModel(self.task_id, self.wapp.now)
        yield InfoLine(id="summary")
        explain = Static("", id="explain", markup=False)
        explain.display = False
        yield explain
        yield RowList(self.graph, GRAPH_COLUMNS, id="graph")
        yield InfoLine(id="info")
        yield self._filter_input("filter: text, status:running, kind:llm_call")

    def on_mount(self) -> None:
        hub = self.wapp.hub
        hub.watch_graph(self, self.task_id)  # first, so no change after the snapshot is missed
        hub.subscribe(self, hub.nodes_changed, self._nodes_changed)
        hub.subscribe(self, hub.tasks_changed, self._tasks_changed)
        hub.subscribe(self, hub.analysed, self._analysed)
        hub.subscribe(self, hub.reloaded, self._reloaded)
        hub.show(self)  # its rows on screen get their estimates and signals
        self._generation += 1
        self._load(self._generation)
        self.model_ready()

    @property
    def model(self) -> GraphModel | None:
        """The graph, once its first page is in."""
        g = self.graph
        return g if g is not None and g.started else None

    def model_ready(self) -> None:
        """The graph (re)loaded: point the list at it."""
        m = self.model
        lst = self.row_list
        if m is not None:
            lst.source = m
            inp = self.query_one("#filter", Input)
            if inp.value:
                m.set_filter(inp.value)
        lst.reset()
        self.update_summary()
        self.update_info()

    # ---- the graph's pages (a thread worker; one snapshot)
    @work(thread=True, exclusive=True, exit_on_error=False, group="graph")
    def _load(self, generation: int) -> None:
        """The graph, page by page from one snapshot (``store.reading.feed.graph_pages``), each posted here.

        Each page waits until the UI has applied and painted the previous one. Without that, this
        thread (pure Python while it builds rows) holds the GIL and the UI thread, which drops
        it at every select(), waits up to a switch interval each time it wants it back: the first
        rows of a 100k-node graph painted after 1.1 s although the page was read in 0.25 s."""
        worker = get_current_worker()
        follower = self.wapp.follower
        quiet, me = follower.quiet, threading.get_ident()
        follower.loaders.add(me)
        try:
            for page in graph_pages(self.wapp.feed, self.task_id, page=LOAD_PAGE):
                if worker.is_cancelled:
                    return
                ack = threading.Event()
                self.post_message(GraphPageReady(self.task_id, page, ack, generation=generation))
                while not ack.wait(0.2):
                    if worker.is_cancelled:
                        return
                quiet.wait(LIVE_FIRST_S)  # a change on its way first (bounded: under a fleet's writes it is seldom quiet)
        except NotFound:
            self.post_message(GraphPageReady(self.task_id, None, generation=generation))
        except LedgerUnavailable as e:
            self.app.post_message(LedgerStatus(str(e), self.wapp.follower))
        finally:
            follower.loaders.discard(me)

    @on(GraphPageReady)
    def _page(self, msg: GraphPageReady) -> None:
        msg.stop()
        if msg.ack is not None:
            self.app.call_after_refresh(msg.ack.set)
        page, g = msg.page, self.graph
        if msg.generation != self._generation or g is None:
            return
        if page is None:
            self.missing = True
            self.wapp.notify(f"task {safe_line(msg.task_id)} is not in the ledger", severity="error", markup=False)
            return
        if page.start == 0:
            g.start(page.task, page.nodes, loaded_at=page.at, total=page.total, last=page.last)
            self.model_ready()
            self.wapp.analysis.graph_loaded(g, first=True, last=False)  # the first screen's P80s, at once
        elif g.started and not g.complete:
            g.extend(page.nodes, last=page.last)
            self.rows_arrived()
        else:
            return
        self.pages += 1
        if page.last:
            self.wapp.analysis.graph_loaded(g, first=False, last=True)

    # ---- what the feed hub brings (console/hub.py)
    def _nodes_changed(self, change: NodesChanged) -> None:
        g = self.graph
        views, as_of = change.of(self.task_id)
        if g is None or not views:
            return
        rows, reshaped = g.apply(views, as_of)
        if g.started:
            self.data_changed(rows, reshaped)

    def _tasks_changed(self, change: TasksChanged) -> None:
        g = self.model
        if g is None or self.task_id not in change.task_ids:
            return
        tasks = self.wapp.tasks_model
        i = tasks.index.get(self.task_id)
        if i is not None:
            g.set_task(tasks.rows[i].view)
            self.update_summary()

    def _analysed(self, msg: AnalysisReady) -> None:
        g = self.model
        if msg.graph is None or g is None or msg.graph[0] != self.task_id:
            return
        _, eta, node_etas, sigs = msg.graph
        g.update_analysis(eta, node_etas, sigs)
        self.update_summary()
        self.row_list.refresh_visible()

    def _reloaded(self, _cursor: int) -> None:
        """The ledger was read afresh (its file replaced): the graph too, from a new snapshot."""
        self.graph = GraphModel(self.task_id, self.wapp.now)
        self.row_list.source = self.graph
        self.missing = False
        self._generation += 1
        self._load(self._generation)
        self.model_ready()

    # ---- what the app asks of every screen (generic hooks)
    def settled(self) -> bool:
        return self.missing or (self.graph is not None and self.graph.complete)

    def shown_node(self, task_id: str, key: str) -> GraphRow | None:
        g = self.model
        if g is None or task_id != self.task_id or key not in g.index:
            return None
        return g.nodes[g.index[key]]

    def tasks_on_screen(self) -> tuple[str, ...]:
        return ()

    def graph_on_screen(self) -> tuple[GraphModel, range] | None:
        g = self.model
        return (g, self.row_list.visible_range()) if g is not None else None

    def selected_task(self) -> str | None:
        return self.task_id

    def selected_node(self) -> str | None:
        m = self.model
        n = m.node_at(self.row_list.cursor) if m else None
        return n.key if n else None

    def select_key(self, key: str) -> bool:
        m = self.model
        pos = m.position_of_key(key) if m else None
        if pos is None:
            return False
        self.row_list.cursor = pos
        return True

    def action_back(self) -> None:
        self.wapp.pop_screen()

    def action_open(self) -> None:
        key = self.selected_node()
        if key is not None:
            self.wapp.open_node(self.task_id, key)

    def action_explain(self) -> None:
        """x: the task's estimate explained (P50, P80, samples, confidence, why, the nodes that weigh
        most) and its signals, under the summary; x again hides it."""
        panel = self.query_one("#explain", Static)
        panel.display = not panel.display
        self.update_summary()

    @on(RowList.Highlighted)
    def _highlighted(self) -> None:
        self.update_info()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        m = self.model
        if m is not None:  # the cursor stays on its node, else on the one that took its place
            self.row_list.refilter(lambda: m.set_filter(event.value), key_at=lambda p: _key_of(m.node_at(p)),
                                   find=lambda key: m.position_of_key(key) if isinstance(key, str) else None)
        self.update_info()

    def rows_arrived(self) -> None:
        """The next page of a streaming graph: more rows, nothing on screen changed."""
        self.row_list.grow()
        self.update_summary()
        self.update_info()

    def update_summary(self) -> None:
        m = self.model
        out = Text(no_wrap=True, overflow="ellipsis")
        t = m.task if m is not None else None
        if m is None or t is None:
            out.append(f"{safe_line(self.task_id)}  loading…", style="dim")
        else:
            counts = m.counts()
            out.append(safe_line(t.task_id), style="bold")
            out.append(f"  {task_status_label(t.status)}  {progress_text(counts)}")
            eta = m.task_eta or {}
            if eta.get("p50_s") is not None:
                out.append(f"  P50 {duration_label(eta['p50_s'])}")
            out.append(f"  P80 {eta_label(m.task_eta)}")
            b = budget_json(t)
            out.append(f"  budget {budget_label(b)}")
            if b["paused_since"]:
                out.append("  " + pause_label(b))
            if t.status == "aborted" or b["gate"] == "stop":
                out.append("  o: report", style="bold")
            out.append(f"  {signals_label(m.task_signals)}")
            if t.handoffs_open:
                out.append(f"  ✋{t.handoffs_open}")
            if not m.complete:
                out.append(f"  loading {len(m.nodes)}/{m.total}…", style="dim")
            if t.title:
                out.append("  " + safe_line(t.title), style="dim")
        self.query_one("#summary", InfoLine).update(out)
        panel = self.query_one("#explain", Static)
        if panel.display:
            panel.update(task_estimate_text(m.task_eta, m.task_signals) if m is not None
                         else Text("loading…", style="dim"))
        if m is not None and m.signals:
            self.update_info()  # the selection's first signal may have changed with the analysis

    def update_info(self) -> None:
        m = self.model
        out = Text(no_wrap=True, overflow="ellipsis")
        n = m.node_at(self.row_list.cursor) if m else None
        if m is not None and n is None:
            out.append("no node matches the filter" if m.filter_text else "no nodes yet", style="dim")
        elif m is not None and n is not None:
            out.append(safe_line(n.key), style="bold")
            out.append(f" {node_status_label(n.status)}")
            sigs = m.signals.get(n.key)
            if sigs:
                out.append("  " + signal_text(sigs[0]), style="bold")
                if len(sigs) > 1:
                    out.append(f" +{len(sigs) - 1}")
            out.append("  deps: " + (", ".join(safe_line(d) for d in n.deps) or MARKS["dash"]))
            deps = m.dependents.get(n.key, [])
            out.append("  dependents: " + (", ".join(safe_line(d) for d in deps[:8]) or MARKS["dash"]))
            if len(deps) > 8:
                out.append(f" +{len(deps) - 8}")
        if m is not None and m.filter_text:
            out.append(f"   [/ {safe_line(m.filter_text)}: {m.row_count()} of {len(m.nodes)}]", style="dim")
        self.query_one("#info", InfoLine).update(out)



def _key_of(node: GraphRow | None) -> str | None:
    return None if node is None else node.key


__all__ = ["TaskGraphScreen", "NODE_GLYPHS"]

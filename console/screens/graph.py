"""A task's graph: every node in topological order, indented by depth, deps beside it."""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Input, Static

from ..explain import task_estimate_text
from ..glyphs import NODE_GLYPHS, budget_label, duration_label, eta_label, node_status_label, pause_label
from ..glyphs import MARKS, signals_label, task_status_label
from ..model import GRAPH_COLUMNS, progress_text, signal_text
from ..text import safe_line
from ..widgets import InfoLine, RowList
from .base import ListScreen

from store.report import budget_json


class TaskGraphScreen(ListScreen):
    list_id = "graph"

    BINDINGS = [
        Binding("escape", "back", "Back", id="back"),
        Binding("enter", "open", "Open", id="open"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("x", "explain", "Explain", id="explain"),
        Binding("m", "app.mind", "Mind", id="mind-open"),  # the task's mind (console/screens/mind.py)
    ]

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.header = f"task {safe_line(task_id)}"

    def compose_body(self) -> Iterable[Widget]:
        yield InfoLine(id="summary")
        explain = Static("", id="explain", markup=False)
        explain.display = False
        yield explain
        yield RowList(_EmptySource(), GRAPH_COLUMNS, id="graph")
        yield InfoLine(id="info")
        yield self._filter_input("filter: text, status:running, kind:llm_call")

    def on_mount(self) -> None:
        self.model_ready()

    @property
    def model(self):
        m = self.wapp.graph_model
        return m if m is not None and m.task_id == self.task_id else None

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
        if m is not None:
            m.set_filter(event.value)
            self.row_list.reset()
        self.update_info()

    def rows_arrived(self) -> None:
        """The next page of a streaming graph: more rows, nothing on screen changed."""
        self.row_list.grow()
        self.update_summary()
        self.update_info()

    def update_summary(self) -> None:
        m = self.model
        out = Text(no_wrap=True, overflow="ellipsis")
        if m is None:
            out.append(f"{safe_line(self.task_id)}  loading…", style="dim")
        else:
            t = m.task
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
        elif n is not None:
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

    def tick(self) -> None:
        super().tick()


class _EmptySource:
    def row_count(self) -> int:
        return 0

    def row_cells(self, index: int):
        return []


__all__ = ["TaskGraphScreen", "NODE_GLYPHS"]

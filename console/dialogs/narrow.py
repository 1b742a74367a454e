"""Narrow: change a task's preconditions (a key and its new value, chosen from what the nodes
name) or exclude nodes (marked in a list); what falls out of scope is abandoned."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable

from textual import on, work
from textual.containers import Horizontal
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Label, Select, SelectionList

from store.actions import NarrowParams
from store.errors import WardenError
from store.jsontypes import JsonObject

from ..glyphs import node_status_label
from ..host import ConsoleHost
from ..text import safe_line
from ..widgets import MarkList
from .base import ActionDialog
from .plan import PlanPreview, plural
from .registry import dialog_for

if TYPE_CHECKING:
    from store.actions import Plan
    from store.views import NodeView


class NarrowChoices(Message):
    def __init__(self, keys: dict[str, dict[str, int]], current: JsonObject, nodes: list[tuple[str, str]],
                 error: str | None = None) -> None:
        super().__init__()
        self.keys, self.current, self.nodes, self.error = keys, current, nodes, error


def precondition_values(nodes: Iterable[NodeView]) -> dict[str, dict[str, int]]:
    """{key: {json value: number of nodes naming it}} over the nodes' preconditions (a list names
    each of its elements)."""
    out: dict[str, dict[str, int]] = {}
    for n in nodes:
        for k, v in (n.preconditions or {}).items():
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                try:
                    j = json.dumps(x, sort_keys=True, ensure_ascii=False)
                except (TypeError, ValueError):
                    continue
                out.setdefault(str(k), {})
                out[str(k)][j] = out[str(k)].get(j, 0) + 1
    return out


@dialog_for(NarrowParams)
class NarrowDialog(ActionDialog):
    def __init__(self, task_id: str, node: str | None = None, *, reason: str = "",
                 exclude: Iterable[str] = ()) -> None:
        super().__init__(task_id, node, reason=reason)
        self.preselected = list(exclude)
        self.choices: NarrowChoices | None = None

    @classmethod
    def opened(cls, host: ConsoleHost, task_id: str, node: str | None, *, reason: str = "",
               exclude: Iterable[str] = ()) -> "NarrowDialog":
        return cls(task_id, node, reason=reason, exclude=exclude)

    def target_label(self) -> str:
        return f"task {safe_line(self.task_id)}: what is out of scope is abandoned (kept for audit)"

    def compose_options(self) -> Iterable[Widget]:
        with Horizontal(classes="field", id="narrow-set"):
            yield Label("set", classes="field-label")
            yield Select([], prompt="precondition", id="pre-key", compact=True)
            yield Label(" = ")
            yield Select([], prompt="new value", id="pre-value", compact=True)
        yield Label("or exclude nodes (space to mark):", classes="field-help")
        yield MarkList(id="exclude", compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self._load_choices()

    @work(thread=True, exclusive=True, exit_on_error=False, group="choices")
    def _load_choices(self) -> None:
        try:
            graph = self.host.feed.read(lambda ledger: ledger.graph(self.task_id))
        except WardenError as e:
            self.post_message(NarrowChoices({}, {}, [], error=str(e)))
            return
        self.post_message(NarrowChoices(precondition_values(graph.nodes), dict(graph.task.preconditions or {}),
                                        [(n.key, n.status) for n in graph.nodes]))

    @on(NarrowChoices)
    def _choices(self, msg: NarrowChoices) -> None:
        msg.stop()
        self.choices = msg
        if msg.error:
            self.query_one("#preview", PlanPreview).show_line(msg.error, style="bold")
            return
        keys = sorted(set(msg.keys) | set(msg.current))
        key_sel = self.query_one("#pre-key", Select)
        key_sel.set_options([(Content(safe_line(k, limit=30)), k) for k in keys])
        if not keys:
            key_sel.disabled = True
            self.query_one("#pre-value", Select).disabled = True
        excl = self.query_one("#exclude", SelectionList)
        pre = set(self.preselected)
        for key, status in msg.nodes[:5000]:
            excl.add_option((Content(f"{safe_line(key, limit=50)}  {node_status_label(status)}"), key,
                             key in pre))
        if pre:
            self.replan()
        elif self.plan_args() is None:
            self.query_one("#preview", PlanPreview).show_line(self.waiting_text())

    def _values_for(self, key: str) -> list[tuple[Content, str]]:
        assert self.choices is not None
        counts = self.choices.keys.get(key, {})
        cur = self.choices.current.get(key, None)
        cur_j = json.dumps(cur, sort_keys=True, ensure_ascii=False) if key in self.choices.current else None
        out = []
        for j, n in sorted(counts.items()):
            label = f"{safe_line(j, limit=30)} ({plural(n, 'node')})" + (" current" if j == cur_j else "")
            out.append((Content(label), j))
        if cur_j is not None and cur_j not in counts:
            out.append((Content(f"{safe_line(cur_j, limit=30)} current"), cur_j))
        return out

    @on(Select.Changed, "#pre-key")
    def _key_changed(self, event: Select.Changed) -> None:
        vals = self.query_one("#pre-value", Select)
        if isinstance(event.value, str):
            vals.set_options(self._values_for(event.value))
        else:
            vals.set_options([])
        self.replan()

    @on(Select.Changed, "#pre-value")
    def _value_changed(self) -> None:
        self.replan()

    @on(SelectionList.SelectedChanged, "#exclude")
    def _exclude_changed(self) -> None:
        self.replan()

    def plan_args(self) -> dict[str, object] | None:
        try:
            key = self.query_one("#pre-key", Select).value
            value = self.query_one("#pre-value", Select).value
            exclude = list(self.query_one("#exclude", SelectionList).selected)
        except Exception:  # noqa: BLE001 - not mounted yet
            return None
        assign: JsonObject = {}
        if isinstance(key, str) and isinstance(value, str):
            assign[key] = json.loads(value)
        if not assign and not exclude:
            return None
        return {"set": assign, "exclude": exclude}

    def waiting_text(self) -> str:
        if self.choices is None:
            return "reading the task's nodes…"
        return "choose a precondition and its new value, or mark nodes to exclude: the preview follows"

    def apply_label(self, plan: "Plan | None") -> str:
        if plan is None:
            return "Narrow"
        return f"Narrow: abandon {plural(len(plan.abandoned), 'node')}"


__all__ = ["NarrowChoices", "NarrowDialog", "precondition_values"]

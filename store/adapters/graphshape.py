"""A LangGraph graph's shape and its checkpoints, as :mod:`store.adapters.langgraph` reads them:
where each node may go next (for "can the graph come back to this node?"), what ran on the way to
a checkpoint, a node's last update, and updates made storable as ledger outputs and observations.
Pure reads of the compiled graph and its checkpointer; nothing here writes the ledger.
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterable, Iterator, Mapping, Never, Protocol, Sequence, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.types import All, Command, StateSnapshot, StreamMode

from store.jsontypes import JsonMapping, JsonObject, JsonValue
from store.ledger.fenced import OUTPUT_CAP

__all__ = ["Graph", "ancestors", "jsonable", "last_update", "observation", "ran_nodes", "reachable", "successors"]

_In = TypeVar("_In", contravariant=True)


class Graph(Protocol[_In]):
    """What Warden uses of a compiled LangGraph graph (``StateGraph(...).compile(checkpointer=...)``):
    its checkpointed state, a state update and a streamed run. Its shape (``builder``, ``channels``,
    ``checkpointer``) is read with ``getattr``: it is not part of LangGraph's typed API. ``_In``: the
    graph's input (its state type)."""

    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot: ...

    def update_state(self, config: RunnableConfig, values: JsonMapping | None,
                     as_node: str | None = None) -> RunnableConfig: ...

    def stream(self, input: _In | Command[str] | None, config: RunnableConfig | None = None, *,  # noqa: A002 - LangGraph's word
               stream_mode: StreamMode | Sequence[StreamMode] | None = None,
               interrupt_before: All | Sequence[str] | None = None) -> Iterator[JsonObject]: ...


# ---------------------------------------------------------------------- the graph's shape
def successors(graph: Graph[Never]) -> dict[str, set[str]]:
    """Where each node may go next, from the builder's edges, branches and declared destinations;
    a branch without known ends (or a node with Command gotos undeclared) may go anywhere."""
    b = getattr(graph, "builder", None)
    names = set(getattr(b, "nodes", {}) or {})
    succ: dict[str, set[str]] = {n: set() for n in names}
    if b is None:
        return {n: set(names) for n in names}
    for start, end in getattr(b, "edges", ()):
        succ.setdefault(start, set()).add(end)
    for starts, end in getattr(b, "waiting_edges", ()):
        for s in starts:
            succ.setdefault(s, set()).add(end)
    for start, branches in (getattr(b, "branches", {}) or {}).items():
        for spec in branches.values():
            ends = getattr(spec, "ends", None)
            succ.setdefault(start, set()).update(ends.values() if ends else names)
    for name, spec in (b.nodes or {}).items():
        ends = getattr(spec, "ends", None)
        if ends:
            succ[name].update(ends)
    return succ


def reachable(succ: Mapping[str, set[str]], starts: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(succ.get(n, ()))
    return seen


def ancestors(graph: Graph[Never], snap: StateSnapshot | None) -> Iterator[StateSnapshot]:
    while snap is not None:
        yield snap
        parent = snap.parent_config
        snap = graph.get_state(parent) if parent else None


def ran_nodes(graph: Graph[Never], snap: StateSnapshot) -> set[str]:
    """Every node that ran on the way to this checkpoint."""
    out: set[str] = set()
    first = True
    for anc in ancestors(graph, snap):
        if not first:
            out.update(anc.next)
        first = False
    return out


def last_update(graph: Graph[Never], snap: StateSnapshot, key: str) -> JsonValue:
    """The update ``key`` wrote the last time it ran on the way to ``snap`` (from the checkpoints)."""
    for anc in ancestors(graph, snap):
        for t in anc.tasks:
            if t.name == key and t.result is not None:
                return jsonable(t.result)
    return None


# ---------------------------------------------------------------------- outputs
def jsonable(value: object) -> JsonValue:
    """A node's update as JSON the ledger can store (non-JSON values as their repr; an update too
    big for a node output becomes its digest and size)."""
    text = json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
    if len(text.encode("utf-8")) > OUTPUT_CAP - 1024:
        return {"truncated": True, "bytes": len(text.encode("utf-8")),
                "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    return json.loads(text)


def observation(update: object) -> str:
    """One loop iteration's update as an observation: one line per leaf, so the new-information
    measure sees what changed and what repeats."""
    return json.dumps(update, sort_keys=True, indent=1, default=repr, ensure_ascii=False)

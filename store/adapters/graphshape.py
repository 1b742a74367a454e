"""A LangGraph graph's shape and its checkpoints, as :mod:`store.adapters.langgraph` reads them:
where each node may go next (for "can the graph come back to this node?"), what ran on the way to
a checkpoint, a node's last update, and updates made storable as ledger outputs and observations.
Pure reads of the compiled graph and its checkpointer; nothing here writes the ledger.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Mapping

from ..ledger.fenced import OUTPUT_CAP

__all__ = ["ancestors", "jsonable", "last_update", "observation", "ran_nodes", "reachable", "successors"]


# ---------------------------------------------------------------------- the graph's shape
def successors(graph: Any) -> dict[str, set[str]]:
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


def ancestors(graph: Any, snap: Any) -> Iterable[Any]:
    while snap is not None:
        yield snap
        parent = snap.parent_config
        snap = graph.get_state(parent) if parent else None


def ran_nodes(graph: Any, snap: Any) -> set[str]:
    """Every node that ran on the way to this checkpoint."""
    out: set[str] = set()
    first = True
    for anc in ancestors(graph, snap):
        if not first:
            out.update(anc.next)
        first = False
    return out


def last_update(graph: Any, snap: Any, key: str) -> Any:
    """The update ``key`` wrote the last time it ran on the way to ``snap`` (from the checkpoints)."""
    for anc in ancestors(graph, snap):
        for t in anc.tasks:
            if t.name == key and t.result is not None:
                return jsonable(t.result)
    return None


# ---------------------------------------------------------------------- outputs
def jsonable(value: Any) -> Any:
    """A node's update as JSON the ledger can store (non-JSON values as their repr; an update too
    big for a node output becomes its digest and size)."""
    text = json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
    if len(text.encode("utf-8")) > OUTPUT_CAP - 1024:
        return {"truncated": True, "bytes": len(text.encode("utf-8")),
                "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    return json.loads(text)


def observation(update: Any) -> str:
    """One loop iteration's update as an observation: one line per leaf, so the new-information
    measure sees what changed and what repeats."""
    return json.dumps(update, sort_keys=True, indent=1, default=repr, ensure_ascii=False)

"""Pure graph algorithms over node keys: topological order, closures, cycle detection.

``deps`` maps a node to the nodes it depends on (its upstream). Nothing here touches a database.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, Mapping, Sequence


def topological_order(keys: Sequence[str], deps: Mapping[str, Iterable[str]]) -> list[str] | None:
    """Kahn's algorithm, stable in the given key order; None when there is a cycle.

    Dependencies outside ``keys`` are ignored (they are already placed).
    """
    keyset = set(keys)
    indeg = {k: 0 for k in keys}
    down: dict[str, list[str]] = {k: [] for k in keys}
    for k in keys:
        for d in set(deps.get(k, ())):
            if d in keyset:
                indeg[k] += 1
                down[d].append(k)
    index = {k: i for i, k in enumerate(keys)}
    import heapq

    heap = [index[k] for k in keys if indeg[k] == 0]
    heapq.heapify(heap)
    out: list[str] = []
    while heap:
        k = keys[heapq.heappop(heap)]
        out.append(k)
        for c in down[k]:
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(heap, index[c])
    return out if len(out) == len(keys) else None


def dependents_map(deps: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Invert ``deps``: node → the nodes that depend on it."""
    down: dict[str, list[str]] = {}
    for k, ds in deps.items():
        down.setdefault(k, [])
        for d in ds:
            down.setdefault(d, []).append(k)
    return down


def downstream_closure(starts: Iterable[str], dependents: Mapping[str, Iterable[str]]) -> set[str]:
    """The start nodes and everything that (transitively) depends on them."""
    seen: set[str] = set()
    queue = deque(starts)
    while queue:
        k = queue.popleft()
        if k in seen:
            continue
        seen.add(k)
        queue.extend(c for c in dependents.get(k, ()) if c not in seen)
    return seen


def upstream_closure(starts: Iterable[str], deps: Mapping[str, Iterable[str]]) -> set[str]:
    """The start nodes and everything they (transitively) depend on."""
    return downstream_closure(starts, deps)

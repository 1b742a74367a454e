"""Pure graph algorithms over node keys: topological order and cycle detection.

``deps`` maps a node to the nodes it depends on (its upstream). Nothing here touches a database;
closures over a stored graph are one recursive query (``store.actions.planning.closure_nodes``).
"""

from __future__ import annotations

import heapq
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


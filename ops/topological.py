"""A stable topological order: what the ONNX importer sorts a graph's nodes with and the task
graph sorts 1F1B's tasks with (a forward that waits for a backward the phases list after it)."""

from __future__ import annotations

import heapq
from typing import Iterable, Sequence


def stable_order(deps: Sequence[Iterable[int]]) -> tuple[list[int], list[int]]:
    """(an order of the items 0..n-1 in which each comes after the items `deps[i]` names,
    those that wait on a cycle): Kahn's algorithm taking the earliest ready item first, so
    that items already in order keep it. The items left out of the order are the second
    list, in index order; it is empty where there is no cycle."""
    waiting = [0] * len(deps)
    dependents: dict[int, list[int]] = {}
    for index, needed in enumerate(deps):
        for d in needed:
            waiting[index] += 1
            dependents.setdefault(d, []).append(index)
    ready = [index for index, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for dependent in dependents.get(index, ()):
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, dependent)
    return order, [index for index, count in enumerate(waiting) if count]

"""The data sets (`feeds.DataSet`) an executor has placed on its workers.

Each is scattered once, on its first use, whole to every worker that loads from it, while it fits
in that worker's share for kept data (`KEPT_SHARE` of its memory limit); one that does not fit is
not kept, and its batches travel with each iteration as `set_tensor`'s do. A data set is
released when its DataSet is garbage collected (a Keras `fit` ends, a loader is dropped) or the
executor closes.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from typing import Any

from .cluster import watched_scatter
from .feeds import DataSet

KEPT_SHARE = 0.25               # of a worker's memory limit, for the data sets it keeps
UNKNOWN_LIMIT_BYTES = 4 << 30   # a worker's memory limit when Dask reports none


class KeptData:
    def __init__(self, client, memory_limits: dict[str, int | None]):
        self.client = client
        self.budget = {w: KEPT_SHARE * (limit or UNKNOWN_LIMIT_BYTES)
                       for w, limit in memory_limits.items()}
        self.used: dict[str, int] = defaultdict(int)
        # name -> ({worker: future}, the workers, bytes)
        self.placed: dict[str, tuple[dict[str, Any], tuple[str, ...], int]] = {}

    def place(self, data: DataSet, workers: list[str]):
        """The futures of `data` on `workers` ({worker: future}), scattering it there first;
        None if it does not fit their share."""
        found = self.placed.get(data.name)
        if found is not None and set(workers) <= set(found[1]):
            return found[0]
        if found is not None:  # read by other workers now (a new strategy): place it again
            self.release(data.name)
        if any(self.used[w] + data.nbytes > self.budget.get(w, 0) for w in workers):
            return None
        future = watched_scatter(self.client, data.array, workers,
                                 f"the upload of data set {data.name}")
        self.placed[data.name] = (future, tuple(workers), data.nbytes)
        for w in workers:
            self.used[w] += data.nbytes
        weakref.finalize(data, self.release, data.name)
        return future

    def release(self, name: str) -> None:
        found = self.placed.pop(name, None)
        if found is not None:
            for w in found[1]:
                self.used[w] -= found[2]

    def close(self) -> None:
        for name in list(self.placed):
            self.release(name)

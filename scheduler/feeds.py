"""Batches named by their rows of a data set the devices' side keeps, instead of shipped.

A data loader's array, or the arrays Keras `fit` trains on, become a `DataSet`: placed on the
workers that load from it once (`DaskExecutor` scatters it on first use and drops it when the
DataSet is gone), after which each iteration's batch travels as a `Rows` of it, a slice or an
index array (a shuffled order's share), and is cut out where it is used. In this process a
batch is simply the rows of the host array. A fed value is either a host array (`set_tensor`)
or a `Rows`; `host_batch` turns either into the array. A worker is given only its `Piece` of a
batch, the hull of the boxes its device loads (`piece`, `rows_piece`), so that no device copies
or receives the others' samples.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from ..ops.box import Box

_NAMES = itertools.count()


@dataclass(frozen=True, eq=False)
class DataSet:
    """A host array of samples (first dim) whose batches are `Rows` of it. `name` tells the
    executors' copies apart; equality is identity."""

    array: np.ndarray
    name: str = field(default_factory=lambda: f"dataset-{next(_NAMES)}")

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, index: Union[slice, np.ndarray]) -> "Rows":
        """The rows `index` (a slice, or an int array of row numbers), as a batch to feed."""
        return Rows(self, index)


@dataclass(frozen=True, eq=False)
class Rows:
    """The batch made of the rows `index` (a slice, or an int array of row numbers) of
    `data`."""

    data: DataSet
    index: Union[slice, np.ndarray]


@dataclass(frozen=True, eq=False)
class Piece:
    """The part `box` (in the whole batch's coordinates) of a batch, as a device is given it."""

    box: Box
    array: Any

    def cut(self, box: Box):
        """`box` of the batch (within this piece)."""
        return self.array[box.relative_to(self.box)]


def piece(batch: np.ndarray, box: Box) -> Piece:
    """`box` of a host batch, in memory of its own (it travels to a worker)."""
    return Piece(box, np.ascontiguousarray(batch[box.relative_to(Box.full(batch.shape))]))


def rows_piece(data: np.ndarray, index: Union[slice, np.ndarray], box: Box) -> Piece:
    """`box` of the batch made of the rows `index` of `data` (a data set a worker keeps): only
    the rows the box holds are taken."""
    (start, stop), rest = box.bounds[0], box.bounds[1:]
    rows = data[index][start:stop] if isinstance(index, slice) else data[index[start:stop]]
    return Piece(box, rows[(slice(None), *(slice(a, b) for a, b in rest))])


def host_batch(feed: Any) -> np.ndarray:
    """The batch a fed value (a host array, or `Rows`) stands for, as a host array."""
    return feed.data.array[feed.index] if isinstance(feed, Rows) else feed


def host_batches(feeds: dict[int, Any]) -> dict[int, np.ndarray]:
    """`feeds` with every `Rows` cut from its host array (the dict itself when there is none)."""
    if not any(isinstance(feed, Rows) for feed in feeds.values()):
        return feeds
    return {tensor: host_batch(feed) for tensor, feed in feeds.items()}

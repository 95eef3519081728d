"""Which device updates which part of a replicated weight box (sharded weight updates).

A weight box held by k devices (data parallelism, or any split that replicates a weight; k up to
MAX_SHARDED_HOLDERS) is cut into k shards, one per holder, so that summing gradients, running
the optimizer and keeping its state are spread over the holders instead of all falling on the
first one: each holder sends shard j of its gradient to shard j's owner (reduce-scatter), which
sums the pieces, updates shard j with shard j's optimizer state (kept there only) and sends the
new shard j to every other holder (all-gather). The task graph
(`taskgraph.TaskGraphBuilder._update`), the executor's host access to optimizer state and the
simulator's memory model all read the shards from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..ops.box import Box


# Every holder sends each other shard's owner its piece and receives every other shard: the
# tasks of a box's update grow as the square of its holders, and beyond a few holders the
# search's simulations slow down more than the spread update gains in them
MAX_SHARDED_HOLDERS = 4


@dataclass(frozen=True)
class Shard:
    """A part of a weight box (in the weight's coordinates) and the holder that updates it."""

    box: Box
    owner: int


def shards(box: Box, holders: Sequence[int], most: int | None = MAX_SHARDED_HOLDERS
           ) -> tuple[Shard, ...]:
    """The shards of a box held by `holders` (its owner first): shard j on `holders[j]`, cut
    along the first dim at least as long as the number of holders, the lengths differing by at
    most one. A box held once, by more than `most` holders (None: no limit; collectives gather
    and sum the shards of any number), or with no dim that long, is one shard on its owner."""
    k = len(holders)
    dim = (next((d for d, n in enumerate(box.shape) if n >= k), None)
           if 1 < k and (most is None or k <= most) else None)
    if dim is None:
        return (Shard(box, holders[0]),)
    start, length = box.bounds[dim][0], box.shape[dim]
    cuts = [start + j * (length // k) + min(j, length % k) for j in range(k + 1)]
    return tuple(Shard(box.replace(dim, cuts[j], cuts[j + 1]), holder)
                 for j, holder in enumerate(holders))


def cut_limit(key, bucketed: frozenset) -> int | None:
    """`shards`'s `most` for the weight box `key`: no limit where the collectives gather and
    sum its shards (`bucketed`: `taskgraph.TaskGraph.bucketed_shards`), else the sends'
    MAX_SHARDED_HOLDERS."""
    return None if key in bucketed else MAX_SHARDED_HOLDERS

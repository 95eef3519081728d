"""Boxes: the one unit of data placement.

A box is a `(start, stop)` pair per tensor dimension, in batch-first (Python) order. A partition of
an operator computes one box of its output and reads boxes of its inputs and weights; moving data
between partitions is intersecting boxes. Every placement question in the project reduces to this
module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Box:
    """A half-open hyper-rectangle `[start, stop)` per dimension."""

    bounds: tuple[tuple[int, int], ...]

    @staticmethod
    def full(shape: Sequence[int]) -> "Box":
        return Box(tuple((0, int(n)) for n in shape))

    @property
    def ndim(self) -> int:
        return len(self.bounds)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(stop - start for start, stop in self.bounds)

    @property
    def starts(self) -> tuple[int, ...]:
        return tuple(start for start, _ in self.bounds)

    @property
    def volume(self) -> int:
        """Elements in the box (0 when empty); the simulator's inner loops call it."""
        volume = 1
        for start, stop in self.bounds:
            volume *= stop - start if stop > start else 0
        return volume

    def is_empty(self) -> bool:
        return any(stop <= start for start, stop in self.bounds)

    def intersect(self, other: "Box") -> "Box":
        if other.ndim != self.ndim:
            raise ValueError(f"cannot intersect a {self.ndim}-d box with a {other.ndim}-d box")
        return Box(tuple((max(a0, b0), min(a1, b1))
                         for (a0, a1), (b0, b1) in zip(self.bounds, other.bounds)))

    def overlap(self, other: "Box") -> "Box | None":
        """The intersection, or None when it is empty (checked dim by dim, to stop early)."""
        bounds = []
        for (a0, a1), (b0, b1) in zip(self.bounds, other.bounds):
            low, high = (a0 if a0 > b0 else b0), (a1 if a1 < b1 else b1)
            if high <= low:
                return None
            bounds.append((low, high))
        return Box(tuple(bounds))

    def contains(self, other: "Box") -> bool:
        return all(a0 <= b0 and b1 <= a1 for (a0, a1), (b0, b1) in zip(self.bounds, other.bounds))

    def relative_to(self, outer: "Box") -> tuple[slice, ...]:
        """Slices that cut this box out of an array holding `outer`."""
        return tuple(slice(s - o, e - o) for (s, e), (o, _) in zip(self.bounds, outer.bounds))

    @staticmethod
    def hull(boxes: Sequence["Box"]) -> "Box":
        """The smallest box holding all of `boxes` (of one rank)."""
        return Box(tuple((min(b.bounds[d][0] for b in boxes), max(b.bounds[d][1] for b in boxes))
                         for d in range(boxes[0].ndim)))

    def replace(self, dim: int, start: int, stop: int) -> "Box":
        bounds = list(self.bounds)
        bounds[dim] = (start, stop)
        return Box(tuple(bounds))

    def clip(self, shape: Sequence[int]) -> "Box":
        return self.intersect(Box.full(shape))

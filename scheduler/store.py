"""What one device holds: weights, optimizer state, and this iteration's activations/gradients.

Activations and gradients are kept as pieces, `(box, array)` per tensor. Reading a box returns the
piece itself when it matches, a view when one piece contains it, and otherwise assembles it from
the pieces that intersect it; gradient reads sum every overlapping piece, which is how partial
gradients from several consumers (or several partitions of one consumer) are reduced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ops.box import Box
from .memory_use import allocated_bytes

WeightKey = tuple[int, int, Box]  # (owner layer index, weight index, box)


@dataclass
class DeviceStore:
    device: int
    xp: Any
    weights: dict[WeightKey, Any] = field(default_factory=dict)
    weight_grads: dict[WeightKey, Any] = field(default_factory=dict)
    summed_wgrads: set[WeightKey] = field(default_factory=set)  # whose array a sum made here
    opt_state: dict[WeightKey, Any] = field(default_factory=dict)  # of the shard it updates
    # a sharded box (`ParallelConfig.shard_weights`): this device's own shard, (its box, its
    # array), kept between uses in place of the whole box, which `weights` holds only while
    # the layer's forward or backward uses it; and a box being gathered, by (key, phase)
    shards: dict[WeightKey, tuple[Box, Any]] = field(default_factory=dict)
    gathering: dict[tuple[WeightKey, str], Any] = field(default_factory=dict)
    incoming_wgrads: dict[WeightKey, list] = field(default_factory=dict)
    shard_grads: dict[WeightKey, Any] = field(default_factory=dict)  # summed, awaiting verdicts
    verdicts: dict[WeightKey, list[bool]] = field(default_factory=dict)  # shards' sums finite?
    values: dict[int, list[tuple[Box, Any]]] = field(default_factory=dict)
    grads: dict[int, list[tuple[Box, Any]]] = field(default_factory=dict)  # computed here
    received_grads: dict[int, list[tuple[Box, Any]]] = field(default_factory=dict)
    saved: dict[tuple[int, int], Any] = field(default_factory=dict)
    partials: dict[tuple[int, str, int], Any] = field(default_factory=dict)  # (layer, phase, part)
    communicator: Any = None  # sums buckets over devices (scheduler/collectives.py)
    baseline: int | None = None  # bytes allocated before the model was installed here
    released: set = field(default_factory=set)  # (kind, tensor) dropped at last use this time

    def held(self, kind: str, tensor: int) -> bool:
        """False where this iteration dropped the tensor's value or gradient ("value", "grad")
        at its last use (scheduler/last_use.py)."""
        return (kind, tensor) not in self.released

    def __post_init__(self):
        self.baseline = allocated_bytes(self.xp)

    def allocated(self) -> int | None:
        """Bytes allocated now beyond `baseline` (scheduler/memory_use.py), or None."""
        now = allocated_bytes(self.xp)
        return None if now is None or self.baseline is None else now - self.baseline

    def add_weight_grad(self, key: WeightKey, dw) -> None:
        """Add a partition's gradient of a weight box to the box's gradient. The first is kept
        as its kernel made it; the second is added into a new array this store then owns, and
        every later one (a pipeline stage's micro-batches: one a part) into that array in
        place, so that m parts make two arrays, not m (the same additions in the same
        order)."""
        total = self.weight_grads.get(key)
        if total is None:
            self.weight_grads[key] = dw
        elif key in self.summed_wgrads:
            total += dw
        else:
            self.weight_grads[key] = total + dw
            self.summed_wgrads.add(key)

    def clear_weight_grads(self) -> None:
        self.weight_grads.clear()
        self.summed_wgrads.clear()

    def clear_iteration(self) -> None:
        self.values.clear()
        self.grads.clear()
        self.received_grads.clear()
        self.saved.clear()
        self.partials.clear()
        self.released.clear()
        self.gathering.clear()

    def weight_part(self, key: WeightKey, box: Box):
        """The array of `box` (a shard, or all of it) of a weight box: this device's own
        shard where the box is sharded (`shards`), else a view of the whole box."""
        own = self.shards.get(key)
        if own is not None:
            return own[1]
        whole = self.weights[key]
        return whole if box == key[2] else whole[box.relative_to(key[2])]

    # ---- activations ----------------------------------------------------------------------------
    def put(self, tensor: int, box: Box, array) -> None:
        self.values.setdefault(tensor, []).append((box, array))

    def read(self, tensor: int, box: Box):
        pieces = self.values.get(tensor, [])
        for piece_box, array in pieces:
            if piece_box == box:
                return array
        for piece_box, array in pieces:
            if piece_box.contains(box):
                return array[box.relative_to(piece_box)]
        if box.is_empty():
            return self.xp.zeros(box.shape, self._dtype(pieces))
        out = self.xp.empty(box.shape, self._dtype(pieces))
        covered = 0
        for piece_box, array in pieces:
            inter = piece_box.intersect(box)
            if not inter.is_empty():
                out[inter.relative_to(box)] = array[inter.relative_to(piece_box)]
                covered += inter.volume
        if covered < box.volume:
            raise RuntimeError(f"device {self.device}: tensor {tensor} box {box} is not fully "
                               f"present (have {[b for b, _ in pieces]})")
        return out

    # ---- gradients ------------------------------------------------------------------------------
    def add_grad(self, tensor: int, box: Box, array, received: bool = False) -> None:
        (self.received_grads if received else self.grads).setdefault(tensor, []).append(
            (box, array))

    def read_grad(self, tensor: int, box: Box):
        pieces = self.grads.get(tensor, []) + self.received_grads.get(tensor, [])
        if len(pieces) == 1 and pieces[0][0] == box:
            return pieces[0][1]
        out = None
        for piece_box, array in pieces:
            inter = piece_box.intersect(box)
            if inter.is_empty():
                continue
            if out is None:
                out = self.xp.zeros(box.shape, array.dtype)
            out[inter.relative_to(box)] += array[inter.relative_to(piece_box)]
        if out is None:
            out = self.xp.zeros(box.shape, "float32")
        return out

    @staticmethod
    def _dtype(pieces):
        return pieces[0][1].dtype if pieces else "float32"

"""What one device sends another: frozen values that each know how they are taken in.

A group's sends collect in its output under the destination device (`actions`); the executor
hands them to that device's store before the groups that receive them run (`receive`). On a
cluster they travel in a `parcels.Parcel`: one pickle with its host arrays out of band, its
GPU arrays as CUDA buffers where the connection carries them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..ops.box import Box
from .store import DeviceStore, WeightKey


@dataclass(frozen=True)
class _TensorBox:
    tensor: int
    box: Box
    array: Any


class Value(_TensorBox):
    """A box of a tensor's value (an activation another partition reads)."""

    def apply(self, store: DeviceStore) -> None:
        store.put(self.tensor, self.box, store.xp.asarray(self.array))


class Grad(_TensorBox):
    """A box of a tensor's gradient, added to what the device has of it."""

    def apply(self, store: DeviceStore) -> None:
        store.add_grad(self.tensor, self.box, store.xp.asarray(self.array), received=True)


@dataclass(frozen=True)
class WeightGrad:
    """A holder's gradient of the shard of a weight box that the receiving device updates
    (`shards.py`), for it to sum before it updates."""

    key: WeightKey
    array: Any

    def apply(self, store: DeviceStore) -> None:
        store.incoming_wgrads.setdefault(self.key, []).append(store.xp.asarray(self.array))


@dataclass(frozen=True)
class Partial:
    """A partition's partial statistics of a reduction, keyed (layer, phase, partition)."""

    key: tuple
    array: Any

    def apply(self, store: DeviceStore) -> None:
        store.partials[self.key] = store.xp.asarray(self.array)


@dataclass(frozen=True)
class Verdict:
    """Whether the summed gradient of one shard of a weight box is finite (non-finite guard),
    for the owners of the box's other shards, which update theirs only if every shard's is."""

    key: WeightKey
    finite: bool

    def apply(self, store: DeviceStore) -> None:
        store.verdicts.setdefault(self.key, []).append(self.finite)


@dataclass(frozen=True)
class NewWeight:
    """A shard's owner's updated values of that shard (`box`, in the weight's coordinates) of a
    weight box, written over another holder's."""

    key: WeightKey
    box: Box
    array: Any

    def apply(self, store: DeviceStore) -> None:
        store.weights[self.key][self.box.relative_to(self.key[2])] = store.xp.asarray(self.array)


@dataclass(frozen=True)
class ShardValue:
    """A shard's owner's values of that shard (`box`) of a sharded weight box, for a holder
    gathering the whole box for the layer's `phase` (`actions.GatherWeight`): written into the
    whole box being gathered there, made on the first shard to arrive."""

    key: WeightKey
    phase: str
    box: Box
    array: Any

    def apply(self, store: DeviceStore) -> None:
        whole = store.gathering.get((self.key, self.phase))
        if whole is None:
            whole = store.gathering[(self.key, self.phase)] = store.xp.empty(
                self.key[2].shape, "float32")
        whole[self.box.relative_to(self.key[2])] = store.xp.asarray(self.array)


Message = Value | Grad | WeightGrad | Partial | Verdict | NewWeight | ShardValue


def receive(store: DeviceStore, messages: Iterable[Message]) -> None:
    """Apply what other devices sent to this one."""
    for message in messages:
        message.apply(store)

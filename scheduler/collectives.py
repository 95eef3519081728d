"""Collectives on the devices' side. The all-reduce that sums a bucket of replicated weights'
gradients over the devices holding them, as DDP's buckets do: launched as soon as backward has
made the bucket's gradients and awaited only before the weights are updated, so that it travels
while the rest of backward runs; every holder then has the summed gradient and updates the whole
weight itself (no new weights to send back). And the all-gather of the partial statistics of a
reduction group (batch norm's sums, softmax's normaliser: `ops.base.Operator.reduction_dims`),
by which each member gets every partition's partial to combine, or their sum where the
operator adds them.

A device's store holds a communicator (`DeviceStore.communicator`): `launch(key, array,
members, gather, partials)` starts the sum (or, with `gather`, the all-gather) of `array` over
the devices `members` (on the communicator of the partials' collectives, with `partials`) and
returns at once; `result(key)` waits for it and returns the sum (or the members' arrays, in
member order). Two kinds:

* `LocalHub`, for the in-process executor's devices (one hub for all the stores): `launch` keeps
  each member's array, `result` sums them in member order. Every member has launched by the
  time one awaits: an await depends on every member's launch, so fusion puts it in a later
  group than all of them (`fusion.place_of`).
* `process_groups.TorchCommunicator`, for a worker's device on a cluster: a torch.distributed
  process group of the devices (gloo on CPUs, NCCL on GPUs).

Buckets are flat: a bucket's gradients are copied into one array, whose sum is then cut back
into views shaped as the gradients (`flatten`, `unflatten`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

# DDP's default bucket size (`bucket_cap_mb`): large enough that a collective's fixed cost is
# small beside its bytes, small enough that the first buckets leave while backward goes on; and
# DDP's cap on the first bucket, which the last layers fill early in backward, so that a model
# smaller than one bucket still sums some of its gradients while the rest of backward runs
BUCKET_BYTES = 25 << 20
FIRST_BUCKET_BYTES = 1 << 20


def flatten(xp, arrays: Sequence) -> Any:
    """One float32 array holding `arrays` one after another."""
    if len(arrays) == 1:
        return xp.ascontiguousarray(arrays[0], dtype="float32").reshape(-1)
    return xp.concatenate([xp.asarray(a, dtype="float32").reshape(-1) for a in arrays])


def unflatten(flat, shapes: Sequence[tuple[int, ...]]) -> list:
    """Views of `flat` shaped as `shapes`, in order (`flatten`'s inverse)."""
    views, start = [], 0
    for shape in shapes:
        size = 1
        for n in shape:
            size *= n
        views.append(flat[start:start + size].reshape(shape))
        start += size
    return views


@dataclass
class _Collective:
    members: tuple[int, ...]
    gather: bool
    arrays: dict[int, Any] = field(default_factory=dict)  # device -> what it launched
    taken: set[int] = field(default_factory=set)


class LocalHub:
    """The communicator of the devices of one process (the in-process executor): a sum is made
    from the members' arrays in member order, so every member gets the same numbers; each gets
    copies of its own."""

    def __init__(self):
        self._pending: dict[str, _Collective] = {}

    def for_device(self, device: int, xp) -> "_LocalEnd":
        return _LocalEnd(self, device, xp)

    def launch(self, key: str, device: int, array, members: tuple[int, ...],
               gather: bool) -> None:
        entry = self._pending.setdefault(key, _Collective(members, gather))
        if device in entry.arrays or (entry.members, entry.gather) != (members, gather):
            raise RuntimeError(f"collective {key}: launched twice by device {device}, or as "
                               f"two different ones")
        entry.arrays[device] = array

    def result(self, key: str, device: int, xp):
        entry = self._pending[key]
        missing = set(entry.members) - set(entry.arrays)
        if missing:
            raise RuntimeError(f"collective {key}: devices {sorted(missing)} have not launched "
                               f"it yet")
        arrays = [entry.arrays[member] for member in entry.members]
        entry.taken.add(device)
        if entry.taken == set(entry.members):
            del self._pending[key]
        if entry.gather:
            return [xp.asarray(array).copy() for array in arrays]
        total = arrays[0].copy()
        for array in arrays[1:]:
            total += array
        return xp.asarray(total)


@dataclass(frozen=True)
class _LocalEnd:
    """One device's end of a LocalHub."""

    hub: LocalHub
    device: int
    xp: Any

    def launch(self, key: str, array, members: tuple[int, ...], gather: bool = False,
               partials: bool = False) -> None:
        self.hub.launch(key, self.device, array, members, gather)

    def result(self, key: str):
        return self.hub.result(key, self.device, self.xp)

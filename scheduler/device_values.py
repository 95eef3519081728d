"""Metric values that stay on their device until the iteration ends: the loss's sums and the
non-finite guard's verdicts. Reading each to the host as it is made would make the host wait
for the device each time (on a GPU, a synchronisation per weight and per metric); instead each
device reads all of an iteration's values in one transfer (`on_host`) when its program ends.
On NumPy arrays the values are host numbers already.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ops import vendor

NONFINITE_GRADIENT = "nonfinite_gradient"  # metrics record of a weight update the guard skipped


@dataclass(frozen=True)
class Verdict:
    """The non-finite guard's verdict on one weight box's gradient, made on its device: the
    fused optimizers skipped the update where `flag` is 1 (`ops.finite.nonfinite_flag`)."""

    key: Any  # the WeightKey
    flag: Any  # a 0-d tensor on the device


def _unread(value) -> bool:
    """Whether `value` is still a device's array or tensor (not yet a host number)."""
    return not isinstance(value, (int, float, str, tuple, list, type(None))) and \
        not type(value).__module__.startswith("numpy")


def on_host(records: list, xp) -> list:
    """`records` (metric sums and `Verdict`s of one device) with every device value read in
    one transfer, in order: sums as numbers (integers where the device's were), verdicts as
    {NONFINITE_GRADIENT: key} records of the updates that were skipped, and None for the
    others."""
    pending = [(index, name, value) for index, record in enumerate(records)
               for name, value in _device_fields(record)]
    read = _read(xp, [value for _, _, value in pending])
    records = [dict(r) if isinstance(r, dict) else r for r in records]
    for (index, name, value), number in zip(pending, read):
        if name is None:
            records[index] = {NONFINITE_GRADIENT: records[index].key} if number else None
        else:
            records[index][name] = int(number) if _integral(value) else number
    return records


def to_host(array) -> Any:
    """A numpy view or copy of a device array (cupy arrays have `.get()`)."""
    get = getattr(array, "get", None)
    return get() if get is not None else array


def _integral(value) -> bool:
    dtype = value.dtype
    return not dtype.is_floating_point if hasattr(dtype, "is_floating_point") else \
        dtype.kind in "iub"


def _device_fields(record):
    if isinstance(record, Verdict):
        return [(None, record.flag)]
    if isinstance(record, dict):
        return [(name, value) for name, value in record.items() if _unread(value)]
    return []


def _read(xp, values: list) -> list[float]:
    if not values:
        return []
    aten = vendor.aten(xp)
    if aten is None:
        return [float(v) for v in xp.stack([xp.asarray(v, "float64") for v in values]).tolist()]
    torch = aten.torch
    tensors = [v if isinstance(v, torch.Tensor) else aten.tensor(v) for v in values]
    return torch.stack([t.reshape(()).double() for t in tensors]).cpu().tolist()

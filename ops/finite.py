"""The test for NaN and Inf that guards every weight update (flexflow/nonfinite.py): on the
vendor kernels as a flag made on the device, which the fused optimizers take as their
`found_inf` (the update is skipped there, and the host reads the flag with the iteration's other
metrics: scheduler/device_values.py); on the reference kernels as a host verdict."""

import math

from . import vendor


def all_finite(xp, array) -> bool:
    """Whether every element of `array` is finite, in one reduction over it where a mask and a
    reduction would take two passes: a NaN or an Inf anywhere makes the sum NaN or infinite.
    Only a sum of finite values that overflowed is looked at element by element. The sum is
    torch's where it can run (ops/vendor.py): a few times faster than NumPy's pairwise sum."""
    aten = vendor.aten(xp)
    total = aten.tensor(array).sum().item() if aten is not None else float(array.sum())
    if math.isfinite(total):
        return True
    return bool(xp.isfinite(array).all())


def nonfinite_flag(xp, array):
    """On the vendor kernels, a 0-d float32 tensor on `array`'s device that is 1 where `array`
    holds a NaN or an Inf, made without the host waiting, in four launches: its least and
    greatest values (a NaN spreads to both, an Inf is one of them), each times zero (0, or NaN
    from a NaN or an Inf: exact where a sum of finite values could overflow), NaN made 1. None
    on the reference kernels (`all_finite` tests there)."""
    aten = vendor.aten(xp)
    if aten is None:
        return None
    torch = aten.torch
    least, greatest = aten.tensor(array).aminmax()
    flag = torch.nan_to_num(least.mul(0).add_(greatest, alpha=0), nan=1.0)
    return flag.float()  # (itself where it is float32 already)

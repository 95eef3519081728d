"""The test for NaN and Inf that guards every weight update (flexflow/nonfinite.py)."""


def all_finite(xp, array) -> bool:
    """Whether every element of `array` is finite, in one reduction over it where a mask and a
    reduction would take two passes: a NaN or an Inf anywhere makes the sum NaN or infinite.
    Only a sum of finite values that overflowed is looked at element by element."""
    if bool(xp.isfinite(array.sum())):
        return True
    return bool(xp.isfinite(array).all())

"""POOL2D parameters shared by the pooling modules and their functional forms.

Fixed pooling writes FlexFlow's five parameters `kernel; stride; padding; PoolType; ActiMode`, each
of the first three an int or, for non-square pools, an `(h, w)` tuple. Adaptive pooling writes
`ADAPTIVE; output_size; PoolType; ActiMode`: its windows depend on the input size, which is known
only when the layer is built.
"""

from __future__ import annotations

from flexflow.type import ActiMode, OpType, PoolType

from .call import Call

ADAPTIVE = "ADAPTIVE"
NO_ACTIVATION = ActiMode.AC_MODE_NONE.value


def _pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def fixed(call: Call, pool_type: PoolType, kernel, stride, padding, *, dilation=1,
          ceil_mode=False, return_indices=False, count_include_pad=True, divisor_override=None):
    """(POOL2D, params) of a max or average pool, refusing options FlexFlow's pool2d lacks."""
    call.expect(not ceil_mode, "ceil_mode=True is not supported (pool2d rounds output sizes down)")
    call.expect(_pair(dilation) == (1, 1), f"dilation {dilation} is not supported")
    call.expect(not return_indices, "return_indices=True is not supported")
    call.expect(divisor_override is None, "divisor_override is not supported")
    call.expect(count_include_pad or _pair(padding) == (0, 0),
                "count_include_pad=False with padding is not supported (pool2d divides by the "
                "whole window)")
    stride = kernel if stride is None or stride == [] else stride
    for what, value in (("kernel_size", kernel), ("stride", stride), ("padding", padding)):
        call.expect(isinstance(value, int) or (isinstance(value, (tuple, list)) and len(value) == 2
                                                and all(isinstance(v, int) for v in value)),
                    f"{what} must be an int or a pair of ints, got {value!r}")
    params = [v if isinstance(v, int) else tuple(v) for v in (kernel, stride, padding)]
    return OpType.POOL2D, (*params, pool_type.value, NO_ACTIVATION)


def adaptive(call: Call, pool_type: PoolType, output_size, return_indices=False):
    call.expect(not return_indices, "return_indices=True is not supported")
    size = output_size if isinstance(output_size, (int, type(None))) else tuple(output_size)
    return OpType.POOL2D, (ADAPTIVE, size, pool_type.value, NO_ACTIVATION)

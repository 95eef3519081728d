"""Kernels that skip unwanted input gradients (a model input's) still give every weight
gradient, unchanged."""

from dataclasses import replace

import numpy as np
import pytest

from flexflow.ops.base import Part
from flexflow.ops.conv2d import Conv2D
from flexflow.ops.dense import Dense

from .op_check import randn, spec_of


@pytest.mark.parametrize("op, x, ws", [
    (Dense(5, "relu"), randn(4, 6, seed=1), [randn(5, 6, seed=2), randn(5, seed=3)]),
    (Conv2D(4, (3, 3), padding=((1, 1), (1, 1)), activation="relu"), randn(2, 3, 6, 6, seed=1),
     [randn(4, 3, 3, 3, seed=2), randn(4, seed=3)]),
])
def test_weight_grads_do_not_depend_on_input_grad(op, x, ws):
    specs = [spec_of(x)]
    whole = Part.whole(specs, op.infer(specs))
    dy = randn(*op.infer(specs)[0].shape, seed=4)
    grads = {}
    for wanted in (True, False):
        part = replace(whole, input_grads=(wanted,))
        ys, saved = op.forward(np, [x], ws, part)
        dxs, dws = op.backward(np, [dy], saved, part)
        assert (dxs[0] is None) == (not wanted)
        grads[wanted] = dws
    assert len(grads[True]) == len(ws) and len(grads[False]) == len(ws)
    for with_dx, without_dx in zip(grads[True], grads[False], strict=True):
        np.testing.assert_array_equal(with_dx, without_dx)

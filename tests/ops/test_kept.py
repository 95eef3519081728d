"""Each operator's `kept_for_backward` (what the memory model counts) against what its training
forward really keeps: the arrays reachable from `saved` are matched by address with the inputs,
the outputs and the weights; the rest count as new arrays. Arrays of fewer elements than a
tenth of the output (per-channel statistics) are not counted, as `Kept` says."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from flexflow.ops import vendor
from flexflow.ops.attention import MultiHeadAttention
from flexflow.ops.base import Kept, Part
from flexflow.ops.batch_norm import BatchNorm
from flexflow.ops.concat import Concat
from flexflow.ops.conv2d import Conv2D
from flexflow.ops.dense import Dense
from flexflow.ops.dropout import Dropout
from flexflow.ops.elementwise import ElementBinary, ElementUnary
from flexflow.ops.layer_norm import LayerNorm
from flexflow.ops.pool2d import Pool2D
from flexflow.ops.reshape import Flat
from flexflow.ops.softmax import Softmax

from .op_check import randn, spec_of

IMAGE = (4, 6, 10, 10)
CASES = {
    "dense": (Dense(16), [(8, 32)]),
    "dense_relu": (Dense(16, "relu"), [(8, 32)]),
    "dense_gelu": (Dense(16, "gelu"), [(8, 32)]),
    "conv": (Conv2D(8, (3, 3), padding=((1, 1), (1, 1)), use_bias=False), [IMAGE]),
    "conv_relu": (Conv2D(8, (3, 3), activation="relu"), [IMAGE]),
    "max_pool": (Pool2D((2, 2), (2, 2)), [IMAGE]),
    "avg_pool": (Pool2D((2, 2), (2, 2), pool_type="avg"), [IMAGE]),
    "batch_norm_relu": (BatchNorm(), [IMAGE]),
    "batch_norm": (BatchNorm(relu=False), [IMAGE]),
    "softmax": (Softmax(), [(8, 32)]),
    "relu": (ElementUnary("relu"), [(8, 32)]),
    "gelu": (ElementUnary("gelu"), [(8, 32)]),
    "exp": (ElementUnary("exp"), [(8, 32)]),
    "scalar_multiply": (ElementUnary("scalar_multiply", 2.0), [(8, 32)]),
    "add": (ElementBinary("add"), [(8, 32), (8, 32)]),
    "multiply": (ElementBinary("multiply"), [(8, 32), (8, 32)]),
    "flat": (Flat(), [IMAGE]),
    "concat": (Concat(1), [(8, 32), (8, 16)]),
    "dropout": (Dropout(0.5), [(8, 32)]),
    "layer_norm": (LayerNorm((1,)), [(8, 32)]),
    "attention": (MultiHeadAttention(16, 4), [(2, 5, 16), (2, 7, 16), (2, 7, 16)]),
}


def _extent(array) -> tuple[int, int] | None:
    """(first byte, end) of an array's memory, numpy or torch."""
    if isinstance(array, torch.Tensor):
        start = array.data_ptr()
        return start, start + array.untyped_storage().nbytes()
    if isinstance(array, np.ndarray):
        base = array
        while isinstance(base.base, np.ndarray):
            base = base.base
        start = base.__array_interface__["data"][0]
        return start, start + base.nbytes
    return None


def _arrays(value, found: list) -> list:
    """Every numpy array and torch tensor reachable from `value`."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _arrays(item, found)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _arrays(getattr(value, field.name), found)
    return found


def _overlaps(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _weights(op, in_specs):
    return [np.ones(w.shape, np.float32) if w.initializer == "ones" else randn(*w.shape, seed=3)
            for w in op.weight_specs(in_specs)]


def measured_kept(op, shapes) -> Kept:
    """What `op`'s forward keeps, found in its `saved`."""
    xs = [randn(*shape, seed=k) for k, shape in enumerate(shapes)]
    in_specs = [spec_of(x) for x in xs]
    out_specs = op.infer(in_specs)
    ws = _weights(op, in_specs)
    ys, saved = op.forward(np, xs, ws, Part.whole(in_specs, out_specs, training=True))
    least = ys[0].size / 10
    inputs, outputs, extra = set(), set(), 0
    places = [_extent(w) for w in ws]
    for array in _arrays(saved, []):
        place = _extent(array)
        if any(_overlaps(place, w) for w in places):
            continue
        hit_in = {k for k, x in enumerate(xs) if _overlaps(place, _extent(x))}
        hit_out = {k for k, y in enumerate(ys) if _overlaps(place, _extent(y))}
        inputs |= hit_in
        outputs |= hit_out
        size = array.numel() if isinstance(array, torch.Tensor) else array.size
        if not hit_in and not hit_out and size >= least:
            extra += place[1] - place[0]
            places.append(place)  # a view kept twice is one array
    return Kept(tuple(sorted(inputs)), tuple(sorted(outputs)), extra / ys[0].size)


@pytest.mark.parametrize("name", list(CASES))
def test_kept_for_backward_is_what_the_forward_keeps(name, kernel_path):
    if kernel_path != "vendor":
        pytest.skip("the memory model describes the vendor kernels, which every device runs")
    op, shapes = CASES[name]
    declared = op.kept_for_backward([spec_of(randn(*shape)) for shape in shapes])
    found = measured_kept(op, shapes)
    assert (declared.inputs, declared.outputs) == (found.inputs, found.outputs), name
    assert declared.extra == pytest.approx(found.extra, rel=0.05, abs=0.01), name


def test_the_check_sees_an_array_kept_beyond_the_declaration():
    """The measurement finds a kept copy no declaration mentions (so the test above can
    fail): a dense layer whose forward also keeps a copy of its output."""
    op = Dense(16)

    class Hoarding(Dense):
        def forward(self, xp, xs, ws, part):
            ys, saved = super().forward(xp, xs, ws, part)
            return ys, (saved, ys[0].copy())
    with vendor.kernels("vendor"):
        found = measured_kept(Hoarding(16), [(8, 32)])
    assert found.extra == pytest.approx(4.0)
    assert op.kept_for_backward([spec_of(randn(8, 32))]).extra == 0.0

"""Checks one operator's forward and backward kernels against PyTorch autograd.

`check_op` runs the operator on one device (the whole tensor as a single part), feeds a random
output gradient through its backward, and compares outputs and every gradient with the same
computation written in PyTorch. PyTorch is the independent oracle; nothing here is hard-coded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import numpy as np
import torch

from flexflow.ops.base import Part
from flexflow.ops.spec import TensorSpec

RTOL = 1e-4
ATOL = 1e-5


def spec_of(array: np.ndarray) -> TensorSpec:
    return TensorSpec(tuple(int(n) for n in array.shape), str(array.dtype))


def run_op(op, xs: Sequence[np.ndarray], ws: Sequence[np.ndarray], dys=None, training=True, seed=0):
    """Forward (and backward when `dys` is given) on numpy; returns (ys, dxs, dws)."""
    in_specs = [spec_of(x) for x in xs]
    out_specs = op.infer(in_specs)
    part = Part.whole(in_specs, out_specs, training=training, seed=seed)
    ys, saved = op.forward(np, list(xs), list(ws), part)
    for y, spec in zip(ys, out_specs):
        assert tuple(y.shape) == spec.shape, f"{op}: output shape {y.shape} != inferred {spec.shape}"
        assert str(y.dtype) == spec.dtype, f"{op}: output dtype {y.dtype} != inferred {spec.dtype}"
    if dys is None:
        return ys, None, None
    dxs, dws = op.backward(np, dys, saved, part)
    assert len(dxs) == len(xs), f"{op}: {len(dxs)} input gradients for {len(xs)} inputs"
    assert len(dws) == len(ws), f"{op}: {len(dws)} weight gradients for {len(ws)} weights"
    return ys, dxs, dws


def check_op(op, xs: Sequence[np.ndarray], ws: Sequence[np.ndarray],
             torch_fn: Callable[..., object], rtol: float = RTOL, atol: float = ATOL,
             seed: int = 0, check_backward: bool = True, training: bool = True):
    """Compare `op` with `torch_fn(*inputs, *weights)` (which returns a tensor or a sequence).

    Weight arrays are passed in the order of `op.weight_specs`; their shapes are checked against
    the specs so a layout mismatch fails loudly.
    """
    in_specs = [spec_of(x) for x in xs]
    specs = op.weight_specs(in_specs)
    assert len(specs) == len(ws), f"{op}: {len(specs)} weights declared, {len(ws)} given"
    for spec, w in zip(specs, ws):
        assert tuple(w.shape) == spec.shape, f"weight {spec.name}: {w.shape} != {spec.shape}"

    t_xs = [torch.tensor(x, requires_grad=x.dtype.kind == "f") for x in xs]
    t_ws = [torch.tensor(w, requires_grad=True) for w in ws]
    t_ys = torch_fn(*t_xs, *t_ws)
    if isinstance(t_ys, torch.Tensor):
        t_ys = [t_ys]
    t_ys = list(t_ys)

    rng = np.random.default_rng(seed + 1)
    dys = [rng.standard_normal(tuple(y.shape)).astype(np.float32) for y in t_ys]
    ys, dxs, dws = run_op(op, xs, ws, dys if check_backward else None, training=training, seed=seed)

    assert len(ys) == len(t_ys), f"{op}: {len(ys)} outputs, torch gave {len(t_ys)}"
    for i, (y, t_y) in enumerate(zip(ys, t_ys)):
        np.testing.assert_allclose(y, t_y.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"{op}: output {i}")
    if not check_backward:
        return ys
    torch.autograd.backward([y for y in t_ys if y.requires_grad],
                            [torch.tensor(d) for d, y in zip(dys, t_ys) if y.requires_grad])
    for i, (dx, t_x) in enumerate(zip(dxs, t_xs, strict=True)):
        if not t_x.requires_grad:
            assert dx is None, f"{op}: gradient returned for integer input {i}"
            continue
        _compare_grad(dx, t_x, rtol, atol, f"{op}: gradient of input {i}")
    for spec, dw, t_w in zip(specs, dws, t_ws, strict=True):
        _compare_grad(dw, t_w, rtol, atol, f"{op}: gradient of weight {spec.name}")
    return ys


def _compare_grad(grad, t_value, rtol, atol, what: str) -> None:
    """A kernel's gradient against torch's: present, of the value's shape, equal. A value torch
    gives no gradient to must get zeros (or None, which only a kernel may say of such a value)."""
    if t_value.grad is None and grad is None:
        return
    assert grad is not None, f"{what} is missing"
    assert tuple(grad.shape) == tuple(t_value.shape), f"{what}: {grad.shape} != {t_value.shape}"
    expected = t_value.grad.numpy() if t_value.grad is not None else np.zeros(t_value.shape,
                                                                                np.float32)
    np.testing.assert_allclose(grad, expected, rtol=rtol, atol=atol, err_msg=what)


def ffmodel_with_input(*shape):
    """An FFModel of batch size 2 and a float input tensor of `shape`, for the tests that an
    FFModel method adds its operator (FlexFlow's API is imported here, not by the kernel tests)."""
    from flexflow.core import DataType, FFConfig, FFModel

    ffmodel = FFModel(FFConfig(argv=[], batch_size=2))
    return ffmodel, ffmodel.create_tensor(list(shape), DataType.DT_FLOAT)


def layer_op(tensor):
    """The operator of the layer that made `tensor`."""
    return tensor.owner_op._layer.op


def randn(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def split_box(shape: Sequence[int], dim: int, parts: int) -> list:
    """Equal (or near-equal) tiling of `shape` into `parts` boxes along `dim`."""
    from flexflow.ops.box import Box

    full = Box.full(shape)
    edges = [round(i * shape[dim] / parts) for i in range(parts + 1)]
    return [full.replace(dim, a, b) for a, b in zip(edges, edges[1:])]


def check_partitioned(op, xs: Sequence[np.ndarray], ws: Sequence[np.ndarray], dim: int,
                      parts: int = 2, rtol: float = RTOL, atol: float = ATOL, seed: int = 0):
    """Split output dim `dim` into `parts` partitions and run each one on the boxes that
    `input_box`/`weight_box` ask for. The partitions' outputs must tile the whole-tensor output,
    and their partial gradients, summed into place, must equal the whole-tensor gradients.
    """
    from flexflow.ops.box import Box

    in_specs = [spec_of(x) for x in xs]
    out_specs = op.infer(in_specs)
    rng = np.random.default_rng(seed + 7)
    dys = [rng.standard_normal(s.shape).astype(np.float32) for s in out_specs]
    full_ys, full_dxs, full_dws = run_op(op, xs, ws, dys, seed=seed)
    sum_dxs = [None if d is None else np.zeros_like(d) for d in full_dxs]
    sum_dws = [np.zeros_like(d) if d is not None else None for d in full_dws]
    w_specs = op.weight_specs(in_specs)
    reduces = dim in [d % len(out_specs[0].shape) for d in op.reduction_dims]
    runs = []
    for out_box in split_box(out_specs[0].shape, dim, parts):
        out_boxes = tuple(
            Box(tuple(b if n == out_specs[0].shape[d] else (0, n)
                      for d, (b, n) in enumerate(zip(out_box.bounds, s.shape))))
            for s in out_specs)
        in_boxes = tuple(op.input_box(out_box, in_specs, i).clip(s.shape)
                         for i, s in enumerate(in_specs))
        w_boxes = [op.weight_box(out_box, in_specs, k) for k in range(len(w_specs))]
        part = Part(out_boxes, in_boxes, tuple(s.shape for s in in_specs), True, seed)
        part_xs = [x[b.relative_to(Box.full(x.shape))] for x, b in zip(xs, in_boxes)]
        part_ws = [w[b.relative_to(Box.full(w.shape))] for w, b in zip(ws, w_boxes)]
        runs.append((out_box, out_boxes, in_boxes, w_boxes, part, part_xs, part_ws))
    if reduces:  # one reduction group: every partition combines every partition's partial
        reduced = op.combine(np, [op.forward_partial(np, r[5], r[6], r[4]) for r in runs],
                             "forward")
        runs = [r[:4] + (replace(r[4], reduced=reduced),) + r[5:] for r in runs]
    backward_runs = []
    for out_box, out_boxes, in_boxes, w_boxes, part, part_xs, part_ws in runs:
        ys, saved = op.forward(np, part_xs, part_ws, part)
        for j, (y, box) in enumerate(zip(ys, out_boxes)):
            np.testing.assert_allclose(y, full_ys[j][box.relative_to(Box.full(full_ys[j].shape))],
                                       rtol=rtol, atol=atol,
                                       err_msg=f"{op}: output {j} of partition {out_box}")
        part_dys = [d[b.relative_to(Box.full(d.shape))] for d, b in zip(dys, out_boxes)]
        backward_runs.append((part_dys, saved, part, in_boxes, w_boxes))
    if reduces:
        reduced = op.combine(np, [op.backward_partial(np, r[0], r[1], r[2])
                                  for r in backward_runs], "backward")
        backward_runs = [r[:2] + (replace(r[2], reduced=reduced),) + r[3:]
                         for r in backward_runs]
    for part_dys, saved, part, in_boxes, w_boxes in backward_runs:
        dxs, dws = op.backward(np, part_dys, saved, part)
        for acc, dx, box in zip(sum_dxs, dxs, in_boxes, strict=True):
            if acc is not None:
                acc[box.relative_to(Box.full(acc.shape))] += dx
        for acc, dw, box in zip(sum_dws, dws, w_boxes, strict=True):
            if acc is not None:
                acc[box.relative_to(Box.full(acc.shape))] += dw
    for i, (acc, full) in enumerate(zip(sum_dxs, full_dxs, strict=True)):
        if acc is not None:
            np.testing.assert_allclose(acc, full, rtol=rtol, atol=atol,
                                       err_msg=f"{op}: summed gradient of input {i}, dim {dim}")
    for spec, acc, full in zip(w_specs, sum_dws, full_dws, strict=True):
        if acc is not None:
            np.testing.assert_allclose(acc, full, rtol=rtol, atol=atol,
                                       err_msg=f"{op}: summed gradient of {spec.name}, dim {dim}")

"""2-D max and average pooling over NCHW tensors.

Pooling reads the same windows as a convolution (`conv2d.Windows`: padding, halo, strided views),
one strided view per kernel offset, combined elementwise; no Python loop over samples or channels.
Max pooling records which kernel offset won each window, so backward routes each gradient to the
first maximum of its window, as PyTorch and cuDNN do.

Where torch is installed both directions are one ATen call each (ops/vendor.py). Padding that
ATen's pooling cannot apply itself (uneven, or over half the kernel) is applied before the call,
except for an average that excludes the padding from its divisor: that one runs the reference.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import vendor
from .activation import activate, activate_backward, aten_activate, aten_activate_backward
from .base import Operator, activation_kept
from .conv2d import Pair, Padding, Windows, check_window_op, window_input_box, window_output_hw
from .spec import DimKind, ShapeError, TensorSpec

POOL_TYPES = ("max", "avg")


@dataclass(frozen=True)
class Pool2D(Operator):
    """Max or average pooling, then an optional activation.

    Max pooling pads with -inf. Average pooling divides by kh*kw when `count_include_pad` (the
    cuDNN behaviour FlexFlow uses), otherwise by the number of window elements inside the input.
    Every output dim splits exactly: N (sample), C (attribute), H and W (attribute, with a halo).
    """

    kernel: Pair
    stride: Pair
    padding: Padding = ((0, 0), (0, 0))
    pool_type: str = "max"
    activation: str = "none"
    count_include_pad: bool = True

    type_name = "Pool2D"

    def infer(self, inputs):
        check_window_op(self, inputs, "pool2d")
        if self.pool_type not in POOL_TYPES:
            raise ShapeError(f"unknown pool_type {self.pool_type!r}; expected one of {POOL_TYPES}")
        if any(max(pad) >= k for pad, k in zip(self.padding, self.kernel)):
            raise ShapeError(f"pool2d padding {self.padding} must be smaller than the kernel "
                             f"{self.kernel}, so that every window overlaps the input")
        x = inputs[0]
        ho, wo = window_output_hw(x, self.kernel, self.stride, self.padding, "pool2d")
        return (TensorSpec(x.shape[:2] + (ho, wo), x.dtype),)

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        windows = Windows.of(part, self.kernel, self.stride, self.padding)
        is_max = self.pool_type == "max"
        fill = float("-inf") if is_max else 0.0
        aten = vendor.aten(xp)
        if aten is not None:
            half_kernel = (self.kernel[0] // 2, self.kernel[1] // 2)
            tensor, padding, explicit = windows.aten_input(aten, x, fill, half_kernel)
            if not (explicit and not is_max and not self.count_include_pad):
                return self._aten_forward(aten, tensor, padding, explicit, windows)
        taps = windows.taps(windows.pad(xp, x, fill))
        _, _, first = next(taps)
        pooled = first.copy()
        if is_max:
            # winner[...] = index of the first kernel offset holding the window's maximum
            area = self.kernel[0] * self.kernel[1]
            winner = xp.zeros(pooled.shape, dtype="uint8" if area <= 256 else "int32")
            for k, (_, _, tap) in enumerate(taps, start=1):
                # offsets come in increasing order, so the last one that raised a window's
                # maximum is the largest: a max of indices, cheaper than a masked assignment
                raised = (tap > pooled).astype(winner.dtype)
                raised *= k
                xp.maximum(winner, raised, out=winner)
                xp.maximum(pooled, tap, out=pooled)
            y, divisor = xp.ascontiguousarray(windows.crop(pooled)), None
        else:
            for _, _, tap in taps:
                pooled += tap
            winner, divisor = None, self._divisor(xp, part, x.dtype)
            y = windows.crop(pooled) / divisor
        y, act_saved = activate(xp, self.activation, y)
        return [y], (winner, divisor, act_saved, windows)

    def kept_for_backward(self, inputs):
        """Its input, a max pool's int64 indices of the winners, and its activation's."""
        act = activation_kept(self.activation)
        return replace(act, inputs=(0,), extra=act.extra + 8 * (self.pool_type == "max"))

    def backward(self, xp, dys, saved, part):
        if isinstance(saved, vendor.Saved):
            return self._aten_backward(saved.aten, dys[0], *saved.values)
        winner, divisor, act_saved, windows = saved
        dy = activate_backward(xp, self.activation, dys[0], act_saved)
        if winner is None:
            dy = dy / divisor
        dy = windows.uncrop(xp, dy)
        d_padded = windows.empty(xp, dy.dtype)
        for k, (_, _, tap) in enumerate(windows.taps(d_padded)):
            windows.scatter(tap, dy if winner is None else dy * (winner == k))
        return [windows.unpad(xp, d_padded)], []

    def _aten_forward(self, aten, tensor, padding, explicit, windows):
        ops, window = aten.ops, (self.kernel, self.stride, padding)
        if self.pool_type == "max":
            y, winner = ops.max_pool2d_with_indices(tensor, *window, (1, 1), False)
        else:
            y, winner = ops.avg_pool2d(tensor, *window, False, self.count_include_pad, None), None
        y, act_saved = aten_activate(aten, self.activation, y, overwrite=True)
        return [aten.array(y)], vendor.Saved(aten, (tensor, padding, explicit, winner, act_saved,
                                                    windows))

    def _aten_backward(self, aten, dy, tensor, padding, explicit, winner, act_saved, windows):
        ops, window = aten.ops, (self.kernel, self.stride, padding)
        dy = aten_activate_backward(aten, self.activation, aten.tensor(dy), act_saved)
        if winner is not None:
            dx = ops.max_pool2d_with_indices_backward(dy, tensor, *window, (1, 1), False, winner)
        else:
            dx = ops.avg_pool2d_backward(dy, tensor, *window, False, self.count_include_pad, None)
        return [aten.array(windows.aten_input_grad(dx, explicit))], []

    def _divisor(self, xp, part, dtype):
        """What each window's sum is divided by: kh*kw, or the (out_h, out_w) counts of window
        elements inside the input (from global positions, so every partition agrees)."""
        if self.count_include_pad:
            return self.kernel[0] * self.kernel[1]
        counts = []
        for dim, k, s, (before, _) in zip((2, 3), self.kernel, self.stride, self.padding):
            size = part.in_shapes[0][dim]
            starts = xp.arange(*part.out_box.bounds[dim]) * s - before
            counts.append(xp.minimum(starts + k, size) - xp.maximum(starts, 0))
        return (counts[0][:, None] * counts[1][None, :]).astype(dtype)

    def dim_kinds(self, inputs):
        return (DimKind.SAMPLE, DimKind.ATTRIBUTE, DimKind.ATTRIBUTE, DimKind.ATTRIBUTE)

    def input_box(self, out_box, inputs, index):
        return window_input_box(out_box, self.kernel, self.stride, self.padding)

    def flops(self, inputs):
        return self.infer(inputs)[0].size * self.kernel[0] * self.kernel[1]

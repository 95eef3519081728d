"""Batch normalization over the channels of an NCHW tensor, with a fused ReLU.

Where torch is installed and a partition holds whole channels (no statistic to combine with
other partitions) both directions are one ATen call each, plus the ReLU (ops/vendor.py); the
running buffers are updated in place by that call. With statistics combined across partitions,
ATen's kernels make each partition's partial sums (from its mean and variance), normalise with the
combined statistics (its batch norm in inference mode, given them) and give the gradients (its
backward's weight gradients, the input's gradient from them and the combined sums); the
reference kernels do the same in NumPy/CuPy.

Statistics are the whole batch's under every split (the default), or each sample partition's
(`per_partition`, what `--per-partition-batch-norm` gives every batch norm at compile:
`take_statistics`), as FlexFlow's cuDNN calls and PyTorch's DDP take them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import vendor
from .activation import activate_backward
from .base import Kept, Operator, expect_float, expect_rank
from .box import Box
from .spec import DimKind, TensorSpec, WeightSpec


def _per_channel(values):
    """A (C,) vector shaped to broadcast over NCHW."""
    return values.reshape(1, -1, 1, 1)


def _channel_sum(a):
    """Per-channel sum of an NCHW array (contiguous reductions, no temporary of a's size)."""
    return a.reshape(a.shape[0], a.shape[1], -1).sum(axis=2).sum(axis=0)


def _channel_dot(xp, a, b):
    """Per-channel sum of a * b, as one dot product per (sample, channel): no temporary."""
    n, c = a.shape[:2]
    dots = vendor.matmul(xp, a.reshape(n, c, 1, -1), b.reshape(n, c, -1, 1))
    return dots.reshape(n, c).sum(axis=0)


@dataclass(frozen=True)
class BatchNorm(Operator):
    """y = relu?((x - mean) / sqrt(var + eps) * scale + bias), statistics per channel.

    Training normalises with the batch's mean and biased variance and updates the running
    buffers in place, PyTorch-style: running = (1 - momentum) * running + momentum * batch, with
    the unbiased variance for running_var. Inference normalises with the running buffers.

    Splitting: C (parameter) is exact, since every statistic belongs to one channel. N, H and W
    (`reduction_dims`) split through a cross-partition reduction: each partition's forward
    partial is its per-channel (sum x, sum x^2, count) in float64, its backward partial its
    per-channel (sum dy, sum dy * (x - mean)); forward and backward then use the combined sums.
    With `per_partition` the batch dim is not reduced over: each sample partition normalises
    with its own samples' statistics (H and W splits still combine theirs, exactly).

    Running statistics: the first partition of each channel box alone updates them (the whole
    batch's statistics, or with `per_partition` the first sample partition's, as DDP's rank 0
    whose buffers `broadcast_buffers` gives every replica), so a box is updated once per step
    however many of its partitions share a device; its other holders are brought level with
    it before an inference pass reads them (`first_partition_weights`).
    """

    relu: bool = True
    eps: float = 1e-5
    momentum: float = 0.1
    per_partition: bool = False  # statistics per sample partition, not the whole batch's

    type_name = "BatchNorm"

    @property
    def reduction_dims(self) -> tuple[int, ...]:
        """The dims statistics are taken over across partitions."""
        return (2, 3) if self.per_partition else (0, 2, 3)

    def first_partition_weights(self) -> tuple[int, ...]:
        return (2, 3)  # running_mean, running_var

    def infer(self, inputs):
        expect_rank(inputs, 0, (4,), "batch_norm input (NCHW)")
        expect_float(inputs, 0, "batch_norm input")
        return (TensorSpec(inputs[0].shape, inputs[0].dtype),)

    def weight_specs(self, inputs):
        channels = (inputs[0].shape[1],)
        return (WeightSpec(name="scale", shape=channels, initializer="ones"),
                WeightSpec(name="bias", shape=channels),
                WeightSpec(name="running_mean", shape=channels, trainable=False),
                WeightSpec(name="running_var", shape=channels, initializer="ones",
                           trainable=False))

    def forward_partial(self, xp, xs, ws, part):
        (x,) = xs
        aten = vendor.aten(xp)
        if aten is not None:  # (ATen's batch-norm kernel's Welford: its mean and variance)
            torch, n = aten.torch, x.size // x.shape[1]
            _, mean, inv_std = aten.ops.native_batch_norm(aten.tensor(x), None, None, None,
                                                          None, True, 0.0, self.eps)
            mean, var = mean.double(), inv_std.double() ** -2 - self.eps
            return aten.array(torch.stack([mean * n, (var + mean * mean) * n,
                                           torch.full_like(mean, n)]))
        x64 = x.astype("float64")
        count = xp.full(x.shape[1], x.size // x.shape[1], "float64")
        return xp.stack([_channel_sum(x64), _channel_dot(xp, x64, x64), count])

    def forward(self, xp, xs, ws, part):
        (x,) = xs
        aten = vendor.aten(xp)
        keeps = part.training and _first_of_box(part)
        if aten is not None and (part.reduced is None or not part.training):
            self._check_count(part.training, x.size // x.shape[1], x.shape)
            return self._aten_forward(aten, x, ws, part.training, keeps)
        mean, var, count = self._statistics(xp, x, ws, part)
        self._check_count(part.training, x.size // x.shape[1], x.shape,
                          count if part.reduced is not None else None)
        if keeps:
            _, _, running_mean, running_var = ws
            running_mean[...] = (1 - self.momentum) * running_mean + self.momentum * mean
            running_var[...] = ((1 - self.momentum) * running_var
                                + self.momentum * var * (count / (count - 1)))
        inv_std = (1 / xp.sqrt(var + self.eps)).astype(x.dtype)
        if aten is not None:  # (training, on the combined statistics)
            return self._aten_combined_forward(aten, x, ws, mean, var, inv_std, count)
        scale, bias = ws[:2]
        centered = x - _per_channel(mean)
        y = centered * _per_channel(scale * inv_std)
        y += _per_channel(bias)
        if self.relu:
            xp.maximum(y, 0, out=y)
        return [y], (centered, inv_std, scale, y if self.relu else None, part.training, count)

    def _statistics(self, xp, x, ws, part):
        """(mean, variance, count per channel) to normalise with: the partition's own in
        training, or those combined across partitions (`part.reduced`); the running ones in
        inference."""
        if not part.training:
            return ws[2], ws[3], x.size // x.shape[1]
        if part.reduced is None:
            count = x.size // x.shape[1]
            mean = _channel_sum(x) / count
            centered = x - _per_channel(mean)
            return mean, _channel_dot(xp, centered, centered) / count, count
        sums, squares, counts = part.reduced  # (counts: per channel, left on the device)
        mean64 = sums / counts
        var = xp.maximum(squares / counts - mean64 * mean64, 0)
        return mean64.astype(x.dtype), var.astype(x.dtype), counts.astype(x.dtype)

    def _aten_combined_forward(self, aten, x, ws, mean, var, inv_std, count):
        """ATen's batch norm normalising with the combined statistics (its inference mode,
        given them as the running ones)."""
        tensor = aten.tensor(x)
        scale, bias = aten.tensor(ws[0]), aten.tensor(ws[1])
        mean, var = aten.tensor(mean), aten.tensor(var)
        y = aten.ops.native_batch_norm(tensor, scale, bias, mean, var, False, self.momentum,
                                       self.eps)[0]
        if self.relu:
            aten.torch.relu_(y)
        return [aten.array(y)], _Combined(aten, tensor, scale, mean, aten.tensor(inv_std),
                                          y if self.relu else None, aten.tensor(count))

    @staticmethod
    def _check_count(training: bool, local: int, shape, combined=None) -> None:
        """Refuse to train on one value per channel. The combined count (per channel, on the
        device) is at least this partition's `local` one, so it is read only where that is 1."""
        if training and local < 2 and (combined is None or int(combined[0]) < 2):
            raise ValueError(f"batch_norm needs more than one value per channel to train, got "
                             f"input shape {shape}")

    def _aten_forward(self, aten, x, ws, training: bool, keeps: bool):
        """ATen's forward; in training it updates the running buffers only where `keeps`
        (given none, it takes the batch statistics and leaves the buffers alone)."""
        tensor = aten.tensor(x)
        scale, bias, running_mean, running_var = (aten.tensor(w) for w in ws)
        updated = (running_mean, running_var) if keeps or not training else (None, None)
        y, mean, inv_std = aten.ops.native_batch_norm(tensor, scale, bias, *updated, training,
                                                      self.momentum, self.eps)
        if self.relu:
            aten.torch.relu_(y)
        return [aten.array(y)], vendor.Saved(aten, (tensor, scale, running_mean, running_var,
                                                    mean, inv_std, y if self.relu else None,
                                                    training))

    def _aten_backward(self, aten, dy, tensor, scale, running_mean, running_var, mean, inv_std,
                       y, training, part):
        dy = aten.tensor(dy)
        if self.relu:
            dy = aten.ops.threshold_backward(dy, y, 0)
        dx, d_scale, d_bias = aten.ops.native_batch_norm_backward(
            dy, tensor, scale, running_mean, running_var, mean, inv_std, training, self.eps,
            [part.wants_grad(0), True, True])
        dx = aten.array(dx) if part.wants_grad(0) else None
        return [dx], [aten.array(d_scale), aten.array(d_bias), None, None]

    def kept_for_backward(self, inputs):
        """Its input, and its output when it applies the ReLU (for the ReLU's backward)."""
        return Kept(inputs=(0,), outputs=(0,) if self.relu else ())

    def backward_partial(self, xp, dys, saved, part):
        if isinstance(saved, _Combined):  # (kept for backward, which needs the same three)
            saved.weight_grads[:] = self._aten_weight_grads(saved, dys[0])
            _, d_scale, d_bias = saved.weight_grads
            return saved.aten.array(saved.aten.torch.stack([d_bias, d_scale / saved.inv_std]))
        centered, _, _, y, _, _ = saved
        dy = dys[0] if y is None else activate_backward(xp, "relu", dys[0], y)
        return xp.stack([_channel_sum(dy), _channel_dot(xp, dy, centered)])

    def backward(self, xp, dys, saved, part):
        if isinstance(saved, _Combined):
            return self._aten_combined_backward(saved, dys[0], part)
        if isinstance(saved, vendor.Saved):
            return self._aten_backward(saved.aten, dys[0], *saved.values, part)
        centered, inv_std, scale, y, training, count = saved
        dy = dys[0] if y is None else activate_backward(xp, "relu", dys[0], y)
        d_bias = _channel_sum(dy)
        d_scale = _channel_dot(xp, dy, centered) * inv_std  # sum of dy * x_hat
        gain = scale * inv_std
        dx = dy * _per_channel(gain)
        if training:
            # the batch statistics depend on x too; with x_hat = centered * inv_std, subtract
            # gain * (d_bias + x_hat * d_scale) / count, over the whole batch's sums
            total_bias, total_scale = ((d_bias, d_scale) if part.reduced is None else
                                       (part.reduced[0], part.reduced[1] * inv_std))
            dx -= centered * _per_channel(gain * inv_std * total_scale / count)
            dx -= _per_channel(gain * total_bias / count)
        return [dx], [d_scale, d_bias, None, None]

    def _aten_weight_grads(self, saved: "_Combined", dy):
        """(dy through the ReLU, this partition's sum of dy * x_hat and of dy) from ATen's
        backward, on the combined statistics."""
        aten = saved.aten
        dy = aten.tensor(dy)
        if self.relu:
            dy = aten.ops.threshold_backward(dy, saved.y, 0)
        _, d_scale, d_bias = aten.ops.native_batch_norm_backward(
            dy, saved.tensor, saved.scale, None, None, saved.mean, saved.inv_std, True,
            self.eps, [False, True, True])
        return dy, d_scale, d_bias

    def _aten_combined_backward(self, saved: "_Combined", dy, part):
        """The reference backward's sums, as two fused ATen passes: dx = gain * dy - x * c2 +
        (mean * c2 - c1), with c1 = gain * sum dy / count and c2 = gain * inv_std^2 * sum
        dy * (x - mean) / count over the whole batch (`part.reduced`)."""
        aten, torch = saved.aten, saved.aten.torch
        dy, d_scale, d_bias = saved.weight_grads or self._aten_weight_grads(saved, dy)
        dx = None
        if part.wants_grad(0):
            total_bias, total_dot = (aten.tensor(total) for total in part.reduced)
            gain = saved.scale * saved.inv_std
            c1 = gain * total_bias / saved.count
            c2 = gain * saved.inv_std * saved.inv_std * total_dot / saved.count
            shape = (1, -1, 1, 1)
            dx = torch.addcmul((saved.mean * c2 - c1).view(shape), dy, gain.view(shape))
            dx = aten.array(dx.addcmul_(saved.tensor, c2.view(shape), value=-1))
        return [dx], [aten.array(d_scale), aten.array(d_bias), None, None]

    def dim_kinds(self, inputs):
        return (DimKind.SAMPLE, DimKind.PARAMETER, DimKind.ATTRIBUTE, DimKind.ATTRIBUTE)

    def weight_box(self, out_box, inputs, index):
        return Box((out_box.bounds[1],))

    def flops(self, inputs):
        return 8 * inputs[0].size


@dataclass(frozen=True)
class _Combined:
    """What a training forward on combined statistics keeps for its backward, as ATen ran it."""

    aten: "vendor.Aten"
    tensor: object
    scale: object
    mean: object
    inv_std: object
    y: object
    count: object  # the values per channel, combined: a tensor on the device
    weight_grads: list = field(default_factory=list)  # backward_partial's (dy, d_scale, d_bias)


def _first_of_box(part) -> bool:
    """Whether `part` is the first partition of its channels' box: it starts at 0 on every dim
    but the channels'."""
    return all(start == 0 for d, (start, _) in enumerate(part.out_box.bounds) if d != 1)


def take_statistics(graph, per_partition: bool) -> None:
    """Make every batch norm of `graph` take its statistics per sample partition or over the
    whole batch (compile applies --per-partition-batch-norm here); its layers are replaced by
    ones whose operator differs in `per_partition` alone."""
    for index, layer in enumerate(graph.layers):
        if isinstance(layer.op, BatchNorm) and layer.op.per_partition != per_partition:
            graph.layers[index] = replace(layer, op=replace(layer.op,
                                                            per_partition=per_partition))

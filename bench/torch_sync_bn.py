"""Batch norm with statistics over the whole batch of a CPU DistributedDataParallel run: what
`nn.SyncBatchNorm` does on GPUs (it refuses CPU tensors), written with torch's tensor ops and
one gloo all-reduce in forward and one in backward, as SyncBatchNorm's CUDA path has them. It is
the PyTorch counterpart of our default batch norm (exact statistics across sample partitions)
in bench/vs_ddp.py's `pytorch-ddp-sync-bn`.

Only torch is imported here, as in bench/torch_twins.py (DDP's ranks import it afresh)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

_DIMS = (0, 2, 3)  # every dim of an NCHW batch but the channels


def _per_channel(values: torch.Tensor) -> torch.Tensor:
    return values.reshape(1, -1, 1, 1)


class _SyncBatchNormFunction(torch.autograd.Function):
    """Forward: the sums of x and x^2 and the count, summed over the ranks; backward: the sums
    of dy and dy * (x - mean), summed over the ranks. The weight's and bias's gradients are
    this rank's own, which DDP then averages, as SyncBatchNorm leaves them."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum):
        count = torch.tensor([x.numel() / x.shape[1]], dtype=x.dtype)
        sums = torch.cat([x.sum(_DIMS), (x * x).sum(_DIMS), count])
        dist.all_reduce(sums)
        channels = x.shape[1]
        total = sums[-1]
        mean = sums[:channels] / total
        var = sums[channels:2 * channels] / total - mean * mean
        invstd = torch.rsqrt(var + eps)
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(momentum * mean)
            running_var.mul_(1 - momentum).add_(momentum * var * total / (total - 1))
        ctx.save_for_backward(x, weight, mean, invstd, total)
        scale = invstd * weight
        return x * _per_channel(scale) + _per_channel(bias - mean * scale)

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, invstd, total = ctx.saved_tensors
        xmu = x - _per_channel(mean)
        sum_dy, sum_dy_xmu = dy.sum(_DIMS), (dy * xmu).sum(_DIMS)
        grad_weight, grad_bias = sum_dy_xmu * invstd, sum_dy.clone()
        sums = torch.cat([sum_dy, sum_dy_xmu])
        dist.all_reduce(sums)
        channels = x.shape[1]
        mean_dy, mean_dy_xmu = sums[:channels] / total, sums[channels:] / total
        dx = (dy - _per_channel(mean_dy) - xmu * _per_channel(invstd * invstd * mean_dy_xmu)) \
            * _per_channel(invstd * weight)
        return dx, grad_weight, grad_bias, None, None, None, None


class CpuSyncBatchNorm2d(nn.BatchNorm2d):
    """`nn.BatchNorm2d` whose training statistics are the whole global batch's."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        return _SyncBatchNormFunction.apply(x, self.weight, self.bias, self.running_mean,
                                            self.running_var, self.eps, self.momentum)


def synchronized(net: nn.Module) -> nn.Module:
    """`net` with every `nn.BatchNorm2d` replaced by a `CpuSyncBatchNorm2d` holding its
    parameters and buffers."""
    for name, child in net.named_children():
        if type(child) is nn.BatchNorm2d:
            replacement = CpuSyncBatchNorm2d(child.num_features, child.eps, child.momentum)
            replacement.load_state_dict(child.state_dict())
            setattr(net, name, replacement)
        else:
            synchronized(child)
    return net

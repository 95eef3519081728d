"""PyTorch modules of bench/dnn.py's builders, made by running a builder on a stand-in for the
FFModel: each `ff.conv2d`, `ff.batch_norm`, ... call becomes the PyTorch layer or function of
the same shape (convolutions and dense layers with bias where ours have it, batch norm with the
fused ReLU, max and average pooling, concatenation, residual adds), so the twin of a deep network
(Inception-v3, ResNet-101) is the network the builder describes, not a second description of it.
The twin returns the logits; the builder's final softmax is the cross-entropy's.

A builder imports flexflow-dask; import this module after torch, so that flexflow-dask's process
settings (flexflow/__init__.py) do not change how PyTorch runs."""

from __future__ import annotations

from typing import Callable


class _Tensor:
    """What a builder sees of a tensor: its `dims`, as an FFModel's tensors have them."""

    def __init__(self, value):
        self.value, self.dims = value, tuple(value.shape)


def _is(mode, name: str) -> bool:
    return mode is not None and getattr(mode, "name", str(mode)).endswith(name)


class _Replay:
    """The stand-in FFModel: makes the layers on the first run (`layers`), reuses them after."""

    def __init__(self, layers, x):
        self.layers, self.x, self.index, self.logits = layers, x, 0, None

    def _layer(self, make: Callable[[], object]):
        if self.index == len(self.layers):
            self.layers.append(make())
        layer = self.layers[self.index]
        self.index += 1
        return layer

    def create_tensor(self, dims, *args, **kwargs):
        return _Tensor(self.x)

    def conv2d(self, t, channels, kh, kw, sh, sw, ph, pw, activation=None, groups=1,
               use_bias=True, *args, **kwargs):
        from torch import nn
        conv = self._layer(lambda: nn.Conv2d(t.dims[1], channels, (kh, kw), (sh, sw), (ph, pw),
                                             groups=groups, bias=use_bias))
        return self._activated(conv(t.value), activation)

    def batch_norm(self, t, relu=True, *args, **kwargs):
        from torch import nn
        y = self._layer(lambda: nn.BatchNorm2d(t.dims[1]))(t.value)
        return _Tensor(nn.functional.relu(y) if relu else y)

    def pool2d(self, t, kh, kw, sh, sw, ph, pw, pool_type=None, *args, **kwargs):
        from torch import nn
        pool = nn.functional.avg_pool2d if _is(pool_type, "AVG") else nn.functional.max_pool2d
        return _Tensor(pool(t.value, (kh, kw), (sh, sw), (ph, pw)))

    def dense(self, t, out_dim, activation=None, use_bias=True, *args, **kwargs):
        from torch import nn
        linear = self._layer(lambda: nn.Linear(t.dims[-1], out_dim, bias=use_bias))
        return self._activated(linear(t.value), activation)

    def add(self, a, b, *args, **kwargs):
        return _Tensor(a.value + b.value)

    def relu(self, t, *args, **kwargs):
        from torch import nn
        return _Tensor(nn.functional.relu(t.value))

    def concat(self, tensors, axis, *args, **kwargs):
        import torch
        return _Tensor(torch.cat([t.value for t in tensors], axis))

    def flat(self, t, *args, **kwargs):
        return _Tensor(t.value.flatten(1))

    def softmax(self, t, *args, **kwargs):
        self.logits = t.value
        return t

    @staticmethod
    def _activated(y, activation):
        from torch import nn
        return _Tensor(nn.functional.relu(y) if _is(activation, "RELU") else y)


def replayed(build, input_shape: tuple[int, ...]):
    """The PyTorch module of `build(ff, batch)` (a bench/dnn.py builder) for inputs of
    `input_shape` (one sample's), its layers made on two zero samples (batch norm needs more
    than one value per channel), seeded."""
    import torch
    from torch import nn

    class Replayed(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList()
            with torch.no_grad():
                self(torch.zeros((2, *input_shape)))

        def forward(self, x):
            replay = _Replay(self.layers, x)
            build(replay, x.shape[0])
            return replay.logits

    torch.manual_seed(0)
    return Replayed()

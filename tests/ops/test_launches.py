"""Launches per training step: on the vendor path a fixed number per layer, whatever the kernel
size and the batch (what a GPU step costs in launches: ops/vendor.py, tests/ops/counting.py)."""

import numpy as np

from flexflow.core import (ActiMode, DataType, FFConfig, FFModel, LossType, MetricsType,
                           SGDOptimizer)
from flexflow.scheduler import cluster

from .counting import CountingAten, counting

LAYERS = 10  # of the model below


def launches_per_step(monkeypatch, kernel: int, batch: int, steps: int = 2) -> int:
    xp, counter = counting()
    monkeypatch.setattr(cluster, "array_module", lambda cpu_only=False: xp)
    ff = FFModel(FFConfig(argv=[], batch_size=batch))
    x = ff.create_tensor([batch, 3, 12, 12], DataType.DT_FLOAT)
    pad = kernel // 2
    t = ff.conv2d(x, 8, kernel, kernel, 1, 1, pad, pad, ActiMode.AC_MODE_RELU)
    t = ff.batch_norm(t)
    t = ff.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ff.conv2d(t, 8, kernel, kernel, 1, 1, pad, pad, ActiMode.AC_MODE_RELU)
    t = ff.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ff.flat(t)
    t = ff.dense(t, 16, ActiMode.AC_MODE_RELU)
    t = ff.dense(t, 10)
    ff.softmax(t)
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY])
    rng = np.random.default_rng(0)
    x.set_tensor(ff, rng.standard_normal((batch, 3, 12, 12)).astype(np.float32))
    ff.label_tensor.set_tensor(ff, rng.integers(0, 10, (batch, 1)).astype(np.int32))
    ff.train_step()  # the first step creates the optimizer state
    counter.numpy = counter.aten = 0
    with CountingAten():
        for _ in range(steps):
            ff.train_step()
    return counter.total // steps


def test_vendor_launches_do_not_grow_with_kernel_or_batch(monkeypatch, kernel_path):
    small = launches_per_step(monkeypatch, kernel=3, batch=4)
    large = launches_per_step(monkeypatch, kernel=5, batch=16)
    if kernel_path == "vendor":
        assert small == large, f"launches per step: {small} (3x3, batch 4), {large} (5x5, 16)"
        assert small <= 12 * LAYERS, f"{small} launches per step for {LAYERS} layers"
    else:  # the reference kernels copy one window offset at a time: the test tells them apart
        assert large > small


def test_counting_sees_element_copies_and_torch_kernels(monkeypatch):
    xp, counter = counting()
    a = xp.zeros((4, 4))
    a[1:3] = 1.0
    b = a + a
    assert counter.numpy == 3 and counter.aten == 0
    with CountingAten():
        import torch
        torch.from_numpy(np.asarray(b)).t().relu_()
    assert counter.aten == 1


"""GPU check, for a machine with an NVIDIA GPU, CuPy and dask-cuda:

1. every operator's CuPy forward and backward against its NumPy run (the CPU path, itself tested
   against PyTorch), on the same inputs;
2. a CNN trained on a 1-GPU `dask_cuda.LocalCUDACluster` (`-ll:gpu 1`), with its losses compared
   to the in-process NumPy run;
3. step time of that CNN against PyTorch on the same GPU.

    python bench/gpu_check.py            # exits 0 and says so when no GPU is present
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from flexflow.ops.attention import MultiHeadAttention
from flexflow.ops.base import Part
from flexflow.ops.batch_matmul import BatchMatmul
from flexflow.ops.batch_norm import BatchNorm
from flexflow.ops.concat import Concat, Split
from flexflow.ops.conv2d import Conv2D
from flexflow.ops.dense import Dense
from flexflow.ops.dropout import Dropout
from flexflow.ops.elementwise import UNARY_FUNCS, ElementBinary, ElementUnary
from flexflow.ops.embedding import Embedding
from flexflow.ops.layer_norm import LayerNorm
from flexflow.ops.pool2d import Pool2D
from flexflow.ops.reduce import Mean
from flexflow.ops.reshape import Flat, Reshape, Reverse, Transpose
from flexflow.ops.softmax import Softmax
from flexflow.ops.spec import TensorSpec

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def positive(*shape):
    return (np.abs(rand(*shape)) + 0.5).astype(np.float32)


def cases():
    """(operator, inputs, weights) covering every operator family."""
    yield Dense(16, "relu"), [rand(8, 32)], [rand(16, 32), rand(16)]
    yield (Conv2D(8, (3, 3), (1, 1), ((1, 1), (1, 1)), "relu"), [rand(4, 3, 16, 16)],
           [rand(8, 3, 3, 3), rand(8)])
    yield Conv2D(8, (3, 3), (2, 2), ((1, 0), (1, 0)), groups=2), [rand(4, 4, 9, 9)], \
        [rand(8, 2, 3, 3), rand(8)]
    yield Pool2D((2, 2), (2, 2)), [rand(4, 3, 8, 8)], []
    yield Pool2D((3, 3), (1, 1), ((1, 1), (1, 1)), "avg"), [rand(4, 3, 8, 8)], []
    yield BatchNorm(), [rand(4, 3, 5, 5)], [positive(3), rand(3), np.zeros(3, np.float32),
                                             np.ones(3, np.float32)]
    yield LayerNorm((-1,)), [rand(4, 6, 8)], [positive(8), rand(8)]
    yield Embedding(20, 8, "sum"), [RNG.integers(0, 20, (4, 5)).astype(np.int32)], [rand(20, 8)]
    yield Softmax(-1), [rand(4, 10)], []
    yield Dropout(0.3, 5), [rand(4, 10)], []
    yield BatchMatmul(), [rand(2, 3, 4), rand(2, 4, 5)], []
    yield MultiHeadAttention(8, 2), [rand(2, 4, 8)] * 3, [rand(8, 8), rand(8, 8), rand(8, 8),
                                                          rand(8), rand(8), rand(8), rand(8, 8),
                                                          rand(8)]
    yield Flat(), [rand(4, 2, 3, 3)], []
    yield Reshape((4, 3, 6)), [rand(4, 18)], []
    yield Transpose((0, 2, 1)), [rand(4, 3, 5)], []
    yield Reverse(1), [rand(4, 3, 5)], []
    yield Concat(1), [rand(4, 2, 3), rand(4, 5, 3)], []
    yield Split((2, 3), 1), [rand(4, 5, 3)], []
    yield Mean((1,)), [rand(4, 5, 3)], []
    for func in ("add", "subtract", "multiply", "divide", "maximum", "minimum"):
        yield ElementBinary(func), [rand(4, 3, 5), positive(3, 5)], []
    for func in UNARY_FUNCS:
        scalar = 2.0 if func in ("pow", "scalar_multiply", "scalar_add", "scalar_sub",
                                 "scalar_true_divide") else None
        yield ElementUnary(func, scalar), [positive(4, 6)], []


def run(op, xp, xs, ws, dys=None):
    specs = [TensorSpec(x.shape, str(x.dtype)) for x in xs]
    part = Part.whole(specs, op.infer(specs), seed=3)
    ys, saved = op.forward(xp, [xp.asarray(x) for x in xs], [xp.asarray(w) for w in ws], part)
    if dys is None:
        return ys, None
    dxs, dws = op.backward(xp, [xp.asarray(d) for d in dys], saved, part)
    return ys, list(dxs) + list(dws)


def to_host(a):
    return None if a is None else (a.get() if hasattr(a, "get") else np.asarray(a))


def check_operators(cupy) -> int:
    failures = 0
    for op, xs, ws in cases():
        cpu_ys, _ = run(op, np, xs, [w.copy() for w in ws])
        dys = [rand(*y.shape) for y in cpu_ys]
        cpu_ys, cpu_grads = run(op, np, xs, [w.copy() for w in ws], dys)
        gpu_ys, gpu_grads = run(op, cupy, xs, [w.copy() for w in ws], dys)
        try:
            for a, b in zip(cpu_ys + cpu_grads, gpu_ys + gpu_grads):
                if a is None or b is None:
                    assert a is None and b is None, "one side has no gradient"
                    continue
                np.testing.assert_allclose(to_host(b), a, rtol=1e-4, atol=1e-5)
            print(f"ok    {op}")
        except AssertionError as error:
            failures += 1
            print(f"FAIL  {op}: {str(error).splitlines()[0]}")
    return failures


def cnn(ff, batch):
    from flexflow.core import ActiMode

    x = ff.create_tensor([batch, 3, 32, 32])
    t = ff.conv2d(x, 32, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.conv2d(t, 64, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ff.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ff.flat(t)
    ff.softmax(ff.dense(t, 10))
    return x


def train(argv, batch, steps, xb, yb):
    from flexflow.core import FFConfig, FFModel, LossType, SGDOptimizer

    ff = FFModel(FFConfig(argv=argv, batch_size=batch))
    x = cnn(ff, batch)
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    x.set_tensor(ff, xb)
    ff.label_tensor.set_tensor(ff, yb)
    losses = [ff.train_step() for _ in range(steps)]
    return ff, losses


def time_median(step, repeats=5, steps=10):
    step()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        runs.append((time.perf_counter() - start) / steps)
    return statistics.median(runs)


def main() -> int:
    try:
        import cupy

        if not cupy.cuda.is_available():
            raise ImportError("no CUDA device")
    except Exception as error:  # no cupy, no driver, no device
        print(f"no GPU here ({error}); nothing to check")
        return 0
    failures = check_operators(cupy)

    batch = 64
    xb = rand(batch, 3, 32, 32)
    yb = RNG.integers(0, 10, (batch, 1)).astype(np.int32)
    _, cpu_losses = train(["--cpu"], batch, 5, xb, yb)
    gpu, gpu_losses = train(["-ll:gpu", "1", "--cluster"], batch, 5, xb, yb)  # LocalCUDACluster
    print(f"losses numpy {np.round(cpu_losses, 5)}\nlosses cupy  {np.round(gpu_losses, 5)}")
    if not np.allclose(cpu_losses, gpu_losses, rtol=1e-3):
        failures += 1
        print("FAIL  training losses differ between the NumPy and CuPy runs")

    import torch
    from torch import nn

    net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1),
                        nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                        nn.Linear(64 * 16 * 16, 10)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    tx, ty = torch.tensor(xb).cuda(), torch.tensor(yb[:, 0]).long().cuda()

    def torch_step():
        opt.zero_grad()
        nn.functional.cross_entropy(net(tx), ty).backward()
        opt.step()
        torch.cuda.synchronize()

    ours = time_median(gpu.train_step)
    theirs = time_median(torch_step)
    print(f"CNN step on 1 GPU: flexflow-dask {ours * 1e3:.2f} ms, PyTorch {theirs * 1e3:.2f} ms, "
          f"ratio {ours / theirs:.2f}x")
    print("GPU check passed" if not failures else f"GPU check: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

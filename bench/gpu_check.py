"""GPU check, for a machine with an NVIDIA GPU, CuPy and dask-cuda:

1. every operator's CuPy forward and backward, on the vendor kernels (torch's CUDA kernels on
   CuPy buffers through DLPack: ops/vendor.py) and on the reference CuPy kernels, against the
   NumPy reference kernels (themselves tested against PyTorch), on the same inputs;
2. that CuPy and torch allocate from one memory pool;
3. a CNN trained on a 1-GPU `dask_cuda.LocalCUDACluster` (`-ll:gpu 1`), with its losses compared
   to the in-process NumPy run, and its step time;
4. the in-process step of that CNN against PyTorch on the same GPU at batch 64 (launch-bound)
   and 512 (kernel-bound), with and without CUDA-graph replay, with the CUDA kernels each
   step launches, and the 1-GPU cluster's step against the in-process one at batch 64;
5. two workers sharing the one GPU (a LocalCUDACluster on device 0 twice), training the CNN
   data parallel with the devices' messages on Dask (`--collectives off`: NCCL refuses two
   ranks on one GPU), its losses against the NumPy run's.

Results also go to `$OUT/gpu_check.json` when `OUT` is set, rewritten as each stage finishes:
the versions, the kernels in-process and on each of the cluster's workers (array module, vendor
or reference), each stage's figures.

    python bench/gpu_check.py            # exits 0 and says so when no GPU is present

It exits 1 where a GPU is present (its device files) but CuPy cannot use it, and where the
cluster's workers ran on anything but CuPy.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from flexflow.ops import vendor
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


def check_operators(cupy, path: str) -> int:
    """Every case on CuPy with the `path` kernels against the NumPy reference kernels."""
    failures = 0
    for op, xs, ws in cases():
        with vendor.kernels("reference"):
            cpu_ys, _ = run(op, np, xs, [w.copy() for w in ws])
            dys = [rand(*y.shape) for y in cpu_ys]
            cpu_ys, cpu_grads = run(op, np, xs, [w.copy() for w in ws], dys)
        with vendor.kernels(path):
            gpu_ys, gpu_grads = run(op, cupy, xs, [w.copy() for w in ws], dys)
        try:
            for a, b in zip(cpu_ys + cpu_grads, gpu_ys + gpu_grads, strict=True):
                if a is None or b is None:
                    assert a is None and b is None, "one side has no gradient"
                    continue
                np.testing.assert_allclose(to_host(b), a, rtol=1e-4, atol=1e-5)
            print(f"ok    {path:9s} {op}")
        except AssertionError as error:
            failures += 1
            print(f"FAIL  {path:9s} {op}: {str(error).splitlines()[0]}")
    return failures


def check_one_memory_pool(cupy) -> int:
    """After the vendor bridge is made, CuPy allocates from torch's pool (or both from RMM)."""
    import torch
    vendor.aten(cupy)
    before = torch.cuda.memory_allocated()
    block = cupy.empty(64 << 20, dtype=cupy.uint8)
    grew = torch.cuda.memory_allocated() - before
    del block
    uses_rmm = "rmm" in (getattr(cupy.cuda.get_allocator(), "__module__", None) or "")
    ok = grew >= 64 << 20 or uses_rmm
    print(f"{'ok  ' if ok else 'FAIL'}  one memory pool: a 64 MiB CuPy array grew torch's "
          f"allocated memory by {grew >> 20} MiB")
    return 0 if ok else 1


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


def torch_cnn(batch):
    import torch
    from torch import nn

    net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1),
                        nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                        nn.Linear(64 * 16 * 16, 10)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    return net, opt


def torch_step_of(xb, yb):
    import torch
    from torch import nn

    net, opt = torch_cnn(len(xb))
    tx, ty = torch.tensor(xb).cuda(), torch.tensor(yb[:, 0]).long().cuda()

    def torch_step():
        opt.zero_grad()
        nn.functional.cross_entropy(net(tx), ty).backward()
        opt.step()
        torch.cuda.synchronize()
    return torch_step


def launches(step) -> int:
    """CUDA kernels one call of `step` launches (every library's: CUPTI sees them all)."""
    from torch.profiler import ProfilerActivity, profile
    step()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def compare_steps(batch: int, results: dict) -> None:
    """In-process CNN step on CuPy (vendor kernels) against PyTorch CUDA, at `batch`: with
    CUDA-graph replay (the default) and without (`--cuda-graphs off`)."""
    import cupy
    xb = rand(batch, 3, 32, 32)
    yb = RNG.integers(0, 10, (batch, 1)).astype(np.int32)
    steps = {}
    replay = "off"
    for name, argv in (("flexflow-dask", []), ("flexflow-dask, no graphs", ["--cuda-graphs",
                                                                            "off"])):
        ff, _ = train(argv, batch, 3, xb, yb)

        def ours(ff=ff):
            ff.train_step()
            cupy.cuda.get_current_stream().synchronize()
        steps[name] = ours
        if not argv:
            replay = _replay_state(ff.compiled.executor.replayer)
    steps["pytorch"] = torch_step_of(xb, yb)
    ms = {name: time_median(step) * 1e3 for name, step in steps.items()}
    counts = {name: launches(step) for name, step in steps.items()}
    results[f"batch {batch}"] = {"ms": ms, "launches": counts, "graph replay": replay}
    print(f"CNN step in-process, batch {batch} (graph replay: {replay}): " + ", ".join(
        f"{name} {ms[name]:.2f} ms ({counts[name]} launches)" for name in ms)
        + f"; ratio to PyTorch {ms['flexflow-dask'] / ms['pytorch']:.2f}x, without graphs "
          f"{ms['flexflow-dask, no graphs'] / ms['pytorch']:.2f}x")


def _replay_state(replayer) -> str:
    if replayer is None:
        return "not possible for this model here"
    if replayer.refused is not None:
        return f"refused: {replayer.refused}"
    return f"on, {len(replayer.graphs)} graph(s)" if replayer.graphs else "not captured"


def two_workers_on_one_gpu(batch, xb, yb, cpu_losses, results: dict) -> int:
    """Stage 5; its failures (0 or 1)."""
    from dask_cuda import LocalCUDACluster

    from flexflow.scheduler import cluster as cluster_module
    try:
        with LocalCUDACluster(n_workers=2, CUDA_VISIBLE_DEVICES="0,0",
                              dashboard_address="127.0.0.1:0") as cluster:
            argv = ["--scheduler", cluster.scheduler_address, "-ll:gpu", "2",
                    "--collectives", "off"]
            ff, losses = train(argv, batch, 5, xb, yb)
            results["two workers on one GPU"] = {"losses": losses,
                                                 "workers' kernels": workers_kernels(ff)}
            ff.compiled.executor.close()
            cluster_module.disconnect(cluster.scheduler_address)
    except Exception as error:  # recorded, and the check goes on to its verdict
        results["two workers on one GPU"] = f"{type(error).__name__}: {error}"
        print(f"FAIL  two workers on one GPU: {results['two workers on one GPU']}")
        return 1
    print(f"losses, two workers on one GPU {np.round(losses, 5)}")
    if not np.allclose(cpu_losses, losses, rtol=1e-3):
        print("FAIL  two workers sharing the GPU train otherwise than the NumPy run")
        return 1
    return 0


def gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU, whatever CuPy makes of it: its device files."""
    return any(Path("/dev").glob("nvidia[0-9]*"))


def _kernels_here() -> str:
    """The array module this process runs kernels on, and which kernels run on its arrays."""
    from flexflow.scheduler.cluster import array_module
    xp = array_module()
    return f"{xp.__name__} {'vendor' if vendor.aten(xp) is not None else 'reference'}"


def workers_kernels(ff) -> list[str]:
    """`_kernels_here` on each of the cluster's workers."""
    cluster = ff.compiled.cluster
    found = cluster.client.run(_kernels_here, workers=cluster.workers)
    return [found[w] for w in cluster.workers]


def versions() -> dict[str, str]:
    import importlib.metadata as metadata
    found = {"python": sys.version.split()[0]}
    for name in ("torch", "cupy-cuda13x", "cupy-cuda12x", "numpy", "dask", "distributed",
                 "dask-cuda", "flexflow-dask"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def save(results: dict, failures: int) -> None:
    """`results` so far to `$OUT/gpu_check.json` (when OUT is set), so a crash leaves them."""
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_check.json").write_text(
            json.dumps({**results, "failures": failures}, indent=1))


def main() -> int:
    try:
        import cupy

        if not cupy.cuda.is_available():
            raise ImportError("no CUDA device")
    except Exception as error:  # no cupy, no driver, no device
        if gpu_present():
            print(f"FAIL  a GPU is here, but CuPy cannot use it ({type(error).__name__}: "
                  f"{error})")
            return 1
        print(f"no GPU here ({error}); nothing to check")
        return 0
    results: dict = {"versions": versions(), "in-process kernels": _kernels_here()}
    print(results)
    failures = sum(check_operators(cupy, path) for path in ("vendor", "reference"))
    failures += check_one_memory_pool(cupy)
    save(results, failures)
    batch = 64
    xb = rand(batch, 3, 32, 32)
    yb = RNG.integers(0, 10, (batch, 1)).astype(np.int32)
    with vendor.kernels("reference"):
        _, cpu_losses = train(["--cpu"], batch, 5, xb, yb)
    gpu, gpu_losses = train(["-ll:gpu", "1", "--cluster"], batch, 5, xb, yb)  # LocalCUDACluster
    print(f"losses numpy {np.round(cpu_losses, 5)}\nlosses cupy  {np.round(gpu_losses, 5)}")
    if not np.allclose(cpu_losses, gpu_losses, rtol=1e-3):
        failures += 1
        print("FAIL  training losses differ between the NumPy and CuPy runs")
    results["workers' kernels"] = kernels = workers_kernels(gpu)
    print(f"the cluster's workers: {kernels}")
    if [k.split()[0] for k in kernels] != ["cupy"]:
        failures += 1
        print(f"FAIL  the cluster's workers ran on {kernels}, not on CuPy")
    cluster_ms = time_median(gpu.train_step) * 1e3
    results["cluster batch 64 ms"] = cluster_ms
    print(f"CNN step on a 1-GPU LocalCUDACluster, batch 64: {cluster_ms:.2f} ms")
    save(results, failures)
    for batch in (64, 512):
        compare_steps(batch, results)
        save(results, failures)
    results["cluster / in-process at batch 64"] = ratio = (
        cluster_ms / results["batch 64"]["ms"]["flexflow-dask"])
    print(f"the 1-GPU cluster's step against the in-process one, batch 64: {ratio:.2f}x")
    failures += two_workers_on_one_gpu(len(xb), xb, yb, cpu_losses, results)
    save(results, failures)
    print("GPU check passed" if not failures else f"GPU check: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""flexflow-dask against what a user would pick instead (PyTorch eager, PyTorch DDP), same cores.

Three networks, FlexFlow's `cifar10_cnn`, the AlexNet-style `alexnet_cifar` and the batch-norm
ResNet `resnet14_cifar` (bench/dnn.py, and their torch twins in bench/torch_twins.py, checked to
have the same trainable parameter count and output shape), train on one synthetic CIFAR-shaped
batch (3x32x32, 10 classes; `--batch`, 64), SGD with momentum, the cross-entropy, on N =
`--devices` cores' worth of processes and threads. On `resnet14_cifar` the systems do not do
the same work across processes: DDP's batch norms normalise each replica's samples by their own
statistics, ours by the whole batch's (exact, reduced across devices; see torch_twins.py):

    pytorch-eager     1 process, N threads
    pytorch-ddp       DistributedDataParallel, gloo over loopback: N processes x 1 thread, each
                      training batch / N samples; the time runs from a barrier to a barrier
    pytorch-ddp-sync-bn  the same with batch norm over the global batch, as ours by default
                      (bench/torch_sync_bn.py: nn.SyncBatchNorm runs on GPUs only)
    ours-in-process   FFModel on one device in its own process, N threads for the vendor kernels
    ours-dp           FFModel data parallel on a local cluster of N single-threaded workers
                      (batch norm's statistics exact, over the whole batch)
    ours-dp-ddp-bn    the same with --per-partition-batch-norm: each worker's batch norm takes
                      its own samples' statistics, as DDP with nn.BatchNorm2d does
    ours-searched     the same cluster, the strategy searched (`--budget`, parameter and
                      attribute parallelism enabled), as bench/search_vs_dp.py does

Every run of a system is a child process of its own (this script with `--child`), so thread
settings and allocator state do not leak from one system to the next; it trains `--warmup`
steps, then times `--steps` steps (ours: a one-epoch `fit` of that many batches on data loaders,
as a user trains, so the data set is kept on the workers and the iterations run in windows; its
warm-up is one such epoch on the same loaders, which places the data set on the workers, as every
epoch but a user's first finds it, since PyTorch's processes train on a batch they hold).
Rounds alternate the systems (round r runs each once, in an order rotated by r), so a slow spell
of the shared host hits all of them. Reported per model and system: the median samples/s over
the rounds, and its ratio to PyTorch DDP and to PyTorch eager (higher is better). Each child
runs in a process group of its own, ended with everything in it (cluster workers, DDP ranks)
when it finishes, fails or is interrupted.

    python bench/vs_ddp.py [--rounds 5] [--steps 5] [--warmup 2] [--batch 64] [--devices 2]
                           [--budget 1000] [--models cifar10_cnn alexnet_cifar resnet14_cifar]
                           [--systems pytorch-eager pytorch-ddp pytorch-ddp-sync-bn
                            ours-in-process ours-dp ours-dp-ddp-bn ours-searched]
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import torch_ddp  # noqa: E402
import torch_twins  # noqa: E402
from child_processes import end_groups_on_sigterm, run_child  # noqa: E402
from command_line import command_line  # noqa: E402
from host_load import StealMeter, describe  # noqa: E402

MODELS = ["cifar10_cnn", "alexnet_cifar", "resnet14_cifar"]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
RESULT = "vs_ddp samples/s: "  # the line of a child's output that carries its figure


def _pytorch_eager(args, name: str) -> float:
    step = torch_twins.sgd_step(torch_twins.module(name), *torch_twins.cifar_batch(args.batch))
    for _ in range(args.warmup):
        step()
    return args.steps * args.batch / torch_twins.seconds(step, args.steps)


def _pytorch_ddp(args, name: str, sync_bn: bool = False) -> float:
    return torch_ddp.samples_per_second(name, args.batch, args.devices, args.warmup, args.steps,
                                        sync_bn)


def _ours(args, name: str, argv: list[str]) -> float:
    """Samples/s of FFModel compiled with the command line `argv`."""
    import dnn

    from flexflow.core import FFConfig, FFModel, LossType, SGDOptimizer
    ff = FFModel(FFConfig(argv=argv, batch_size=args.batch))
    (x,) = getattr(dnn, name)(ff, args.batch)
    ff.compile(optimizer=SGDOptimizer(ff, lr=torch_twins.LEARNING_RATE,
                                      momentum=torch_twins.MOMENTUM),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    try:
        images, labels = torch_twins.cifar_batch(args.batch)
        loaders = (ff.create_data_loader(x, np.concatenate([images] * args.steps)),
                   ff.create_data_loader(ff.label_tensor, np.concatenate([labels] * args.steps)))
        if args.warmup:  # (one epoch: the data set is then on the workers, as after a first)
            _fit_seconds(ff, loaders)
        return args.steps * args.batch / _fit_seconds(ff, loaders)
    finally:
        ff.compiled.executor.close()


def _fit_seconds(ff, loaders) -> float:
    """Wall time of a one-epoch `fit` on the data `loaders` (input, label), as a user trains;
    its `[Metrics]` lines are dropped."""
    with contextlib.redirect_stderr(io.StringIO()):
        return torch_twins.seconds(lambda: ff.fit(x=loaders[0], y=loaders[1], epochs=1), 1)


def _ours_on_cluster(args, name: str, flags: list[str]) -> float:
    """`_ours` on a fresh local cluster of `--devices` single-threaded workers."""
    from local_cluster import local_cluster

    from flexflow.scheduler import cluster as cluster_module
    with local_cluster(args.devices) as cluster:
        address = cluster.scheduler_address
        try:
            return _ours(args, name, ["--scheduler", address, "-ll:gpu", str(args.devices),
                                      *flags])
        finally:
            cluster_module.disconnect(address)


def _ours_searched(args, name: str) -> float:
    return _ours_on_cluster(args, name, ["--budget", str(args.budget),
                                         "--enable-parameter-parallel",
                                         "--enable-attribute-parallel"])


class System(NamedTuple):
    run: Callable[..., float]  # (args, model name) -> samples/s
    spread: bool  # N processes of 1 thread each, else 1 process of N threads
    layout: str  # how it uses the N cores, `{n}` for N


SYSTEMS = {
    "pytorch-eager": System(_pytorch_eager, False, "1 process x {n} threads"),
    "pytorch-ddp": System(_pytorch_ddp, True, "{n} processes x 1 thread (gloo)"),
    "pytorch-ddp-sync-bn": System(
        lambda args, name: _pytorch_ddp(args, name, sync_bn=True), True,
        "{n} processes x 1 thread (gloo), batch norm over the global batch as ours"),
    "ours-in-process": System(lambda args, name: _ours(args, name, []), False,
                              "1 process x {n} threads (vendor kernels)"),
    "ours-dp": System(lambda args, name: _ours_on_cluster(args, name, []), True,
                      "{n} workers x 1 thread, data parallel"),
    "ours-dp-ddp-bn": System(
        lambda args, name: _ours_on_cluster(args, name, ["--per-partition-batch-norm"]), True,
        "{n} workers x 1 thread, data parallel, batch norm per partition as DDP's"),
    "ours-searched": System(_ours_searched, True, "{n} workers x 1 thread, searched"),
}


def twins(name: str, batch: int) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Network `name`'s trainable parameter count and output shape, per framework (a batch
    norm's running statistics are buffers in both, not parameters)."""
    import dnn
    import torch

    from flexflow.checkpoint import weight_specs
    from flexflow.core import FFConfig, FFModel
    ff = FFModel(FFConfig(argv=[], batch_size=batch))
    getattr(dnn, name)(ff, batch)
    output = ff.graph.tensors[ff.graph.layers[-1].outputs[0]].spec.shape
    ours = sum(math.prod(spec.shape) for spec in weight_specs(ff).values() if spec.trainable)
    net = torch_twins.module(name)
    with torch.no_grad():
        torch_output = tuple(net(torch.zeros(batch, 3, 32, 32)).shape)
    return {"flexflow-dask": (ours, tuple(output)),
            "pytorch": (torch_twins.parameter_count(net), torch_output)}


def check_twins(args) -> None:
    """Prints each network's parameter count and output shape; exits where they differ."""
    for name in args.models:
        counts = twins(name, args.batch)
        print(f"{name}: " + "; ".join(f"{framework} {count:,} parameters, output {shape}"
                                      for framework, (count, shape) in counts.items()))
        if len(set(counts.values())) != 1:
            raise SystemExit(f"{name}: the torch twin is not the same network as ours")


def child(args) -> None:
    import torch
    system = SYSTEMS[args.child]
    torch.set_num_threads(1 if system.spread else args.devices)
    (name,) = args.models
    print(RESULT + repr(system.run(args, name)), flush=True)


def samples_per_second(args, system: str, name: str) -> float:
    """One run of `system` on network `name` in a child process."""
    threads = "1" if SYSTEMS[system].spread else str(args.devices)
    env = dict(os.environ, **{variable: threads for variable in THREAD_VARIABLES})
    command = [sys.executable, __file__, "--child", system, "--models", name]
    for option in ("steps", "warmup", "batch", "devices", "budget"):
        command += [f"--{option}", str(getattr(args, option))]
    output = run_child(command, env)
    results = [line for line in output.splitlines() if line.startswith(RESULT)]
    if not results:
        raise RuntimeError(f"{system} on {name} printed no result:\n{output}")
    return float(results[-1][len(RESULT):])


def measure(args, name: str) -> dict[str, list[float]]:
    """Samples/s of each system on network `name`, one per round, in rotated orders."""
    figures: dict[str, list[float]] = {system: [] for system in args.systems}
    for round_ in range(args.rounds):
        shift = round_ % len(args.systems)
        for system in args.systems[shift:] + args.systems[:shift]:
            steal = StealMeter()
            figures[system].append(samples_per_second(args, system, name))
            print(f"  {name} round {round_ + 1}: {system:15s} {figures[system][-1]:8.1f} "
                  f"samples/s ({describe(steal.read())})", flush=True)
    return figures


def report(args, name: str, figures: dict[str, list[float]]) -> None:
    """Per system: the median samples/s, and its ratios to DDP and to eager where they ran."""
    medians = {system: statistics.median(values) for system, values in figures.items()}
    print(f"{name}, batch {args.batch}: median samples/s of {args.rounds} rounds "
          f"(higher is better)")
    for system, median in medians.items():
        ratios = "".join(f"  {median / medians[base]:5.2f}x {label}"
                         for base, label in (("pytorch-ddp", "DDP"),
                                             ("pytorch-ddp-sync-bn", "DDP sync BN"),
                                             ("pytorch-eager", "eager"))
                         if base in medians)
        print(f"  {system:19s} {median:8.1f}{ratios}")


def host_now() -> str:
    """The load average and the CPU steal of the last second."""
    steal = StealMeter()
    time.sleep(1)
    return describe(steal.read())


def check_options(args) -> None:
    """Exits on a model or system this bench does not have, or a batch that DDP cannot split."""
    unknown = sorted(set(args.models) - set(MODELS)) + sorted(set(args.systems) - set(SYSTEMS))
    if unknown:
        raise SystemExit(f"unknown model or system {unknown}; models {MODELS}, systems "
                         f"{list(SYSTEMS)}")
    if args.batch % args.devices:
        raise SystemExit(f"--batch {args.batch} does not split evenly over --devices "
                         f"{args.devices}")


def main():
    args = command_line(__doc__, rounds=5, steps=5, warmup=2, batch=64, devices=2, budget=1000,
                        models=list(MODELS), systems=list(SYSTEMS), child="")
    check_options(args)
    if args.child:
        child(args)
        return
    import torch
    end_groups_on_sigterm()
    steal = StealMeter()
    print(f"{os.cpu_count()} cores (os.cpu_count), {host_now()} at start; torch "
          f"{torch.__version__}; N = {args.devices}; {args.warmup} warm-up and {args.steps} "
          f"timed steps per run")
    for system in args.systems:
        print(f"  {system:15s} {SYSTEMS[system].layout.format(n=args.devices)}")
    check_twins(args)
    try:
        for name in args.models:
            report(args, name, measure(args, name))
    except KeyboardInterrupt:
        raise SystemExit("interrupted; the running system's processes are ended") from None
    print(f"over the run {describe(steal.read())}; at the end {host_now()}")


if __name__ == "__main__":
    main()

"""Peak memory of a training step, flexflow-dask against PyTorch, each in a process of its own.

What is measured is what a device's memory must hold: the growth of the process's peak resident
memory (Linux's VmHWM, reset after the imports) over its resident memory after the imports, to
the end of `--steps` training steps (SGD with momentum, the cross-entropy of the logits), one
thread. In-process networks (batch per network below):

    resnet18_112    bench/dnn.py's resnet18 (ImageNet's, batch norm) on 3x112x112, batch 32
    resnet18_224    the same on 3x224x224, batch 32
    cifar10_cnn     FlexFlow's cifar10_cnn, batch 64
    transformer_lm  bench/dnn.py's transformer_lm (4 blocks, width 512, vocab 8192), batch 16

Beside it: our peak allocated bytes as `--profiling` measures them (`get_perf_metrics()
.peak_memory`: the C heap in use after each kernel task, scheduler/memory_use.py) and the memory
model's prediction for the one device (`memory_model` below), the figure compile's memory check
and the search use. Systems alternate within each round, rounds repeat, figures are medians;
ratios are flexflow-dask / PyTorch (lower is better).

With `--cluster`, the same per process on 2 workers: each of our 2 single-threaded Dask workers
against each of PyTorch DDP's 2 ranks (gloo), the global batch split between them, the growth
counted from after each process's imports (ours: before the model compiles, so calibration's
kernel probes count too) to the end of the steps.

    python bench/memory.py [--rounds 3] [--networks resnet18_112 ...] [--steps 3] [--batch N]
                           [--cluster [--split sample|parameter|attribute]]

`--networks resnet101 inception_v3` (3x224x224 and 3x299x299, batch 8) are bench/dnn.py's
ResNet-101 and Inception-v3, against PyTorch modules replayed from the same builders.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

NETWORKS = {"resnet18_112": ("resnet18", 32, 112), "resnet18_224": ("resnet18", 32, 224),
            "cifar10_cnn": ("cifar10_cnn", 64, 32), "transformer_lm": ("transformer_lm", 16, 0)}
# beside them, at batches this machine holds, for bench/paper_memory.py (PyTorch's twins are
# replayed from the builders, bench/torch_replay.py)
DEEP_NETWORKS = {"resnet101": ("resnet101", 8, 224), "inception_v3": ("inception_v3", 8, 299)}
ALL_NETWORKS = {**NETWORKS, **DEEP_NETWORKS}
SYSTEMS = ("flexflow", "pytorch")
SPLITS = ("sample", "parameter", "attribute")  # ours on 2 workers (`split_strategy`)
MB = 1e6


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def start_peak() -> int:
    """Reset this process's peak resident memory to its present one; that, in bytes."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    return _status_kb("VmRSS") * 1024


def peak_since(start: int) -> int:
    """Bytes the peak resident memory grew since `start_peak()` returned `start`."""
    return _status_kb("VmHWM") * 1024 - start


def spec(network: str, batch: int | None = None) -> tuple[str, int, int]:
    """(builder name, batch, image side) of `network`, at `batch` when given."""
    name, default, image = ALL_NETWORKS[network]
    return name, batch or default, image


def batch_of(network: str, batch: int | None = None):
    """(inputs, labels) of a network's synthetic batch, from one seed."""
    import numpy as np
    name, batch, image = spec(network, batch)
    rng = np.random.default_rng(0)
    if name == "transformer_lm":
        return (rng.integers(0, 8192, (batch, 64)).astype(np.int32),
                rng.integers(0, 8192, (batch, 64, 1)).astype(np.int32))  # a token per position
    return (rng.standard_normal((batch, 3, image, image)).astype(np.float32),
            rng.integers(0, 10 if name == "cifar10_cnn" else 1000, (batch, 1)).astype(np.int32))


def split_strategy(graph, split: str, devices: int) -> dict:
    """Data parallelism, except: "parameter" splits each dense layer's outputs over the
    devices; "attribute", each convolution's and pool's output rows (where they divide)."""
    from flexflow.scheduler.strategy import ParallelConfig, data_parallel_strategy
    strategy = data_parallel_strategy(graph, devices)
    kinds = {"parameter": ("Dense",), "attribute": ("Conv2D", "Pool2D")}.get(split, ())
    for layer in graph.layers:
        if type(layer.op).__name__ in kinds:
            shape = graph.tensors[layer.outputs[0]].spec.shape
            rank = len(shape)
            dim = rank - 1 if split == "parameter" else 2
            if shape[dim] % devices:
                continue
            degrees = tuple(devices if d == dim else 1 for d in range(rank))
            strategy[layer.name] = ParallelConfig(degrees, tuple(range(devices)))
    return strategy


def flexflow_model(network: str, argv: tuple[str, ...] = (), batch: int | None = None,
                   split: str = "sample", devices: int = 1):
    """A compiled FFModel of `network` (in-process, or as `argv` says) fed its batch, with
    `--profiling`, which measures its peak allocated bytes; on `devices`, under
    `split_strategy`."""
    import dnn

    from flexflow.core import FFConfig, FFModel, LossType, MetricsType, SGDOptimizer
    name, batch, image = spec(network, batch)
    ff = FFModel(FFConfig(argv=["--profiling", *argv], batch_size=batch))
    build = getattr(dnn, name)
    x = (build(ff, batch, image) if name == "resnet18" else build(ff, batch))[0]
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY],
               strategy=split_strategy(ff.graph, split, devices) if devices > 1 else None)
    xb, yb = batch_of(network, batch)
    x.set_tensor(ff, xb)
    ff.label_tensor.set_tensor(ff, yb)
    return ff


def pytorch_step(network: str, batch: int | None = None):
    import torch
    import torch_twins
    name, _, image = spec(network, batch)
    if network in DEEP_NETWORKS:
        import dnn
        import torch_replay
        net = torch_replay.replayed(getattr(dnn, name), (3, image, image))
    else:
        net = torch_twins.module(name)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    xb, yb = batch_of(network, batch)
    x, y = torch.from_numpy(xb), torch.from_numpy(yb).long().reshape(-1)
    if name == "transformer_lm":  # (token ids)
        x = x.long()

    def step():
        optimizer.zero_grad()
        logits = net(x)
        torch.nn.functional.cross_entropy(logits.reshape(y.shape[0], -1), y).backward()
        optimizer.step()
    return step


def memory_model(ff, devices: int = 1):
    """The memory model's predicted peak bytes of the model's one device, or of each of its
    `devices` (the figures the simulator and compile's memory check use)."""
    from flexflow.deployment import update_rule
    from flexflow.scheduler.planner import memory_needed
    peaks = memory_needed(ff.graph, ff.compiled.executor.taskgraph, devices,
                          ff.compiled.objective, update_rule(ff.optimizer))
    return peaks[0] if devices == 1 else peaks


def child(system: str, network: str, steps: int, batch: int | None = None) -> dict:
    if system == "flexflow":  # first, as a FlexFlow script imports it: before PyTorch loads
        import flexflow.core  # noqa: F401  (its imports, before the baseline)
    import torch
    torch.set_num_threads(1)
    start = start_peak()
    figures = {}
    if system == "flexflow":
        ff = flexflow_model(network, batch=batch)
        for _ in range(steps):
            ff.train_step()
        figures["predicted"] = memory_model(ff)
        figures["allocated"] = ff.get_perf_metrics().peak_memory[0]
    else:
        step = pytorch_step(network, batch)
        for _ in range(steps):
            step()
    figures["peak"] = peak_since(start)
    return figures


def cluster_child(system: str, network: str, steps: int, split: str) -> dict:
    """Per worker (or rank) peak growth over `steps` steps on 2 of them (ours under `split`;
    DDP's is always the sample split)."""
    if system == "flexflow":
        return _ours_on_two_workers(network, steps, split)
    import torch.multiprocessing as mp
    import torch_ddp
    import os
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(torch_ddp.free_port()),
                      GLOO_SOCKET_IFNAME="lo")
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_ddp_rank, args=(network, steps, results), nprocs=2, join=True)
    peaks = sorted(results.get() for _ in range(2))
    return {"peak": [peak for _, peak in peaks]}


def _ddp_rank(rank: int, network: str, steps: int, results) -> None:
    import torch
    import torch.distributed as dist
    import torch_twins
    torch.set_num_threads(1)
    start = start_peak()
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        net = torch.nn.parallel.DistributedDataParallel(torch_twins.module(NETWORKS[network][0]))
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        xb, yb = batch_of(network)
        share = len(xb) // 2
        x = torch.from_numpy(xb[rank * share:(rank + 1) * share])
        y = torch.from_numpy(yb[rank * share:(rank + 1) * share]).long().reshape(-1)
        for _ in range(steps):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            optimizer.step()
        results.put((rank, peak_since(start)))
        del net, optimizer  # DDP's reducer holds the group: gone before the group is
        dist.barrier()  # no rank tears its gloo pairs down while another still uses them
    finally:
        dist.destroy_process_group()


def _imports_then_start_peak() -> int:
    """On a worker: what training imports (as a DDP rank has imported torch.distributed),
    then `start_peak`."""
    import torch.distributed  # noqa: F401

    import flexflow.core  # noqa: F401
    import flexflow.scheduler.distributed  # noqa: F401
    return start_peak()


def _ours_on_two_workers(network: str, steps: int, split: str) -> dict:
    from local_cluster import local_cluster

    from flexflow.scheduler import cluster as cluster_module
    from distributed import Client
    with local_cluster(2) as cluster, Client(cluster.scheduler_address) as client:
        address = cluster.scheduler_address
        starts = client.run(_imports_then_start_peak)
        ff = None
        try:
            ff = flexflow_model(network, ["--scheduler", address, "-ll:gpu", "2"],
                                split=split, devices=2)
            for _ in range(steps):
                ff.train_step()
            peaks = client.run(lambda dask_worker: peak_since(starts[dask_worker.address]))
            workers = ff.compiled.cluster.workers
            return {"peak": [peaks[w] for w in workers],
                    "allocated": ff.get_perf_metrics().peak_memory,
                    "predicted": memory_model(ff, len(workers))}
        finally:
            if ff is not None:
                ff.compiled.executor.close()
            cluster_module.disconnect(address)


def run_child(system: str, network: str, steps: int, cluster: bool = False,
              batch: int | None = None, split: str = "sample") -> dict:
    """One child's figures. PyTorch's children run as PyTorch runs by default: without the
    MKL setting flexflow-dask's import puts in this process's environment, where it did."""
    import os
    env = dict(os.environ, **{name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                     "MKL_NUM_THREADS")})
    if system == "pytorch":
        env.pop("MKL_DISABLE_FAST_MM", None)
    done = subprocess.run([sys.executable, __file__, "--child", system, network,
                           "--steps", str(steps)] + ["--cluster", "--split", split] * cluster
                          + ["--batch", str(batch)] * (batch is not None), env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{system} {network} failed:\n{done.stderr[-3000:]}")
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def measure(network: str, rounds: int, steps: int, cluster: bool,
            batch: int | None = None, split: str = "sample") -> dict[str, list[dict]]:
    figures: dict[str, list[dict]] = {system: [] for system in SYSTEMS}
    for round_index in range(rounds):
        order = SYSTEMS if round_index % 2 == 0 else SYSTEMS[::-1]
        for system in order:
            figures[system].append(run_child(system, network, steps, cluster, batch, split))
    return figures


def report(network: str, figures: dict[str, list[dict]], load: str) -> None:
    _line(f"{network:15s}", "pytorch", figures, lambda value: value, load)


def report_cluster(network: str, figures: dict[str, list[dict]], load: str) -> None:
    """One line per worker (rank)."""
    for k in range(2):
        _line(f"{network:15s} worker {k} ", "DDP rank", figures, lambda value, k=k: value[k],
              load)


def _line(label: str, baseline: str, figures: dict[str, list[dict]], pick, load: str) -> None:
    """The medians of one process's figures (`pick` takes its own out of each run's)."""
    def median(system, figure):
        return statistics.median(pick(f[figure]) for f in figures[system])
    ours, theirs = median("flexflow", "peak"), median("pytorch", "peak")
    allocated, predicted = median("flexflow", "allocated"), median("flexflow", "predicted")
    print(f"{label} resident: {baseline} {theirs / MB:6.0f} MB  flexflow-dask "
          f"{ours / MB:6.0f} MB  ratio {ours / theirs:4.2f}x | allocated {allocated / MB:6.0f} MB"
          f"  predicted {predicted / MB:6.0f} MB ({(predicted - allocated) / allocated:+.1%})  "
          f"({load})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--networks", nargs="+", choices=list(ALL_NETWORKS),
                        default=list(NETWORKS))
    parser.add_argument("--batch", type=int, help="instead of each network's own")
    parser.add_argument("--split", choices=SPLITS, default="sample",
                        help="with --cluster: how ours splits the network (split_strategy)")
    parser.add_argument("--cluster", action="store_true",
                        help="2 workers against PyTorch DDP's 2 ranks, per process")
    parser.add_argument("--child", nargs=2, metavar=("SYSTEM", "NETWORK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    if args.child:
        figures = (cluster_child(*args.child, args.steps, args.split) if args.cluster
                   else child(*args.child, args.steps, args.batch))
        print(json.dumps(figures))
        return
    from host_load import StealMeter, describe
    print(f"peak resident memory growth over {args.steps} training steps, one thread, median of "
          f"{args.rounds} alternating rounds; flexflow-dask / PyTorch (lower is better)",
          flush=True)
    for network in args.networks:
        steal = StealMeter()
        figures = measure(network, args.rounds, args.steps, args.cluster, args.batch, args.split)
        if args.cluster:
            report_cluster(f"{network} {args.split}", figures, describe(steal.read()))
        else:
            report(network, figures, describe(steal.read()))


if __name__ == "__main__":
    main()

"""Simulator accuracy: predicted vs measured iteration time on real local clusters.

For a LocalCluster of 2 and of 4 single-threaded worker processes (one per device, as
`-ll:gpu N` starts without GPUs), every (model, strategy) pair is trained for a few iterations
and timed, and simulated on the machine model calibrated on that cluster (kernels from the
calibration cache, the scheduler and links measured at the start). A shared machine's load
changes from one second to the next, and calibration follows it (the reference kernel and
the scheduler's pace are timed at every calibration; the effective cores once per cluster, with
its overheads), so each pair is
predicted and measured in alternating rounds: the prediction is the median of the rounds'
predictions, the measurement the median of all their iterations (after warm-up). Pairs: the
parallel-execution test models under several strategy kinds, an AlexNet-style CNN with
4096-wide dense layers under data parallelism, the "one weird trick" and an
all-parameter-parallel strategy, and a deep MLP (bench/pipeline_overlap.py's, smaller) under
data parallelism, as a pipeline of a stage a worker in 1, 2 and 4 micro-batches, with every
dense layer split by output features, and in Megatron's pairs (column- then row-parallel).

Reports per pair the relative error, and per cluster size and overall the median and worst
absolute error and the Spearman rank correlation of predicted vs measured.

    python bench/simulator_accuracy.py [--workers 2,4] [--rounds 5] [--steps 3] [--warmup 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from dnn import alexnet_cifar  # noqa: E402
from host_load import StealMeter, describe  # noqa: E402
from local_cluster import local_cluster  # noqa: E402
from pipeline_overlap import Size  # noqa: E402
from tests.parallel import models as test_models  # noqa: E402

from flexflow import deployment  # noqa: E402
from flexflow.core import DataType, FFConfig, FFModel, LossType, SGDOptimizer  # noqa: E402
from flexflow.losses import loss_function  # noqa: E402
from flexflow.scheduler import cluster as cluster_module  # noqa: E402
from flexflow.scheduler.calibration.runners import DaskRunner  # noqa: E402
from flexflow.scheduler.planner import Planner, PlanOptions  # noqa: E402
from flexflow.scheduler.pipelines import pipeline_strategy  # noqa: E402
from flexflow.scheduler.search import SearchOptions, one_weird_trick  # noqa: E402
from flexflow.scheduler.strategy import ParallelConfig, data_parallel_strategy  # noqa: E402
from flexflow.scheduler.tensor_parallel import megatron_strategy  # noqa: E402

ALEXNET_BATCH = 64
TEST_KINDS = ("sample", "parameter", "reshard")
DEEP_MLP = Size(batch=64, features=1024, width=1024, layers=6, classes=4)  # (~0.1 s a step)


def all_parameter(graph, n):
    """Every dense layer but the last split by output features, the rest data parallel."""
    strategy = one_weird_trick(graph, n)
    for layer in graph.layers[:-1]:
        if layer.type_name == "Conv2D":
            shape = graph.tensors[layer.outputs[0]].spec.shape
            parts = max(d for d in range(1, n + 1) if shape[1] % d == 0 and n % d == 0)
            strategy[layer.name] = ParallelConfig((1, parts, 1, 1), tuple(range(parts)))
    return strategy


def pairs():
    """(label, build(ff) -> inputs, batch, strategy(graph, n))."""
    for name, build in test_models.MODELS.items():
        for kind in TEST_KINDS:
            yield (f"{name}/{kind}", build, test_models.BATCH,
                   lambda graph, n, kind=kind: test_models.strategy(kind, graph, n))
    alexnet = (lambda ff: alexnet_cifar(ff, ALEXNET_BATCH))
    yield "alexnet_cifar/data-parallel", alexnet, ALEXNET_BATCH, data_parallel_strategy
    yield "alexnet_cifar/one-weird-trick", alexnet, ALEXNET_BATCH, one_weird_trick
    yield "alexnet_cifar/parameter", alexnet, ALEXNET_BATCH, all_parameter
    deep = (lambda ff: [DEEP_MLP.build(ff)])
    yield "deep_mlp/data-parallel", deep, DEEP_MLP.batch, data_parallel_strategy
    for micro in (1, 2, 4):  # a stage a worker (1: placement, the stages one after the other)
        yield (f"deep_mlp/pipeline x{micro}", deep, DEEP_MLP.batch,
               lambda graph, n, micro=micro: pipeline_strategy(graph, n, n, micro))
    # tensor parallelism over all workers: every dense layer but the last split by output
    # features, against Megatron's pairs (column- then row-parallel, one sum a pair)
    yield "deep_mlp/one-weird-trick", deep, DEEP_MLP.batch, one_weird_trick
    yield ("deep_mlp/megatron", deep, DEEP_MLP.batch,
           lambda graph, n: megatron_strategy(graph, n, n))


def feed(ff, inputs, batch) -> None:
    """Random inputs and labels of the right shapes and kinds."""
    rng = np.random.default_rng(0)
    for t in inputs:
        if t.data_type == DataType.DT_INT32:
            t.set_tensor(ff, rng.integers(0, 20, t.dims).astype(np.int32))
        else:
            t.set_tensor(ff, rng.standard_normal(t.dims).astype(np.float32))
    classes = ff.graph.tensors[ff.graph.layers[-1].outputs[0]].spec.shape[-1]
    ff.label_tensor.set_tensor(ff, rng.integers(0, classes, (batch, 1)).astype(np.int32))


def step_ms(ff, steps) -> list[float]:
    """Wall times (ms) of `steps` training iterations."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        ff.train_step()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def predict(ff, client, workers, batch, refresh):
    """(predicted ms, the calibrated machine model)."""
    graph = ff.graph
    output = graph.tensors[graph.layers[-1].outputs[0]].spec
    loss = loss_function(LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, (), batch,
                        output.size // batch, True)
    taskgraph = ff.compiled.executor.taskgraph
    options = PlanOptions(SearchOptions(0), refresh_cluster=refresh,
                          checks=deployment.checks(ff.ffconfig, bool(taskgraph.replicated)))
    planner = Planner(graph, ff.objective, len(workers), DaskRunner(client, workers), options,
                      loss, ff.optimizer.rule(), stream=open(os.devnull, "w"))
    return planner.simulate(ff.strategy, taskgraph).time, planner.simulator.machine


def describe_calibration(machine) -> str:
    """What the cluster's calibration measured once and keeps for every prediction."""
    cores = machine.cores_per_node or machine.num_devices
    overheads = ", ".join(f"{name} {ms:.2f}" for name, ms in vars(machine.overheads).items())
    everyone = tuple(range(machine.num_devices))
    small_sum = machine.collective_ms(everyone, 4, False) if machine.num_devices > 1 else 0.0
    return (f"calibrated: {cores:.2f} effective cores for {machine.num_devices} workers; "
            f"overheads (ms, scaled by the scheduler's pace now) {overheads}; a small sum over "
            f"every worker {small_sum:.2f} ms")


def spearman(xs, ys) -> float:
    def ranks(values):
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out
    return float(np.corrcoef(ranks(xs), ranks(ys))[0, 1])


def summary(label, rows) -> None:
    errors = [abs(p - m) / m for _, p, m in rows]
    rho = spearman([p for _, p, _ in rows], [m for _, _, m in rows])
    print(f"{label}: {len(rows)} pairs; median |error| {100 * statistics.median(errors):.1f}% "
          f"(target <= 10%), worst {100 * max(errors):.1f}% (<= 25%), Spearman {rho:.3f} "
          f"(>= 0.9)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2,4")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="iterations timed per round")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--only", default="", help="substring of the pair labels to run")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; "
          f"{args.rounds} rounds of a prediction and {args.steps} iterations per pair, after "
          f"{args.warmup} warm-up iterations")
    everything = []
    for workers in (int(w) for w in args.workers.split(",")):
        rows = []
        with local_cluster(workers) as cluster:
            address = cluster.scheduler_address
            for label, build, batch, make in pairs():
                if args.only not in label:
                    continue
                ff = FFModel(FFConfig(argv=["--scheduler", address, "-ll:gpu", str(workers)],
                                      batch_size=batch))
                inputs = build(ff)
                ff.compile(optimizer=SGDOptimizer(ff, lr=0.01, momentum=0.9),
                           loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                           strategy=make(ff.graph, workers))
                client = cluster_module.connect(address).client
                workers_list = sorted(client.scheduler_info(n_workers=-1)["workers"])
                feed(ff, inputs, batch)
                step_ms(ff, args.warmup)
                steal = StealMeter()
                predictions, times = [], []
                for round_ in range(args.rounds):
                    first = not rows and not round_
                    predicted, machine = predict(ff, client, workers_list, batch, first)
                    if first:
                        print(describe_calibration(machine), flush=True)
                    predictions.append(predicted)
                    times += step_ms(ff, args.steps)
                predicted, measured = statistics.median(predictions), statistics.median(times)
                ff.compiled.executor.close()
                rows.append((label, predicted, measured))
                print(f"{workers} workers  {label:34s} predicted {predicted:9.1f} ms  measured "
                      f"{measured:9.1f} ms  error {100 * (predicted - measured) / measured:+6.1f}%"
                      f"  ({describe(steal.read())})", flush=True)
            cluster_module.disconnect(address)
        summary(f"{workers} workers", rows)
        everything += rows
    summary("all", everything)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

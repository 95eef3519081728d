"""Putting a compiled model on devices: the strategy for the devices at hand (given, imported,
searched or data parallel), the iteration's task graph built with its checks, and the executor
that runs it, in this process or on a Dask cluster (DESIGN.md).

`compile()` deploys once (`first`: honouring --import, writing --export and the pictures); after
a lost worker (flexflow/recovery.py) the model is deployed again on the workers that remain,
searched again if the run searched, else data parallel. These are functions of the model's
public parts (graph, flags, optimizer) and of what compile fixed (objective, loss kernel), so
`CompiledRun` (flexflow/compiled.py) can deploy itself again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from . import profiling, report
from .config import FFConfig, FlagError
from .ops import vendor
from .ops.spec import ShapeError
from .plots import check_path, search_trace, timeline
from .scheduler import cluster as cluster_module
from .scheduler import process_groups, strategy_file
from .scheduler.distributed import DaskExecutor
from .scheduler.executor import Executor, LocalExecutor
from .scheduler.fed_checks import fed_checks
from .scheduler.graph_replay import Replayer, reason_not_to_replay
from .scheduler.actions import Context
from .scheduler.planner import Planner, PlanOptions, capacities, runner_for
from .scheduler.progress import Progress
from .scheduler.search import SearchOptions
from .scheduler.strategy import data_parallel_strategy
from .scheduler.taskgraph import Checks, Objective, TaskGraph, build_task_graph


@dataclass(frozen=True)
class Deployment:
    """A compiled model on its devices."""

    strategy: dict            # layer name -> ParallelConfig
    taskgraph: TaskGraph      # one iteration, as the executor runs it
    executor: Executor
    profiler: profiling.OpProfiler | None  # --profiling
    cluster: object | None    # the Dask cluster trained on; None in this process


def update_rule(optimizer):
    """The optimizer's update kernel with its hyper-parameters as they are now (they may be
    scheduled between iterations)."""
    return None if optimizer is None else optimizer.rule()


def _replayer(config: FFConfig, model, num_devices: int, xp, profiler) -> Replayer | None:
    """CUDA-graph replay of the in-process steps, where it can work and is not turned off."""
    if config.cuda_graphs == "off" or profiler is not None:
        return None
    reason = reason_not_to_replay(model.graph, num_devices, xp, update_rule(model.optimizer))
    return Replayer() if reason is None else None


def deploy(model, objective: Objective, loss, cluster, strategy: dict | None, first: bool,
           previous: Executor | None = None) -> Deployment:
    """Plan `model` for the devices of `cluster` (or this process) and start its executor,
    closing `previous` (the executor of an earlier deployment) once the plan is made."""
    config = model.ffconfig
    num_devices = len(cluster.workers) if cluster else config.num_devices
    what = "the given strategy" if strategy is not None else "data parallelism"
    if first and strategy is None and config.import_strategy_file:
        strategy = strategy_file.load(config.import_strategy_file, model.graph, num_devices)
        what = f"the strategy of {config.import_strategy_file}"
    runner = runner_for(cluster, num_devices, config.cpu_only)
    runner.run_all(vendor.use_tensor_op_math, config.allow_tensor_op_math_conversion)
    memory = gpu_memory(config, runner)
    graph_checks = checks(config, uses_collectives(config, cluster))
    planner = Planner(model.graph, objective, num_devices, runner,
                      replace(plan_options(config, first, graph_checks), device_memory=memory),
                      loss, update_rule(model.optimizer))
    trace = search_trace.SearchTrace() if first and config.search_plot_file else None
    if config.search_budget > 0:
        strategy = _search(config, planner, strategy, trace)
        what = "the searched strategy"
    strategy = dict(strategy or data_parallel_strategy(model.graph, num_devices))
    taskgraph = build_task_graph(model.graph, strategy, num_devices, objective, graph_checks)
    planner.finish(strategy, taskgraph, capacities(runner, memory), what,
                   config.export_strategy_file if first else "")
    if previous is not None:
        previous.close()
    if first:
        _draw_pictures(config, model.graph, planner, strategy, trace)
    profiler = None
    if config.profiling:
        simulator = planner.simulator_for(strategy)
        profiler = profiling.OpProfiler(model.graph, simulator.simulate_taskgraph(taskgraph),
                                        simulator.machine.describe())
    ctx = Context(model.graph, loss, fed_checks=fed_checks(model.graph, objective.label, loss,
                                                           objective.output))
    if cluster:
        executor = DaskExecutor(taskgraph, ctx, cluster.client, cluster.workers, config.cpu_only,
                                cluster.memory, graph_checks.collectives)
    else:
        xp = cluster_module.array_module(config.cpu_only)
        executor = LocalExecutor(taskgraph, ctx, num_devices, xp,
                                 _replayer(config, model, num_devices, xp, profiler))
    return Deployment(strategy, taskgraph, executor, profiler, cluster)


def plan_options(config: FFConfig, first: bool = True, graph_checks: Checks | None = None
                 ) -> PlanOptions:
    """The search and machine-model flags, for the planner, which simulates task graphs
    built with `graph_checks` (those of the run in this process by default). After a lost
    worker (`first` False) the machine-model file no longer describes the devices: calibrate
    what remains."""
    search = SearchOptions(config.search_budget, config.search_alpha,
                           config.enable_sample_parallel, config.enable_parameter_parallel,
                           config.enable_attribute_parallel, config.seed,
                           enable_recomputation=config.enable_recomputation,
                           enable_weight_sharding=config.enable_weight_sharding,
                           enable_pipeline_parallel=config.enable_pipeline_parallel,
                           processes=config.search_processes,
                           contraction_splits=not config.export_strategy_file
                           or strategy_file.is_json(config.export_strategy_file))
    version, machine_file = ((config.machine_model_version, config.machine_model_file)
                             if first else (0, ""))
    return PlanOptions(search, version, machine_file, config.device_memory_mb << 20,
                       config.export_strategy_task_graph_file if first else "",
                       config.cpu_only, checks=graph_checks or checks(config, False))


def gpu_memory(config: FFConfig, runner) -> int:
    """Bytes of memory per device that -ll:fsize gives: a GPU's; on CPU workers the memory is
    the worker's memory limit (FlexFlow's command lines give -ll:fsize for their GPUs), and 0
    means not given."""
    return config.device_memory_mb << 20 if config.device_memory_mb and runner.on_gpus() else 0


def checks(config: FFConfig, collectives: bool) -> Checks:
    """What the task graphs check and measure (the non-finite guard, `--profiling`), and
    whether they sum replicated weights' gradients with collectives (`uses_collectives`)."""
    return Checks(finite_gradients=not config.allow_nonfinite, kernel_times=config.profiling,
                  collectives=collectives, bucket_bytes=config.bucket_size_mb << 20)


def uses_collectives(config: FFConfig, cluster) -> bool:
    """`--collectives`: on, off, or auto: on a cluster whose workers all have
    torch.distributed, unless it was reached at a tls:// address (the collectives travel
    unencrypted: scheduler/process_groups.py). In this process `on` sums buckets in memory
    (scheduler/collectives.py), as the tests of the collective path do."""
    if config.collectives == "off" or (cluster is None and config.collectives == "auto"):
        return False
    if cluster is None:
        return True
    ready = cluster_module.run_on(cluster.client, cluster.workers, "a look for torch",
                                  process_groups.available)
    if config.collectives == "auto":
        return all(ready.values()) and not config.scheduler_address.startswith("tls://")
    if not all(ready.values()):
        raise FlagError(f"--collectives on needs torch.distributed on every worker; it is "
                        f"missing on {sorted(w for w, ok in ready.items() if not ok)}")
    return True


def start_cluster(config: FFConfig):
    """The Dask cluster this run uses, or None to run in this process (DESIGN.md)."""
    tls = cluster_module.TLSFiles(config.tls_ca_file, config.tls_cert, config.tls_key)
    if config.scheduler_address or tls:  # (TLS files without a tls:// address are refused)
        if config.plain_cluster:
            raise FlagError("--plain-cluster is for the cluster -ll:gpu N starts; the protocol of "
                            "a --scheduler cluster is its address's")
        return cluster_module.connect(config.scheduler_address,
                                      config.workers_per_node * config.num_nodes or None,
                                      tls=tls)
    wants_cluster = config.num_devices > 1 or config.force_cluster or config.profile_file
    if wants_cluster and not config.in_process:
        return cluster_module.start_local(config.num_devices, config.device_memory_mb,
                                          plain=config.plain_cluster,
                                          profiled=bool(config.profile_file))
    return None


# the flags of the files written once the work is done (the search, the training), by field
OUTPUT_FILES = {"export_strategy_file": "--export",
                "export_strategy_task_graph_file": "--taskgraph",
                "search_plot_file": "--search-plot", "timeline_file": "--timeline",
                "profile_file": "--profile"}


def check_output_file(path: str, flag: str) -> None:
    """A FlagError naming `flag` and `path` unless the file can be written there: not a
    folder; an existing file writable, or else a folder that exists and is writable. Checked
    before any work, since the file is written only once the work is done."""
    target = Path(path)
    folder = target.resolve().parent
    if target.is_dir():
        raise FlagError(f"{flag} {path}: is a folder; give the name of a file to write")
    if target.exists():
        if not os.access(target, os.W_OK):
            raise FlagError(f"{flag} {path}: the file exists and is not writable")
    elif not folder.exists():
        raise FlagError(f"{flag} {path}: folder {folder} does not exist")
    elif not folder.is_dir():
        raise FlagError(f"{flag} {path}: {folder} is not a folder")
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise FlagError(f"{flag} {path}: folder {folder} is not writable")


def check_diagnostics(config: FFConfig) -> None:
    """Refuse profiling, picture and output-file flags that cannot be honoured, before any
    work (the cluster, the calibration, the search)."""
    report.check(config)
    for field, flag in OUTPUT_FILES.items():
        if getattr(config, field):
            check_output_file(getattr(config, field), flag)
    for path, flag in ((config.timeline_file, "--timeline"),
                       (config.search_plot_file, "--search-plot")):
        if path:
            check_path(path, flag)
    if config.search_plot_file and config.search_budget <= 0:
        raise FlagError("--search-plot draws the strategy search's trace: it needs a "
                        "search (--budget N with N > 0)")


def check_inputs(graph, batch: int) -> None:
    """Every input the model reads has the batch size as its first dimension."""
    for tensor_id in graph.inputs:
        if not graph.consumers(tensor_id):
            continue
        dims = graph.tensors[tensor_id].spec.shape
        if dims[0] != batch:
            raise ShapeError(f"input tensor {dims}: dim 0 must be the batch size {batch} "
                             f"(set with -b), got {dims[0]}")


def check_output_batch(graph, batch: int) -> None:
    """Training compares the output with one label row per output row, and the labels come in
    batches of the inputs' batch size: an output whose dim 0 is not a multiple of it (a layer
    lost the batch) would be trained against the labels of other samples. Refused, naming the
    first layer whose output has such a dim 0. (A multiple keeps every sample: a sequence
    folded into the batch.)"""
    output = graph.tensors[graph.layers[-1].outputs[0]].spec
    if not output.shape or output.shape[0] % batch == 0:
        return
    layer = next(layer for layer in graph.layers
                 if any(graph.tensors[t].spec.shape[:1] and graph.tensors[t].spec.shape[0] % batch
                        for t in layer.outputs))
    lost = next(graph.tensors[t].spec.shape[0] for t in layer.outputs
                if graph.tensors[t].spec.shape[0] % batch)
    raise ShapeError(f"layer '{layer.user_name or layer.name}' turns the batch of {batch} (-b) "
                     f"into {lost}, and the model's output "
                     f"{output.shape} is trained against labels of that batch: each step would "
                     f"compare it with the labels of other samples")


def _search(config: FFConfig, planner: Planner, imported, trace) -> dict:
    """The planner's search, with a progress bar (and the trace for --search-plot)."""
    with Progress("MCMC search", config.search_budget + 1) as progress:
        def observe(current_ms: float, best_ms: float) -> None:
            progress.update(info=f"best {best_ms:.4f} ms")
            if trace is not None:
                trace.record(current_ms, best_ms)
        stream, planner.stream = planner.stream, progress.around(planner.stream)
        try:
            return planner.search(imported, observe)
        finally:
            planner.stream = stream


def _draw_pictures(config: FFConfig, graph, planner: Planner, strategy: dict, trace) -> None:
    """--search-plot and --timeline, once the strategy is chosen."""
    if not (config.search_plot_file or config.timeline_file):
        return
    baseline = data_parallel_strategy(graph, planner.num_devices)
    simulator = planner.simulator_for(strategy, baseline)
    if config.search_plot_file:
        search_trace.draw(config.search_plot_file, trace,
                          simulator.simulate_full(baseline).cost)
        print(f"Search trace drawn in {config.search_plot_file}")
    if config.timeline_file:
        timeline.draw_strategies(config.timeline_file, simulator, strategy)
        print(f"Simulated timelines drawn in {config.timeline_file}")

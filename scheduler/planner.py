"""What `FFModel.compile` does about strategies: check the one it is given, or search.

The machine model comes from `--machine-model-file` (FlexFlow's version-1 file with
`--machine-model-version 1`, our JSON form, or a preset name such as `p100-4x4`), and otherwise
from calibrating the devices the run will train on. A searched strategy is printed in FlexFlow's
block, then training goes on with it (FlexFlow r22.07 exits instead). `--taskgraph FILE` writes
the simulated task graph of the strategy used. A strategy that needs more memory than a device
has is rejected before any work starts, when the capacity is known (`-ll:fsize`, a worker's
memory limit, or the machine model).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ..ops.graph import Graph
from . import machine as machine_module
from .calibration import DaskRunner, LocalRunner, calibrate
from .costs import KernelCalls, calls_for
from .machine import MachineError, MachineModel
from .search import SearchOptions, SearchSpace, initial_candidates, print_strategy, search
from .memory import MemoryModel, iteration_memory, optimizer_state_copies
from .simulator import Simulation, Simulator, check_memory, write_dot
from .strategy import Strategy
from .taskgraph import Checks, Objective, TaskGraph, TaskGraphBuilder


@dataclass(frozen=True)
class PlanOptions:
    search: SearchOptions
    machine_model_version: int = 0
    machine_model_file: str = ""
    device_memory: int = 0       # bytes per device (-ll:fsize), 0: not given
    taskgraph_file: str = ""
    cpu_only: bool = False
    refresh_cluster: bool = False  # measure the scheduler and links again, not from the cache
    checks: Checks = Checks()      # what the run's task graphs check and measure


def runner_for(cluster, num_devices: int, cpu_only: bool):
    """Where calibration runs: the cluster's workers, or this process."""
    if cluster is None:
        return LocalRunner(num_devices, cpu_only)
    return DaskRunner(cluster.client, cluster.workers, cpu_only, cluster.memory)


def capacities(runner, device_memory: int) -> list[int] | None:
    """Bytes each device may hold, when known."""
    if device_memory:
        return [device_memory] * runner.num_devices
    limits = runner.memory()
    return None if any(m is None for m in limits) else [int(m) for m in limits]


def machine_from_file(options: PlanOptions) -> MachineModel | None:
    """The machine the flags name, or None (calibrate instead)."""
    path = options.machine_model_file
    if options.machine_model_version not in (0, 1):
        raise MachineError(f"--machine-model-version must be 0 or 1, got "
                           f"{options.machine_model_version}")
    if not path:
        if options.machine_model_version == 1:
            raise MachineError("--machine-model-version 1 needs --machine-model-file FILE")
        return None
    if path in machine_module.PRESETS and not Path(path).exists():
        machine = machine_module.preset(path)
    else:
        machine = machine_module.read(path, options.device_memory or None)
    if options.device_memory:
        machine = machine_module.with_memory(machine, options.device_memory)
    return machine


def memory_needed(graph: Graph, taskgraph: TaskGraph, num_devices: int,
                  objective: Objective | None, optimizer) -> list[int]:
    """Each device's peak bytes in one iteration of `taskgraph` (scheduler/memory.py)."""
    return iteration_memory(MemoryModel(graph, objective), taskgraph, num_devices,
                            optimizer_state_copies(optimizer))


def check_fits(graph: Graph, taskgraph: TaskGraph, capacity: list[int] | None,
               objective: Objective | None, optimizer, what: str) -> None:
    if capacity is None:
        return
    memory = memory_needed(graph, taskgraph, len(capacity), objective, optimizer)
    check_memory(Simulation(0.0, memory, capacity), what)


class Planner:
    """Chooses the strategy of one compile."""

    def __init__(self, graph: Graph, objective: Objective | None, num_devices: int, runner,
                 options: PlanOptions, loss=None, optimizer=None, stream=None):
        self.graph = graph
        self.objective = objective
        self.num_devices = num_devices
        self.runner = runner
        self.options = options
        self.loss = loss
        self.optimizer = optimizer
        self.stream = stream or sys.stdout
        self.simulator: Simulator | None = None

    def _machine(self, configs: dict[int, list]) -> MachineModel:
        machine = machine_from_file(self.options)
        if machine is None:
            calls = KernelCalls(self.graph, self.loss, self.optimizer)
            builder = TaskGraphBuilder(self.graph, self.objective, self.options.checks)
            needed = calls_for(calls, builder, configs, self.objective)
            machine = calibrate(self.runner, needed, self.options.device_memory or None,
                                self.stream, self.options.refresh_cluster).machine
        if machine.num_devices != self.num_devices:
            raise MachineError(
                f"the machine model ({machine.describe()}) has {machine.num_devices} devices "
                f"but this run has {self.num_devices}: pass -ll:gpu/--nodes to match it")
        return machine

    def _simulator(self, configs: dict[int, list]) -> Simulator:
        if self.simulator is None:
            self.simulator = Simulator(self.graph, self.objective, self._machine(configs),
                                       self.loss, self.optimizer, self.options.checks)
        return self.simulator

    def simulator_for(self, *strategies: Strategy) -> Simulator:
        """The simulator of this compile: the search's, or one on the machine model of the
        flags or of calibrating the configurations of `strategies` (--profiling, --timeline)."""
        return self._simulator({layer.index: [s[layer.name] for s in strategies]
                                for layer in self.graph.layers})

    def simulate(self, strategy: Strategy, taskgraph: TaskGraph) -> Simulation:
        """The simulated iteration of `taskgraph`, built for `strategy`."""
        return self.simulator_for(strategy).simulate_taskgraph(taskgraph)

    def search(self, imported: Strategy | None, observer=None) -> dict:
        """MCMC search; prints FlexFlow's lines and returns the best strategy. `observer` is
        passed on to `search.search` (called with the current and best cost per proposal)."""
        options = self.options.search
        space = SearchSpace(self.graph, self.num_devices, options)
        configs = {layer.index: space.configs(layer) for layer in self.graph.layers}
        for candidate in initial_candidates(self.graph, self.num_devices, options,
                                            imported).values():
            for layer in self.graph.layers:
                configs[layer.index].append(candidate[layer.name])
        simulator = self._simulator(configs)
        if imported is not None:
            check_memory(simulator.simulate_full(imported), "the imported strategy")
        result = search(simulator, options, imported, self.stream, observer)
        print_strategy(self.graph, result.best, self.stream)
        return result.best

    def finish(self, strategy: Strategy, taskgraph: TaskGraph, capacity: list[int] | None,
               what: str, export: str = "") -> None:
        """Check memory, write the simulated task graph and export the strategy, as asked."""
        simulator = self.simulator
        if simulator is None and self.options.taskgraph_file:
            simulator = self._simulator({layer.index: [strategy[layer.name]]
                                         for layer in self.graph.layers})
        if simulator is None:
            check_fits(self.graph, taskgraph, capacity, self.objective,
                       self.optimizer, what)
        else:
            simulation = simulator.simulate_taskgraph(taskgraph)
            if self.options.taskgraph_file:
                write_dot(self.options.taskgraph_file, simulation)
                print(f"Simulated task graph ({simulation.time:.4f} ms per iteration) written "
                      f"to {self.options.taskgraph_file}", file=self.stream)
            check_memory(simulation, what)
        if export:
            from . import strategy_file
            strategy_file.save(dict(strategy), export)
            if self.options.search.budget > 0:
                print(f"Exported the best strategy to {export}; a later run can skip the "
                      f"search with --import {export}", file=self.stream)

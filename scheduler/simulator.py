"""Predicts the iteration time of a strategy by simulating the task graph the executor runs.

The executor (`executor.fuse`, `distributed.DaskExecutor`) runs the TaskGraph's (device, epoch)
groups: each device's in order, in one Dask task per device (its program), a group's output for
another device pushed to that device's worker. So the simulator schedules exactly those groups:

* a group costs the per-task overhead on its device (taking in what it receives and running it)
  plus, for each of its tasks, the per-action overhead and the task's kernel time (measured or
  analytic, `costs.TaskCoster`);
* each device's program is dispatched by the scheduler, one FIFO resource for the whole
  cluster, after submission (one hop) and its per-task time (Dask's scheduler hands out one
  task at a time); no group starts before its device's program;
* a group is ready one hop after its last dependency ends; it then receives, from every group on
  another device it receives from, what that group's tasks send its device (the executor pushes
  each device its own part of a group's output), over the route between the devices, and the
  input batches it loads over the client's route;
* it runs when its inputs are in and its device is free, for its cost plus the per-input
  overhead of each output it received; where devices share a node's cores (`cores_per_node`,
  which may be fractional: what a shared host really gives), the groups running on a node share
  them fairly, each slowed to min(1, cores / running groups) of its speed, and the scheduler
  (with the client, on the first node) takes its share too: its per-task time, a hop and a
  transfer that start, stretch by max(1, (running groups + 1) / cores) (the event loops of the
  scheduler and of the workers moving the bytes compete with the kernels).

Every device and link resource, and the scheduler, is one FIFO resource; events are processed
in time order (event-driven list scheduling), ties by group order. The predicted iteration time
is the last group's end plus the per-iteration overhead. Asked to (`record_transfers`, for
pictures), the full simulation also lists when each link resource was busy with which transfer
(`Simulation.transfers`); the search never asks, so its thousands of simulations skip that.

Memory: per device, the activations and gradients it keeps for the iteration (the executor keeps
them until the next forward), the weights it holds with their gradients, and on each owner of
a shard of a weight box the shard's optimizer state and the gradient pieces the other holders
send in. A strategy over a device's capacity is
penalised by 1 ms per MB over (FlexFlow's rule) in `Simulation.cost`, which the search minimises;
`check_memory` turns it into an error for a strategy a user gives or imports.

`Simulator.simulate` is the delta simulation: the task graph comes from memoised segments
(`taskgraph.TaskGraphBuilder`), task costs are memoised per segment, and fusion epochs are
recomputed only from the first segment that changed. `Simulator.simulate_full` rebuilds and
re-fuses everything with the executor's own code; both return the same numbers.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping, NamedTuple

from ..ops.graph import Graph
from . import actions as A
from .costs import KernelCalls, TaskCoster
from .fusion import LOAD, fuse, link, naming_key, place_of
from .machine import MachineModel, Route
from .shards import shards
from .strategy import Strategy, StrategyError
from .taskgraph import (Checks, Objective, Task, TaskGraph, TaskGraphBuilder, TaskKey,
                        build_task_graph)

MB = 1 << 20
DISPATCH = 3  # the event stage of a device's program reaching it (0-2: a group's stages)
PENALTY_MS_PER_BYTE = 1.0 / 1e6  # FlexFlow: 1 ms per MB over capacity
NO_EARLY: Mapping[int, list] = MappingProxyType({})  # a group that posts nothing early


@dataclass(slots=True)
class GroupPlan:
    """One fused group as the simulator sees it."""

    name: str
    device: int
    cost: float                      # ms on its device
    sent: dict[int, float]           # bytes of its output for each device it sends to
    feeds: float                     # bytes of input batches shipped with it
    receive_from: tuple[int, ...]    # groups whose output it fetches
    after: tuple[int, ...]           # other groups it waits for
    early: Mapping[int, list[tuple[float, float]]] = field(
        default_factory=lambda: NO_EARLY)  # messages posted as their tasks end
    #                                  (`actions.sent_early`), for each device they go to:
    #                                  (ms into `cost`, bytes)
    tasks: tuple[Task, ...] = ()     # kept by the full simulation (for DOT export) ...
    task_ms: tuple[float, ...] = ()  # ... with each task's time


class Transfer(NamedTuple):
    """A link resource busy with one hop of one transfer (latency included), in ms."""

    resource: str
    start: float
    end: float


@dataclass
class Simulation:
    time: float                      # ms: predicted iteration time
    memory: list[int]                # bytes per device
    capacity: list[int]
    plans: list[GroupPlan] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)  # when recording was asked for

    @property
    def over(self) -> list[tuple[int, int, int]]:
        """(device, bytes needed, capacity) for every device over its capacity."""
        return [(d, m, c) for d, (m, c) in enumerate(zip(self.memory, self.capacity)) if m > c]

    @property
    def penalty(self) -> float:
        return sum(m - c for _, m, c in self.over) * PENALTY_MS_PER_BYTE

    @property
    def cost(self) -> float:
        """What the search minimises: time plus the memory penalty."""
        return self.time + self.penalty


def check_memory(simulation: Simulation, what: str) -> None:
    """Reject a strategy that does not fit the devices' memory, naming every device over."""
    over = simulation.over
    if over:
        lines = "; ".join(f"device {d} needs {m / MB:.1f} MB, has {c / MB:.1f} MB"
                          for d, m, c in over)
        raise StrategyError(f"{what} does not fit in device memory: {lines}")


# ---- scheduling ---------------------------------------------------------------------------------
def _transfer(route: Route, nbytes: float, ready: float, free: dict[str, float],
              transfers: list[Transfer] | None, stretch: float = 1.0) -> float:
    """When `nbytes` sent at `ready` arrive, each hop taking `stretch` times its time; books the
    route's resources (FIFO), and lists the bookings in `transfers` unless it is None."""
    for hop in route:
        start = ready
        for resource in hop.resources:
            busy = free.get(resource, 0.0)
            if busy > start:
                start = busy
        ready = start + (hop.latency + nbytes / hop.bandwidth) * stretch
        for resource in hop.resources:
            free[resource] = ready
        if transfers is not None:
            transfers.extend(Transfer(resource, start, ready) for resource in hop.resources)
    return ready


def schedule(plans: list[GroupPlan], machine: MachineModel,
             transfers: list[Transfer] | None = None) -> tuple[list[float], list[float]]:
    """Start and end (ms) of every group; see the module docstring for the rules. Given a list
    `transfers`, every link booking is appended to it."""
    return _Schedule(plans, machine, transfers).run()


class _Schedule:
    """One event-driven simulation of `plans`. Events are (time, group, stage, version):
    `DISPATCH` (the device's program reaches it; booked for each device's first group), 0 (the
    group's dependencies are done: it takes in what it receives), then the stages of running
    (1: ready to run, without shared cores its end; with them, `_SharedCores`'s stages)."""

    def __init__(self, plans: list[GroupPlan], machine: MachineModel,
                 transfers: list[Transfer] | None):
        n = len(plans)
        self.plans, self.machine, self.transfers = plans, machine, transfers
        self.hop, self.receive = machine.overheads.hop, machine.overheads.receive
        self.scheduler_free = 0.0
        self.waiting = [len(p.receive_from) + len(p.after) for p in plans]
        self.dependents: list[list[int]] = [[] for _ in range(n)]
        for i, p in enumerate(plans):
            for j in p.receive_from + p.after:
                self.dependents[j].append(i)
        self.latest = [0.0] * n
        self.starts, self.ends = [0.0] * n, [0.0] * n
        self.free: dict[str, float] = {}
        self.device_free = [0.0] * machine.num_devices
        self.dispatched: list[float | None] = [None] * machine.num_devices  # programs' starts
        self.cores = (_SharedCores(machine, plans, self.receive) if machine.cores_per_node
                      else None)
        first: dict[int, int] = {}  # device -> its first group, which its program's dispatch books
        self.held: dict[int, list[int]] = {}  # device -> groups ready before its program started
        for i, plan in enumerate(plans):
            first.setdefault(plan.device, i)
            self.held.setdefault(plan.device, [])
            if self.waiting[i] == 0:
                self.held[plan.device].append(i)
        self.events = [(self.hop, i, DISPATCH, 0) for i in first.values()]
        heapq.heapify(self.events)

    def run(self) -> tuple[list[float], list[float]]:
        events, cores = self.events, self.cores
        while events:
            t, i, stage, version = heapq.heappop(events)
            if stage == DISPATCH:
                self._dispatch(t, i)
            elif stage == 0:
                self._take_in(t, i)
            elif cores is None:
                self._run_alone(t, i)
            else:  # devices share cores: groups end when their work is done
                finished = cores.step(t, i, stage, version, self.starts, events)
                if finished is not None:
                    self._done(*finished)
        return self.starts, self.ends

    def _stretch(self) -> float:
        return 1.0 if self.cores is None else self.cores.slowdown()

    def _dispatch(self, t: float, i: int) -> None:
        """The scheduler hands the group's device its program."""
        if self.scheduler_free > t:
            if self.cores is not None:  # see who runs when the scheduler gets to it
                heapq.heappush(self.events, (self.scheduler_free, i, DISPATCH, 0))
                return
            t = self.scheduler_free
        device = self.plans[i].device
        t = t + self.machine.overheads.scheduler * self._stretch()
        self.dispatched[device] = self.scheduler_free = t
        for k in self.held.pop(device):
            heapq.heappush(self.events, (max(t, self.latest[k] + self.hop), k, 0, 0))

    def _take_in(self, t: float, i: int) -> None:
        """The group takes in what it receives and its fed batches, then may run."""
        plan, machine, free, transfers = self.plans[i], self.machine, self.free, self.transfers
        stretch = self._stretch()  # the event loops moving the bytes share the cores
        ready = t
        for j in plan.receive_from:
            source = self.plans[j]
            route = machine.routes[(source.device, plan.device)]
            early = source.early.get(plan.device) if source.early else None
            if early:
                arrived = self._early_arrival(j, early, route, stretch)
                if arrived > ready:
                    ready = arrived
            if transfers is None and len(route) == 1 and len(route[0].resources) == 1:
                hop, resource = route[0], route[0].resources[0]  # _transfer, inlined
                start = free.get(resource, 0.0)
                if start < t:
                    start = t
                arrived = free[resource] = start + (
                    hop.latency + source.sent.get(plan.device, 0) / hop.bandwidth) * stretch
            else:
                arrived = _transfer(route, source.sent.get(plan.device, 0), t, free, transfers,
                                    stretch)
            if arrived > ready:
                ready = arrived
        if plan.feeds:
            arrived = _transfer(machine.host_routes[plan.device], plan.feeds, t, free, transfers,
                                stretch)
            if arrived > ready:
                ready = arrived
        heapq.heappush(self.events, (ready, i, 1, 0))

    def _early_arrival(self, j: int, early: list, route: Route, stretch: float) -> float:
        """When the messages `early` that group `j` posted one device have arrived: each leaves
        when the task that made it ends, at its place in the group's cost scaled to the group's
        run."""
        source, start = self.plans[j], self.starts[j]
        scale = (self.ends[j] - start) / source.cost if source.cost else 0.0
        arrived = 0.0
        for offset, nbytes in early:
            at = _transfer(route, nbytes, start + offset * scale, self.free, self.transfers,
                           stretch)
            if at > arrived:
                arrived = at
        return arrived

    def _run_alone(self, t: float, i: int) -> None:
        """The group runs on its device as soon as the device is free."""
        plan = self.plans[i]
        start = t if t > self.device_free[plan.device] else self.device_free[plan.device]
        end = self.device_free[plan.device] = (start + plan.cost
                                               + self.receive * len(plan.receive_from))
        self.starts[i] = start
        self._done(i, end)

    def _done(self, i: int, end: float) -> None:
        """The group ended at `end`: its dependents may get ready."""
        self.ends[i] = end
        plans, latest, waiting = self.plans, self.latest, self.waiting
        for k in self.dependents[i]:
            if end > latest[k]:
                latest[k] = end
            waiting[k] -= 1
            if waiting[k]:
                continue
            program = self.dispatched[plans[k].device]
            if program is None:
                self.held[plans[k].device].append(k)
            else:
                ready = latest[k] + self.hop * self._stretch()
                heapq.heappush(self.events, (ready if ready > program else program, k, 0, 0))


class _SharedCores:
    """Groups running on devices that share a node's cores (worker processes standing in for
    devices on one host): the running groups of a node share its `cores_per_node` cores fairly,
    each progressing at min(1, cores / running) of its own speed, as an operating system shares
    CPUs; a device runs its groups one at a time, in the order they became ready. Events: stage 1
    (ready to run), stage 2 (a running group's work done, valid while its node's version holds)."""

    def __init__(self, machine: MachineModel, plans: list[GroupPlan], receive: float):
        self.capacity = float(machine.cores_per_node)
        self.nodes = machine.nodes
        self.plans = plans
        self.receive = receive
        self.queued: dict[int, list[int]] = {}        # device -> groups waiting for it
        self.busy: set[int] = set()                   # devices running a group
        nodes = set(machine.nodes)
        self.running: dict[int, dict[int, float]] = {node: {} for node in nodes}  # work left
        self.since = {node: 0.0 for node in nodes}    # when `running` was last brought up to date
        self.rate = {node: 1.0 for node in nodes}
        self.version = {node: 0 for node in nodes}

    def step(self, t: float, i: int, stage: int, version: int, starts: list[float],
             events: list) -> tuple[int, float] | None:
        """Handle one event; returns (group, end) when a group has finished."""
        device = self.plans[i].device
        node = self.nodes[device]
        if stage == 1:
            if device in self.busy:
                self.queued.setdefault(device, []).append(i)
            else:
                self._begin(i, t, starts, events)
            return None
        if version != self.version[node]:  # the node's sharing changed since this was booked
            return None
        self._advance(node, t)
        del self.running[node][i]
        self.busy.discard(device)
        waiting = self.queued.get(device)
        if waiting:
            self._begin(waiting.pop(0), t, starts, events, rebook=False)
        self._rebook(node, t, events)
        return i, t

    def slowdown(self) -> float:
        """How much longer the scheduler (a process on the first node, with the client) takes
        for a dispatch or a hop now: it shares the node's cores with the groups running
        there."""
        return max(1.0, (len(self.running[self.nodes[0]]) + 1) / self.capacity)

    def _begin(self, i: int, t: float, starts: list[float], events: list,
               rebook: bool = True) -> None:
        plan = self.plans[i]
        node = self.nodes[plan.device]
        self._advance(node, t)
        self.busy.add(plan.device)
        self.running[node][i] = plan.cost + self.receive * len(plan.receive_from)
        starts[i] = t
        if rebook:
            self._rebook(node, t, events)

    def _advance(self, node: int, t: float) -> None:
        done = (t - self.since[node]) * self.rate[node]
        running = self.running[node]
        for j in running:
            running[j] -= done
        self.since[node] = t

    def _rebook(self, node: int, t: float, events: list) -> None:
        running = self.running[node]
        rate = self.rate[node] = min(1.0, self.capacity / len(running)) if running else 1.0
        version = self.version[node] = self.version[node] + 1
        for j, work in running.items():
            heapq.heappush(events, (t + max(work, 0.0) / rate, j, 2, version))


# ---- memory -------------------------------------------------------------------------------------
class MemoryModel:
    """(device, bytes) a task adds to what devices keep until the iteration ends: a forward
    partition its outputs and saved inputs (and in training the inputs' gradients, of the same
    size), loads and received pieces their boxes, a loss its gradient."""

    def __init__(self, graph: Graph, training: bool):
        self.graph = graph
        self.training = training
        self.itemsize = [t.spec.itemsize for t in graph.tensors]

    def task(self, task: Task) -> tuple[tuple[int, int], ...]:
        action, kind, size = task.action, type(task.action), self.itemsize
        if kind is A.Forward:
            layer = self.graph.layers[action.layer]
            kept = sum(b.volume * size[t] for t, b in zip(layer.outputs, action.out_boxes))
            kept += (1 + self.training) * sum(b.volume * size[t]
                                              for t, b in zip(layer.inputs, action.in_boxes))
            return ((task.device, kept),)
        if kind is A.Load or kind is A.Fill:
            return ((task.device, action.box.volume * size[action.tensor]),)
        if kind is A.Send:
            return ((action.dst, action.box.volume * size[action.tensor]),)
        if kind is A.Loss:
            return ((task.device, action.box.volume * size[action.output]),)
        return ()


def weight_memory(graph: Graph, weight_devices: dict, num_devices: int, state_copies: int,
                  training: bool) -> list[int]:
    """Weights on every holder (with their gradients in training); on each shard's owner
    (`shards.py`), the shard's optimizer state and the pieces of its gradient the other holders
    send in."""
    memory = [0] * num_devices
    for wkey, holders in weight_devices.items():
        nbytes = wkey[2].volume * 4
        trainable = training and graph.layers[wkey[0]].weights[wkey[1]].trainable
        for d in holders:
            memory[d] += nbytes * (2 if trainable else 1)
        if trainable:
            for shard in shards(wkey[2], holders):
                memory[shard.owner] += shard.box.volume * 4 * (state_copies + len(holders) - 1)
    return memory


def optimizer_state_copies(optimizer) -> int:
    """Arrays of optimizer state per weight (SGD with momentum: 1, Adam: 2)."""
    if optimizer is None:
        return 0
    import numpy
    return len(optimizer.init_state(numpy, numpy.zeros(1, numpy.float32)))


# ---- the simulator ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _TaskRow:
    """What the delta simulation needs of one task, whatever the epochs."""

    key: TaskKey
    device: int
    deps: tuple[TaskKey, ...]
    ms: float
    sent: float        # bytes to each device of `to`
    to: tuple[int, ...]
    early: bool        # posted as soon as it has run (`actions.sent_early`)
    exported: bool     # other segments depend on it
    fed: int | None    # the input tensor it loads


@dataclass(frozen=True)
class _SegmentInfo:
    """What the delta simulation needs of a segment, whatever the epochs."""

    externals: tuple[TaskKey, ...]  # keys its tasks depend on that other segments make
    rooted: bool                # has tasks without dependencies (their epoch is absolute)
    rows: tuple[_TaskRow, ...]
    memory: tuple               # (device, bytes) its tasks keep, loads excepted ...
    loads: dict                 # ... which are here: load key -> (device, bytes)


@dataclass(slots=True)
class _GroupPart:
    """A segment's tasks in one group while `Simulator._segment` gathers them (frozen into a
    `_Share` when done): the key the group is named after (`fusion.naming_key`), the tasks'
    costs, the bytes they send each device, the places on other devices they read from (an
    ordered set, relative to the segment's base), their fed tensors and their messages posted
    early."""

    first: TaskKey
    costs: list[float]
    sent: dict[int, float]
    reads: dict
    feeds: dict
    early: list  # messages posted early: (index into costs, device, bytes)

    def share(self, place: tuple[int, int]) -> _Share:
        return _Share(place, self.first, tuple(self.costs), tuple(self.sent.items()),
                      tuple(self.reads), tuple(self.feeds), tuple(self.early))


@dataclass(frozen=True, slots=True, eq=False)
class _Share:
    """A segment's part of one group, frozen: see `_GroupPart`; `place` and `reads` relative to
    the segment's base. Compared and hashed by identity: whole groups are remembered by the
    shares they are made of (`Simulator._plans`)."""

    place: tuple[int, int]
    first: TaskKey
    costs: tuple[float, ...]
    sent: tuple[tuple[int, float], ...]   # (device, bytes)
    reads: tuple[tuple[int, int], ...]
    feeds: tuple[int, ...]
    early: tuple[tuple[int, int, float], ...]


@dataclass(frozen=True, slots=True)
class _Assembled:
    """A whole group assembled from its segments' shares: what `fusion.link` and its
    `GroupPlan` take, the overhead of running it included. Shared by the plans of every
    simulation that finds it (`sent`, `early`): never modified."""

    first: TaskKey
    cost: float
    sent: dict[int, float]
    feeds: float                         # bytes of input batches shipped with it
    early: Mapping[int, list]            # `GroupPlan.early`
    reads: Iterable[tuple[int, int]]     # places on other devices it reads from, in order


@dataclass
class _SegmentResult:
    """A segment's share of the fused groups, for given inputs: the (device, epoch) of its
    external dependencies relative to `base`, their lowest epoch (0 when it has tasks without
    dependencies; the result stays valid while they keep their devices and relative epochs),
    and which of its loads earlier segments already made."""

    exports: dict[TaskKey, tuple[int, int]]  # key -> (device, epoch) other segments depend on
    shares: tuple[_Share, ...]
    memory: list[tuple[int, int]]


EXPORTED = (A.Forward, A.Backward, A.Loss, A.Load, A.Fill)  # what other segments depend on
RESULTS_KEPT = 64  # results remembered per segment, for different inputs (~10 MB a 1000 steps)
ASSEMBLED_KEPT = 16384  # whole groups remembered; all are forgotten when full


class Simulator:
    """Simulates one model's training iteration on one machine under many strategies."""

    def __init__(self, graph: Graph, objective: Objective | None, machine: MachineModel,
                 loss=None, optimizer=None, checks: Checks = Checks()):
        """`checks`: those of the task graphs the executor will run (`taskgraph.Checks`)."""
        self.graph = graph
        self.objective = objective
        self.machine = machine
        self.calls = KernelCalls(graph, loss, optimizer)
        self.coster = TaskCoster(self.calls, machine)
        self.builder = TaskGraphBuilder(graph, objective, checks)
        self.state_copies = optimizer_state_copies(optimizer)
        self.memory_model = MemoryModel(graph, objective is not None)
        self._records: dict[int, list] = {}  # id(segment) -> [segment, info, {inputs: result}]
        self._weights: dict[int, tuple] = {}  # id(weight holders) -> (memory, holders)
        self._where: dict[str, tuple[int, int]] = {}
        self._assembled: dict[tuple, _Assembled] = {}  # [share, base, ...] -> whole group

    @property
    def num_devices(self) -> int:
        return self.machine.num_devices

    def _capacity(self) -> list[int]:
        return [self.machine.memory(d) for d in range(self.num_devices)]

    def _feed_bytes(self, tensors) -> float:
        if not tensors:
            return 0.0
        return float(sum(self.graph.tensors[t].spec.nbytes for t in tensors))

    def _finish(self, plans: list[GroupPlan], memory: list[int],
                record_transfers: bool = False) -> Simulation:
        transfers: list[Transfer] | None = [] if record_transfers else None
        starts, ends = schedule(plans, self.machine, transfers)
        time = self.machine.overheads.iteration + max(ends, default=0.0)
        return Simulation(time, memory, self._capacity(), plans, starts, ends, transfers or [])

    # ---- full ---------------------------------------------------------------------------------
    def simulate_full(self, strategy: Strategy, record_transfers: bool = False) -> Simulation:
        """Build the task graph from scratch, fuse it as the executor does, simulate;
        `record_transfers` fills `Simulation.transfers` (for pictures)."""
        taskgraph = build_task_graph(self.graph, strategy, self.num_devices, self.objective,
                                     self.builder.checks)
        return self.simulate_taskgraph(taskgraph, record_transfers)

    def simulate_taskgraph(self, taskgraph: TaskGraph,
                           record_transfers: bool = False) -> Simulation:
        forwards = {(t.action.layer, t.action.part): t.action for t in taskgraph.tasks
                    if isinstance(t.action, A.Forward)}

        def forward_of(layer, part):
            return forwards[(layer, part)]
        groups = fuse(taskgraph.tasks)
        index = {g.name: i for i, g in enumerate(groups)}
        plans = []
        for g in groups:
            costs, sent, early, feeds = [self.machine.overheads.task], {}, [], {}
            for t in g.tasks:
                c = self.coster.cost(t, forward_of)
                costs.append(c.ms)
                if A.sent_early(t.action):
                    early.append((len(costs) - 1, c.to[0], c.sent))
                else:
                    _add_sent(sent, c.sent, c.to)
                if type(t.action) is A.Load:
                    feeds[t.action.tensor] = True
            plans.append(GroupPlan(g.name, g.device, math.fsum(costs), sent,
                                   self._feed_bytes(feeds),
                                   tuple(index[k] for k in g.receive_from),
                                   tuple(index[k] for k in g.after), _early_sends(costs, early),
                                   g.tasks, tuple(costs[1:])))
        training = self.objective is not None
        memory = weight_memory(self.graph, taskgraph.weight_devices, self.num_devices,
                               self.state_copies, training)
        for t in taskgraph.tasks:
            for device, nbytes in self.memory_model.task(t):
                memory[device] += nbytes
        return self._finish(plans, memory, record_transfers)

    # ---- delta --------------------------------------------------------------------------------
    def simulate(self, strategy: Strategy) -> Simulation:
        """The same result as `simulate_full` (for a valid strategy), recomputing only the
        segments whose tasks, or whose external dependencies' devices and relative epochs,
        changed; costs are summed exactly (fsum), so the grouping order cannot matter."""
        where, records = self._where, self._records
        made: set[TaskKey] = set()
        memory = list(self._weight_memory(strategy))
        groups: dict[tuple[int, int], list] = {}  # place -> [share, its base, share, ...]
        for segment in self.builder.segments(strategy):
            record = records.get(id(segment))  # segments are memoised: identity is content
            if record is None:
                record = records[id(segment)] = [segment, self._segment_info(segment, strategy),
                                                 {}]
            info, results = record[1], record[2]
            found = [where[k] for k in info.externals]
            base = 0 if info.rooted or not found else min([e for _, e in found])
            if base:
                found = [(d, e - base) for d, e in found]
            inputs = (tuple(found), segment.loads & made if segment.loads else frozenset())
            result = results.get(inputs)
            if result is None:
                if len(results) >= RESULTS_KEPT:  # the search moves between a few neighbours
                    del results[next(iter(results))]
                result = results[inputs] = self._segment(segment, info, inputs)
            if segment.loads:
                made |= segment.loads
            if base:
                for key, (device, epoch) in result.exports.items():
                    where[key] = (device, epoch + base)
            else:
                where.update(result.exports)
            for device, nbytes in result.memory:
                memory[device] += nbytes
            for share in result.shares:
                place = share.place
                if base:
                    place = (place[0], place[1] + base)
                members = groups.get(place)
                if members is None:
                    groups[place] = [share, base]
                else:
                    members.append(share)
                    members.append(base)
        return self._finish(self._plans(groups), memory)

    def _plans(self, groups: dict[tuple[int, int], list]) -> list[GroupPlan]:
        """Whole groups as the executor fuses them (`fusion.link`). A group is assembled from
        its segments' shares once, then remembered for as long as the same shares (which the
        key keeps alive) make it with the same bases: a proposal changes a few groups."""
        assembled, cache = {}, self._assembled
        for g, members in groups.items():
            key = tuple(members)
            whole = cache.get(key)
            if whole is None:
                if len(cache) >= ASSEMBLED_KEPT:
                    cache.clear()
                whole = cache[key] = self._assemble(members)
            assembled[g] = whole
        ordered, links = link({g: (whole.first, whole.reads) for g, whole in assembled.items()})
        plans = []
        for g, (name, receive_from, after) in zip(ordered, links):
            whole = assembled[g]
            plans.append(GroupPlan(name, g[0], whole.cost, whole.sent, whole.feeds, receive_from,
                                   after, whole.early))
        return plans

    def _assemble(self, members: list) -> _Assembled:
        """One group from [share, its segment's base, share, ...], in graph order."""
        costs, sent, early, reads, feeds = [self.machine.overheads.task], {}, [], {}, {}
        first = members[0].first
        for i in range(0, len(members), 2):
            share, base = members[i], members[i + 1]
            if first.kind == LOAD:
                first = naming_key(first, share.first)
            if share.early:
                shift = len(costs)
                early += [(k + shift, d, b) for k, d, b in share.early]
            costs += share.costs
            for device, nbytes in share.sent:
                sent[device] = sent.get(device, 0) + nbytes
            if base:
                for device, epoch in share.reads:
                    reads[(device, epoch + base)] = None
            else:
                for place in share.reads:
                    reads[place] = None
            for tensor in share.feeds:
                feeds[tensor] = None
        return _Assembled(first, math.fsum(costs), sent, self._feed_bytes(feeds),
                          _early_sends(costs, early), tuple(reads))

    def _weight_memory(self, strategy: Strategy) -> list[int]:
        holders = self.builder.weight_devices(strategy)  # memoised: identity is content
        found = self._weights.get(id(holders))
        if found is None:
            if len(self._weights) > len(self._records) + 1000:
                self._weights.clear()
            found = self._weights[id(holders)] = (weight_memory(
                self.graph, holders, self.num_devices, self.state_copies,
                self.objective is not None), holders)
        return found[0]

    def _segment_info(self, segment, strategy: Strategy) -> _SegmentInfo:
        own = {t.key for t in segment.tasks}
        externals = tuple(dict.fromkeys(d for t in segment.tasks for d in t.deps
                                        if d not in own))
        parts, graph = self.builder.parts, self.graph

        def forward_of(layer, part):
            return parts(layer, strategy[graph.layers[layer].name])[part].action
        rows, memory, loads = [], {}, {}
        for t in segment.tasks:
            cost = self.coster.cost(t, forward_of)
            fed = t.action.tensor if type(t.action) is A.Load else None
            rows.append(_TaskRow(t.key, t.device, t.deps, cost.ms, cost.sent, cost.to,
                                 A.sent_early(t.action), isinstance(t.action, EXPORTED), fed))
            for device, nbytes in self.memory_model.task(t):
                if t.key in segment.loads:
                    loads[t.key] = (device, nbytes)
                else:
                    memory[device] = memory.get(device, 0) + nbytes
        return _SegmentInfo(externals, any(not t.deps for t in segment.tasks), tuple(rows),
                            tuple(memory.items()), loads)

    def _segment(self, segment, info: _SegmentInfo, inputs: tuple) -> _SegmentResult:
        """Epochs (as `executor.fuse` computes them, relative to the inputs' base) and the
        group shares of one segment."""
        found, repeated = inputs
        places = dict(zip(info.externals, found))
        exports = {}
        groups: dict[tuple[int, int], _GroupPart] = {}
        for row in info.rows:
            epoch, sources = place_of(row.device, row.deps, places)
            place = places[row.key] = (row.device, epoch)
            if row.key in repeated:  # an earlier segment made this load; only its place counts
                continue
            if row.exported:
                exports[row.key] = place
            group = groups.get(place)
            if group is None:
                group = groups[place] = _GroupPart(row.key, [], {}, {}, {}, [])
            elif group.first.kind == LOAD:
                group.first = naming_key(group.first, row.key)
            group.costs.append(row.ms)
            if row.early:
                group.early.append((len(group.costs) - 1, row.to[0], row.sent))
            elif row.to:
                _add_sent(group.sent, row.sent, row.to)
            for source in sources:
                group.reads[source] = True
            if row.fed is not None:
                group.feeds[row.fed] = True
        memory = list(info.memory) + [info.loads[k] for k in info.loads if k not in repeated]
        return _SegmentResult(exports, tuple(part.share(place) for place, part in groups.items()),
                              memory)


def _add_sent(sent: dict[int, float], nbytes: float, to: tuple[int, ...]) -> None:
    for device in to:
        sent[device] = sent.get(device, 0) + nbytes


def _early_sends(costs: list[float], early: list) -> Mapping[int, list]:
    """`GroupPlan.early` from (index into a group's costs, device, bytes): each message leaves
    when the task at that index ends."""
    if not early:
        return NO_EARLY
    ends = list(itertools.accumulate(costs))
    by_device: dict[int, list] = {}
    for k, device, nbytes in early:
        messages = by_device.get(device)
        if messages is None:
            by_device[device] = [(ends[k], nbytes)]
        else:
            messages.append((ends[k], nbytes))
    return by_device


# ---- export -------------------------------------------------------------------------------------
def write_dot(path: str, simulation: Simulation) -> None:
    """The simulated task graph as Graphviz DOT: one record per task, `key | kind | {start |
    end}` in ms (FlexFlow's layout), tasks of one fused group in a cluster, edges = deps."""
    lines = ["digraph taskgraph {", "  node [shape=record];"]
    names: dict[TaskKey, str] = {}
    for g, (plan, start) in enumerate(zip(simulation.plans, simulation.starts)):
        lines.append(f'  subgraph cluster_{g} {{ label="{plan.name} (device {plan.device})";')
        clock = start + plan.cost - sum(plan.task_ms)  # the fused task's own overhead first
        for t, ms in zip(plan.tasks, plan.task_ms):
            names[t.key] = f"t{len(names)}"
            kind = type(t.action).__name__
            lines.append(f'    {names[t.key]} [label="{t.key} | {kind} | {{{clock:.3f} | '
                         f'{clock + ms:.3f}}}"];')
            clock += ms
        lines.append("  }")
    for plan in simulation.plans:
        for t in plan.tasks:
            for d in t.deps:
                lines.append(f"  {names[d]} -> {names[t.key]};")
    lines.append("}")
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")

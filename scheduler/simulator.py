"""Predicts the iteration time of a strategy by simulating the task graph the executor runs.

The executor (`executor.fuse`, `distributed.DaskExecutor`) runs the TaskGraph's (device, epoch,
lane) groups: each device's in order, in one Dask task per device (its program), a group's
output for another device pushed to that device's worker. So the simulator schedules exactly
those groups:

* a group costs, for each of its tasks, the per-action overhead and the task's kernel time
  (measured or analytic, `costs.TaskCoster`), plus the per-task overhead on its device where
  the program hands it messages (the first group of a device's program, and those that take in
  messages; a group that only follows collectives runs straight on);
* each device's program is dispatched by the scheduler, one FIFO resource for the whole
  cluster, after submission (one hop) and its per-task time (Dask's scheduler hands out one
  task at a time); no group starts before its device's program;
* a group is ready when its dependencies have ended, one hop later for those that send it a
  message (not for the group before it on its device, nor for the launches of a collective it
  awaits); it then receives, from every group on another device that sends it a message, what
  that group's tasks send its device (the executor pushes each device its own part of a group's
  output), over the route between the devices, and the input batches it loads over the
  client's route; and it waits for the buckets' all-reduces it awaits, each of which starts
  once its last member has launched it and the members' earlier collectives are done, and
  takes the machine's collective time (`MachineModel.collective_ms`);
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

Memory: per device, the peak of what it holds (scheduler/memory.py: the weights with their
gradients and optimizer state, and the activations and gradients of the iteration from the task
that makes each to its last use). A strategy over a device's capacity is
penalised by 1 ms per MB over (FlexFlow's rule) in `Simulation.cost`, which the search minimises;
`check_memory` turns it into an error for a strategy a user gives or imports.

`Simulator.simulate` is the delta simulation: the task graph comes from memoised segments
(`taskgraph.TaskGraphBuilder`), task costs are memoised per segment, and fusion epochs are
recomputed only from the first segment that changed. `Simulator.simulate_full` rebuilds and
re-fuses everything with the executor's own code; both return the same numbers.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping, NamedTuple

from ..ops.graph import Graph
from . import actions as A
from .costs import KernelCalls, TaskCoster
from .fusion import LOAD, Place, fuse, group_name, link, naming_key, place_of
from .machine import MachineModel, Route
from .memory import (MemoryModel, as_rows, iteration_memory, optimizer_state_copies,
                     weight_memory)
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
    cost: float                      # ms on its device: its tasks' (`task_ms`)
    sent: dict[int, float]           # bytes of its output for each device it sends to
    feeds: float                     # bytes of the input batches' boxes it loads
    receive_from: tuple[int, ...]    # groups whose output it fetches
    after: tuple[int, ...]           # other groups it waits for
    early: Mapping[int, list[tuple[float, float]]] = field(
        default_factory=lambda: NO_EARLY)  # messages posted as their tasks end
    #                                  (`actions.sent_early`), for each device they go to:
    #                                  (ms into `cost`, bytes)
    tasks: tuple[Task, ...] = ()     # kept by the full simulation (for DOT export) ...
    task_ms: tuple[float, ...] = ()  # ... with each task's time
    launches: tuple[tuple[float, Launch], ...] = ()  # collectives it launches, each when its
    #                                  task ends (ms into `cost`)
    awaits: tuple[str, ...] = ()     # collectives it waits for before it runs
    follows: tuple[int, ...] = ()    # groups of their launches, on every member but itself


class Launch(NamedTuple):
    """A collective as one member's task starts it: a bucket's all-reduce
    (`actions.AllReduce`) or a reduction group's sum or all-gather of partials
    (`actions.SharePartial`, on a communicator of their own), of `nbytes` a member."""

    key: str
    nbytes: float
    devices: tuple[int, ...]
    gather: bool
    partials: bool = False


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
             transfers: list[Transfer] | None = None,
             collective_ms=None) -> tuple[list[float], list[float]]:
    """Start and end (ms) of every group; see the module docstring for the rules. Given a list
    `transfers`, every link booking is appended to it; `collective_ms`, a memo of the
    machine's (`Simulator` keeps one: the same buckets recur in every proposal)."""
    return _Schedule(plans, machine, transfers, collective_ms or machine.collective_ms).run()


class _Schedule:
    """One event-driven simulation of `plans`. Events are (time, group, stage, version):
    `DISPATCH` (the device's program reaches it; booked for each device's first group), 0 (the
    group's dependencies are done: it takes in what it receives), then the stages of running
    (1: ready to run, without shared cores its end; with them, `_SharedCores`'s stages)."""

    def __init__(self, plans: list[GroupPlan], machine: MachineModel,
                 transfers: list[Transfer] | None, collective_ms):
        n = len(plans)
        self.plans, self.machine, self.transfers = plans, machine, transfers
        self.collective_ms = collective_ms
        self.hop = machine.overheads.hop
        self.scheduler_free = 0.0
        self.latest = [0.0] * n  # when a group's dependencies allow it to start
        self.starts, self.ends = [0.0] * n, [0.0] * n
        self.free: dict[str, float] = {}
        self.device_free = [0.0] * machine.num_devices
        self.dispatched: list[float | None] = [None] * machine.num_devices  # programs' starts
        first = self._book(plans, machine.overheads)
        self.cores = (_SharedCores(machine, plans, self.work) if machine.cores_per_node
                      else None)
        self.events = [(self.hop, i, DISPATCH, 0) for i in first.values()]
        heapq.heapify(self.events)
        self.launched: dict[str, list[tuple[int, float, Launch]]] = {}  # key -> its launches
        self.previous: dict[str, str | None] = {}  # key -> the one before it on its communicator
        last: dict[tuple, str] = {}
        for i, plan in enumerate(plans):
            for offset, launch in plan.launches:
                if launch.key not in self.launched:
                    communicator = (launch.devices, launch.partials)  # (buckets and partials
                    self.previous[launch.key] = last.get(communicator)  # on groups apart)
                    last[communicator] = launch.key
                self.launched.setdefault(launch.key, []).append((i, offset, launch))
        self.collected: dict[str, float] = {}  # key -> when the collective is done

    def _book(self, plans: list[GroupPlan], overheads) -> dict[int, int]:
        """Each group's dependents, the count it waits for, its overheads before its tasks
        (`before`) and its `work`, and per device the groups ready before its program starts
        (`held`); returns each device's first group (which its program's dispatch books). One
        pass over the plans: the search schedules thousands of groups a proposal.

        The groups that follow one tuple of launching groups (the members of a collective,
        `fusion.link`) wait for a barrier, a node numbered after the groups that passes when
        the last of them ends: n members' awaits cost n + n links, not n * n."""
        n = len(plans)
        task, receive = overheads.task, overheads.receive
        dependents: list[list[int]] = [[] for _ in range(n)]
        waiting, before, work = [0] * n, [0.0] * n, [0.0] * n
        first: dict[int, int] = {}
        held: dict[int, list[int]] = {}
        barriers: dict[tuple[int, ...], int] = {}
        for i, p in enumerate(plans):
            sources, after, follows = p.receive_from, p.after, p.follows
            for j in sources:
                dependents[j].append(i)
            for j in after:
                dependents[j].append(i)
            count = len(sources) + len(after)
            if follows:
                barrier = barriers.get(follows)
                if barrier is None:
                    barrier = barriers[follows] = len(dependents)
                    dependents.append([])
                    waiting.append(len(follows))
                    for j in follows:
                        dependents[j].append(barrier)
                dependents[barrier].append(i)
                count += 1
            device, opens = p.device, p.device not in first
            if opens:
                first[device], held[device] = i, []
            ahead = (task if opens or sources else 0.0) + receive * len(sources)
            before[i], work[i] = ahead, ahead + p.cost
            waiting[i] = count
            if not count:
                held[device].append(i)
        self.dependents, self.waiting, self.before, self.work, self.held = (
            dependents, waiting, before, work, held)
        self.latest += [0.0] * len(barriers)
        return first

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
            heapq.heappush(self.events, (max(t, self.latest[k]), k, 0, 0))

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
        for key in plan.awaits:
            done = self.collected.get(key)  # (most awaits find their collective worked out)
            if done is None:
                done = self._collected(key, stretch)
            if done > ready:
                ready = done
        heapq.heappush(self.events, (ready, i, 1, 0))

    def _collected(self, key: str, stretch: float) -> float:
        """When a collective ends: it starts once every member has launched it (each launch
        at its task's place in its group's run; every launching group has ended by the time
        one awaits) and the collectives launched before it on its communicator are done (in
        launch order, the order of every member's program), and takes the machine's time for
        its bytes over its members (`MachineModel.collective_ms`)."""
        pending = []  # this one and those before it not yet worked out, latest first
        while key is not None and key not in self.collected:
            pending.append(key)
            key = self.previous[key]
        free = 0.0 if key is None else self.collected[key]
        for key in reversed(pending):
            start, launch = free, None
            for j, offset, launch in self.launched[key]:
                start = max(start, self._into(j, offset))
            free = self.collected[key] = start + self.collective_ms(
                launch.devices, launch.nbytes, launch.gather) * stretch
        return free

    def _into(self, j: int, offset: float) -> float:
        """When group `j` (ended) reached `offset` ms into its tasks' cost: after what it did
        before its tasks, at its pace (slower where it shared cores)."""
        work = self.work[j]
        scale = (self.ends[j] - self.starts[j]) / work if work else 0.0
        return self.starts[j] + (self.before[j] + offset) * scale

    def _early_arrival(self, j: int, early: list, route: Route, stretch: float) -> float:
        """When the messages `early` that group `j` posted one device have arrived: each leaves
        when the task that made it ends."""
        arrived = 0.0
        for offset, nbytes in early:
            at = _transfer(route, nbytes, self._into(j, offset), self.free, self.transfers,
                           stretch)
            if at > arrived:
                arrived = at
        return arrived

    def _run_alone(self, t: float, i: int) -> None:
        """The group runs on its device as soon as the device is free."""
        plan = self.plans[i]
        start = t if t > self.device_free[plan.device] else self.device_free[plan.device]
        end = self.device_free[plan.device] = start + self.work[i]
        self.starts[i] = start
        self._done(i, end)

    def _done(self, i: int, end: float) -> None:
        """The group ended at `end`: its dependents may get ready, a hop later for those it
        sends a message (the others follow it on its device, or meet it in a collective)."""
        self.ends[i] = end
        plans, latest, waiting = self.plans, self.latest, self.waiting
        hop = self.hop * self._stretch()
        n = len(plans)
        for k in self.dependents[i]:
            ready = end if k >= n or i not in plans[k].receive_from else end + hop
            if ready > latest[k]:
                latest[k] = ready
            waiting[k] -= 1
            if waiting[k]:
                continue
            if k >= n:  # a barrier (`_book`): its last launching group has ended
                self._pass(k)
            else:
                self._ready(k)

    def _pass(self, barrier: int) -> None:
        """The groups waiting for `barrier` have it behind them at its time."""
        latest, waiting, passed = self.latest, self.waiting, self.latest[barrier]
        for k in self.dependents[barrier]:
            if passed > latest[k]:
                latest[k] = passed
            waiting[k] -= 1
            if not waiting[k]:
                self._ready(k)

    def _ready(self, k: int) -> None:
        """Group `k` has nothing left to wait for: it takes in its inputs once its device's
        program has started."""
        device = self.plans[k].device
        program = self.dispatched[device]
        if program is None:
            self.held[device].append(k)
        else:
            heapq.heappush(self.events, (max(self.latest[k], program), k, 0, 0))


class _SharedCores:
    """Groups running on devices that share a node's cores (worker processes standing in for
    devices on one host): the running groups of a node share its `cores_per_node` cores fairly,
    each progressing at min(1, cores / running) of its own speed, as an operating system shares
    CPUs; a device runs its groups one at a time, in the order they became ready. Events: stage 1
    (ready to run), stage 2 (a running group's work done, valid while its node's version holds)."""

    def __init__(self, machine: MachineModel, plans: list[GroupPlan], work: list[float]):
        self.capacity = float(machine.cores_per_node)
        self.nodes = machine.nodes
        self.plans = plans
        self.work = work
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
        self.running[node][i] = self.work[i]
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


# ---- the simulator ------------------------------------------------------------------------------
class _TaskRow(NamedTuple):
    """What the delta simulation needs of one task, whatever the epochs (a tuple: the
    STRATEGY_FREE rows are made anew from a remembered one's fields for every task)."""

    key: TaskKey
    device: int
    deps: tuple[TaskKey, ...]
    lane: int
    ms: float
    sent: float        # bytes to each device of `to`
    to: tuple[int, ...]
    early: bool        # posted as soon as it has run (`actions.sent_early`)
    exported: bool     # other segments depend on it
    fed: float         # bytes of the input batch's box it loads
    launch: Launch | None = None  # the bucket's all-reduce it launches
    awaits: str | None = None     # the bucket whose sum it waits for


@dataclass(frozen=True)
class _SegmentInfo:
    """What the delta simulation needs of a segment, whatever the epochs."""

    externals: tuple[TaskKey, ...]  # keys its tasks depend on that other segments make
    rooted: bool                # has tasks without dependencies (their epoch is absolute)
    rows: tuple[_TaskRow, ...]
    memory: tuple               # its tasks' memory intervals (memory.as_rows), loads excepted ...
    loads: dict                 # ... which are here: load key -> their rows


@dataclass(slots=True)
class _GroupPart:
    """A segment's tasks in one group while `Simulator._segment` gathers them (frozen into a
    `_Share` when done): the key the group is named after (`fusion.naming_key`), the tasks'
    costs, the bytes they send each device, the places on other devices they read from (an
    ordered set, relative to the segment's base), the bytes they load and their messages posted
    early."""

    first: TaskKey
    costs: list[float]
    sent: dict[int, float]
    reads: dict
    feeds: float
    early: list  # messages posted early: (index into costs, device, bytes)
    launches: list = field(default_factory=list)  # (index into costs, Launch)
    awaits: list = field(default_factory=list)    # collectives' keys
    follows: dict = field(default_factory=dict)   # places of their launches (an ordered set)

    def share(self, place: Place) -> _Share:
        return _Share(place, self.first, tuple(self.costs), tuple(self.sent.items()),
                      tuple(self.reads), self.feeds, tuple(self.early),
                      tuple(self.launches), tuple(self.awaits), tuple(self.follows))


@dataclass(frozen=True, slots=True, eq=False)
class _Share:
    """A segment's part of one group, frozen: see `_GroupPart`; `place` and `reads` relative to
    the segment's base. Compared and hashed by identity: whole groups are remembered by the
    shares they are made of (`Simulator._plans`)."""

    place: Place
    first: TaskKey
    costs: tuple[float, ...]
    sent: tuple[tuple[int, float], ...]   # (device, bytes)
    reads: tuple[Place, ...]
    feeds: float
    early: tuple[tuple[int, int, float], ...]
    launches: tuple[tuple[int, Launch], ...]
    awaits: tuple[str, ...]
    follows: tuple[Place, ...]  # places of the launches it awaits, as `reads`


@dataclass(frozen=True, slots=True)
class _Assembled:
    """A whole group assembled from its segments' shares: what `fusion.link` and its
    `GroupPlan` take. Shared by the plans of every simulation that finds it (`sent`, `early`):
    never modified."""

    name: str                            # `fusion.group_name`
    first: TaskKey
    cost: float
    sent: dict[int, float]
    feeds: float                         # bytes of input batches' boxes it loads
    early: Mapping[int, list]            # `GroupPlan.early`
    reads: Iterable[Place]     # places on other devices it reads from, in order
    launches: tuple[tuple[float, Launch], ...]  # `GroupPlan.launches`
    awaits: tuple[str, ...]
    follows: Iterable[Place]   # places of the collectives' launches it awaits


@dataclass
class _SegmentResult:
    """A segment's share of the fused groups, for given inputs: the places (device, epoch,
    lane) of its external dependencies relative to `base`, their lowest epoch (0 when it has
    tasks without dependencies; the result stays valid while they keep their devices and
    relative epochs), and which of its loads earlier segments already made."""

    exports: dict[TaskKey, Place]  # key -> place other segments depend on
    shares: tuple[_Share, ...]
    memory: list  # rows of memory intervals (memory.as_rows)


EXPORTED = (A.Forward, A.Backward, A.Loss, A.Load, A.Fill, A.AllReduce)  # what other
#                                                            segments depend on
# Tasks whose cost and memory depend on nothing but their action and device (not on the
# strategy's partitions, `forward_of`/`parts_of`): their rows are remembered across segments,
# since a bucket's updates come back, with other keys at most, in the next segment that holds
# them
STRATEGY_FREE = frozenset({A.Update, A.CheckShard, A.AwaitReduced, A.AllReduce,
                           A.SendWeightGrad, A.SendWeight})
ROWS_KEPT = 200_000  # such rows remembered; all are forgotten when full
RESULTS_KEPT = 64  # results remembered per segment, for different inputs (~10 MB a 1000 steps)
ASSEMBLED_KEPT = 16384  # whole groups remembered in a generation (two are kept: those the
#                        last generation did not use are forgotten when the next one is full)
COLLECTIVES_KEPT = 4096  # collectives' times remembered (devices, bytes, gather), least recent out


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
        self.memory_model = MemoryModel(graph, objective)
        self._records: dict[int, list] = {}  # id(segment) -> [segment, info, {inputs: result}]
        self._weights: dict[int, tuple] = {}  # id(weight holders) -> (memory, holders)
        self._where: dict[str, Place] = {}
        self._assembled: dict[tuple, _Assembled] = {}  # [share, base, ...] -> whole group
        self._assembled_before: dict[tuple, _Assembled] = {}  # the generation before
        self._rows: dict[tuple, tuple] = {}  # (STRATEGY_FREE action, device) -> (a row,
        #                                      its intervals)
        self._collective_ms = functools.lru_cache(maxsize=COLLECTIVES_KEPT)(
            machine.collective_ms)

    @property
    def num_devices(self) -> int:
        return self.machine.num_devices

    def _capacity(self) -> list[int]:
        return [self.machine.memory(d) for d in range(self.num_devices)]

    def _load_bytes(self, action: A.Action) -> float:
        """Bytes of an input batch's box a task loads (each device reads only its boxes)."""
        if type(action) is not A.Load:
            return 0.0
        return float(action.box.volume * self.graph.tensors[action.tensor].spec.itemsize)

    def _finish(self, plans: list[GroupPlan], memory: list[int],
                record_transfers: bool = False) -> Simulation:
        transfers: list[Transfer] | None = [] if record_transfers else None
        starts, ends = schedule(plans, self.machine, transfers, self._collective_ms)
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
            costs, sent, early, feeds = [], {}, [], 0.0
            launches, awaits = [], []
            for t in g.tasks:
                c = self.coster.cost(t, forward_of)
                costs.append(c.ms)
                if A.sent_early(t.action):
                    early.append((len(costs) - 1, c.to[0], c.sent))
                else:
                    _add_sent(sent, c.sent, c.to)
                feeds += self._load_bytes(t.action)
                _note_collective(t.action, len(costs) - 1, c.sent, launches, awaits)
            plans.append(GroupPlan(g.name, g.device, math.fsum(costs), sent, feeds,
                                   tuple(index[k] for k in g.receive_from),
                                   tuple(index[k] for k in g.after), _early_sends(costs, early),
                                   g.tasks, tuple(costs), _launch_times(costs, launches),
                                   tuple(awaits), tuple(index[k] for k in g.follows)))
        memory = iteration_memory(self.memory_model, taskgraph, self.num_devices,
                                  self.state_copies)
        return self._finish(plans, memory, record_transfers)

    # ---- delta --------------------------------------------------------------------------------
    def simulate(self, strategy: Strategy) -> Simulation:
        """The same result as `simulate_full` (for a valid strategy), recomputing only the
        segments whose tasks, or whose external dependencies' devices and relative epochs,
        changed; costs are summed exactly (fsum), so the grouping order cannot matter. A
        strategy with 1F1B's schedule (`ParallelConfig.in_flight`) is simulated whole: its
        forwards wait for backwards, which the segments' order (forward first) cannot place."""
        if any(config.in_flight for config in strategy.values()):
            return self.simulate_taskgraph(self.builder.build(strategy))
        where, records = self._where, self._records
        made: set[TaskKey] = set()
        intervals = []  # each segment's rows of memory intervals
        groups: dict[Place, list] = {}  # place -> [share, its base, share, ...]
        for segment in self.builder.segments(strategy):
            record = records.get(id(segment))  # segments are memoised: identity is content
            if record is None:
                record = records[id(segment)] = [segment, self._segment_info(segment, strategy),
                                                 {}]
            info, results = record[1], record[2]
            found = [where[k] for k in info.externals]
            base = 0 if info.rooted or not found else min([e for _, e, _ in found])
            if base:
                found = [(d, e - base, lane) for d, e, lane in found]
            inputs = (tuple(found), segment.loads & made if segment.loads else frozenset())
            result = results.get(inputs)
            if result is None:
                if len(results) >= RESULTS_KEPT:  # the search moves between a few neighbours
                    del results[next(iter(results))]
                result = results[inputs] = self._segment(segment, info, inputs)
            if segment.loads:
                made |= segment.loads
            if base:
                for key, (device, epoch, lane) in result.exports.items():
                    where[key] = (device, epoch + base, lane)
            else:
                where.update(result.exports)
            intervals += result.memory
            for share in result.shares:
                place = share.place
                if base:
                    place = (place[0], place[1] + base, place[2])
                members = groups.get(place)
                if members is None:
                    groups[place] = [share, base]
                else:
                    members.append(share)
                    members.append(base)
        weights, gradients = self._weight_memory(strategy)
        peaks = self.memory_model.peak(intervals + [gradients], self.num_devices)
        memory = [w + p for w, p in zip(weights, peaks)]
        return self._finish(self._plans(groups), memory)

    def _plans(self, groups: dict[Place, list]) -> list[GroupPlan]:
        """Whole groups as the executor fuses them (`fusion.link`). A group is assembled from
        its segments' shares once, then remembered for as long as the same shares (which the
        key keeps alive) make it with the same bases: a proposal changes a few groups."""
        assembled, cache, older = {}, self._assembled, self._assembled_before
        for g, members in groups.items():
            key = tuple(members)
            whole = cache.get(key)
            if whole is None:
                whole = older.pop(key, None) or self._assemble(g, members)
                if len(cache) >= ASSEMBLED_KEPT:  # (a generation full: the one before it goes)
                    older, cache = self._assembled_before, self._assembled = cache, {}
                cache[key] = whole
            assembled[g] = whole
        ordered, links = link({g: (whole.reads, whole.follows)
                               for g, whole in assembled.items()})
        plans = []
        for g, (receive_from, after, follows) in zip(ordered, links):
            whole = assembled[g]
            plans.append(GroupPlan(whole.name, g[0], whole.cost, whole.sent, whole.feeds,
                                   receive_from, after, whole.early, (), (), whole.launches,
                                   whole.awaits, follows))  # (positional: thousands a proposal)
        return plans

    def _assemble(self, at: Place, members: list) -> _Assembled:
        """The group at `at` from [share, its segment's base, share, ...], in graph order."""
        costs, sent, early, reads, feeds = [], {}, [], {}, 0.0
        launches, awaits, follows = [], [], {}
        first = members[0].first
        for i in range(0, len(members), 2):
            share, base = members[i], members[i + 1]
            if first.kind == LOAD:
                first = naming_key(first, share.first)
            if share.early:
                shift = len(costs)
                early += [(k + shift, d, b) for k, d, b in share.early]
            if share.launches:
                shift = len(costs)
                launches += [(k + shift, launch) for k, launch in share.launches]
            awaits += share.awaits
            costs += share.costs
            for device, nbytes in share.sent:
                sent[device] = sent.get(device, 0) + nbytes
            for found, places in ((reads, share.reads), (follows, share.follows)):
                if base:
                    for device, epoch, lane in places:
                        found[(device, epoch + base, lane)] = None
                else:
                    for place in places:
                        found[place] = None
            feeds += share.feeds
        return _Assembled(group_name(first, at), first, math.fsum(costs), sent, feeds,
                          _early_sends(costs, early), tuple(reads), _launch_times(costs, launches),
                          tuple(awaits), tuple(follows))

    def _weight_memory(self, strategy: Strategy) -> tuple[list[int], object]:
        """(bytes each device holds throughout for the weights, the rows of the weight
        gradients' memory intervals)."""
        holders = self.builder.weight_devices(strategy)  # memoised: identity is content
        found = self._weights.get(id(holders))
        if found is None:
            if len(self._weights) > len(self._records) + 1000:
                self._weights.clear()
            replicated, bucketed = (self.builder.replicated(strategy),
                                    self.builder.bucketed(strategy))
            found = self._weights[id(holders)] = (weight_memory(
                self.graph, holders, self.num_devices, self.state_copies,
                self.objective is not None, replicated, False, self.builder.sharded(strategy),
                bucketed), as_rows(self.memory_model.gradient_intervals(
                    holders, replicated, bucketed)), holders)
        return found[0], found[1]

    def _segment_info(self, segment, strategy: Strategy) -> _SegmentInfo:
        own = {t.key for t in segment.tasks}
        externals = tuple(dict.fromkeys(d for t in segment.tasks for d in t.deps
                                        if d not in own))
        parts, graph = self.builder.parts, self.graph

        def forward_of(layer, part):
            return parts(layer, strategy[graph.layers[layer].name])[part].action

        def parts_of(layer):
            return dict(enumerate(parts(layer, strategy[graph.layers[layer].name])))
        rows, memory, loads, known = [], [], {}, self._rows
        for t in segment.tasks:
            if type(t.action) in STRATEGY_FREE:
                found = known.get((t.action, t.device))
                if found is None:
                    if len(known) >= ROWS_KEPT:
                        known.clear()
                    found = known[(t.action, t.device)] = self._task_row(t, forward_of,
                                                                        parts_of)
                elif found[0].key != t.key or found[0].deps != t.deps:
                    found = (_TaskRow(t.key, t.device, t.deps, t.lane, *found[0][4:]), found[1])
            else:
                found = self._task_row(t, forward_of, parts_of)
            rows.append(found[0])
            if t.key in segment.loads:
                loads[t.key] = as_rows(found[1])
            else:
                memory += found[1]
        return _SegmentInfo(externals, any(not t.deps for t in segment.tasks), tuple(rows),
                            (as_rows(memory),), loads)

    def _task_row(self, t: Task, forward_of, parts_of) -> tuple[_TaskRow, tuple]:
        """What the delta simulation needs of one task: its row and its memory intervals."""
        cost = self.coster.cost(t, forward_of)
        launches, awaits = [], []
        _note_collective(t.action, 0, cost.sent, launches, awaits)
        return (_TaskRow(t.key, t.device, t.deps, t.lane, cost.ms, cost.sent, cost.to,
                         A.sent_early(t.action), isinstance(t.action, EXPORTED),
                         self._load_bytes(t.action), launches[0][1] if launches else None,
                         awaits[0] if awaits else None),
                self.memory_model.task(t, parts_of))

    def _segment(self, segment, info: _SegmentInfo, inputs: tuple) -> _SegmentResult:
        """Epochs (as `executor.fuse` computes them, relative to the inputs' base) and the
        group shares of one segment."""
        found, repeated = inputs
        places = dict(zip(info.externals, found))
        exports = {}
        groups: dict[Place, _GroupPart] = {}
        for row in info.rows:
            place, sources, launches = place_of(row.device, row.lane, row.deps, places)
            places[row.key] = place
            if row.key in repeated:  # an earlier segment made this load; only its place counts
                continue
            if row.exported:
                exports[row.key] = place
            group = groups.get(place)
            if group is None:
                group = groups[place] = _GroupPart(row.key, [], {}, {}, 0.0, [])
            elif group.first.kind == LOAD:
                group.first = naming_key(group.first, row.key)
            group.costs.append(row.ms)
            if row.early:
                group.early.append((len(group.costs) - 1, row.to[0], row.sent))
            elif row.to:
                _add_sent(group.sent, row.sent, row.to)
            for source in sources:
                group.reads[source] = True
            for launch in launches:
                group.follows[launch] = True
            group.feeds += row.fed
            if row.launch is not None:
                group.launches.append((len(group.costs) - 1, row.launch))
            elif row.awaits is not None:
                group.awaits.append(row.awaits)
        memory = list(info.memory) + [info.loads[k] for k in info.loads if k not in repeated]
        return _SegmentResult(exports, tuple(part.share(place) for place, part in groups.items()),
                              memory)


def _add_sent(sent: dict[int, float], nbytes: float, to: tuple[int, ...]) -> None:
    for device in to:
        sent[device] = sent.get(device, 0) + nbytes


def _note_collective(action: A.Action, index: int, nbytes: float, launches: list,
                     awaits: list) -> None:
    """Note a task's part in a collective: its launch (at `index` into its group's costs, of
    `nbytes`, what the task costs to send), or its await."""
    kind = type(action)
    if kind is A.AllReduce:
        launches.append((index, Launch(action.bucket, nbytes, action.devices, False)))
    elif kind is A.SharePartial:
        launches.append((index, Launch(A.partials_key(action.layer, action.phase, action.parts),
                                       nbytes, action.members, not action.summed, True)))
    elif kind is A.ShareShard:
        launches.append((index, Launch(A.shard_key(action.key, action.phase), nbytes,
                                       action.holders, True, True)))
    elif kind is A.GatherWeight and action.holders:
        awaits.append(A.shard_key(action.key, action.phase))
    elif kind is A.AwaitReduced:
        awaits.append(action.bucket)
    elif kind is A.AwaitPartials:
        awaits.append(A.partials_key(action.layer, action.phase, action.parts))


def _launch_times(costs: list[float], launches: list) -> tuple[tuple[float, Launch], ...]:
    """`GroupPlan.launches` from (index into a group's costs, Launch): each starts when the
    task at that index ends."""
    if not launches:
        return ()
    ends = list(itertools.accumulate(costs))
    return tuple((ends[k], launch) for k, launch in launches)


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
    for g, plan in enumerate(simulation.plans):
        lines.append(f'  subgraph cluster_{g} {{ label="{plan.name} (device {plan.device})";')
        clock = simulation.ends[g] - sum(plan.task_ms)  # (its overheads come first)
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

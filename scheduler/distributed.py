"""Runs a TaskGraph on a Dask cluster, one worker per device.

Each worker keeps the model's state for its device in process memory (a `DeviceStore` in
`_MODELS`, installed once with `Client.run`): weights and optimizer state never leave it between
iterations. Per window of iterations (one, or those a fit runs between the points where the
client must act: CompiledRun.run_window) the client submits one Dask task per device, pinned to
its worker, all in one graph: the device's program, its fused groups (`executor.fuse`) in order,
once per iteration. What a group sends another device goes straight to that device's worker
(`push`), where the program that needs it waits for it: a hop between devices is one message,
not a round trip through the scheduler. Batches of kept data sets travel as their rows
(scheduler/kept_data.py); other batches inside the task when small, else scattered to the
workers that load from them. A program's key is its first group's name, the model's id and the
window's first iteration: `<first layer>-<kind>-d<device>e<epoch>-<model>-<iteration>`. Each
program returns each iteration's metric records (loss sums, checked updates, timed kernels). All
of a model's programs are in one Dask span of its own (scheduler/history.py).

A worker that leaves the cluster mid-run would leave the programs (or the gathering of their
results) waiting for it, so the client waits and gathers in short slices and checks between
them that its workers are still there; a lost worker raises `cluster.WorkerLost` (FFModel
recovers from it, flexflow/recovery.py). When a program fails or a worker is lost, the client
cancels the iteration's other programs, which then stop waiting (`push.Cancelled`).
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Mapping

from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from . import process_groups
from .actions import (AllReduce, Context, IterationState, Load, SharePartial, ShareShard,
                      sent_early)
from .allocator import keep_freed_memory
from .cluster import (FAILED, alive, array_module, check_alive, run_on, watched_gather,
                      watched_scatter, watched_wait)
from .device_values import on_host
from .executor import Executor, run_tasks, start_iteration
from ..ops.box import Box
from .feeds import Piece, Rows, host_batch, piece, rows_piece
from .fusion import Group
from .history import model_span
from .kept_data import KeptData
from .messages import receive
from .parcels import Parcel
from .push import HANDLER, Mailbox, post, settle, task_wanted
from .store import DeviceStore
from .taskgraph import TaskGraph

INLINE_BYTES = 1 << 20  # batches smaller than this travel inside the task that loads them


@dataclass(frozen=True)
class Step:
    """One fused group of a device's program."""

    position: int                # the group's place in the iteration (orders metric records)
    group: Group
    deliver_to: tuple[int, ...]  # devices with a group that receives from this one
    early: frozenset[int]        # its tasks whose message is posted at once (actions.sent_early)


def programs(groups: list[Group]) -> dict[int, tuple[Step, ...]]:
    """Each device's groups, in order, with the devices each one's output goes to and the
    tasks whose message goes as soon as they have run. (The groups a group only follows,
    those of the launches of the collectives it awaits, send it nothing: the collective moves
    the data and makes it wait.)"""
    receivers: dict[str, set[int]] = defaultdict(set)
    for group in groups:
        for source in group.receive_from:
            receivers[source].add(group.device)
    steps: dict[int, list[Step]] = defaultdict(list)
    for position, group in enumerate(groups):
        early = frozenset(k for k, task in enumerate(group.tasks) if sent_early(task.action))
        steps[group.device].append(Step(position, group, tuple(sorted(receivers[group.name])),
                                        early))
    return {device: tuple(device_steps) for device, device_steps in steps.items()}


def _readers(groups: list[Group], workers: list[str]) -> dict[int, dict[str, Box]]:
    """For each fed tensor, the workers that load it, and the hull of the boxes each loads
    (the piece of the batch it is given: feeds.Piece)."""
    boxes: dict[int, dict[str, list[Box]]] = {}
    for group in groups:
        for task in group.tasks:
            if isinstance(task.action, Load):
                boxes.setdefault(task.action.tensor, {}).setdefault(
                    workers[group.device], []).append(task.action.box)
    return {t: {w: Box.hull(found) for w, found in per.items()} for t, per in boxes.items()}


def _in_order(per_device) -> list[dict]:
    """One iteration's metric records from every device's program, in the order of their
    groups (the in-process executor's order)."""
    entries = sorted((entry for records in per_device for entry in records),
                     key=lambda entry: entry[0])
    return [record for _, records in entries for record in records]


@dataclass
class _Device:
    """What a worker keeps for one device of a model."""

    ctx: Context
    store: DeviceStore
    mailbox: Mailbox
    programs: dict[tuple[str, ...], tuple[Step, ...]] = field(default_factory=dict)  # by phases


_MODELS: dict[tuple[str, int], _Device] = {}  # lives on each worker


def _install(model_id: str, device: int, ctx: Context, cpu_only: bool, dask_worker=None) -> str:
    keep_freed_memory()  # each iteration reuses the memory the last one freed
    xp = array_module(cpu_only)
    _MODELS[(model_id, device)] = _Device(ctx, DeviceStore(device, xp), Mailbox())
    dask_worker.handlers[HANDLER] = _deliver
    return xp.__name__


def _install_program(model_id: str, device: int, phases: tuple[str, ...],
                     steps: tuple[Step, ...]) -> None:
    """Keep the device's program for `phases` on its worker: sent once, not every iteration
    (a program of a few hundred tasks takes milliseconds to pickle)."""
    _MODELS[(model_id, device)].programs[phases] = steps


def _uninstall(model_id: str) -> None:
    for key in [k for k in _MODELS if k[0] == model_id]:
        del _MODELS[key]
    process_groups.leave(model_id)


async def _time_collectives(model_id: str, workers: list[str], sizes: tuple[int, ...],
                            runs: int, dask_worker=None) -> dict[int, float]:
    device = workers.index(dask_worker.address)
    communicator = _MODELS[(model_id, device)].store.communicator
    return await asyncio.to_thread(process_groups.time_collectives, communicator,
                                   tuple(range(len(workers))), sizes, runs)


async def _time_amid_work(model_id: str, workers: list[str], make_work, runs: int,
                          dask_worker=None) -> float:
    device = workers.index(dask_worker.address)
    communicator = _MODELS[(model_id, device)].store.communicator
    return await asyncio.to_thread(process_groups.time_amid_work, communicator,
                                   tuple(range(len(workers))), make_work, runs)


def collective_groups(taskgraph: TaskGraph) -> set[process_groups.Group]:
    """The process groups the task graph's collectives run on: buckets' sums, and partials'
    collectives and sharded weights' all-gathers on groups of their own."""
    found = set()
    for task in taskgraph.tasks:
        if isinstance(task.action, AllReduce):
            found.add((task.action.devices, False))
        elif isinstance(task.action, SharePartial):
            found.add((task.action.members, True))
        elif isinstance(task.action, ShareShard):
            found.add((task.action.holders, True))
    return found


async def _join_groups(model_id: str, meeting: process_groups.Rendezvous, workers: list[str],
                       groups: list[process_groups.Group], cuda: bool,
                       dask_worker=None) -> None:
    """This worker's device joins the model's process groups, which then sum its buckets."""
    device = workers.index(dask_worker.address)
    await process_groups.join(model_id, device, meeting, len(workers), groups, cuda,
                              dask_worker=dask_worker)
    _MODELS[(model_id, device)].store.communicator = process_groups.membership(model_id, device)


def _deliver(model: str, device: int, iteration: int, source: str, items: Parcel,
             parcels: int | None = 1) -> None:
    """The worker handler for what `source` sent `device` (runs on the worker's event loop):
    one parcel of `parcels` (None: a message posted early, `actions.sent_early`)."""
    installed = _MODELS.get((model, device))
    if installed is not None:  # (a model closed meanwhile has nothing to receive)
        installed.mailbox.put(iteration, source, items.items, parcels)


@dataclass(frozen=True)
class _Iteration:
    """One iteration of a window, as a device's program runs it (its batches apart)."""

    number: int             # the executor's count (what devices send each other carries it)
    state: IterationState   # without its batches: counters and the update rule
    rows: dict              # tensor -> rows of the data set kept here that make its batch


def _run_window(model_id: str, device: int, phases: tuple[str, ...],
                clearing: tuple[bool, bool], iterations: tuple[_Iteration, ...],
                boxes: dict[int, Box], feeds: dict, peers: list[str]) -> list[list]:
    """Run this device's program for `phases` once per iteration of the window, in order, on
    this worker's store (`clearing`: whether each iteration first drops the last one's values,
    and the weight gradients), with the batches `feeds` ({(position in the window, tensor): this
    device's piece of a batch, or a data set kept here of whose iteration's `rows` it takes the
    piece `boxes[tensor]`}), taking what other devices send from the mailbox and posting what
    they need to `peers` (worker addresses by device); returns each iteration's metric records,
    with their groups' positions."""
    from distributed import get_worker

    installed = _MODELS[(model_id, device)]
    worker = get_worker()
    wanted = task_wanted(worker)
    if installed.store.communicator is not None:  # its waits end with the program's task
        installed.store.communicator.wanted = wanted
    by_iteration: dict[int, dict] = defaultdict(dict)
    for (position, t), feed in feeds.items():
        rows = iterations[position].rows
        by_iteration[position][t] = rows_piece(feed, rows[t], boxes[t]) if t in rows else feed
    return [_run_iteration(installed, model_id, phases, clearing, iteration,
                           by_iteration[k], peers, worker, wanted)
            for k, iteration in enumerate(iterations)]


def _run_iteration(installed: _Device, model_id: str, phases: tuple[str, ...],
                   clearing: tuple[bool, bool], iteration: _Iteration, batches: dict,
                   peers: list[str], worker, wanted) -> list:
    store, mailbox = installed.store, installed.mailbox
    ctx = installed.ctx.at(replace(iteration.state, feeds=batches))
    start_iteration(store, *clearing)
    mailbox.drop_before(iteration.number)
    sent, records = [], []
    for step in installed.programs[phases]:
        for source in step.group.receive_from:
            receive(store, mailbox.take(iteration.number, source, wanted))
        early: dict[int, int] = defaultdict(int)  # device -> messages posted to it early

        def send_early(dst: int, message, name=step.group.name) -> None:
            early[dst] += 1
            sent.append(post(worker, peers[dst], [message], model=model_id, device=dst,
                             iteration=iteration.number, source=name, parcels=None))
        out = run_tasks(ctx, store, step.group, send_early, step.early)
        metrics = out.pop("metrics", None)
        if metrics:
            records.append((step.position, metrics))
        for dst in step.deliver_to:
            sent.append(post(worker, peers[dst], out.get(dst, []), model=model_id, device=dst,
                             iteration=iteration.number, source=step.group.name,
                             parcels=early[dst] + 1))
    settle(sent, wanted)
    return _on_host(records, store.xp)


def _on_host(records: list, xp) -> list:
    """The iteration's (group position, metrics) records with their device values read in one
    transfer (scheduler/device_values.py)."""
    positions = [position for position, metrics in records for _ in metrics]
    read = on_host([record for _, metrics in records for record in metrics], xp)
    by_position: dict[int, list] = {}
    for position, record in zip(positions, read):
        if record is not None:
            by_position.setdefault(position, []).append(record)
    return list(by_position.items())


def _on_store(model_id: str, device: int, fn, args: tuple):
    return fn(_MODELS[(model_id, device)].store, *args)


class DaskExecutor(Executor):
    """Device d is the worker at `workers[d]`; `memory_limits`, each worker's (None: not
    known), bound the data sets it keeps (scheduler/kept_data.py)."""

    def __init__(self, taskgraph: TaskGraph, ctx: Context, client, workers: list[str],
                 cpu_only: bool = False, memory_limits: list[int | None] | None = None,
                 collectives: bool = False):
        if len(set(workers)) != len(workers):
            raise ValueError(f"each device needs a worker of its own, got workers {workers}")
        super().__init__(taskgraph, ctx, len(workers))
        self.client = client
        self.workers = workers
        self.model_id = uuid.uuid4().hex[:8]
        self._span = model_span(self.model_id)
        self._iterations = itertools.count()
        self._programs: dict[tuple[str, ...], dict[int, tuple[Step, ...]]] = {}
        self._kept = KeptData(client, dict(zip(workers, memory_limits or [None] * len(workers))))
        self.array_modules = [self._on_worker(d, "starting the model", _install, self.model_id, d,
                                              ctx, cpu_only) for d in range(len(workers))]
        groups = sorted(collective_groups(taskgraph))
        if collectives and groups:
            self._form_groups(groups)

    def time_collectives(self, sizes: tuple[int, ...], runs: int) -> dict[int, float]:
        """The median ms of a sum of each of `sizes` bytes over all devices, as the slowest
        device timed it (`process_groups.time_collectives`, on the group the graph's sums over
        every device formed)."""
        timed = self._on_workers(self.workers, "timing the collectives", _time_collectives,
                                 self.model_id, list(self.workers), sizes, runs)
        return {name: max(each[name] for each in timed.values())
                for name in next(iter(timed.values()))}

    def time_amid_work(self, make_work, runs: int) -> float:
        """The ms a small sum over all devices costs after each computed `make_work()`'s
        work (`process_groups.time_amid_work`), as the slowest device timed it."""
        timed = self._on_workers(self.workers, "timing the collectives amid work",
                                 _time_amid_work, self.model_id, list(self.workers), make_work,
                                 runs)
        return max(timed.values())

    def _form_groups(self, groups: list[process_groups.Group]) -> None:
        """The workers' torch.distributed process groups for the buckets' sums
        (scheduler/process_groups.py), met at a store on the first device's worker."""
        host, port = self._on_worker(0, "opening the rendezvous", process_groups.open_store,
                                     self.model_id, len(self.workers))
        meeting = process_groups.Rendezvous(host, port, process_groups.new_prefix(self.model_id))
        self._on_workers(self.workers, "forming the process groups", _join_groups,
                         self.model_id, meeting, list(self.workers), groups,
                         "cupy" in self.array_modules)

    def run(self, *phases: str, state: IterationState = IterationState(),
            zero_gradients: bool = False) -> list[dict[str, float]]:
        return self.run_window(phases, [state], zero_gradients)[0]

    def run_window(self, phases: tuple[str, ...], states, zero_gradients: bool = False
                   ) -> list[list[dict[str, float]]]:
        """One program per device runs the window's iterations, all submitted as one graph."""
        groups = self.groups(phases)
        if phases not in self._programs:
            self._programs[phases] = programs(groups)
            for device, steps in self._programs[phases].items():
                self._on_worker(device, "sending the program", _install_program, self.model_id,
                                device, phases, steps)
        readers = _readers(groups, self.workers)
        iterations, feeds = [], {}
        for k, state in enumerate(states):
            number = next(self._iterations)
            try:
                rows, shipped = self._ship_feeds(readers, state.feeds)
            except (OSError, KeyError, ValueError):  # a reader of the batch may have left
                self._check_workers(f"iteration {number}: sending the batch")
                raise
            iterations.append(_Iteration(number, replace(state, feeds={}), rows))
            feeds.update({(k, t): feed for t, feed in shipped.items()})
        during = f"iteration {iterations[0].number}" + (
            f"-{iterations[-1].number}" if len(iterations) > 1 else "")
        clearing = ("forward" in phases, zero_gradients)
        futures = self._submit(phases, clearing, tuple(iterations), feeds, readers)
        self._wait(futures, f"{during} ({', '.join(phases)})")
        failed = [future for future in futures if future.status in FAILED]
        if failed:  # the other programs may wait for what a failed one would have sent
            self.client.cancel([future for future in futures if not future.done()])
            self._check_workers("an iteration")
            failed[0].result()  # raises the program's exception here
        per_device = watched_gather(self.client, futures, self.workers, during)
        return [_in_order(done[k] for done in per_device) for k in range(len(iterations))]

    def _submit(self, phases: tuple[str, ...], clearing: tuple[bool, bool],
                iterations: tuple[_Iteration, ...], feeds: dict,
                readers: dict[int, dict[str, Box]]) -> list:
        """The window's programs, each a Dask task pinned to its device's worker, submitted
        as one graph: one message to the scheduler. Submitted one by one, all but the first
        would wait out the client's batching interval (10 ms) and the scheduler would take
        them in turn. The arguments Dask need not look into are bound in a partial (the
        iterations without their batches: counters, the update rule, the rows of kept data
        sets); the batches stay an argument, so that scattered ones (futures) are fetched."""
        layers = {}
        for device, steps in self._programs[phases].items():
            loads = {task.action.tensor for step in steps for task in step.group.tasks
                     if isinstance(task.action, Load)}
            key = f"{steps[0].group.name}-{self.model_id}-{iterations[0].number}"
            worker = self.workers[device]
            run = partial(_run_window, self.model_id, device, phases, clearing, iterations,
                          {t: readers[t][worker] for t in loads})
            mine = {k: feed[worker] for k, feed in feeds.items() if k[1] in loads}
            layers[key] = MaterializedLayer(
                {key: (run, mine, list(self.workers))},
                annotations={"workers": [worker], "allow_other_workers": False,
                             "span": self._span})
        graph = HighLevelGraph(layers, {key: set() for key in layers})
        return self.client.get(graph, list(layers), sync=False)

    def _wait(self, futures: list, during: str) -> None:
        watched_wait(self.client, futures, self.workers, during)

    def _check_workers(self, during: str, futures: list = ()) -> None:
        check_alive(self.client, self.workers, during, futures)

    def _ship_feeds(self, readers: dict[int, dict[str, Box]],
                    batches: Mapping[int, Any]) -> tuple[dict, dict]:
        """Each fed batch for the workers that load it (`readers`, by tensor), as `_run_window`
        takes them: ({tensor: rows}, {tensor: {worker: what travels}}). For `feeds.Rows` of a
        data set the readers keep, the rows, and the data set (placed once); else each worker's
        piece of the batch (`feeds.Piece`), passed with its task when small, scattered to it
        when large (Dask keeps large values out of graphs)."""
        rows, shipped = {}, {}
        for tensor, boxes in readers.items():
            feed = batches[tensor]
            kept = (self._kept.place(feed.data, sorted(boxes)) if isinstance(feed, Rows)
                    else None)
            if kept is not None:
                rows[tensor], shipped[tensor] = feed.index, kept
                continue
            batch = host_batch(feed)
            shipped[tensor] = {w: self._shipped(piece(batch, box), w) for w, box in boxes.items()}
        return rows, shipped

    def _shipped(self, part: Piece, worker: str):
        """A worker's piece of a batch as it travels: itself, or scattered to the worker."""
        if part.array.nbytes < INLINE_BYTES:
            return part
        return watched_scatter(self.client, part, [worker], "the upload of a batch")[worker]

    def _call(self, device: int, fn, *args):
        return self._on_worker(device, f"a call to device {device}", _on_store, self.model_id,
                               device, fn, args)

    def _on_worker(self, device: int, during: str, fn, *args):
        """`fn(*args)` in the process of `device`'s worker."""
        worker = self.workers[device]
        return self._on_workers([worker], during, fn, *args)[worker]

    def _on_workers(self, workers: list[str], during: str, fn, *args) -> dict:
        """`fn(*args)` in the process of each of `workers`: {worker: result}."""
        return run_on(self.client, workers, during, fn, *args)

    def release(self, data_sets) -> None:
        for data in data_sets:
            self._kept.release(data.name)

    def close(self) -> None:
        self._kept.close()
        try:
            self.client.run(_uninstall, self.model_id,
                            workers=sorted(alive(self.client, self.workers)))
        except Exception:  # the cluster may already be gone at interpreter exit
            pass

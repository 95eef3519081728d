"""Runs a TaskGraph's fused groups (`fusion.fuse`); owns the devices' stores.

This executor runs the groups in this process, one `DeviceStore` per device, in the order `fuse`
lists them (a topological order of the groups' graph, the order Dask's synchronous scheduler
would pick; running it directly saves the scheduler's pass over the graph at every iteration).
It is the one-device default, and the reference the distributed executor (one Dask task per
device, running its groups: `distributed.py`) must match.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Collection

import numpy

from ..ops.box import Box
from . import allocator
from .actions import Context, IterationState, run_timed
from .collectives import LocalHub
from .device_values import on_host, to_host
from .feeds import host_batches
from .fusion import Group, fuse
from .graph_replay import Replayer, rule_replays
from .last_use import GRAD, VALUE, Released, frees_at_last_use, release, with_releases
from .messages import receive
from .store import DeviceStore, WeightKey
from .taskgraph import PHASES, TaskGraph


def run_group(ctx: Context, store: DeviceStore, group: Group, *incoming) -> dict:
    """Apply what the groups of `group.receive_from` sent (the first `incoming`: their outputs,
    keyed by destination device), then run `group`'s tasks."""
    for sent in incoming[:len(group.receive_from)]:
        receive(store, sent.get(store.device, ()))
    return run_tasks(ctx, store, group)


def run_tasks(ctx: Context, store: DeviceStore, group: Group,
              send_early: Callable[[int, Any], None] | None = None,
              early: Collection[int] = ()) -> dict:
    """Run `group`'s tasks in order; returns what they emitted: items keyed by destination
    device, and metric records under "metrics". The message of each task at a position in
    `early` (`actions.sent_early` names them) goes to `send_early(device, message)` at once
    instead. After each task its device drops what the task was the last to read
    (`group.releases`)."""
    out: dict = {}
    releases = group.releases
    for index, task in enumerate(group.tasks):
        early_message = index in early
        if early_message:
            before = len(out.get(task.action.dst, ()))
        if task.timed:
            run_timed(task.action, store, ctx, out)
        else:
            task.action.run(store, ctx, out)
        if early_message and len(out.get(task.action.dst, ())) > before:
            send_early(task.action.dst, out[task.action.dst].pop())
        if releases and releases[index]:
            release(store, releases[index])
    return out


class Executor:
    """What both executors share: planning phases into fused groups, and host access to the
    stores, expressed as functions of a store run where the store lives (`_call`)."""

    def __init__(self, taskgraph: TaskGraph, ctx: Context, num_devices: int):
        self.taskgraph = taskgraph
        self.ctx = ctx
        self.num_devices = num_devices
        self._groups: dict[tuple[str, ...], list[Group]] = {}

    def groups(self, phases: tuple[str, ...]) -> list[Group]:
        """The fused groups of `phases`, with what each device drops at last use where a run of
        them frees (scheduler/last_use.py; not calibration's probes, which have no model)."""
        if phases not in self._groups:
            groups = fuse(self.taskgraph.phase(*phases))
            if self.ctx.graph is not None and frees_at_last_use(phases):
                groups = with_releases(groups, self.ctx.graph)
            self._groups[phases] = groups
        return self._groups[phases]

    def run(self, *phases: str, state: IterationState = IterationState(),
            zero_gradients: bool = False) -> list[dict[str, float]]:
        """Run the tasks of `phases` on the batch and counters of `state` (after zeroing weight
        gradients, if asked); returns the metric sums the loss tasks produced. (Calibration's
        probes feed nothing and leave `state` out.)"""
        raise NotImplementedError

    def run_window(self, phases: tuple[str, ...], states, zero_gradients: bool = False
                   ) -> list[list[dict[str, float]]]:
        """`run` once per IterationState of `states`, in order: each one's metric sums. An
        executor that can run them as one program per device does (distributed.py)."""
        return [self.run(*phases, state=state, zero_gradients=zero_gradients)
                for state in states]

    def _call(self, device: int, fn, *args):
        """`fn(store, *args)` on `device`'s store; returns its result on the client."""
        raise NotImplementedError

    def close(self) -> None:
        """Release devices; nothing to do in-process."""

    def release(self, data_sets) -> None:
        """The devices' side may drop its copies of these `feeds.DataSet`s (placed again if
        fed later); in this process there are none."""

    # ---- host access ----------------------------------------------------------------------------
    def _weight_boxes(self, owner: int, index: int) -> list[tuple[WeightKey, list[int]]]:
        return [(k, devices) for k, devices in self.taskgraph.weight_devices.items()
                if k[0] == owner and k[1] == index]

    def set_weight(self, owner: int, index: int, array) -> None:
        self.set_weights({(owner, index): array})

    def set_weights(self, arrays: dict[tuple[int, int], Any]) -> None:
        """Write whole weights, keyed (owner layer, weight index), to every device holding a box
        of them (of a sharded box, each shard to its owner only): one call per device."""
        def piece(value, place):
            return place[1], _box_of(value, place[0])
        for d, pieces in self._scatter(arrays, piece, self._weight_places).items():
            self._call(d, _store_set_weights, pieces)

    def get_weight(self, owner: int, index: int, shape: tuple[int, ...]):
        return self.get_weights({(owner, index): shape})[(owner, index)]

    def get_weights(self, shapes: dict[tuple[int, int], tuple[int, ...]]) -> dict:
        """Whole weights, keyed (owner layer, weight index) as `shapes` is, assembled from the
        devices that own their boxes: one call per device, however many weights."""
        out = {ref: numpy.empty(shape, numpy.float32) for ref, shape in shapes.items()}
        for (ref, box), array in self._gather(shapes, _store_get_weights, self._weight_readers):
            out[ref][box.relative_to(Box.full(shapes[ref]))] = array
        return out

    def set_optimizer_state(self, states: dict[tuple[int, int], dict[str, Any]]) -> None:
        """Replace the optimizer state of whole weights, keyed (owner layer, weight index), each
        a dict of full-size slots ({"v": ...} for SGD momentum, {"m", "v"} for Adam): every
        shard of every box of a weight gets its slice on the device that updates it (the
        shard's owner, `shards.py`). An empty dict clears the state, which the optimizer then
        creates afresh at its next update."""
        def slots_of(state, box):
            return {name: _box_of(array, box) for name, array in state.items()}
        for d, pieces in self._scatter(states, slots_of, self._shard_owners).items():
            self._call(d, _store_set_opt_states, pieces)

    def get_optimizer_states(self, shapes: dict[tuple[int, int], tuple[int, ...]]) -> dict:
        """The optimizer's slots of whole weights, keyed as `shapes` is, assembled from their
        shards' owners (one call per device); {} for a weight before its first update. A shard
        not yet updated reads as zeros, the state both optimizers start from."""
        states: dict[tuple[int, int], dict[str, Any]] = {ref: {} for ref in shapes}
        for (ref, box), state in self._gather(shapes, _store_get_opt_states,
                                              self._state_readers):
            for name, array in (state or {}).items():
                slot = states[ref].setdefault(name, numpy.zeros(shapes[ref], numpy.float32))
                slot[box.relative_to(Box.full(shapes[ref]))] = array
        return states

    # Where a box's host data lives, as (part of the box, device) pairs: its weight on every
    # holder, read from the owner; its optimizer state on each shard's owner (on every holder
    # of a replicated box, read from the first).
    # A sharded box's weight lives on its shards' owners, each its own shard only.
    def _weight_places(self, key: WeightKey) -> list[tuple[tuple[Box, Box | None], int]]:
        """((the part of the box written, the shard it is or None for the whole), device)."""
        if key in self.taskgraph.sharded:
            return [((s.box, s.box), s.owner) for s in self.taskgraph.weight_shards(key)]
        return [((key[2], None), d) for d in self.taskgraph.weight_devices[key]]

    def _weight_readers(self, key: WeightKey) -> list[tuple[Box, int]]:
        if key in self.taskgraph.sharded:
            return self._shard_owners(key)
        return self._owner(key)

    def _owner(self, key: WeightKey) -> list[tuple[Box, int]]:
        return [(key[2], self.taskgraph.weight_devices[key][0])]

    def _shard_owners(self, key: WeightKey) -> list[tuple[Box, int]]:
        return [(shard.box, shard.owner) for shard in self.taskgraph.weight_shards(key)]

    def _state_readers(self, key: WeightKey) -> list[tuple[Box, int]]:
        if key in self.taskgraph.replicated:
            return self._owner(key)
        return self._shard_owners(key)

    def _scatter(self, values: dict[tuple[int, int], Any], slice_for_box,
                 where) -> dict[int, list[tuple[WeightKey, Any]]]:
        """Per device, (box key, `slice_for_box(value, part)`) for each part of each box of
        each weight in `values` that `where(box key)` places on the device."""
        per_device: dict[int, list] = {}
        for (owner, index), value in values.items():
            for key, _ in self._weight_boxes(owner, index):
                for part, d in where(key):
                    per_device.setdefault(d, []).append((key, slice_for_box(value, part)))
        return per_device

    def _gather(self, refs, read, where) -> list[tuple[tuple[tuple[int, int], Box], Any]]:
        """((weight, part), value) for each part of each box of each weight in `refs` ((owner
        layer, weight index) pairs) that `where(box key)` places on a device, `read(store,
        keys)` run once on each device that has some of them."""
        keys_on: dict[int, list[tuple[WeightKey, Box]]] = {}
        for owner, index in refs:
            for key, _ in self._weight_boxes(owner, index):
                for part, d in where(key):
                    keys_on.setdefault(d, []).append((key, part))
        return [((key[:2], part), value) for d, found in keys_on.items()
                for (key, part), value in zip(found, self._call(d, read, [k for k, _ in found]))]

    def zero_gradients(self) -> None:
        for d in range(self.num_devices):
            self._call(d, start_iteration, False, True)

    def get_weight_grad(self, owner: int, index: int, shape: tuple[int, ...]):
        """The summed gradient of a weight over all devices that computed a part of it."""
        out = numpy.zeros(shape, numpy.float32)
        full = Box.full(shape)
        for key, devices in self._weight_boxes(owner, index):
            for d in devices:
                grad = self._call(d, _store_get_weight_grad, key)
                if grad is not None:
                    out[key[2].relative_to(full)] += grad
        return out

    def get_value(self, tensor: int, shape: tuple[int, ...], dtype: str):
        """The whole value, from the pieces the devices hold (`Released` where the last run
        dropped it at its last use)."""
        out = numpy.empty(shape, dtype)
        full = Box.full(shape)
        for d in range(self.num_devices):
            for box, array in self._call(d, _store_values, tensor):
                out[box.relative_to(full)] = array
        return out

    def get_grad(self, tensor: int, shape: tuple[int, ...]):
        """Sum of the gradient pieces each device computed itself (received copies excluded)."""
        out = numpy.zeros(shape, numpy.float32)
        full = Box.full(shape)
        for d in range(self.num_devices):
            for box, array in self._call(d, _store_grads, tensor):
                out[box.relative_to(full)] += array
        return out


class LocalExecutor(Executor):
    """Runs every device's tasks in this process (devices are stores, not workers). This
    process's allocator keeps the memory it frees, as the workers' does (scheduler/allocator.py):
    under glibc's defaults each iteration's large arrays go back to the system when freed and
    are faulted in again, page by page, by the next iteration."""

    def __init__(self, taskgraph: TaskGraph, ctx: Context, num_devices: int, xp,
                 replayer: Replayer | None = None):
        super().__init__(taskgraph, ctx, num_devices)
        allocator.keep_freed_memory()
        hub = LocalHub()
        self.stores = [DeviceStore(d, xp, communicator=hub.for_device(d, xp))
                       for d in range(num_devices)]
        self.replayer = replayer  # CUDA-graph replay of whole training steps (graph_replay.py)

    def run(self, *phases: str, state: IterationState = IterationState(),
            zero_gradients: bool = False) -> list[dict[str, float]]:
        def plain(feeds) -> list:
            return self._run_groups(phases, replace(state, feeds=feeds), zero_gradients)
        xp = self.stores[0].xp
        if self.replayer is None or phases != PHASES or not rule_replays(state.optimizer):
            records = plain(host_batches(state.feeds))
        else:
            key = (state.training, state.optimizer, zero_gradients)
            records = self.replayer.run(key, state.feeds, self.ctx.fed_checks, self.stores[0],
                                        plain, xp)
        return [record for record in on_host(records, xp) if record is not None]

    def _run_groups(self, phases: tuple[str, ...], state: IterationState,
                    zero_gradients: bool) -> list:
        """The groups of `phases` in order, on the batches of `state`; their metric records
        (device values unread)."""
        ctx = self.ctx.at(state)
        for store in self.stores:
            start_iteration(store, "forward" in phases, zero_gradients)
        sent: dict[str, dict] = {}
        metrics = []
        for group in self.groups(phases):
            out = run_group(ctx, self.stores[group.device], group,
                            *(sent[name] for name in group.receive_from))
            sent[group.name] = out
            metrics.extend(out.get("metrics", ()))
        return metrics

    def _call(self, device: int, fn, *args):
        if self.replayer is not None and fn not in _READS:  # (a write the graphs captured)
            self.replayer.forget()
        return fn(self.stores[device], *args)


def start_iteration(store: DeviceStore, clear_iteration: bool, zero_gradients: bool) -> None:
    """Drop the last iteration's activations (when a forward pass starts) and gradients."""
    if clear_iteration:
        store.clear_iteration()
    if zero_gradients:
        store.clear_weight_grads()


# ---- functions of a store, run where the store lives ------------------------------------------
def _store_set_weights(store: DeviceStore, pieces) -> None:
    """Write (key, (shard, piece)) pairs: a whole box's values (no shard), or the device's own
    shard of a sharded box, which is then all it keeps of the box."""
    for key, (shard, piece) in pieces:
        if shard is not None:
            store.weights.pop(key, None)
            own = store.shards.get(key)
            if own is not None and own[0] == shard:
                own[1][...] = store.xp.asarray(piece)
            else:
                store.shards[key] = (shard, store.xp.array(piece, dtype="float32"))
        elif key in store.weights:
            store.weights[key][...] = store.xp.asarray(piece)
        else:
            store.weights[key] = store.xp.array(piece, dtype="float32")


def _store_get_weights(store: DeviceStore, keys: list[WeightKey]):
    """Each box's values here: the device's own shard of a sharded box, else the whole."""
    return [to_host(store.weight_part(key, key[2])) for key in keys]


def _store_set_opt_states(store: DeviceStore, pieces) -> None:
    for key, slots in pieces:
        if slots:
            store.opt_state[key] = {name: store.xp.array(piece, dtype="float32")
                                    for name, piece in slots.items()}
        else:
            store.opt_state.pop(key, None)


def _store_get_opt_states(store: DeviceStore, keys: list[WeightKey]):
    return [{name: to_host(array) for name, array in store.opt_state[key].items()}
            if key in store.opt_state else None for key in keys]


def _store_get_weight_grad(store: DeviceStore, key: WeightKey):
    grad = store.weight_grads.get(key)
    return None if grad is None else to_host(grad)


def _store_values(store: DeviceStore, tensor: int):
    if not store.held(VALUE, tensor):
        raise Released(VALUE, tensor)
    return [(box, to_host(a)) for box, a in store.values.get(tensor, ())]


def _store_grads(store: DeviceStore, tensor: int):
    if not store.held(GRAD, tensor):
        raise Released(GRAD, tensor)
    return [(box, to_host(a)) for box, a in store.grads.get(tensor, ())]


def _box_of(array, box: Box):
    """The float32 contents of `box` of a whole host array."""
    return numpy.ascontiguousarray(array[box.relative_to(Box.full(array.shape))], numpy.float32)


_READS = frozenset((_store_get_weights, _store_get_opt_states, _store_get_weight_grad,
                    _store_values, _store_grads))  # host access that leaves a store as it was

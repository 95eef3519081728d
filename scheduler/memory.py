"""The memory model: each device's peak bytes in one iteration of a task graph, as the executor
holds them (values and gradients dropped at their last use, scheduler/last_use.py; what each
forward keeps for its backward, `Operator.kept_for_backward`).

An iteration is a line of positions: layer L's forward at L, the loss at n (the layer count),
layer L's backward at 2n - L. Every array a task makes is an interval on that line, on one
device, inclusive at both ends (what a task reads and what it makes exist at once):

- a value from its producer's forward to its last reader's forward, or, when a forward keeps it
  for backward, to the backward of the first layer (in graph order) that keeps it, the last of
  those backward passes to run; the model's outputs and the label to the end of the iteration;
- what a forward keeps beyond its inputs and outputs (`Kept.extra`), to its own backward;
- an input box no single partition of its producer made, which the read assembles into a new
  array (`DeviceStore.read`), for that forward, or to its backward where the forward keeps it;
  the pieces sent in for that read are then not what is kept (`MemoryModel._assembled`);
- a gradient piece from the backward that makes it (or the loss) to the backward of the tensor's
  producer, which reads it; a read that sums several pieces makes one more, for that backward.

A recomputed layer (`ParallelConfig.recompute`) keeps its inputs to its backward, which reads
them, and nothing else: what its forward would have kept beyond them (its kept outputs,
`Kept.extra`) exists again at its backward only (the outputs made again besides are dropped
before the backward's kernels make the gradients).

A stage of a pipeline in 1F1B's schedule (`ParallelConfig.in_flight` = k) holds k
micro-batches' activations at most, which the positions (per layer, not per micro-batch) cannot
tell: the arrays of its other micro-batches, and what it sends of them, are left out
(`TaskGraph.uncounted`); they reuse the memory the first k free. (What a stage receives is
counted for the sender's k micro-batches, one more than the receiver's: an over-estimate of one
micro-batch of the tensor between the stages.)

A value or gradient sent to another device is an interval there too. Weights, their gradients
and optimizer state (`weight_memory`) are held throughout. A sharded weight box
(`ParallelConfig.shard_weights`) is held throughout as its shards, each on its owner with its
optimizer state, and whole on each holder at the forward and at the backward of its layer, whose
gathers make it (`GatherWeight`; its gradient is whole on every holder, as any box's). The
peak is the largest sum of the intervals over positions (`peak`). Kernels' own scratch memory is
not modelled.
"""

from __future__ import annotations

from typing import Iterable

import numpy

from ..ops.base import Kept
from ..ops.graph import Graph
from . import actions as A
from .shards import cut_limit, shards
from .taskgraph import Objective, Partition, Task

Interval = tuple[int, int, int, int]  # (device, first position, last position, bytes)


class MemoryModel:
    """The intervals (`Interval`) of the arrays each task makes, for one model's graph."""

    def __init__(self, graph: Graph, objective: Objective | None):
        self.graph = graph
        self.layers = n = len(graph.layers)
        self.end = 2 * n + 1  # after the last backward: what the iteration keeps to its end
        self.itemsize = [t.spec.itemsize for t in graph.tensors]
        self.training = objective is not None
        readers: dict[int, list[int]] = {}
        for layer in graph.layers:
            for t in dict.fromkeys(layer.inputs):
                readers.setdefault(t, []).append(layer.index)
        self.readers = readers
        self.producer = {t.id: t.producer[0] for t in graph.tensors if t.producer is not None}
        self.kept = [self._kept(layer) for layer in graph.layers]
        # the layers whose contraction partitions keep their slice's share of `Kept.extra`
        self.kept_cut = frozenset(layer.index for layer in graph.layers if getattr(
            layer.op.contraction(graph.in_specs(layer)), "kept_cut", False))
        # the layers whose recomputation moves a tensor's end: its readers and its producer
        self._deciders = {t.id: tuple(readers.get(t.id, ())) + (
            (self.producer[t.id],) if t.id in self.producer else ()) for t in graph.tensors}
        self._recomputed_ends: dict[tuple, int] = {}
        self.value_end = {t.id: self._value_end(t.id) for t in graph.tensors}

    def _kept(self, layer):
        if not self.training:
            return None
        return layer.op.kept_for_backward([self.graph.tensors[t].spec for t in layer.inputs])

    def backward_at(self, layer: int) -> int:
        return 2 * self.layers - layer

    def _kept_by(self, layer: int, recomputed: frozenset):
        """What `layer`'s forward keeps for its backward: its inputs alone where recomputed."""
        if layer in recomputed and self.training:
            return Kept(inputs=tuple(range(len(self.graph.layers[layer].inputs))))
        return self.kept[layer]

    def value_end_of(self, tensor: int, parts_of) -> int:
        """`value_end` under the strategy `parts_of` tells, where it recomputes layers."""
        recomputed = frozenset(layer for layer in self._deciders[tensor]
                               if parts_of(layer)[0].action.recompute)
        if not recomputed:
            return self.value_end[tensor]
        key = (tensor, recomputed)
        if key not in self._recomputed_ends:
            self._recomputed_ends[key] = self._value_end(tensor, recomputed)
        return self._recomputed_ends[key]

    def _value_end(self, tensor: int, recomputed: frozenset = frozenset()) -> int:
        """The last position at which `tensor`'s value is held, the layers `recomputed`."""
        readers = self.readers.get(tensor, [])
        if not readers:
            return self.end  # a model output, the label or an unread input
        kept = {layer: self._kept_by(layer, recomputed) for layer in self._deciders[tensor]}
        keepers = [layer for layer in readers
                   if kept[layer] is not None and any(
                       self.graph.layers[layer].inputs[i] == tensor
                       for i in kept[layer].inputs)]
        producer = self.producer.get(tensor)
        if producer is not None and kept[producer] is not None and any(
                self.graph.layers[producer].outputs[i] == tensor
                for i in kept[producer].outputs):
            keepers.append(producer)
        if keepers:
            return self.backward_at(min(keepers))
        return max(readers)

    def _grad_end(self, tensor: int) -> int:
        return self.backward_at(self.producer.get(tensor, 0))

    def task(self, task: Task, parts_of) -> tuple[Interval, ...]:
        """`parts_of(layer)`: a layer's partitions (`taskgraph.Partition`: the Forward action
        and its device), a mapping by partition (a backward's boxes, where the pieces of a
        producer's outputs are)."""
        action, kind = task.action, type(task.action)
        if kind is A.Forward:
            return self._forward(task.device, action, parts_of)
        if kind is A.Backward:
            return self._backward(task.device, action, parts_of(action.layer)[action.part].action)
        if kind is A.Load or kind is A.Fill:
            return ((task.device, 0, self.value_end_of(action.tensor, parts_of),
                     action.box.volume * self.itemsize[action.tensor]),)
        if kind is A.Loss:
            return ((task.device, self.layers, self._grad_end(action.grad_tensor),
                     action.box.volume * self.itemsize[action.output]),)
        if kind is A.Send:
            return (self._sent_gradient(action) if action.grad
                    else self._sent_value(action, parts_of),)
        if kind is A.ForwardPartial and action.forward.contraction > 1:
            return self._contracted(task.device, action.forward)
        if kind is A.GatherWeight:  # the whole box, for the layer's forward or backward
            at = action.layer if action.phase == "forward" else self.backward_at(action.layer)
            return ((task.device, at, at, action.key[2].volume * 4),)
        return ()

    def _forward(self, device: int, action: A.Forward, parts_of) -> tuple[Interval, ...]:
        at, layer = action.layer, self.graph.layers[action.layer]
        made = [(device, at, self.value_end_of(t, parts_of), box.volume * self.itemsize[t])
                for t, box in zip(layer.outputs, action.out_boxes)]
        kept = None if action.recompute else self.kept[at]
        if kept is not None and kept.extra:
            made.append((device, at, self.backward_at(at), self._extra(kept, action)))
        for index, (t, box) in enumerate(zip(layer.inputs, action.in_boxes)):
            if t in self.producer and not box.is_empty():
                keeps = kept is not None and index in kept.inputs
                made += self._assembled(device, at, t, box, keeps, parts_of)
        return tuple(made)

    def _contracted(self, device: int, forward: A.Forward) -> tuple[Interval, ...]:
        """A contraction split's share of the output and the group's sum, each the size of
        the output box, at its forward; a recomputed forward keeps the sum to its backward."""
        at = forward.layer
        nbytes = forward.out_boxes[0].volume * self.itemsize[self.graph.layers[at].outputs[0]]
        made = [(device, at, at, 2 * nbytes)]
        if forward.recompute:
            made.append((device, at, self.backward_at(at), nbytes))
        return tuple(made)

    def _assembled(self, device: int, at: int, tensor: int, box, keeps: bool, parts_of
                   ) -> list[Interval]:
        """Where no partition of `tensor`'s producer made a box holding `box`, the read
        assembles the pieces into a new array (`DeviceStore.read`): that array, for this
        forward or to its backward when the forward `keeps` it; the pieces sent in for this
        read are then dropped after the tensor's last reader instead of being kept: a negative
        interval takes their bytes off to where the tensor's value ends."""
        producer = self.producer[tensor]
        output = self.graph.layers[producer].outputs.index(tensor)
        parts = parts_of(producer).values()
        if any(p.action.out_boxes[output].contains(box) for p in parts):
            return []
        nbytes = self.itemsize[tensor]
        made = [(device, at, self.backward_at(at) if keeps else at, box.volume * nbytes)]
        dropped, end = max(self.readers[tensor]), self.value_end_of(tensor, parts_of)
        local = 0  # of `box`, what this device's own partitions made
        for p in parts:
            inter = p.action.out_boxes[output].overlap(box) if p.device == device else None
            local += 0 if inter is None else inter.volume
        if end > dropped and local < box.volume:
            made.append((device, dropped + 1, end, -(box.volume - local) * nbytes))
        return made

    def _backward(self, device: int, action: A.Backward, forward: A.Forward
                  ) -> tuple[Interval, ...]:
        layer = self.graph.layers[action.layer]
        at = self.backward_at(action.layer)
        made = []
        for t, box in zip(layer.inputs, forward.in_boxes):
            if t in self.producer:
                made.append((device, at, self._grad_end(t), box.volume * self.itemsize[t]))
        for t, box in zip(layer.outputs, forward.out_boxes):
            if len(self.readers.get(t, ())) > 1:  # the pieces are summed into a new array
                made.append((device, at, at, box.volume * self.itemsize[t]))
        kept = self.kept[action.layer]
        if action.recompute and kept is not None:  # what the forward keeps, made again
            made += [(device, at, at, forward.out_boxes[i].volume * self.itemsize[t])
                     for i, t in enumerate(layer.outputs) if i in kept.outputs]
            if kept.extra:
                made.append((device, at, at, self._extra(kept, forward)))
        return tuple(made)

    def _extra(self, kept: Kept, forward: A.Forward) -> int:
        """The bytes of what `forward` keeps beyond its inputs and outputs: a share of the
        heads' under a head split (`Contraction.kept_cut`)."""
        nbytes = kept.extra * forward.out_boxes[0].volume
        if forward.layer in self.kept_cut:
            nbytes /= forward.contraction
        return int(nbytes)

    def _sent_value(self, action: A.Send, parts_of) -> Interval:
        start = self.producer.get(action.tensor, 0)
        return (action.dst, start, self.value_end_of(action.tensor, parts_of),
                action.box.volume * self.itemsize[action.tensor])

    def _sent_gradient(self, action: A.Send) -> Interval:
        last_reader = max(self.readers.get(action.tensor, [self.layers]))
        return (action.dst, self.backward_at(last_reader), self._grad_end(action.tensor),
                action.box.volume * self.itemsize[action.tensor])

    def intervals(self, tasks: Iterable[Task], uncounted: frozenset = frozenset()
                  ) -> list[Interval]:
        """The intervals of `tasks`, a whole task graph's, but those of the tasks `uncounted`
        (`TaskGraph.uncounted`: 1F1B's micro-batches beyond the first k)."""
        tasks = [t for t in tasks if t.key not in uncounted] if uncounted else list(tasks)
        parts: dict[int, dict[int, Partition]] = {}
        for t in tasks:
            kind = type(t.action)
            if kind is A.Forward or kind is A.ForwardPartial:
                forward = t.action if kind is A.Forward else t.action.forward
                parts.setdefault(forward.layer, {})[forward.part] = Partition(
                    forward, t.device, t.key)
        return [interval for t in tasks for interval in self.task(t, parts.__getitem__)]

    def gradient_intervals(self, weight_devices: dict, replicated: frozenset = frozenset(),
                           bucketed: frozenset = frozenset()) -> list[Interval]:
        """Each holder's gradient of each trainable weight box, from its owner layer's backward
        to the end of the iteration (they are zeroed when the next step starts), and of a
        `replicated` box the copy its bucket makes to sum it (from the same backward: a bucket
        is launched once its gradients are made); the pieces of a sharded box's gradient its
        shards' owners receive, at its owner's backward (none for a box whose gradient is
        all-reduced: `replicated`, or sharded and `bucketed`)."""
        if not self.training:
            return []
        trained = [(wkey, holders) for wkey, holders in weight_devices.items()
                   if self.graph.layers[wkey[0]].weights[wkey[1]].trainable]
        made = []
        for wkey, holders in trained:  # (a box's bytes counted once, not once a holder)
            at, nbytes = self.backward_at(wkey[0]), wkey[2].volume * 4
            copies = 2 if wkey in replicated else 1  # with its bucket's copy, once made
            made += [(d, at, self.end, nbytes * copies) for d in holders]
        for wkey, holders in trained:  # a shard's pieces from the other holders, at its update
            if wkey not in replicated and wkey not in bucketed and len(holders) > 1:
                at = self.backward_at(wkey[0])
                made += [(shard.owner, at, at, shard.box.volume * 4 * (len(holders) - 1))
                         for shard in shards(wkey[2], holders)]
        return made

    def peak(self, rows: list[numpy.ndarray], num_devices: int) -> list[int]:
        """`peak` over this iteration's positions."""
        return peak(rows, num_devices, self.end + 1)


def iteration_memory(model: MemoryModel, taskgraph, num_devices: int,
                     state_copies: int) -> list[int]:
    """Each device's peak bytes in one iteration of `taskgraph` (a `taskgraph.TaskGraph`):
    the weights and optimizer state, plus the peak of the intervals."""
    memory = weight_memory(model.graph, taskgraph.weight_devices, num_devices, state_copies,
                           model.training, taskgraph.replicated, gradients=False,
                           sharded=taskgraph.sharded, bucketed=taskgraph.bucketed_shards)
    peaks = model.peak([as_rows(model.intervals(taskgraph.tasks, taskgraph.uncounted)),
                        as_rows(model.gradient_intervals(taskgraph.weight_devices,
                                                         taskgraph.replicated,
                                                         taskgraph.bucketed_shards))],
                       num_devices)
    return [w + p for w, p in zip(memory, peaks)]


def as_rows(intervals: Iterable[Interval]) -> numpy.ndarray:
    """Intervals as an (n, 4) int64 array, the form `peak` sums (the delta simulation keeps
    each segment's so)."""
    return numpy.array(list(intervals), dtype=numpy.int64).reshape(-1, 4)


def peak(rows: list[numpy.ndarray], num_devices: int, positions: int) -> list[int]:
    """Per device, the largest sum of the bytes of the intervals in `rows` (arrays of
    `as_rows`) at any of `positions` positions."""
    rows = numpy.concatenate(rows) if rows else numpy.zeros((0, 4), numpy.int64)
    width = positions + 1
    starts = rows[:, 0] * width + rows[:, 1]
    ends = rows[:, 0] * width + rows[:, 2] + 1
    size = num_devices * width
    live = (numpy.bincount(starts, rows[:, 3], size)
            - numpy.bincount(ends, rows[:, 3], size)).reshape(num_devices, width)
    return [int(p) for p in numpy.cumsum(live, axis=1).max(axis=1, initial=0)]


def weight_memory(graph: Graph, weight_devices: dict, num_devices: int, state_copies: int,
                  training: bool, replicated: frozenset = frozenset(),
                  gradients: bool = True, sharded: frozenset = frozenset(),
                  bucketed: frozenset = frozenset()) -> list[int]:
    """Weights on every holder (with their gradients in training), a `sharded` box's as
    each shard on its owner; on each shard's owner (`shards.py`), the shard's optimizer state
    and the pieces of its gradient the other holders send in; on every holder of a
    `replicated` box (all-reduced), its optimizer state and its copy in the bucket that is
    summed. A `bucketed` box (sharded, its shards gathered and its gradient summed by the
    collectives: `TaskGraph.bucketed_shards`) is cut over all its holders, and its gradient,
    a bucket of its own, is summed in place: no copy, no pieces. Without `gradients`, the
    gradients, the buckets' copies and the pieces sent in are left to
    `MemoryModel.gradient_intervals`, which places them in the iteration."""
    memory = [0] * num_devices
    for wkey, holders in weight_devices.items():
        nbytes = wkey[2].volume * 4
        trainable = training and graph.layers[wkey[0]].weights[wkey[1]].trainable
        whole = wkey not in sharded
        for d in holders:
            memory[d] += nbytes * ((1 if whole else 0) + (1 if trainable and gradients else 0))
        if whole and not trainable:
            continue
        if whole and wkey in replicated:  # (with the bucket's copy of the gradient, where
            for d in holders:               # `gradients`)
                memory[d] += nbytes * (state_copies + (1 if gradients else 0))
            continue
        cut = shards(wkey[2], holders, cut_limit(wkey, bucketed))
        if not whole:
            for shard in cut:
                memory[shard.owner] += shard.box.volume * 4
        if not trainable:
            continue
        for shard in cut:
            pieces = len(holders) - 1 if gradients and wkey not in bucketed else 0
            memory[shard.owner] += shard.box.volume * 4 * (state_copies + pieces)
    return memory


def optimizer_state_copies(optimizer) -> int:
    """Arrays of optimizer state per weight (SGD with momentum: 1, Adam: 2)."""
    if optimizer is None:
        return 0
    return len(optimizer.init_state(numpy, numpy.zeros(1, numpy.float32)))

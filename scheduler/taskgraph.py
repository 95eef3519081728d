"""From (graph, strategy, objective) to device-pinned tasks.

Every task is data only: a key (`TaskKey`: layer, phase, part, kind; written `<layer>-<kind>-
<part>` where it is shown), the device it runs on, its phase, the keys it depends on, and an
action from `scheduler.actions`. Data movement is derived from boxes alone: a consumer partition
needs `op.input_box(out_box)`; every producer partition whose box intersects it either sits on
the same device (a plain dependency) or sends the intersection (a Send task on the producer's
device). Backward mirrors this with gradient pieces. A weight box held by several devices is
updated in shards (`shards.py`): each holder sends shard j of its gradient to shard j's owner,
which sums the pieces, updates shard j and sends its new values to the other holders. A layer with
sharded weights (`ParallelConfig.shard_weights`) keeps such a box as shards between uses: its
forward and its backward on each holder are preceded by a gather of the other shards from their
owners (`SendShard`, `GatherWeight`) and followed by a free of the whole (`FreeWeight`), and
its update has no all-gather (the next forward's gather brings the new values).

The graph is assembled from segments: one per layer and phase (its forward tasks and the sends
that feed them; the loss; its backward tasks and the gradient sends that feed them) and one per
weight box (its update). A segment is a pure function of the configurations of the few layers it
touches, and every key in it is derived from layer names and partition indices, never from a
global counter. So a builder can memoise segments: after a one-layer change only that layer's
and its neighbours' segments are rebuilt, which is what the simulator's delta mode relies on.

The simulator and the executor both consume this one graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product
from typing import NamedTuple, Union

from ..ops.box import Box
from ..ops.graph import Graph
from . import actions as A
from .collectives import BUCKET_BYTES, FIRST_BUCKET_BYTES
from .pipelines import in_dependency_order, one_f_one_b_lanes
from .shards import Shard, cut_limit, shards
from .store import WeightKey
from .strategy import ParallelConfig, Strategy, StrategyError, validate

PHASES = ("forward", "loss", "backward", "update")
MEMO_LIMIT = 20_000  # weight layouts remembered by a builder


@dataclass(frozen=True)
class Objective:
    """What training optimizes: the output tensor, its label tensor, and whether the last layer
    is a softmax whose gradient the loss computes directly (cross-entropy on probabilities)."""

    output: int
    label: int
    through_softmax: bool


@dataclass(frozen=True)
class Checks:
    """What an iteration does besides the model's math: what it checks and measures, and how it
    sums the gradients of replicated weights; part of the graph that runs, and so of the graph
    that is simulated. `finite_gradients`: every weight update first tests its gradient for NaN
    and Inf (FFModel's non-finite guard, off with `--allow-nonfinite`). `kernel_times`: every
    kernel task records its time (`--profiling`). `collectives`: a weight box held by several
    devices has its gradient summed by an all-reduce of buckets of up to `bucket_bytes`, and
    every holder updates it whole (`--collectives`, scheduler/collectives.py); else each holder
    sends each shard's owner its piece (`shards.py`)."""

    finite_gradients: bool = False
    kernel_times: bool = False
    collectives: bool = False
    bucket_bytes: int = BUCKET_BYTES


class UpdatePart(NamedTuple):
    """Which piece of a weight box's update a task is: the weight's index in its layer, the
    box's number among the weight's boxes, the shard's number (`shards.py`), and the other
    holder it sends to or receives on (None for the shard owner's own test and update)."""

    weight: int
    box: int
    shard: int
    device: int | None = None


Part = Union[int, str, tuple]


class TaskKey(NamedTuple):
    """What a task is, as fields: the layer it belongs to (or the input tensor it loads,
    `input<t>`), the phase it runs in, which part of the layer's work it is (a partition index;
    for a send, its segment's tag and number; for a load, its device and box bounds; for a
    weight update, an `UpdatePart`), and its kind (`forward`, `fpartial`, `send`, `sendgrad`,
    `loss`, `backward`, `bpartial`, `partialsend`, `load`, `check`, `update`, `sendweight`,
    `receive`; for sharded weights `sendshard`, `gatherweight`, `freeweight`). Nothing parses
    a key back: the text form is for people (`<layer>-<kind>-<part>`, so Dask's task stream and
    DOT files read per op)."""

    layer: str
    phase: str
    part: Part
    kind: str

    def __str__(self) -> str:
        return f"{self.layer}-{self.kind}-{_part_text(self.part)}"


def _part_text(part: Part) -> str:
    if isinstance(part, tuple):
        return ".".join(_part_text(p) for p in part if p is not None)
    return str(part)


@dataclass(frozen=True)
class Task:
    key: TaskKey
    device: int
    phase: str
    action: A.Action
    deps: tuple[TaskKey, ...] = ()
    timed: bool = False  # records its time in the metrics (`actions.run_timed`)
    lane: int = 0  # its micro-batch on its device (`Partition.lane`; fusion.place_of)


@dataclass
class TaskGraph:
    tasks: list[Task] = field(default_factory=list)  # in a topological order
    weight_devices: dict[WeightKey, list[int]] = field(default_factory=dict)  # owner first
    replicated: frozenset[WeightKey] = frozenset()  # boxes every holder updates (all-reduced)
    sharded: frozenset[WeightKey] = frozenset()  # boxes kept as shards between uses
    collectives: bool = False  # sharded boxes then gathered and summed by collectives
    # the tasks of the micro-batches 1F1B runs in the memory earlier ones freed
    # (`Partition.counted`), whose arrays the memory model leaves out, and their sends'
    uncounted: frozenset[TaskKey] = frozenset()

    @property
    def bucketed_shards(self) -> frozenset[WeightKey]:
        """The sharded boxes the collectives gather and sum (`Checks.collectives`), cut over
        every holder however many."""
        return self.sharded if self.collectives else frozenset()

    def weight_shards(self, key: WeightKey) -> tuple[Shard, ...]:
        """Which device updates (and keeps the optimizer state of) which part of a box: every
        holder all of a replicated box (each keeps the same state)."""
        if key in self.replicated:
            return tuple(Shard(key[2], d) for d in self.weight_devices[key])
        return shards(key[2], self.weight_devices[key], cut_limit(key, self.bucketed_shards))

    def phase(self, *phases: str) -> list[Task]:
        return [t for t in self.tasks if t.phase in phases]

    @property
    def phases(self) -> tuple[str, ...]:
        """The phases its tasks belong to, in the order they first appear (the order to run)."""
        return tuple(dict.fromkeys(t.phase for t in self.tasks))


@dataclass(frozen=True)
class Partition:
    """One partition of a layer: its forward action, device and forward task key, and the
    lanes of its forward and its backward. A device given several parts of a layer (m of them:
    a pipeline stage's micro-batches, scheduler/pipelines.py) runs each in a fused group of its
    own (`fusion.place_of`), so that the next stage starts on one micro-batch while this one
    runs the next: in GPipe's schedule the forward of its j-th part in lane j, the backward in
    lane m + j, so that the stage runs every micro-batch's forward before the backwards (and
    holds the whole batch's activations, as the memory model counts them); in 1F1B's
    (`ParallelConfig.in_flight` = k) in the lanes of `pipelines.one_f_one_b_lanes`, the
    forward of part j >= k waiting for the backward of the device's part j - k (`waits_for`),
    and only the first k counted by the memory model (the others reuse what those free). Lane
    0 for both otherwise."""

    action: A.Forward
    device: int
    key: TaskKey
    lane: int = 0
    backward_lane: int = 0
    waits_for: int | None = None  # the part whose backward this forward follows (1F1B)
    counted: bool = True  # its arrays count towards its device's peak (`TaskGraph.uncounted`)


@dataclass(frozen=True)
class Segment:
    """The tasks one layer adds to one phase, or one weight box's update. `key` names what the
    tasks depend on (the segment kind, the layer or weight, the configurations involved): equal
    keys mean equal tasks. `loads` are the keys of input-loading tasks, which several segments
    may create; the first one in graph order is kept."""

    key: tuple
    tasks: tuple[Task, ...]
    loads: frozenset[TaskKey] = frozenset()


class _Writer:
    """Collects one segment's tasks; send keys are numbered within the segment (`tag`)."""

    def __init__(self, tag: str, checks: Checks):
        self.tag = tag
        self.checks = checks
        self.tasks: list[Task] = []
        self.loads: set[TaskKey] = set()
        self.sends = 0
        self.gathers: dict[tuple, dict[int, TaskKey]] = {}  # (phase, group) -> awaits
        self.partial_sends: set[TaskKey] = set()  # a device's parts (micro-batches) share one

    def add(self, key: TaskKey, device: int, phase: str, action: A.Action, deps=(),
            lane: int = 0) -> TaskKey:
        deps = tuple(deps) if len(deps) < 2 else tuple(dict.fromkeys(deps))
        timed = self.checks.kernel_times and A.kernel_of(action) is not None
        self.tasks.append(Task(key, device, phase, action, deps, timed, lane))
        return key

    def send(self, producer_key: TaskKey, source: int, action: A.Send, phase: str,
             deps) -> TaskKey:
        kind = "sendgrad" if action.grad else "send"
        self.sends += 1
        return self.add(TaskKey(producer_key.layer, phase, (self.tag, self.sends), kind), source,
                        phase, action, deps)

    def load(self, tensor: int, box: Box, device: int, phase: str,
             action: A.Action) -> TaskKey:
        key = TaskKey(f"input{tensor}", phase, (device, box.bounds), "load")
        if key not in self.loads:
            self.loads.add(key)
            self.add(key, device, phase, action)
        return key

    def segment(self, key: tuple) -> Segment:
        return Segment(key, tuple(self.tasks), frozenset(self.loads))


class TaskGraphBuilder:
    """Builds the task graphs of one model under many strategies, memoising partitions and
    segments by the configurations they depend on (strategies must already be valid)."""

    def __init__(self, graph: Graph, objective: Objective | None = None,
                 checks: Checks = Checks()):
        self.graph = graph
        self.objective = objective
        self.checks = checks
        layers = graph.layers
        self.producers = [tuple(dict.fromkeys(graph.tensors[t].producer[0] for t in layer.inputs
                                              if graph.tensors[t].producer is not None))
                          for layer in layers]
        readers: dict[int, list[int]] = {}
        for layer in layers:
            for t in dict.fromkeys(layer.inputs):
                readers.setdefault(t, []).append(layer.index)
        self.readers = {t: tuple(reversed(v)) for t, v in readers.items()}  # backward order
        self.weighted = [layer for layer in layers if layer.weights]
        users: dict[int, int] = {}
        for layer in self.weighted:
            users[layer.weight_owner] = users.get(layer.weight_owner, 0) + 1
        # layers whose weights no other layer uses (tied weights are never sharded: each use
        # would gather and free the one whole copy of the other's)
        self._untied = frozenset(layer.index for layer in self.weighted
                                 if users[layer.weight_owner] == 1)
        self.skip = self.last = self.grad_tensor = None
        if objective is not None:
            self.last = graph.tensors[objective.output].producer[0]
            last = layers[self.last]
            self.grad_tensor = last.inputs[0] if objective.through_softmax else objective.output
            if objective.through_softmax:
                self.skip = self.last
        self._parts: dict[tuple[int, ParallelConfig], tuple[Partition, ...]] = {}
        self._values_memo: dict[tuple[int, ParallelConfig, int | None], list] = {}
        self._weights_memo: dict[tuple[int, ParallelConfig], dict] = {}
        self._overlaps: dict[tuple, list] = {}
        self._weights_of: dict[tuple, tuple] = {}
        self._segments: dict[tuple, Segment] = {}
        self._bucket_of = self._bucket_numbers()

    # ---- partitions -----------------------------------------------------------------------------
    def parts(self, index: int, config: ParallelConfig) -> tuple[Partition, ...]:
        cache = (index, config)
        if cache not in self._parts:
            self._parts[cache] = self._make_parts(index, config)
        return self._parts[cache]

    def _make_parts(self, index: int, config: ParallelConfig) -> tuple[Partition, ...]:
        layer = self.graph.layers[index]
        in_specs = self.graph.in_specs(layer)
        out_shapes = [self.graph.tensors[t].spec.shape for t in layer.outputs]
        c = config.contraction
        groups = reduction_groups(layer.op.reduction_dims, config.degrees)
        boxes = config.boxes(out_shapes[0])
        parts = []
        for p, device in enumerate(config.devices):
            box = boxes[p // config.copies]
            out_boxes = tuple(
                Box(tuple(b if n == out_shapes[0][d] else (0, n)
                          for d, (b, n) in enumerate(zip(box.bounds, shape))))
                for shape in out_shapes)
            in_boxes = tuple(layer.op.input_box(box, in_specs, i).clip(s.shape)
                             for i, s in enumerate(in_specs))
            weight_keys = tuple((layer.weight_owner, k, layer.op.weight_box(box, in_specs, k))
                                for k in range(len(layer.weights)))
            if c > 1:
                in_boxes, weight_keys = _contracted(layer.op.contraction(in_specs), p % c, c,
                                                    in_boxes, weight_keys)
                group = tuple(range(p - p % c, p - p % c + c))
            else:
                group = groups[p // config.replicas]
            action = A.Forward(index, p, out_boxes, in_boxes, weight_keys, group,
                               config.recompute, c)
            parts.append(Partition(action, device, TaskKey(layer.name, "forward", p, "forward"),
                                   *self._schedule(index, config, p)))
        return tuple(parts)

    def _schedule(self, index: int, config: ParallelConfig, p: int) -> tuple:
        """Part p's lanes, the part it waits for and whether it is counted (`Partition`)."""
        device = config.devices[p]
        j, micro = config.devices[:p].count(device), config.micro_batches
        if micro == 1:
            return 0, 0, None, True
        k = config.in_flight if self.objective is not None else 0
        if not k:
            return j, micro + j, None, True
        forward, backward = one_f_one_b_lanes(j, k, micro)
        waits_for = None
        if j >= k and index != self.skip:  # (a softmax the loss goes through has no backward)
            mine = [q for q, d in enumerate(config.devices) if d == device]
            waits_for = mine[j - k]
        return forward, backward, waits_for, j < k

    def _values(self, strategy: Strategy, tensor: int, device: int | None = None
                ) -> list[tuple[Box, int, TaskKey]]:
        """(box, device, key) of every piece of a layer output: where several partitions hold
        a box (a contraction split, replicas), the one on `device` where there is one, else
        the first."""
        index, k = self.graph.tensors[tensor].producer
        config = strategy[self.graph.layers[index].name]
        c = config.copies
        here = device if c > 1 else None
        memo = self._values_memo.get((tensor, config, here))
        if memo is None:
            parts = self.parts(index, config)
            chosen = [next((q for q in parts[b:b + c] if q.device == here), parts[b])
                      for b in range(0, len(parts), c)]
            memo = self._values_memo[(tensor, config, here)] = [
                (part.action.out_boxes[k], part.device, part.key) for part in chosen]
        return memo

    def _overlapping(self, pieces: list, box: Box) -> list[tuple[Box, int, TaskKey]]:
        """(intersection, device, key) of the pieces that intersect `box`, memoised for piece
        lists the builder keeps (their identity is then stable)."""
        memo = (id(pieces), box)
        found = self._overlaps.get(memo)
        if found is None:
            found = self._overlaps[memo] = (overlapping(pieces, box), pieces)
        return found[0]

    def _weight_uses(self, index: int, config: ParallelConfig) -> dict:
        """For every weight box the layer's partitions use: the devices using it (in partition
        order) and each one's backward keys. Memoised per configuration, so that a strategy's
        weight layout (`_weights`) is merged from a few dicts per layer rather than walked
        partition by partition."""
        memo = self._weights_memo.get((index, config))
        if memo is None:
            name = self.graph.layers[index].name
            found: dict[WeightKey, dict[int, list[TaskKey]]] = {}
            for p, part in enumerate(self.parts(index, config)):
                for wkey in part.action.weight_keys:
                    found.setdefault(wkey, {}).setdefault(part.device, []).append(
                        TaskKey(name, "backward", p, "backward"))
            memo = self._weights_memo[(index, config)] = {
                wkey: (tuple(by), {d: tuple(keys) for d, keys in by.items()})
                for wkey, by in found.items()}
        return memo

    # ---- segments -------------------------------------------------------------------------------
    def segments(self, strategy: Strategy) -> list[Segment]:
        """The graph's segments in a topological order: forward by layer, the loss, backward in
        reverse, each weight box's update right after the backward of the last layer (in
        backward order) that uses it, so that a device's program sends the box's gradient
        pieces while the rest of its backward runs (`actions.sent_early`). With collectives, a
        bucket's all-reduce is launched there instead, and the awaits of the sums and the
        updates come after all of backward, so that the sums travel while backward goes on
        (DDP's order)."""
        layers = self.graph.layers
        out = [self._segment(self._forward_key(strategy, layer.index), strategy)
               for layer in layers]
        if self.objective is None:
            return out
        out.append(self._segment(("loss", strategy[layers[self.last].name]), strategy))
        updates = self._weights(strategy)[1]
        for layer in reversed(layers):
            if layer.index != self.skip:
                out.append(self._segment(self._backward_key(strategy, layer.index), strategy))
            out += updates.get(layer.index, ())
        return out + list(updates.get(AFTER_BACKWARD, ()))

    def _forward_key(self, strategy: Strategy, index: int) -> tuple:
        """The layer's and its producers' configs, and which of the layers reading its inputs
        or outputs are recomputed (that moves where the memory model drops the values)."""
        layers = self.graph.layers
        names = [layers[i].name for i in (index, *self.producers[index])]
        layer = layers[index]
        readers = dict.fromkeys(i for t in (*layer.inputs, *layer.outputs)
                                for i in self.readers.get(t, ()))
        return (("forward", index) + tuple(strategy[n] for n in names)
                + (tuple(i for i in readers if strategy[layers[i].name].recompute),))

    def _backward_key(self, strategy: Strategy, index: int) -> tuple:
        layer = self.graph.layers[index]
        consumers = [i for t in layer.outputs for i in self.readers.get(t, ())]
        if self.grad_tensor in layer.outputs:
            consumers.append(self.last)
        return ("backward", index) + tuple(strategy[self.graph.layers[i].name]
                                           for i in (index, *consumers))

    def _segment(self, key: tuple, strategy: Strategy) -> Segment:
        segment = self._segments.get(key)
        if segment is None:
            kind = key[0]
            if kind == "forward":
                segment = self._forward(key, strategy, self.graph.layers[key[1]])
            elif kind == "loss":
                segment = self._loss(key, strategy)
            elif kind == "backward":
                segment = self._backward(key, strategy, self.graph.layers[key[1]])
            elif kind == "update":
                segment = self._update(key)
            else:
                segment = self._bucket(key)
            self._segments[key] = segment
        return segment

    # ---- forward ----------------------------------------------------------------------------
    def _need_value(self, w: _Writer, strategy, tensor: int, box: Box, device: int,
                    phase: str = "forward") -> list[TaskKey]:
        """Keys of the tasks that put `box` of `tensor` on `device`."""
        spec = self.graph.tensors[tensor]
        if spec.producer is None:  # fed from outside, or a constant: made where it is needed
            action = A.Load(tensor, box) if spec.constant is None else A.Fill(
                tensor, box, spec.constant)
            return [w.load(tensor, box, device, phase, action)]
        pieces = self._overlapping(self._values(strategy, tensor, device), box)
        return _gather(w, pieces, tensor, box, device, "forward", grad=False)

    def _forward(self, key: tuple, strategy: Strategy, layer) -> Segment:
        w = _Writer(layer.name, self.checks)
        parts = self.parts(layer.index, strategy[layer.name])
        uses = self.sharded_uses(layer.index, strategy[layer.name])
        ready = self._gathers(w, layer, parts, "forward", uses,
                              self._forward_triggers(strategy, layer.index)) if uses else {}
        pending = []
        for p, part in enumerate(parts):
            deps = list(ready.get(part.device, ()))
            if part.waits_for is not None:  # 1F1B: after that micro-batch's backward
                deps.append(TaskKey(layer.name, "backward", part.waits_for, "backward"))
            for tensor, in_box in zip(layer.inputs, part.action.in_boxes):
                deps += self._need_value(w, strategy, tensor, in_box, part.device)
            if part.action.group:
                w.add(TaskKey(layer.name, "forward", p, "fpartial"), part.device, "forward",
                      A.ForwardPartial(part.action), deps, part.lane)
            pending.append(deps)
        for p, part in enumerate(parts):
            deps = pending[p] + _partials(w, layer, "forward", part.action.group, part.device,
                                          parts)
            w.add(part.key, part.device, "forward", part.action, deps, part.lane)
        if uses:
            self._frees(w, layer, parts, "forward", uses, lambda p: parts[p].key)
        return w.segment(key)

    # ---- sharded weights ------------------------------------------------------------------------
    def sharded_uses(self, index: int, config: ParallelConfig) -> dict[WeightKey, tuple]:
        """The boxes layer `index` keeps sharded under `config`, with their holders (owner
        first): where it shards its weights, its trainable boxes held by several devices, unless
        another layer uses its weights. A function of the layer's config alone, so the segments
        that read it stay pure."""
        if not config.shard_weights or index not in self._untied:
            return {}
        return {wkey: using for wkey, (using, _) in self._weight_uses(index, config).items()
                if len(using) > 1 and self._trainable(wkey)}

    def _gathers(self, w: _Writer, layer, parts, phase: str, uses: dict, triggers,
                 after=lambda device: ()) -> dict[int, list[TaskKey]]:
        """Per device, the gathers of the sharded boxes `uses` before the layer's `phase`
        there: each other shard's owner sends its shard after `triggers(owner)` (its tasks
        just before, so that the shard arrives when it is needed, not when the iteration
        starts), or with the collectives every holder launches the all-gather of its shard
        then; the gather also waits for `after(device)`."""
        ready: dict[int, list[TaskKey]] = {}
        for b, (wkey, holders) in enumerate(uses.items()):
            tag = f"w{wkey[1]}b{b}"
            if self.checks.collectives:
                sources = [w.add(TaskKey(layer.name, phase, (tag, d), "shareshard"), d, phase,
                                 A.ShareShard(wkey, phase, holders), triggers(d))
                           for d in holders]
            for d in holders:
                deps = list(after(d))
                if self.checks.collectives:
                    deps += sources
                else:
                    deps += self._shard_sends(w, layer, phase, tag, wkey, holders, d, triggers)
                ready.setdefault(d, []).append(w.add(
                    TaskKey(layer.name, phase, (tag, d), "gatherweight"), d, phase,
                    A.GatherWeight(wkey, phase, layer.index, _parts_on(parts, d),
                                   holders if self.checks.collectives else ()), deps))
        return ready

    @staticmethod
    def _shard_sends(w: _Writer, layer, phase: str, tag: str, wkey: WeightKey, holders,
                     device: int, triggers) -> list[TaskKey]:
        """The sends of every other owner's shard of `wkey` to `device`, each after
        `triggers(owner)`."""
        return [w.add(TaskKey(layer.name, phase, (tag, j, device), "sendshard"), shard.owner,
                      phase, A.SendShard(wkey, device, shard.box, phase), triggers(shard.owner))
                for j, shard in enumerate(shards(wkey[2], holders)) if shard.owner != device]

    def _frees(self, w: _Writer, layer, parts, phase: str, uses: dict, key_of) -> None:
        """Each holder's free of the whole of each sharded box `uses` once the layer's
        `phase` tasks there (`key_of(partition)`) have run."""
        for b, (wkey, holders) in enumerate(uses.items()):
            for d in holders:
                here = _parts_on(parts, d)
                w.add(TaskKey(layer.name, phase, (f"w{wkey[1]}b{b}", d), "freeweight"), d,
                      phase, A.FreeWeight(wkey, phase, layer.index, here),
                      [key_of(p) for p in here])

    def _forward_triggers(self, strategy: Strategy, index: int):
        """What a shard's owner sends its shard for a forward after: its forwards of the
        layer's producers (in the forward segment's key)."""
        layers = self.graph.layers
        keys = [part for i in self.producers[index]
                for part in self.parts(i, strategy[layers[i].name])]
        return lambda device: [part.key for part in keys if part.device == device]

    # ---- loss and backward ----------------------------------------------------------------------
    def _loss(self, key: tuple, strategy: Strategy) -> Segment:
        objective = self.objective
        last = self.graph.layers[self.last]
        w = _Writer(f"{last.name}.loss", self.checks)
        for p, (box, device, value_key) in enumerate(self._values(strategy, objective.output)):
            label_box = self.label_box(box)
            deps = [value_key] + self._need_value(w, strategy, objective.label, label_box,
                                                  device, "loss")
            w.add(TaskKey(last.name, "loss", p, "loss"), device, "loss",
                  A.Loss(objective.output, box, objective.label, label_box, self.grad_tensor),
                  deps)
        return w.segment(key)

    def label_box(self, box: Box) -> Box:
        label_shape = self.graph.tensors[self.objective.label].spec.shape
        return Box(tuple(b if n == m else (0, m) for b, n, m in zip(
            box.bounds, self.graph.tensors[self.objective.output].spec.shape, label_shape)))

    def _grad_pieces(self, strategy: Strategy, tensor: int) -> list[tuple[Box, int, TaskKey]]:
        """Gradient pieces of a layer output, in the order backward produces them: the loss's,
        then each consumer's backward partitions, consumers in reverse layer order."""
        pieces = []
        if tensor == self.grad_tensor:
            last = self.graph.layers[self.last].name
            pieces += [(box, device, TaskKey(last, "loss", p, "loss")) for p, (box, device, _) in
                       enumerate(self._values(strategy, self.objective.output))]
        if not self.graph.tensors[tensor].spec.dtype.startswith("float"):
            return pieces
        for index in self.readers.get(tensor, ()):
            if index == self.skip:
                continue
            consumer = self.graph.layers[index]
            for q, part in enumerate(self.parts(index, strategy[consumer.name])):
                for t, box in zip(consumer.inputs, part.action.in_boxes):
                    if t == tensor:
                        pieces.append((box, part.device,
                                       TaskKey(consumer.name, "backward", q, "backward")))
        return pieces

    def _backward(self, key: tuple, strategy: Strategy, layer) -> Segment:
        w = _Writer(layer.name, self.checks)
        parts = self.parts(layer.index, strategy[layer.name])
        pieces = {t: self._grad_pieces(strategy, t) for t in dict.fromkeys(layer.outputs)}
        uses = self.sharded_uses(layer.index, strategy[layer.name])
        ready = {}
        if uses:  # a shard is sent once its owner has made the gradients this layer reads
            made = [(device, k) for found in pieces.values() for _, device, k in found]
            ready = self._gathers(
                w, layer, parts, "backward", uses,
                lambda device: list(dict.fromkeys(k for d, k in made if d == device)),
                lambda device: [part.key for part in parts if part.device == device])
        grad_deps = []
        config = strategy[layer.name]
        for p, part in enumerate(parts):
            deps = list(ready.get(part.device, ()))
            for tensor, box in zip(layer.outputs, part.action.out_boxes):
                found = overlapping(pieces[tensor], box)
                if config.replicas > 1:
                    found = _replicas_share(found, config, p)
                deps += _gather(w, found, tensor, box, part.device, "backward", grad=True)
            grad_deps.append(deps)
            if part.action.backward_group:
                w.add(TaskKey(layer.name, "backward", p, "bpartial"), part.device, "backward",
                      A.BackwardPartial(layer.index, p), deps, part.backward_lane)
        for p, part in enumerate(parts):
            deps = grad_deps[p] + _partials(w, layer, "backward", part.action.backward_group,
                                            part.device, parts)
            # a backward reads what its forward kept; outputs that carry no gradient (bools)
            # give it no other dependency, and its forward may wait on a message
            deps = deps or [part.key]
            w.add(TaskKey(layer.name, "backward", p, "backward"), part.device, "backward",
                  A.Backward(layer.index, p, part.action.backward_group, part.action.recompute),
                  deps,
                  part.backward_lane)
        if uses:
            self._frees(w, layer, parts, "backward", uses,
                        lambda p: TaskKey(layer.name, "backward", p, "backward"))
        return w.segment(key)

    # ---- update ---------------------------------------------------------------------------------
    def weight_devices(self, strategy: Strategy) -> dict[WeightKey, list[int]]:
        """Devices holding each weight box, owner (first user in layer order) first (the same
        dict for the same configurations of the layers with weights: do not modify it)."""
        return self._weights(strategy)[0]

    def _weights(self, strategy: Strategy) -> tuple[dict, dict[int, list[Segment]], frozenset]:
        """Weight holders, the update segments by the layer whose backward they follow, and
        the sharded boxes, memoised by the weighted layers' splits, devices, sharding and the
        partitions per box (a contraction split's and replicas' have the same degrees and
        devices; recomputation changes none of them; sharding changes the updates and what the
        holders keep, and so the simulator's weight memory, keyed by the holders' identity)."""
        memo = tuple((c.degrees, c.devices, c.shard_weights, c.contraction, c.replicas)
                     for c in (strategy[layer.name] for layer in self.weighted))
        found = self._weights_of.get(memo)
        if found is None:
            if len(self._weights_of) > MEMO_LIMIT:
                self._weights_of.clear()
            holders = self._holders(strategy)
            sharded = frozenset(k for layer in self.weighted
                                for k in self.sharded_uses(layer.index, strategy[layer.name]))
            updates: dict[int, list[Segment]] = {}
            uses = self._update_uses(strategy, holders, sharded)
            if self.checks.collectives:  # (a sharded box's owners then update its shards)
                for after, key in self._bucket_keys([u for u in uses if len(u.devices) > 1]):
                    updates.setdefault(after, []).append(self._segment(key, strategy))
                uses = [u for u in uses if len(u.devices) == 1]
            for use in uses:
                updates.setdefault(use.after, []).append(self._segment(use.key(), strategy))
            found = self._weights_of[memo] = (holders, updates, sharded)
        return found

    def sharded(self, strategy: Strategy) -> frozenset[WeightKey]:
        """The weight boxes the holders keep as shards between uses (`sharded_uses`)."""
        return self._weights(strategy)[2]

    def bucketed(self, strategy: Strategy) -> frozenset[WeightKey]:
        """The sharded boxes the collectives gather and sum (`TaskGraph.bucketed_shards`)."""
        return self.sharded(strategy) if self.checks.collectives else frozenset()

    def replicated(self, strategy: Strategy) -> frozenset[WeightKey]:
        """The trainable weight boxes every holder updates after an all-reduce (collectives)."""
        if not self.checks.collectives:
            return frozenset()
        sharded = self.sharded(strategy)
        return frozenset(k for k, devices in self.weight_devices(strategy).items()
                         if len(devices) > 1 and self._trainable(k) and k not in sharded)

    def _trainable(self, wkey: WeightKey) -> bool:
        return self.graph.layers[wkey[0]].weights[wkey[1]].trainable

    def _holders(self, strategy: Strategy) -> dict[WeightKey, list[int]]:
        devices: dict[WeightKey, list[int]] = {}
        for layer in self.weighted:
            for wkey, (using, _) in self._weight_uses(layer.index, strategy[layer.name]).items():
                holders = devices.get(wkey)
                if holders is None:
                    devices[wkey] = list(using)
                else:
                    holders += [d for d in using if d not in holders]
        return devices

    def _update_uses(self, strategy: Strategy, holders: dict,
                     sharded: frozenset = frozenset()) -> list["_BoxUse"]:
        """How every trainable weight box is used, in order of first use."""
        backward: dict[WeightKey, dict[int, tuple[TaskKey, ...]]] = {}  # (shared: not changed)
        last_use: dict[WeightKey, int] = {}
        for layer in reversed(self.weighted):
            if layer.index == self.skip:
                continue
            for wkey, (_, done) in self._weight_uses(layer.index, strategy[layer.name]).items():
                have = backward.get(wkey)
                backward[wkey] = done if have is None else {
                    d: have.get(d, ()) + done.get(d, ()) for d in dict.fromkeys((*have, *done))}
                last_use[wkey] = layer.index
        uses = []
        boxes_seen: dict[tuple[int, int], int] = {}
        for wkey, devices in holders.items():
            if not self._trainable(wkey):
                continue
            box_index = boxes_seen[wkey[:2]] = boxes_seen.get(wkey[:2], -1) + 1
            done = backward.get(wkey, {})
            uses.append(_BoxUse(wkey, box_index, last_use.get(wkey, self.last), tuple(devices),
                                tuple(done.get(d, ()) for d in devices), wkey in sharded))
        return uses

    def _bucket_keys(self, uses: list["_BoxUse"]) -> list[tuple[int, tuple]]:
        """(the layer after whose backward the bucket is launched, the key of its launch
        segment) and (AFTER_BACKWARD, the key of its awaits and updates) for each bucket of the
        replicated boxes `uses`, in the order backward completes their gradients: the boxes
        of one of the model's buckets (`_bucket_numbers`) with the same holders; a sharded box
        in a bucket of its own, which the all-reduce sums in place (a bucket of several is a
        copy of their gradients: FSDP reduces each layer's at once too)."""
        grouped: dict[tuple, list[_BoxUse]] = {}
        for n, use in enumerate(sorted(uses, key=lambda use: -use.after)):  # (stable)
            group = ("sharded", n) if use.sharded else (self._bucket_of[use.wkey[:2]],
                                                        use.devices)
            grouped.setdefault(group, []).append(use)
        buckets = list(grouped.values())
        members = [tuple((u.wkey, u.box_index, u.done, u.sharded) for u in bucket)
                   for bucket in buckets]
        # the names of the bucket launched last on each tuple of holders (its launches are all
        # a "reduced" segment needs of it: keyed so, the segment outlives the bucket's members)
        last = {bucket[0].devices: self._bucket_names(m)[:2] for bucket, m in
                sorted(zip(buckets, members), key=lambda pair: -pair[0][-1].after)}
        keys = []
        for bucket, mine in zip(buckets, members):
            devices = bucket[0].devices
            keys.append((bucket[-1].after, ("allreduce", mine, devices)))
            keys.append((AFTER_BACKWARD, ("reduced", mine, devices, last[devices])))
        return keys

    def _bucket_numbers(self) -> dict[tuple[int, int], int]:
        """Each trainable weight's bucket, by (layer, weight): DDP's buckets of the whole
        weights in the order backward completes them, the first closed once it holds
        FIRST_BUCKET_BYTES, the others `bucket_bytes`. A strategy's buckets are these cut where
        the holders differ; fixed by the model rather than by the strategy, so that a change
        to one layer's split changes its own buckets alone, and the search rebuilds their
        segments, not those of every bucket after them."""
        completes: dict[int, int] = {}  # owner -> the layer whose backward uses it last
        for layer in reversed(self.weighted):
            if layer.index != self.skip:
                completes[layer.weight_owner] = layer.index
        owners = sorted((layer.index for layer in self.weighted
                         if layer.weight_owner == layer.index),
                        key=lambda owner: -completes.get(owner, len(self.graph.layers)))
        numbers: dict[tuple[int, int], int] = {}
        bucket = size = 0
        for owner in owners:
            for k, spec in enumerate(self.graph.layers[owner].weights):
                if spec.trainable:
                    if size >= self._bucket_cap(bucket + 1):
                        bucket, size = bucket + 1, 0
                    numbers[owner, k] = bucket
                    size += math.prod(spec.shape) * 4
        return numbers

    def _update(self, key: tuple) -> Segment:
        """A box's update: reduce-scatter, the shards' updates, and, unless the box is kept
        sharded (the next gather brings the new values), the all-gather."""
        _, wkey, box_index, devices, done, sharded = key
        layer = self.graph.layers[wkey[0]].name
        w = _Writer(_BoxUpdate.name(layer, wkey, box_index), self.checks)
        box = _BoxUpdate(w, layer, wkey, box_index, devices, done)
        updates = box.updates(box.reduce_scatter())
        if not sharded:
            box.all_gather(updates)
        return w.segment(key)

    def _bucket(self, key: tuple) -> Segment:
        """A bucket's all-reduce launch on each holder, after the backward tasks there that
        use its boxes ("allreduce"); or each holder's await of the sum, then its update of each
        box, whole, or of its own shard of a sharded box ("reduced"). An await depends on
        every holder's launch, and on the launches of the last bucket of the same holders,
        which follow all of backward: so that no await stops a device's backward while its
        sums travel."""
        kind, members, devices = key[:3]
        layer, tag, bucket = self._bucket_names(members)
        keys = tuple(member[0] for member in members)
        launches = [TaskKey(layer, "update", (tag, device), "allreduce") for device in devices]
        w = _Writer(bucket, self.checks)
        if kind == "allreduce":
            for d, (launch, device) in enumerate(zip(launches, devices)):
                w.add(launch, device, "update", A.AllReduce(bucket, keys, devices),
                      [k for _, _, done, _ in members for k in done[d]])
            return w.segment(key)
        last_layer, last_tag = key[3]
        launches += [TaskKey(last_layer, "update", (last_tag, device), "allreduce")
                     for device in devices if last_tag != tag or last_layer != layer]
        for device in devices:
            summed = w.add(TaskKey(layer, "update", (tag, device), "reduced"), device, "update",
                           A.AwaitReduced(bucket, keys), launches)
            for wkey, index, _, sharded in members:
                cut = shards(wkey[2], devices, None) if sharded else (Shard(wkey[2], device),)
                for j, shard in enumerate(cut):
                    if shard.owner == device:
                        w.add(TaskKey(self.graph.layers[wkey[0]].name, "update",
                                      UpdatePart(wkey[1], index, j, device), "update"),
                              device, "update", A.Update(wkey, shard.box,
                                                         self.checks.finite_gradients,
                                                         tests_whole=sharded), [summed])
        return w.segment(key)

    def _bucket_cap(self, made: int) -> int:
        """The bytes at which the bucket being filled, after `made` - 1 others, is closed."""
        return (min(FIRST_BUCKET_BYTES, self.checks.bucket_bytes) if made == 1
                else self.checks.bucket_bytes)

    def _bucket_names(self, members: tuple) -> tuple[str, str, str]:
        """(the layer, the tag and the name) a bucket's keys are given: its first box's."""
        first, box_index = members[0][:2]
        layer = self.graph.layers[first[0]].name
        return layer, f"w{first[1]}b{box_index}", _BoxUpdate.name(layer, first, box_index)

    # ---- assembly -------------------------------------------------------------------------------
    def build(self, strategy: Strategy) -> TaskGraph:
        tg = TaskGraph(weight_devices={k: list(v) for k, v in
                                       self.weight_devices(strategy).items()},
                       replicated=self.replicated(strategy), sharded=self.sharded(strategy),
                       collectives=self.checks.collectives)
        seen: set[TaskKey] = set()
        for segment in self.segments(strategy):
            tg.tasks += assemble(segment, seen)
        keys = [t.key for t in tg.tasks]
        if len(set(keys)) != len(keys):
            raise AssertionError("task keys are not unique")
        if any(config.in_flight for config in strategy.values()):
            tg.tasks = in_dependency_order(tg.tasks)  # 1F1B's forwards follow backwards
            tg.uncounted = self._uncounted(strategy, tg.tasks)
        return tg

    def _uncounted(self, strategy: Strategy, tasks: list[Task]) -> frozenset[TaskKey]:
        """`TaskGraph.uncounted`: the forward, loss and backward tasks of the parts 1F1B does
        not count, and the sends of what they make."""
        found = set()
        for layer in self.graph.layers:
            for p, part in enumerate(self.parts(layer.index, strategy[layer.name])):
                if not part.counted:
                    found |= {TaskKey(layer.name, phase, p, kind) for phase, kind in (
                        ("forward", "fpartial"), ("forward", "forward"),
                        ("backward", "bpartial"), ("backward", "backward"))}
                    if layer.index == self.last:
                        found.add(TaskKey(layer.name, "loss", p, "loss"))
        found |= {t.key for t in tasks if isinstance(t.action, A.Send)
                  and any(d in found for d in t.deps)}
        return frozenset(found)


AFTER_BACKWARD = -1  # where the segments go that follow all of backward (`segments`)


@dataclass(frozen=True)
class _BoxUse:
    """How a trainable weight box is used: its number among its weight's boxes, the layer
    whose backward completes its gradient (`after`), its holders (owner first) and each
    holder's backward keys that use it."""

    wkey: WeightKey
    box_index: int
    after: int
    devices: tuple[int, ...]
    done: tuple[tuple[TaskKey, ...], ...]
    sharded: bool = False  # kept as shards between uses: no all-gather after the update

    def key(self) -> tuple:
        """The key of its update segment (sharded over its holders)."""
        return ("update", self.wkey, self.box_index, self.devices, self.done, self.sharded)


class _BoxUpdate:
    """Writes the update of one weight box, spread over the devices holding it (`holders`,
    owner first, with `done`: each one's backward keys that use the box): reduce-scatter of
    the gradient's shards (`shards.py`), each shard updated on its owner (under the guard, once
    every shard's sum is known to be finite), then all-gather of the new shards."""

    def __init__(self, w: _Writer, layer: str, wkey: WeightKey, box_index: int,
                 holders: tuple[int, ...], done: tuple[tuple[TaskKey, ...], ...]):
        self.w, self.layer, self.wkey, self.box_index = w, layer, wkey, box_index
        self.holders = holders
        self.backward = dict(zip(holders, done))
        self.shards = shards(wkey[2], holders)

    @staticmethod
    def name(layer: str, wkey: WeightKey, box_index: int) -> str:
        """A weight box's name in its update's keys: `<layer>.w<weight>b<box>`."""
        return f"{layer}.w{wkey[1]}b{box_index}"

    def key(self, kind: str, shard: int, device: int | None = None) -> TaskKey:
        return TaskKey(self.layer, "update", UpdatePart(self.wkey[1], self.box_index, shard,
                                                        device), kind)

    def _others(self, shard: Shard) -> list[int]:
        return [d for d in self.holders if d != shard.owner]

    def reduce_scatter(self) -> list[list[TaskKey]]:
        """For each shard, what brings every holder's gradient of it to its owner: the owner's
        backward tasks, and a send from each other holder after its own."""
        summed = []
        for j, shard in enumerate(self.shards):
            deps = list(self.backward[shard.owner])
            for r in self._others(shard):
                deps.append(self.w.add(self.key("sendgrad", j, r), r, "update",
                                       A.SendWeightGrad(self.wkey, shard.owner, shard.box),
                                       self.backward[r]))
            summed.append(deps)
        return summed

    def updates(self, summed: list[list[TaskKey]]) -> list[TaskKey]:
        """Each shard's update on its owner, after `summed[j]`; under the non-finite guard a
        box of several shards is first tested shard by shard, and every update waits for all
        the verdicts."""
        w, wkey, incoming = self.w, self.wkey, len(self.holders) - 1
        guarded = w.checks.finite_gradients
        if not guarded or len(self.shards) == 1:
            return [w.add(self.key("update", j), shard.owner, "update",
                          A.Update(wkey, shard.box, guarded, incoming), summed[j])
                    for j, shard in enumerate(self.shards)]
        owners = [shard.owner for shard in self.shards]
        tested = [w.add(self.key("check", j), shard.owner, "update", A.CheckShard(
            wkey, shard.box, incoming, tuple(o for o in owners if o != shard.owner)), summed[j])
            for j, shard in enumerate(self.shards)]
        return [w.add(self.key("update", j), shard.owner, "update",
                      A.Update(wkey, shard.box, True, 0, len(self.shards)), tested)
                for j, shard in enumerate(self.shards)]

    def all_gather(self, updates: list[TaskKey]) -> None:
        """Each shard's new values, from its owner to every other holder."""
        for j, (shard, update) in enumerate(zip(self.shards, updates)):
            for r in self._others(shard):
                send = self.w.add(self.key("sendweight", j, r), shard.owner, "update",
                                  A.SendWeight(self.wkey, r, shard.box), [update])
                self.w.add(self.key("receive", j, r), r, "update", A.Receive(), [send])


def _parts_on(parts, device: int) -> tuple[int, ...]:
    """The partitions of a layer (`parts`, in partition order) that run on `device`."""
    return tuple(p for p, part in enumerate(parts) if part.device == device)


def assemble(segment: Segment, seen_loads: set[TaskKey]):
    """The segment's tasks minus loads an earlier segment already made (updates `seen_loads`)."""
    if not segment.loads or segment.loads.isdisjoint(seen_loads):
        seen_loads |= segment.loads
        return segment.tasks
    tasks = [t for t in segment.tasks if t.key not in seen_loads]
    seen_loads |= segment.loads
    return tasks


def overlapping(pieces, box: Box) -> list[tuple[Box, int, TaskKey]]:
    """(intersection with `box`, device, key) of each piece that intersects it."""
    found = []
    for piece_box, piece_device, key in pieces:
        inter = piece_box.overlap(box)
        if inter is not None:
            found.append((inter, piece_device, key))
    return found


def _replicas_share(found, config: ParallelConfig, p: int) -> list:
    """Of the gradient pieces `found` for replica p's output box, those it takes: the pieces
    made on its device, and for a box's first replica those made where the box has no
    replica. Each piece is then summed into one replica's backward, so the replicas' input
    and weight gradients are partial sums that add up to the whole (the backward is linear
    in the output's gradient)."""
    r = config.replicas
    held = config.devices[p - p % r:p - p % r + r]
    mine = config.devices[p]
    return [piece for piece in found
            if piece[1] == mine or (p % r == 0 and piece[1] not in held)]


def _gather(w: _Writer, overlaps, tensor, box, device, phase, grad):
    """Dependencies that bring the pieces of `tensor` intersecting `box` (`overlaps`, from
    `overlapping`) to `device`.

    Values are sent piece by piece. Gradient pieces are partial sums, so each remote device
    sends once: the sum of all its pieces over the bounding box of their intersections
    (sending per piece would send that sum once per piece)."""
    deps = []
    remote: dict[int, list[tuple[Box, TaskKey]]] = {}
    for inter, piece_device, key in overlaps:
        if piece_device == device:
            deps.append(key)
        elif grad:
            remote.setdefault(piece_device, []).append((inter, key))
        else:
            deps.append(w.send(key, piece_device, A.Send(tensor, inter, device, False), phase,
                               [key]))
    for source, found in remote.items():
        bounds = found[0][0] if len(found) == 1 else Box.hull([b for b, _ in found])
        deps.append(w.send(found[0][1], source, A.Send(tensor, bounds, device, True), phase,
                           [k for _, k in found]))
    return deps


def _partials(w: _Writer, layer, phase: str, group: tuple[int, ...], device: int,
              parts) -> list[TaskKey]:
    """Dependencies that bring every partial of `group` to `device`: with collectives, where
    the group's partitions are on devices of their own, one collective of the group (its
    launches and its awaits made once, `_gathered`); else a message from each other partition."""
    members = tuple(parts[q].device for q in group)
    if w.checks.collectives and len(set(members)) == len(members) > 1:
        return [_gathered(w, layer, phase, group, members)[device]]
    deps = []
    for q in group:
        source = parts[q].device
        key = TaskKey(layer.name, phase, q, f"{phase[0]}partial")
        send = TaskKey(layer.name, phase, (q, device), "partialsend")
        if source == device:
            deps.append(key)
        elif send in w.partial_sends:  # another part on `device` asked for it already
            deps.append(send)
        else:
            w.partial_sends.add(send)
            deps.append(w.add(send, source, phase, A.SendPartial(layer.index, phase, q, device),
                              [key]))
    return deps


def _gathered(w: _Writer, layer, phase: str, group: tuple[int, ...],
              members: tuple[int, ...]) -> dict[int, TaskKey]:
    """The awaits, by device, of the collective of `group`'s partials (a sum where the
    operator adds them, else an all-gather): each member launches it after making its partial
    and awaits it after every member's launch."""
    found = w.gathers.get((phase, group))
    if found is not None:
        return found
    kind, summed = f"{phase[0]}partial", layer.op.adds_partials(phase)
    launches = [w.add(TaskKey(layer.name, phase, (q, "g"), "gather"), device, phase,
                      A.SharePartial(layer.index, phase, q, group, members, summed),
                      [TaskKey(layer.name, phase, q, kind)])
                for q, device in zip(group, members)]
    found = w.gathers[(phase, group)] = {
        device: w.add(TaskKey(layer.name, phase, (q, "a"), "gathered"), device, phase,
                      A.AwaitPartials(layer.index, phase, group, members, summed), launches)
        for q, device in zip(group, members)}
    return found


def _contracted(contraction, r: int, c: int, in_boxes: tuple[Box, ...],
                weight_keys: tuple[WeightKey, ...]) -> tuple[tuple, tuple]:
    """The input boxes and weight keys of the `r`-th of `c` partitions of an output box under a
    contraction split: the r-th of c equal slices of each box along the summed dim (a dense
    layer's features; an attention's heads, whose dims hold several numbers a head), and no
    `first_only` weight but for r = 0."""
    def cut(box: Box, dim: int) -> Box:
        start, stop = box.bounds[dim]
        step = (stop - start) // c
        return box.replace(dim, start + r * step, start + (r + 1) * step)
    ins = list(in_boxes)
    for i, dim in contraction.inputs:
        ins[i] = cut(ins[i], dim)
    dims = dict(contraction.weights)
    keys = [(owner, k, cut(box, dims[k]) if k in dims else box)
            for owner, k, box in weight_keys if not (r and k in contraction.first_only)]
    return tuple(ins), tuple(keys)


def reduction_groups(reduction_dims, degrees) -> list[tuple[int, ...]]:
    """For each partition, the partitions it must combine partials with: those at the same grid
    position on every dim but the split reduction dims (empty when no reduction dim is split)."""
    split = [d % len(degrees) for d in reduction_dims if degrees[d % len(degrees)] > 1]
    coords = list(product(*(range(d) for d in degrees)))
    if not split:
        return [()] * len(coords)

    def key(c):
        return tuple(0 if d in split else v for d, v in enumerate(c))
    return [tuple(q for q, other in enumerate(coords) if key(other) == key(c)) for c in coords]


def check_training_output(graph: Graph, strategy: Strategy, objective: Objective) -> None:
    """The loss and metrics read the model output whole per sample: only its batch may split."""
    last = graph.layers[graph.tensors[objective.output].producer[0]]
    if strategy[last.name].copies > 1:
        raise StrategyError(f"layer '{last.name}' produces the model output, which the loss "
                            f"reads once per sample: it may not split the features it sums "
                            f"over or run replicated (contraction "
                            f"{strategy[last.name].contraction}, replicas "
                            f"{strategy[last.name].replicas})")
    if any(d > 1 for d in strategy[last.name].degrees[1:]):
        raise StrategyError(f"layer '{last.name}' produces the model output, which the loss "
                            f"and metrics read whole per sample: it may only be split along "
                            f"the batch dim, got degrees {strategy[last.name].degrees}")


def build_task_graph(graph: Graph, strategy: Strategy, num_devices: int,
                     objective: Objective | None = None, checks: Checks = Checks()) -> TaskGraph:
    """The training (or, without an objective, inference) task graph of one iteration."""
    validate(graph, strategy, num_devices)
    if objective is not None:
        check_training_output(graph, strategy, objective)
    return TaskGraphBuilder(graph, objective, checks).build(strategy)

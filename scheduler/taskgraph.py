"""From (graph, strategy, objective) to device-pinned tasks.

Every task is data only: a key (`<layer>-<phase>-<part>`, so Dask's task stream reads as a
per-op profile), the device it runs on, its phase, the keys it depends on, and an action from
`scheduler.actions`. Data movement is derived from boxes alone: a consumer partition needs
`op.input_box(out_box)`; every producer partition whose box intersects it either sits on the same
device (a plain dependency) or sends the intersection (a Send task on the producer's device).
Backward mirrors this with gradient pieces, and each weight's replicas send their gradients to
the first replica (its owner), which updates and sends the new values back.

The simulator and the executor both consume this one graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from ..ops.box import Box
from ..ops.graph import Graph
from . import actions as A
from .store import WeightKey
from .strategy import Strategy, StrategyError, validate

PHASES = ("forward", "loss", "backward", "update")


@dataclass(frozen=True)
class Objective:
    """What training optimizes: the output tensor, its label tensor, and whether the last layer
    is a softmax whose gradient the loss computes directly (cross-entropy on probabilities)."""

    output: int
    label: int
    through_softmax: bool


@dataclass(frozen=True)
class Task:
    key: str
    device: int
    phase: str
    action: A.Action
    deps: tuple[str, ...] = ()


@dataclass
class TaskGraph:
    tasks: list[Task] = field(default_factory=list)  # in a topological order
    weight_devices: dict[WeightKey, list[int]] = field(default_factory=dict)  # owner first

    def by_key(self) -> dict[str, Task]:
        return {t.key: t for t in self.tasks}

    def phase(self, *phases: str) -> list[Task]:
        return [t for t in self.tasks if t.phase in phases]


class _Builder:
    def __init__(self, graph: Graph, strategy: Strategy, objective: Objective | None):
        self.graph = graph
        self.strategy = strategy
        self.objective = objective
        self.tg = TaskGraph()
        self.values: dict[int, list[tuple[Box, int, str]]] = {}  # tensor -> (box, device, key)
        self.grads: dict[int, list[tuple[Box, int, str]]] = {}
        self.loads: dict[tuple[int, Box, int], str] = {}
        self.weight_tasks: dict[WeightKey, dict[int, list[str]]] = {}  # device -> backward keys
        self.parts: dict[int, list[tuple[A.Forward, int, str]]] = {}  # layer -> parts
        self.sends = 0
        self.keys: set[str] = set()

    def add(self, key: str, device: int, phase: str, action: A.Action, deps=()) -> str:
        if key in self.keys:
            raise AssertionError(f"task key {key!r} is not unique")
        self.keys.add(key)
        self.tg.tasks.append(Task(key, device, phase, action, tuple(dict.fromkeys(deps))))
        return key

    # ---- forward ----------------------------------------------------------------------------
    def need_value(self, tensor: int, box: Box, device: int, phase: str = "forward") -> list[str]:
        """Keys of the tasks that put `box` of `tensor` on `device`."""
        spec = self.graph.tensors[tensor]
        if spec.producer is None:  # fed from outside, or a constant: made where it is needed
            cache = (tensor, box, device)
            if cache not in self.loads:
                action = A.Load(tensor, box) if spec.constant is None else A.Fill(
                    tensor, box, spec.constant)
                self.loads[cache] = self.add(f"input{tensor}-load-{len(self.loads)}", device,
                                             phase, action)
            return [self.loads[cache]]
        return self._gather(self.values[tensor], tensor, box, device, "forward", grad=False)

    def _gather(self, pieces, tensor, box, device, phase, grad):
        """Dependencies that bring the pieces of `tensor` intersecting `box` to `device`.

        Values are sent piece by piece. Gradient pieces are partial sums, so each remote device
        sends once: the sum of all its pieces over the bounding box of their intersections
        (sending per piece would send that sum once per piece)."""
        deps = []
        remote: dict[int, list[tuple[Box, str]]] = {}
        for piece_box, piece_device, key in pieces:
            inter = piece_box.intersect(box)
            if inter.is_empty():
                continue
            if piece_device == device:
                deps.append(key)
            elif grad:
                remote.setdefault(piece_device, []).append((inter, key))
            else:
                deps.append(self._send(key, piece_device, A.Send(tensor, inter, device, False),
                                       phase, [key]))
        for source, found in remote.items():
            bounds = Box(tuple((min(b.bounds[d][0] for b, _ in found),
                                max(b.bounds[d][1] for b, _ in found))
                               for d in range(box.ndim)))
            deps.append(self._send(found[0][1], source, A.Send(tensor, bounds, device, True),
                                   phase, [k for _, k in found]))
        return deps

    def _send(self, producer_key: str, source: int, action: A.Send, phase: str, deps) -> str:
        self.sends += 1
        name = producer_key.rsplit("-", 2)[0]
        kind = "sendgrad" if action.grad else "send"
        return self.add(f"{name}-{kind}-{self.sends}", source, phase, action, deps)

    def forward(self):
        for layer in self.graph.layers:
            config = self.strategy[layer.name]
            in_specs = self.graph.in_specs(layer)
            out_shapes = [self.graph.tensors[t].spec.shape for t in layer.outputs]
            groups = reduction_groups(layer.op.reduction_dims, config.degrees)
            pending = []
            for p, (box, device) in enumerate(zip(config.boxes(out_shapes[0]), config.devices)):
                out_boxes = tuple(
                    Box(tuple(b if n == out_shapes[0][d] else (0, n)
                              for d, (b, n) in enumerate(zip(box.bounds, shape))))
                    for shape in out_shapes)
                in_boxes = tuple(layer.op.input_box(box, in_specs, i).clip(s.shape)
                                 for i, s in enumerate(in_specs))
                weight_keys = tuple((layer.weight_owner, k, layer.op.weight_box(box, in_specs, k))
                                    for k in range(len(layer.weights)))
                deps = []
                for tensor, in_box in zip(layer.inputs, in_boxes):
                    deps += self.need_value(tensor, in_box, device)
                for wkey in weight_keys:
                    devices = self.tg.weight_devices.setdefault(wkey, [])
                    if device not in devices:
                        devices.append(device)
                action = A.Forward(layer.index, p, out_boxes, in_boxes, weight_keys, groups[p])
                if groups[p]:
                    self.add(f"{layer.name}-fpartial-{p}", device, "forward",
                             A.ForwardPartial(action), deps)
                pending.append((action, device, deps))
            for p, (action, device, deps) in enumerate(pending):
                deps += self._partials(layer, "forward", action.group, device, pending)
                key = self.add(f"{layer.name}-forward-{p}", device, "forward", action, deps)
                self.parts.setdefault(layer.index, []).append((action, device, key))
                for tensor, out_box in zip(layer.outputs, action.out_boxes):
                    self.values.setdefault(tensor, []).append((out_box, device, key))

    def _partials(self, layer, phase: str, group: tuple[int, ...], device: int, parts) -> list:
        """Dependencies that bring every partial of `group` to `device`."""
        deps = []
        for q in group:
            source = parts[q][1]
            key = f"{layer.name}-{phase[0]}partial-{q}"
            if source == device:
                deps.append(key)
            else:
                deps.append(self.add(f"{layer.name}-{phase[0]}partial{q}-send-{device}", source,
                                     phase, A.SendPartial(layer.index, phase, q, device), [key]))
        return deps

    # ---- loss and backward ----------------------------------------------------------------------
    def loss(self):
        objective = self.objective
        producer = self.graph.tensors[objective.output].producer[0]
        last = self.graph.layers[producer]
        grad_tensor = last.inputs[0] if objective.through_softmax else objective.output
        for p, (box, device, key) in enumerate(self.values[objective.output]):
            deps = [key] + self.need_value(objective.label, self._label_box(box), device, "loss")
            loss_key = self.add(f"{last.name}-loss-{p}", device, "loss",
                                A.Loss(objective.output, box, objective.label,
                                       self._label_box(box), grad_tensor), deps)
            self.grads.setdefault(grad_tensor, []).append((box, device, loss_key))

    def _label_box(self, box: Box) -> Box:
        label_shape = self.graph.tensors[self.objective.label].spec.shape
        return Box(tuple(b if n == m else (0, m) for b, n, m in zip(
            box.bounds, self.graph.tensors[self.objective.output].spec.shape, label_shape)))

    def backward(self):
        skip = None
        if self.objective is not None and self.objective.through_softmax:
            skip = self.graph.tensors[self.objective.output].producer[0]
        for layer in reversed(self.graph.layers):
            if layer.index == skip:
                continue
            parts = self.parts[layer.index]
            grad_deps = []
            for p, (fwd, device, _) in enumerate(parts):
                deps = []
                for tensor, box in zip(layer.outputs, fwd.out_boxes):
                    deps += self._gather(self.grads.get(tensor, []), tensor, box, device,
                                         "backward", grad=True)
                grad_deps.append(deps)
                if fwd.group:
                    self.add(f"{layer.name}-bpartial-{p}", device, "backward",
                             A.BackwardPartial(layer.index, p), deps)
            for p, (fwd, device, _) in enumerate(parts):
                deps = grad_deps[p] + self._partials(layer, "backward", fwd.group, device, parts)
                key = self.add(f"{layer.name}-backward-{p}", device, "backward",
                               A.Backward(layer.index, p, fwd.group), deps)
                for tensor, box in zip(layer.inputs, fwd.in_boxes):
                    spec = self.graph.tensors[tensor]
                    if spec.producer is not None and spec.spec.dtype.startswith("float"):
                        self.grads.setdefault(tensor, []).append((box, device, key))
                for wkey in fwd.weight_keys:
                    self.weight_tasks.setdefault(wkey, {}).setdefault(device, []).append(key)

    def update(self):
        boxes_seen: dict[tuple[int, int], int] = {}
        for wkey, devices in self.tg.weight_devices.items():
            layer = self.graph.layers[wkey[0]]
            if layer.weights[wkey[1]].role in A.BUFFER_ROLES:
                continue
            owner, replicas = devices[0], devices[1:]
            backward = self.weight_tasks.get(wkey, {})
            box_index = boxes_seen[wkey[:2]] = boxes_seen.get(wkey[:2], -1) + 1
            name = f"{layer.name}-w{wkey[1]}b{box_index}"
            deps = list(backward.get(owner, []))
            for r in replicas:
                deps.append(self.add(f"{name}-sendgrad-{r}", r, "update",
                                     A.SendWeightGrad(wkey, owner), backward.get(r, [])))
            update = self.add(f"{name}-update", owner, "update", A.Update(wkey), deps)
            for r in replicas:
                send = self.add(f"{name}-sendweight-{r}", owner, "update", A.SendWeight(wkey, r),
                                [update])
                self.add(f"{name}-receive-{r}", r, "update", A.Receive(), [send])


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


def build_task_graph(graph: Graph, strategy: Strategy, num_devices: int,
                     objective: Objective | None = None) -> TaskGraph:
    """The training (or, without an objective, inference) task graph of one iteration."""
    validate(graph, strategy, num_devices)
    if objective is not None:
        last = graph.layers[graph.tensors[objective.output].producer[0]]
        if any(d > 1 for d in strategy[last.name].degrees[1:]):
            raise StrategyError(f"layer '{last.name}' produces the model output, which the loss "
                                f"and metrics read whole per sample: it may only be split along "
                                f"the batch dim, got degrees {strategy[last.name].degrees}")
    builder = _Builder(graph, strategy, objective)
    builder.forward()
    if objective is not None:
        builder.loss()
        builder.backward()
        builder.update()
    return builder.tg

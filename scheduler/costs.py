"""What a task costs: the kernel calls it makes and the bytes it hands to other devices.

A `KernelCall` is keyed by what runs (the operator with its attributes, the loss, the optimizer)
and the shapes it runs on, so every partition of one shape shares one measurement, and carries
what calibration needs to rebuild the call on a worker (`probe`) and the FLOPs and bytes of the
analytic estimate. Data movement inside a device (loads, reads for a send) is charged at the
device's memory bandwidth; bytes between devices are the simulator's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..ops.graph import Graph
from . import actions as A
from .machine import MachineModel
from .shards import shards


MEMO_LIMIT = 200_000  # kernel calls remembered (a full rebuild makes new partitions each time)
VERDICT_BYTES = 1  # a shard's finiteness (`actions.CheckShard`)


@dataclass(frozen=True)
class KernelCall:
    key: str          # cost-table key: phase | subject | shapes
    phase: str        # forward, backward, forward_partial, backward_partial, loss, update
    subject: Any      # the Operator, loss function or optimizer that runs
    probe: tuple      # what calibration needs to rebuild the call
    flops: float      # analytic estimate
    nbytes: float     # analytic estimate


@dataclass(frozen=True)
class TaskCost:
    ms: float               # time on its device, action overhead included
    sent: float = 0.0       # bytes it sends each of the devices `to`
    to: tuple[int, ...] = ()


def describe(subject: Any) -> str:
    """A stable text for a cost key: dataclass reprs, minus references to the model."""
    own = type(subject).__dict__.get("__getstate__")  # the class says what it pickles
    if own is not None:
        fields = own(subject)
        items = ", ".join(f"{k}={fields[k]!r}" for k in sorted(fields))
        return f"{type(subject).__name__}({items})"
    return repr(subject)


def _nbytes(shape, dtype: str) -> int:
    size = 1
    for n in shape:
        size *= n
    return size * (1 if dtype == "bool" else int(dtype[-2:]) // 8)


class KernelCalls:
    """Builds (and memoises) the kernel calls of forward/backward partitions, losses and
    optimizer updates for one model."""

    def __init__(self, graph: Graph, loss=None, optimizer=None):
        self.graph = graph
        self.loss = loss
        self.optimizer = optimizer
        self._loss_text = describe(loss) if loss is not None else "loss"
        self._optimizer_text = describe(optimizer) if optimizer is not None else "update"
        self._memo: dict[tuple, Any] = {}
        self._flops: dict[int, tuple[int, int]] = {}

    def op_call(self, forward: A.Forward, phase: str) -> KernelCall:
        memo = (id(forward), phase)  # the entry keeps `forward` alive, so its id stays unique
        found = self._memo.get(memo)
        if found is None:
            if len(self._memo) > MEMO_LIMIT:
                self._memo.clear()
            found = self._memo[memo] = (self._op_call(forward, phase), forward)
        return found[0]

    def _op_call(self, forward: A.Forward, phase: str) -> KernelCall:
        layer = self.graph.layers[forward.layer]
        tensors = self.graph.tensors
        in_specs = [tensors[t].spec for t in layer.inputs]
        in_dtypes = tuple(s.dtype for s in in_specs)
        out_shapes = tuple(b.shape for b in forward.out_boxes)
        in_shapes = tuple(b.shape for b in forward.in_boxes)
        weight_shapes = tuple(k[2].shape for k in forward.weight_keys)
        grads = tuple(tensors[t].producer is not None for t in layer.inputs)
        group = len(forward.backward_group if phase.startswith("backward") else forward.group)
        shapes = (out_shapes, in_shapes, in_dtypes, weight_shapes, group,
                  grads if phase.startswith("backward") else ())
        key = f"{phase}|{describe(layer.op)}|{shapes}"
        probe = (forward.out_boxes, forward.in_boxes, tuple(s.shape for s in in_specs),
                 in_dtypes, weight_shapes, group, grads)
        flops, full = self._layer_flops(layer.index)
        # (under a contraction split each of a box's partitions does its share of the box's
        # work in its partial, and its forward only finishes the sum: the activation)
        fraction = forward.out_boxes[0].volume / full / forward.contraction
        nbytes = (sum(_nbytes(b.shape, d) for b, d in zip(forward.in_boxes, in_dtypes))
                  + sum(_nbytes(s, "float32") for s in out_shapes + weight_shapes))
        if phase == "forward" and forward.contraction > 1:
            work = float(forward.out_boxes[0].volume)
            nbytes = 2 * sum(_nbytes(s, "float32") for s in out_shapes)
        elif phase == "forward" or (phase == "forward_partial" and forward.contraction > 1):
            work = flops * fraction
        elif phase == "backward":
            work, nbytes = 2 * flops * fraction, 2 * nbytes
        else:  # a statistic over the partition's input
            work, nbytes = 0.0, sum(_nbytes(b.shape, d) for b, d in
                                    zip(forward.in_boxes, in_dtypes))
        return KernelCall(key, phase, layer.op, probe, work, nbytes)

    def _layer_flops(self, index: int) -> tuple[int, int]:
        if index not in self._flops:
            layer = self.graph.layers[index]
            out = self.graph.tensors[layer.outputs[0]].spec
            self._flops[index] = (layer.op.flops(self.graph.in_specs(layer)), out.size)
        return self._flops[index]

    def loss_call(self, loss: A.Loss) -> KernelCall:
        memo = ("loss", loss.box.shape, loss.label_box.shape)
        call = self._memo.get(memo)
        if call is None:
            label_dtype = self.graph.tensors[loss.label].spec.dtype
            shapes = (loss.box.shape, loss.label_box.shape, label_dtype)
            nbytes = 3 * _nbytes(loss.box.shape, "float32")
            call = self._memo[memo] = KernelCall(f"loss|{self._loss_text}|{shapes}", "loss",
                                                 self.loss, shapes, nbytes / 4, nbytes)
        return call

    def update_call(self, shape: tuple[int, ...]) -> KernelCall:
        memo = ("update", shape)
        call = self._memo.get(memo)
        if call is None:
            nbytes = 5 * _nbytes(shape, "float32")  # read weight, grad, state; write two
            call = self._memo[memo] = KernelCall(f"update|{self._optimizer_text}|{shape}",
                                                 "update", self.optimizer, (shape,),
                                                 nbytes / 4, nbytes)
        return call

    def check_call(self, shape: tuple[int, ...]) -> KernelCall:
        """The test of a gradient for NaN and Inf before it is applied (`Update.check_finite`):
        one more pass over the gradient."""
        memo = ("check", shape)
        call = self._memo.get(memo)
        if call is None:
            nbytes = _nbytes(shape, "float32")
            call = self._memo[memo] = KernelCall(f"check|isfinite|{shape}", "check", None,
                                                 (shape,), nbytes / 4, nbytes)
        return call

    def sum_call(self, shape: tuple[int, ...]) -> KernelCall:
        """Adding a gradient piece another holder sent in to a shard owner's (`Update.run`,
        `CheckShard.run`): a new array."""
        memo = ("sum", shape)
        call = self._memo.get(memo)
        if call is None:
            nbytes = 3 * _nbytes(shape, "float32")  # read two arrays, write one
            call = self._memo[memo] = KernelCall(f"sum|add|{shape}", "sum", None, (shape,),
                                                 nbytes / 12, nbytes)
        return call

    def update_calls(self, action: A.Update) -> list[KernelCall]:
        shape = action.shard.shape
        if action.check_finite and not action.verdicts:  # tests the gradient itself
            return [self.update_call(shape), self.check_call(shape)]
        return [self.update_call(shape)]

    def of_task(self, action: A.Action, forward_of: Callable[[int, int], A.Forward]
                ) -> list[KernelCall]:
        """The kernel calls an action makes (none for pure data movement)."""
        if isinstance(action, A.Forward):
            return [self.op_call(action, "forward")]
        if isinstance(action, A.ForwardPartial):
            return [self.op_call(action.forward, "forward_partial")]
        if isinstance(action, A.Backward) or isinstance(action, A.BackwardPartial):
            return self._backward_calls(action, forward_of(action.layer, action.part))
        if isinstance(action, A.Loss):
            return [self.loss_call(action)]
        if isinstance(action, A.Update):
            return self.update_calls(action)
        if isinstance(action, A.CheckShard):
            return [self.check_call(action.shard.shape)]
        return []


    def _backward_calls(self, action: A.Action, forward: A.Forward) -> list[KernelCall]:
        """A backward's or backward partial's call, after its forward's where it runs that again
        (a recomputed layer's first backward action: the partial where there is one)."""
        partial = isinstance(action, A.BackwardPartial)
        calls = [self.op_call(forward, "backward_partial" if partial else "backward")]
        if forward.recompute and partial == bool(forward.backward_group):
            calls.insert(0, self.op_call(forward, "forward"))
        return calls


class TaskCoster:
    """Costs of tasks on a machine (kernel calls memoised in `KernelCalls`)."""

    def __init__(self, calls: KernelCalls, machine: MachineModel):
        self.calls = calls
        self.machine = machine
        graph = calls.graph
        self._itemsize = [t.spec.itemsize for t in graph.tensors]

    def cost(self, task, forward_of: Callable[[int, int], A.Forward]) -> TaskCost:
        machine, action, device = self.machine, task.action, task.device
        kind = type(action)
        ms = machine.overheads.action
        for call in self.calls.of_task(action, forward_of):
            ms += machine.kernel_time(device, call.key, call.flops, call.nbytes)
        if kind is A.Send:
            nbytes = action.box.volume * self._itemsize[action.tensor]
            return TaskCost(ms + machine.copy_time(device, nbytes), nbytes, (action.dst,))
        if kind is A.Load or kind is A.Fill:
            nbytes = action.box.volume * self._itemsize[action.tensor]
            return TaskCost(ms + machine.copy_time(device, nbytes))
        if kind is A.SendPartial or kind is A.SharePartial:  # (shared: its bytes, no message)
            call = self.calls.op_call(forward_of(action.layer, action.part),
                                      f"{action.phase}_partial")
            nbytes = machine.partial_bytes.get(call.key, partial_estimate(call))
            return TaskCost(ms, nbytes, (action.dst,) if kind is A.SendPartial else ())
        if kind is A.SendWeightGrad or kind is A.SendWeight or kind is A.SendShard:
            return TaskCost(ms, action.shard.volume * 4, (action.dst,))
        if kind is A.ShareShard:  # its shard copied into a padded flat array, whose bytes it
            #                       shares (no message)
            nbytes = 4 * action.padded_volume
            return TaskCost(ms + machine.copy_time(device, nbytes), nbytes)
        if kind is A.GatherWeight:  # its own shard (or every one) copied into the whole box
            return TaskCost(ms + machine.copy_time(device, action.key[2].volume * 4))
        if kind is A.AllReduce:  # its gradients copied into one bucket, whose bytes it sums
            nbytes = 4 * sum(k[2].volume for k in action.keys)
            return TaskCost(ms + machine.copy_time(device, nbytes), nbytes)
        if (kind is A.Update or kind is A.CheckShard) and action.incoming:
            call = self.calls.sum_call(action.shard.shape)  # adds the pieces sent in first
            ms += action.incoming * machine.kernel_time(device, call.key, call.flops, call.nbytes)
        if kind is A.CheckShard:  # its verdict, to the owners of the box's other shards
            return TaskCost(ms, VERDICT_BYTES, action.peers)
        return TaskCost(ms)


def partial_estimate(call: KernelCall) -> int:
    """Bytes of a reduction partial when calibration did not record them: per-channel or
    per-row statistics, a few float64 numbers per output element outside the reduced dims; a
    contraction split's share of the output (no reduced dim), float32 of the output box."""
    out_box = call.probe[0][0]
    reduced = getattr(call.subject, "reduction_dims", ())
    if not reduced:
        return 4 * out_box.volume
    kept = 1
    for d, n in enumerate(out_box.shape):
        if d not in [r % len(out_box.shape) for r in reduced]:
            kept *= n
    return 3 * 8 * kept


def calls_for(calls: KernelCalls, builder, configs: dict[int, list], objective=None
              ) -> list[KernelCall]:
    """Every kernel call the given per-layer configurations can make (what the search may
    score): forward, backward and partials of each partition, the loss under each
    configuration of the output's producer, and the update of each shard of each weight box
    (with the test of its gradient when the builder's graphs check them, and the sum of a
    gradient piece another holder sends in)."""
    graph = calls.graph
    found: dict[str, KernelCall] = {}
    last = graph.tensors[objective.output].producer[0] if objective is not None else None
    for index, layer_configs in configs.items():
        layer = graph.layers[index]
        for config in layer_configs:
            parts = builder.parts(index, config)
            for part in parts:
                forward = part.action
                phases = ["forward"] + (["backward"] if objective is not None else [])
                if forward.group:
                    phases.append("forward_partial")
                if forward.backward_group and objective is not None:
                    phases.append("backward_partial")
                for phase in phases:
                    call = calls.op_call(forward, phase)
                    found.setdefault(call.key, call)
                if objective is None:
                    continue
                if index == last:
                    box = forward.out_boxes[graph.layers[index].outputs.index(
                        objective.output)]
                    loss = A.Loss(objective.output, box, objective.label,
                                  builder.label_box(box), builder.grad_tensor)
                    call = calls.loss_call(loss)
                    found.setdefault(call.key, call)
            if objective is not None:
                for call in _update_calls(calls, builder, layer, parts):
                    found.setdefault(call.key, call)
    return list(found.values())


def _update_calls(calls: KernelCalls, builder, layer, parts) -> list[KernelCall]:
    """The update, gradient sum (and test, when the builder's graphs check gradients) of each
    shard of each trainable weight box the partitions use, cut over the devices using it (a
    box the builder's graphs all-reduce is one shard)."""
    holders: dict = {}
    for part in parts:
        for wkey in part.action.weight_keys:
            devices = holders.setdefault(wkey, [])
            if layer.weights[wkey[1]].trainable and part.device not in devices:
                devices.append(part.device)
    found = []
    for wkey, devices in holders.items():
        whole = builder.checks.collectives and len(devices) > 1  # all-reduced, updated whole
        for box in ([wkey[2]] if whole else [s.box for s in shards(wkey[2], devices)]
                    if devices else ()):
            found += [calls.update_call(box.shape), calls.sum_call(box.shape)]
            if builder.checks.finite_gradients:
                found.append(calls.check_call(box.shape))
    return found

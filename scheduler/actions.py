"""What a task does on its device. Actions are plain frozen data; `run(store, ctx, out)` does the
work against the device's `DeviceStore`, with `ctx` (a `Context`) holding the model and this
iteration's inputs, and `out` collecting what must leave the device: data for other devices
(`out[device]`) and metric sums for the client (`out["metrics"]`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import numpy as np

from ..ops import losses
from ..ops.base import Part, split_partial
from ..ops.box import Box
from ..ops.finite import all_finite, nonfinite_flag
from ..ops.graph import Graph
from ..ops.optimizers import UpdateRule
from . import collectives
from . import gathered
from . import messages as M
from .device_values import NONFINITE_GRADIENT, Verdict
from .feeds import Piece
from .shards import shards
from .store import DeviceStore, WeightKey

@dataclass(frozen=True)
class IterationState:
    """What one run of the task graph reads besides the model. A value, made for each run and
    handed to the executor with it, so that no run sees another's batch or counters and a run
    can be made again exactly as it was (flexflow/recovery.py plays runs again)."""

    feeds: Mapping[int, Any] = field(default_factory=dict)  # tensor id -> host array of the batch
    step: int = 0        # iterations run, seeds dropout
    updates: int = 0     # optimizer steps taken (Adam's bias correction)
    training: bool = True
    optimizer: UpdateRule | None = None


@dataclass(frozen=True)
class Context:
    """What every task of a run reads: the model, fixed when the executor is made, and the
    run's `IterationState` (`at`)."""

    graph: Graph
    loss: losses.Loss | None = None
    iteration: IterationState = IterationState()
    # fed tensor -> the check of its host pieces, made as they are loaded (fed_checks.py)
    fed_checks: Mapping[int, Callable[[Any], None]] = field(default_factory=dict)

    def at(self, iteration: IterationState) -> "Context":
        return replace(self, iteration=iteration)


class Action:
    def run(self, store: DeviceStore, ctx: Context, out: dict) -> None:
        raise NotImplementedError


def _emit(out: dict, device: int, message: M.Message) -> None:
    out.setdefault(device, []).append(message)


@dataclass(frozen=True)
class Load(Action):
    """Slice this device's box of a fed tensor (an input batch or the label) out of the batch."""

    tensor: int
    box: Box

    def run(self, store, ctx, out):
        host = ctx.iteration.feeds[self.tensor]  # the batch, or this device's piece of it
        part = (host.cut(self.box) if isinstance(host, Piece)
                else host[self.box.relative_to(Box.full(host.shape))])
        check = ctx.fed_checks.get(self.tensor)
        if check is not None and isinstance(part, np.ndarray):  # (a replayed graph's inputs
            check(part)                                          # were checked as uploaded)
        store.put(self.tensor, self.box, store.xp.asarray(part))


@dataclass(frozen=True)
class Fill(Action):
    """A constant tensor's box, made on the device that reads it."""

    tensor: int
    box: Box
    value: float

    def run(self, store, ctx, out):
        dtype = ctx.graph.tensors[self.tensor].spec.dtype
        store.put(self.tensor, self.box, store.xp.full(self.box.shape, self.value, dtype))


def _combined(store, op, layer: int, phase: str, group: tuple[int, ...]):
    """The partials of a reduction group merged in partition order (or as a collective summed
    them: `AwaitPartials`)."""
    summed = store.partials.get((layer, phase, group))
    if summed is not None:
        return summed
    return op.combine(store.xp, [store.partials[(layer, phase, q)] for q in group], phase)


RECOMPUTE = "recompute in backward"  # what a recomputed forward keeps in place of its saved
MADE = "made"  # the phase under which what a partial made (`ops.base.MadePartial`) waits


@dataclass(frozen=True)
class Forward(Action):
    """One partition of a layer's forward: reads its input boxes and weights, writes its output
    boxes and keeps what its backward needs."""

    layer: int
    part: int
    out_boxes: tuple[Box, ...]
    in_boxes: tuple[Box, ...]
    weight_keys: tuple[WeightKey, ...]
    group: tuple[int, ...] = ()  # partitions whose partials this one combines
    recompute: bool = False  # keep nothing for backward, which runs this forward again
    contraction: int = 1  # partitions sharing its output box (`ParallelConfig.contraction`)

    @property
    def backward_group(self) -> tuple[int, ...]:
        """The partitions whose backward partials this one's backward combines: none under a
        contraction split, whose backward reads the output's gradient alone."""
        return () if self.contraction > 1 else self.group

    def operands(self, store, ctx):
        layer = ctx.graph.layers[self.layer]
        xs = [store.read(t, b) for t, b in zip(layer.inputs, self.in_boxes)]
        ws = [store.weights[k] for k in self.weight_keys]
        part = Part(self.out_boxes, self.in_boxes,
                    tuple(ctx.graph.tensors[t].spec.shape for t in layer.inputs),
                    ctx.iteration.training, seed=ctx.iteration.step * 7919 + layer.index,
                    input_grads=tuple(ctx.graph.tensors[t].producer is not None
                                      for t in layer.inputs),
                    fed=tuple(t in ctx.fed_checks for t in layer.inputs),
                    share=self.part % self.contraction)
        return layer, xs, ws, part

    def run(self, store, ctx, out):
        layer, xs, ws, part = self.operands(store, ctx)
        if self.group:
            part = replace(part, reduced=_combined(store, layer.op, self.layer, "forward",
                                                   self.group),
                           made=store.partials.pop((self.layer, MADE, self.part), None))
        ys, saved = layer.op.forward(store.xp, xs, ws, part)
        for tensor, box, y in zip(layer.outputs, self.out_boxes, ys):
            store.put(tensor, box, y)
        # (a recomputed forward keeps its Part: the same seed and combined statistics again;
        # a contraction split's sum, the size of the output, only where it runs again; what
        # its partial made is in `saved` or, recomputed, made again)
        if self.contraction > 1 and not self.recompute:
            part = replace(part, reduced=None)
        part = replace(part, made=None)
        store.saved[(self.layer, self.part)] = (RECOMPUTE if self.recompute else saved, part,
                                                self)

    def recomputed(self, store, ctx, part: Part):
        """What this forward keeps for backward, made again from its inputs (still held: the
        backward reads them, `last_use.reads`) with its first run's `part`; the buffers it
        updates in place (batch norm's running statistics) are copies, so they move once."""
        layer = ctx.graph.layers[self.layer]
        xs = [store.read(t, b) for t, b in zip(layer.inputs, self.in_boxes)]
        ws = [store.weights[k] if layer.weights[k[1]].trainable
              else store.xp.array(store.weights[k]) for k in self.weight_keys]
        return layer.op.forward(store.xp, xs, ws, part)[1]


@dataclass(frozen=True)
class ForwardPartial(Action):
    """This partition's share of a statistic its reduction group needs before forward."""

    forward: Forward

    def run(self, store, ctx, out):
        layer, xs, ws, part = self.forward.operands(store, ctx)
        partial, made = split_partial(layer.op.forward_partial(store.xp, xs, ws, part))
        if made is not None:  # what its forward keeps, for it alone
            store.partials[(self.forward.layer, MADE, self.forward.part)] = made
        store.partials[(self.forward.layer, "forward", self.forward.part)] = partial


@dataclass(frozen=True)
class BackwardPartial(Action):
    """This partition's share of a statistic its reduction group needs before backward."""

    layer: int
    part: int

    def run(self, store, ctx, out):
        layer = ctx.graph.layers[self.layer]
        saved, part, fwd = store.saved[(self.layer, self.part)]
        if saved is RECOMPUTE:  # made again here, for the backward that follows too
            saved = fwd.recomputed(store, ctx, part)
            store.saved[(self.layer, self.part)] = (saved, part, fwd)
        dys = [store.read_grad(t, b) for t, b in zip(layer.outputs, fwd.out_boxes)]
        store.partials[(self.layer, "backward", self.part)] = \
            layer.op.backward_partial(store.xp, dys, saved, part)


@dataclass(frozen=True)
class SendPartial(Action):
    """A partition's share of a reduction statistic, for another member of its group."""

    layer: int
    phase: str
    part: int
    dst: int

    def run(self, store, ctx, out):
        key = (self.layer, self.phase, self.part)
        _emit(out, self.dst, M.Partial(key, store.partials[key]))


@dataclass(frozen=True)
class Backward(Action):
    """One partition of a layer's backward: the gradients of its inputs' boxes and of its
    weights, from its outputs' gradients and what its forward kept."""

    layer: int
    part: int
    group: tuple[int, ...] = ()
    recompute: bool = False  # its forward kept nothing: run it again first

    def run(self, store, ctx, out):
        layer = ctx.graph.layers[self.layer]
        saved, part, fwd = store.saved.pop((self.layer, self.part))
        if saved is RECOMPUTE:
            saved = fwd.recomputed(store, ctx, part)
        dys = [store.read_grad(t, b) for t, b in zip(layer.outputs, fwd.out_boxes)]
        if self.group:
            part = replace(part, reduced=_combined(store, layer.op, self.layer, "backward",
                                                   self.group))
        dxs, dws = layer.op.backward(store.xp, dys, saved, part)
        for index, (tensor, box, dx) in enumerate(zip(layer.inputs, fwd.in_boxes, dxs)):
            if dx is not None and part.wants_grad(index):
                store.add_grad(tensor, box, dx)
        for key, dw in zip(fwd.weight_keys, dws):
            if dw is None:
                continue
            store.add_weight_grad(key, dw)


@dataclass(frozen=True)
class Loss(Action):
    """Loss gradient and metric sums for one box of the model output."""

    output: int
    box: Box
    label: int
    label_box: Box
    grad_tensor: int  # the output, or the softmax's input when the loss goes through it

    def run(self, store, ctx, out):
        grad, sums = ctx.loss(store.xp, store.read(self.output, self.box),
                              store.read(self.label, self.label_box))
        store.add_grad(self.grad_tensor, self.box, grad)
        out.setdefault("metrics", []).append(sums)


@dataclass(frozen=True)
class Send(Action):
    """A box of a tensor (its value, or with `grad` its gradient) for the device that reads it."""

    tensor: int
    box: Box
    dst: int
    grad: bool

    def run(self, store, ctx, out):
        array = (store.read_grad if self.grad else store.read)(self.tensor, self.box)
        _emit(out, self.dst, (M.Grad if self.grad else M.Value)(self.tensor, self.box, array))


@dataclass(frozen=True)
class SendWeightGrad(Action):
    """This holder's gradient of one shard of a weight box, for the shard's owner to sum."""

    key: WeightKey
    dst: int
    shard: Box

    def run(self, store, ctx, out):
        grad = store.weight_grads.get(self.key)
        if grad is not None:
            _emit(out, self.dst, M.WeightGrad(self.key, _shard_of(grad, self.key, self.shard)))


def _shard_of(array, key: WeightKey, shard: Box):
    """The part of a weight box's array (weight or gradient) that holds `shard`: a view."""
    return array if shard == key[2] else array[shard.relative_to(key[2])]


def _shard_gradient(store: DeviceStore, key: WeightKey, shard: Box):
    """The summed gradient of a shard on its owner: the owner's own slice plus the pieces the
    other holders sent in (None when no device computed one)."""
    grad = store.weight_grads.get(key)
    if grad is not None:
        grad = _shard_of(grad, key, shard)
    for extra in store.incoming_wgrads.pop(key, []):
        grad = extra if grad is None else grad + extra
    return grad


def _report_nonfinite(out: dict, key: WeightKey) -> None:
    out.setdefault("metrics", []).append({NONFINITE_GRADIENT: key})


@dataclass(frozen=True)
class CheckShard(Action):
    """Under the non-finite guard, on the owner of one shard of a box cut into several: sums the
    shard's gradient (its own slice and the `incoming` pieces), tests it, reports it when it is
    not finite (as `Update` does), and tells the owners of the box's other shards (`peers`)
    whether it is: no shard of the box is then updated unless every shard's sum is finite."""

    key: WeightKey
    shard: Box
    incoming: int
    peers: tuple[int, ...]

    def run(self, store, ctx, out):
        grad = _shard_gradient(store, self.key, self.shard)
        finite = grad is None or all_finite(store.xp, grad)
        if not finite:
            _report_nonfinite(out, self.key)
        store.shard_grads[self.key] = grad
        store.verdicts.setdefault(self.key, []).append(finite)
        for peer in self.peers:
            _emit(out, peer, M.Verdict(self.key, finite))


@dataclass(frozen=True)
class Update(Action):
    """Applies the summed gradient of one shard of a weight box (`shard`: all of it when the
    box is not cut) with the optimizer, to that part of the weight and to the shard's optimizer
    state, which lives on this device only. With `check_finite` (the non-finite guard,
    flexflow/nonfinite.py) a gradient holding a NaN or Inf is not applied, leaving the weight
    and its optimizer state as they were, and its weight key is reported in the metrics
    instead (on the vendor kernels the device decides: the fused optimizer skips the update,
    and its `Verdict` is read with the iteration's metrics). A guarded box cut into several
    shards is applied whole or not at all: each shard's sum is tested by its `CheckShard`, and
    the update waits for all their `verdicts`."""

    key: WeightKey
    shard: Box
    check_finite: bool = False
    incoming: int = 0  # gradient pieces other holders send in, added to this device's slice
    verdicts: int = 0  # shards whose CheckShard verdict it waits for (0: it sums and tests)
    tests_whole: bool = False  # a sharded box's all-reduced gradient: its owners all test the
    #                            whole (the same everywhere), so they all decide alike

    def run(self, store, ctx, out):
        skip = None  # (the device's verdict, where the vendor kernels make one)
        if self.verdicts:
            grad = store.shard_grads.pop(self.key)
            if not all(store.verdicts.pop(self.key)):
                return
        else:
            grad = _shard_gradient(store, self.key, self.shard)
            tested = store.weight_grads.get(self.key) if self.tests_whole else grad
            if grad is not None and self.check_finite:
                skip = nonfinite_flag(store.xp, tested)
                if skip is not None:
                    out.setdefault("metrics", []).append(Verdict(self.key, skip))
                elif not all_finite(store.xp, tested):
                    _report_nonfinite(out, self.key)
                    return
        if grad is None:
            return
        weight = store.weight_part(self.key, self.shard)
        # the vendor kernels update contiguous memory only: a shard cut along a later dim is
        # updated in a contiguous copy, then written back, from a contiguous gradient (a slice
        # of an all-reduced whole one is not)
        updated = weight if weight.flags.c_contiguous else store.xp.ascontiguousarray(weight)
        grad = grad if grad.flags.c_contiguous else store.xp.ascontiguousarray(grad)
        if self.key not in store.opt_state:
            store.opt_state[self.key] = ctx.iteration.optimizer.init_state(store.xp, updated)
        ctx.iteration.optimizer.update(store.xp, updated, grad, store.opt_state[self.key],
                                       ctx.iteration.updates, skip)
        if updated is not weight:
            weight[...] = updated


TIMING = "op_time_ms"  # metrics record of a timed kernel task: (layer, partition, phase, ms)
ALLOCATED = "allocated_bytes"  # and of its device's allocated bytes after it: (device, bytes)


def kernel_of(action: Action) -> tuple[int, int, str] | None:
    """(layer, partition, phase) of an action that runs an operator's kernels, else None."""
    if isinstance(action, Forward):
        return action.layer, action.part, "forward"
    if isinstance(action, ForwardPartial):
        return action.forward.layer, action.forward.part, "forward"
    if isinstance(action, (Backward, BackwardPartial)):
        return action.layer, action.part, "backward"
    return None


def run_timed(action: Action, store: DeviceStore, ctx: Context, out: dict) -> None:
    """Runs a kernel action and records in the metrics, where `--profiling` reads them, how long
    it took on its device (after the GPU's queued work, when there is a GPU) and the bytes its
    device has allocated once it has run (`DeviceStore.allocated`; its inputs and outputs
    are all held then)."""
    synchronize = synchronizer(store.xp)
    # what a backward pops from the store stays referenced until the bytes are read: the
    # kernel held it together with what it made
    held_during = store.saved.get((action.layer, action.part)) if type(
        action) is Backward else None
    synchronize()
    start = time.perf_counter()
    action.run(store, ctx, out)
    synchronize()
    ms = (time.perf_counter() - start) * 1e3
    records = out.setdefault("metrics", [])
    records.append({TIMING: (*kernel_of(action), ms)})
    allocated = store.allocated()
    del held_during
    if allocated is not None:
        records.append({ALLOCATED: (store.device, allocated)})


def synchronizer(xp) -> Callable[[], None]:
    """Waits for the device's queued work (CuPy's current stream); nothing to wait for with
    NumPy. Timings take it on both sides of what they time."""
    cuda = getattr(xp, "cuda", None)
    if cuda is None:
        return lambda: None
    return lambda: cuda.get_current_stream().synchronize()


@dataclass(frozen=True)
class SendWeight(Action):
    """The new values of one shard of a weight box, from its owner to another holder."""

    key: WeightKey
    dst: int
    shard: Box

    def run(self, store, ctx, out):
        _emit(out, self.dst, M.NewWeight(self.key, self.shard,
                                         store.weight_part(self.key, self.shard)))


@dataclass(frozen=True)
class SendShard(Action):
    """This device's shard (`shard`) of a sharded weight box, for another holder gathering the
    whole box before the layer's `phase` ("forward" or "backward") there."""

    key: WeightKey
    dst: int
    shard: Box
    phase: str

    def run(self, store, ctx, out):
        _emit(out, self.dst, M.ShardValue(self.key, self.phase, self.shard,
                                          store.weight_part(self.key, self.shard)))


@dataclass(frozen=True)
class ShareShard(Action):
    """Launches the all-gather, over a sharded weight box's `holders` (owner first), of this
    device's shard of it for the layer's `phase`: flat, padded to the largest shard (the
    collective gathers arrays of one shape). The collectives' way of doing what `SendShard`
    does one shard and one message at a time; `GatherWeight` assembles the result."""

    key: WeightKey
    phase: str
    holders: tuple[int, ...]

    @property
    def padded_volume(self) -> int:
        """Elements of the flat array each holder launches: the largest shard's."""
        return max(shard.box.volume for shard in shards(self.key[2], self.holders, None))

    def run(self, store, ctx, out):
        flat = store.xp.zeros(self.padded_volume, "float32")
        own = store.shards.get(self.key)
        if own is not None:
            flat[:own[0].volume] = own[1].reshape(-1)
        store.communicator.launch(shard_key(self.key, self.phase), flat, self.holders,
                                  gather=True, partials=True)


def shard_key(key: WeightKey, phase: str) -> str:
    """The all-gather of a sharded box's shards before its layer's `phase`."""
    return f"shards-{key[0]}.{key[1]}.{key[2].bounds}-{phase}"


@dataclass(frozen=True)
class GatherWeight(Action):
    """Makes the whole of a sharded weight box on this holder for the layer's `phase`: the
    shards the other owners sent (`SendShard`), and this device's own, or with `holders`
    every holder's from their all-gather (`ShareShard`); before a backward it is put back
    where the layer's forwards here (`parts`) kept it (`gathered.attach`)."""

    key: WeightKey
    phase: str
    layer: int
    parts: tuple[int, ...]
    holders: tuple[int, ...] = ()

    def run(self, store, ctx, out):
        whole = (self._all_gathered(store) if self.holders
                 else store.gathering.pop((self.key, self.phase), None))
        if whole is None:  # (no other owner: a box of one shard, this device's)
            whole = store.xp.empty(self.key[2].shape, "float32")
        own = store.shards.get(self.key)
        if own is not None and not self.holders:
            whole[own[0].relative_to(self.key[2])] = own[1]
        store.weights[self.key] = whole
        if self.phase == "backward":
            _rewrite_kept(store, self.layer, self.parts,
                          lambda kept: gathered.attach(kept, self.key, whole, store.xp))

    def _all_gathered(self, store):
        """The whole box from its holders' padded flat shards, in holder order."""
        whole = store.xp.empty(self.key[2].shape, "float32")
        flats = store.communicator.result(shard_key(self.key, self.phase))
        for shard, flat in zip(shards(self.key[2], self.holders, None), flats):
            whole[shard.box.relative_to(self.key[2])] = flat[:shard.box.volume].reshape(
                shard.box.shape)
        return whole


@dataclass(frozen=True)
class FreeWeight(Action):
    """Drops this holder's whole copy of a sharded weight box after the layer's `phase` has
    used it (its own shard stays); after the forward, what the layer's forwards here
    (`parts`) kept of it is marked for the backward's gather (`gathered.detach`), so that
    nothing holds it in between."""

    key: WeightKey
    phase: str
    layer: int
    parts: tuple[int, ...]

    def run(self, store, ctx, out):
        whole = store.weights.pop(self.key, None)
        if whole is None or self.phase != "forward":
            return
        _rewrite_kept(store, self.layer, self.parts,
                      lambda kept: gathered.detach(kept, self.key, whole))


def _rewrite_kept(store, layer: int, parts: tuple[int, ...], change) -> None:
    """Replace what the forwards of `layer`'s `parts` on this device kept (the first item of
    their `saved` entries) by `change(kept)`."""
    for p in parts:
        entry = store.saved.get((layer, p))
        if entry is not None:
            store.saved[(layer, p)] = (change(entry[0]),) + entry[1:]


# A weight's gradient piece or new values this large leave as soon as the task that makes them
# has run, while the program runs the rest of its group (`sent_early`)
EARLY_SEND_BYTES = 1 << 20


def sent_early(action: Action) -> bool:
    """Whether a device's program posts this task's message as soon as the task has run, rather
    than with the rest of its group's output at the group's end: a weight box shard's gradient
    piece or new values of EARLY_SEND_BYTES or more (float32, as the cost model counts them),
    which can then travel while the program goes on with the layers' backward or other
    updates. Smaller messages wait for the group's one parcel."""
    kind = type(action)
    return ((kind is SendWeightGrad or kind is SendWeight)
            and action.shard.volume * 4 >= EARLY_SEND_BYTES)


@dataclass(frozen=True)
class AllReduce(Action):
    """Launches the sum, over the devices `devices` that hold them, of this device's gradients
    of the weight boxes `keys` (a bucket: scheduler/collectives.py) and goes on at once; a box
    without a gradient here counts as zeros."""

    bucket: str
    keys: tuple[WeightKey, ...]
    devices: tuple[int, ...]

    def run(self, store, ctx, out):
        xp = store.xp
        grads = [store.weight_grads.get(key) for key in self.keys]
        grads = [xp.zeros(key[2].shape, "float32") if grad is None else grad
                 for key, grad in zip(self.keys, grads)]
        store.communicator.launch(self.bucket, collectives.flatten(xp, grads), self.devices)


@dataclass(frozen=True)
class AwaitReduced(Action):
    """Waits for a bucket's sum (`AllReduce`) and makes it the gradients of its boxes, which
    this device then updates whole (every holder updates the same weights the same way)."""

    bucket: str
    keys: tuple[WeightKey, ...]

    def run(self, store, ctx, out):
        summed = store.communicator.result(self.bucket)
        for key, grad in zip(self.keys, collectives.unflatten(
                summed, [key[2].shape for key in self.keys])):
            store.weight_grads[key] = grad


@dataclass(frozen=True)
class SharePartial(Action):
    """Launches the collective, over the devices `members` of its reduction group `parts` (one
    partition each, in partition order), of this partition's partial statistics for `phase`:
    their sum where the operator combines partials by adding them (`summed`: batch norm's), else
    their all-gather."""

    layer: int
    phase: str
    part: int
    parts: tuple[int, ...]
    members: tuple[int, ...]
    summed: bool

    def run(self, store, ctx, out):
        store.communicator.launch(partials_key(self.layer, self.phase, self.parts),
                                  store.partials[(self.layer, self.phase, self.part)],
                                  self.members, gather=not self.summed, partials=True)


@dataclass(frozen=True)
class AwaitPartials(Action):
    """Waits for a reduction group's shared partials (`SharePartial`): their sum, or every
    partition's, for this device's partition to combine."""

    layer: int
    phase: str
    parts: tuple[int, ...]  # the group's partitions, in partition order
    members: tuple[int, ...]  # their devices
    summed: bool

    def run(self, store, ctx, out):
        shared = store.communicator.result(partials_key(self.layer, self.phase, self.parts))
        if self.summed:
            store.partials[(self.layer, self.phase, self.parts)] = shared
            return
        for part, partial in zip(self.parts, shared):
            store.partials[(self.layer, self.phase, part)] = partial


def partials_key(layer: int, phase: str, parts: tuple[int, ...]) -> str:
    """The collective of one layer's reduction group in one phase."""
    return f"partials/{layer}/{phase}/{parts}"


@dataclass(frozen=True)
class Receive(Action):
    """Marks where a device takes in data no later task of the phase reads (new weights): the
    executor applies a group's incoming data before its tasks run, so this does nothing more."""

    def run(self, store, ctx, out):
        pass

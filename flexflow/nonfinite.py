"""The non-finite guard: training stops at the first NaN or Inf in a loss or a gradient with a
`NonFiniteError` that names the layer where it first appeared, unless `--allow-nonfinite` is given
(then training goes on, as FlexFlow's did).

Cheap while all is well, since nothing extra leaves the devices: the loss is already on the
client in the metrics, and every weight update of a guarded task graph (built so:
`taskgraph.Checks`) tests the gradient it is about to apply, reporting through the metrics
channel only when that gradient is not finite. Only then does `diagnose` read this iteration's
values and gradients back from the devices: the fed batches,
every layer's outputs in forward order, the loss, then the gradients each layer's backward pass
made (of its weights, then of its inputs) in backward order. A gradient that several layers add
to (a tensor read twice, a shared weight) is named at the first of them in backward order.
A step run as one (a training step frees each value at its last use: scheduler/last_use.py)
is first run again up to its backward as FlexFlow's separate calls run it, which keep every
value until the next forward, with the batch-norm buffers put back as they were; the weights
it runs on are those the step's finite gradients have already updated.

The weights stay finite: a gradient that is not finite is never applied (nor does it touch the
optimizer state); a weight updated in shards over several devices is tested shard by shard and
updated whole or not at all (`scheduler.actions.CheckShard`). The step that raises is applied
to the weights whose gradients were finite, since a training step is one task graph and their
updates do not wait for the others. A loss that is not finite is seen when the step's graph
has run, so if its gradients were all finite, that step was applied in full.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .scheduler.actions import NONFINITE_GRADIENT
from .scheduler.feeds import host_batches
from .scheduler.last_use import frees_at_last_use
from .tensor import tensor_name


class NonFiniteError(FloatingPointError):
    """A loss or gradient became NaN or Inf during training. `layer`: the name of the first layer
    where a non-finite value appeared (None for a fed batch); `tensor`: what held it (`output`,
    `loss`, `loss gradient`, `weight gradient`, `input gradient` or `input`); `iteration`: the
    training iteration, counting from 1."""

    def __init__(self, message: str, layer: str | None, tensor: str, iteration: int):
        super().__init__(message)
        self.layer = layer
        self.tensor = tensor
        self.iteration = iteration


def check(run, phases: tuple[str, ...], pieces: list[dict], state) -> list[dict]:
    """One run's metric pieces without the guard's records; raises `NonFiniteError` when the run
    (of a CompiledRun, on the IterationState `state`) trained (backward or update) and its loss
    or a gradient was not finite."""
    flagged, rest = _split(pieces)
    if _stops(run, phases, flagged, rest):
        if frees_at_last_use(phases):
            _run_again_keeping_values(run, state)
        raise diagnose(run, state, _loss_finite(rest), flagged)
    return rest


def _run_again_keeping_values(run, state) -> None:
    """Run `state`'s forward, loss and backward again as separate runs, which keep what they
    compute; the buffers (batch norm's running statistics) are written back afterwards."""
    graph = run.model.graph
    buffers = {(layer.index, index): weight.shape for layer in graph.layers
               if layer.weight_owner == layer.index
               for index, weight in enumerate(layer.weights) if not weight.trainable}
    kept = run.perform(lambda executor: executor.get_weights(buffers), record=False)
    for phases, zero in ((("forward",), False), (("loss", "backward"), True)):
        run.perform(lambda executor: executor.run(*phases, state=state, zero_gradients=zero),
                    record=False)
    run.perform(lambda executor: executor.set_weights(kept), record=False)


def stops(run, phases: tuple[str, ...], pieces: list[dict]) -> bool:
    """Whether `check` raises for these metric pieces of a run."""
    return _stops(run, phases, *_split(pieces))


def _split(pieces: list[dict]) -> tuple[list, list[dict]]:
    """(the weight keys the guard flagged, the other pieces)."""
    flagged = [piece[NONFINITE_GRADIENT] for piece in pieces if NONFINITE_GRADIENT in piece]
    rest = [piece for piece in pieces if NONFINITE_GRADIENT not in piece] if flagged else pieces
    return flagged, rest


def _stops(run, phases, flagged: list, rest: list[dict]) -> bool:
    if run.model.ffconfig.allow_nonfinite or not ({"backward", "update"} & set(phases)):
        return False
    return bool(flagged) or not _loss_finite(rest)


def _loss_finite(pieces: list[dict]) -> bool:
    return bool(np.isfinite(sum(piece.get("loss", 0.0) for piece in pieces)))


@dataclass(frozen=True)
class Finding:
    layer: str | None  # None: a fed batch
    tensor: str        # the kind, as `NonFiniteError.tensor`
    what: str          # for the message
    note: str = ""     # what explains it, if found


def diagnose(run, state, loss_finite: bool, flagged: list) -> NonFiniteError:
    """The error naming the first layer where a non-finite value appeared this iteration (the
    run on `state`); `flagged`: the weight keys whose updates found their gradients not
    finite."""
    iteration = state.step + 1
    found = _first_nonfinite(_Reader(run, state.feeds), loss_finite)
    if found is None:  # not to be seen on the devices any more: name what the update saw
        owner, index, _ = flagged[0]
        layer = run.model.graph.layers[owner]
        found = Finding(layer.name, "weight gradient",
                        f"the gradient of its weight '{layer.weights[index].name}'")
    where = f", layer '{found.layer}'" if found.layer is not None else ""
    message = (f"training iteration {iteration}{where}: {found.what} is not finite (NaN or "
               f"Inf){found.note}, the first non-finite value of this iteration. Training stopped; "
               f"gradients that are not finite were not applied (--allow-nonfinite trains on "
               f"regardless)")
    return NonFiniteError(message, found.layer, found.tensor, iteration)


class _Reader:
    """Host copies of this iteration's data, read from the devices on request."""

    def __init__(self, run, feeds):
        self.run, self.feeds = run, host_batches(feeds)
        self.model = run.model
        self.graph = run.model.graph

    def _read(self, action):
        return self.run.perform(action, record=False)

    def value(self, tensor: int):
        spec = self.graph.tensors[tensor].spec
        return self._read(lambda executor: executor.get_value(tensor, spec.shape, spec.dtype))

    def grad(self, tensor: int):
        shape = self.graph.tensors[tensor].spec.shape
        return self._read(lambda executor: executor.get_grad(tensor, shape))

    def weight(self, layer, index: int, gradient: bool):
        """A weight of `layer` (its owner's, when it shares them), or its summed gradient."""
        owner = layer.weight_owner
        shape = self.graph.layers[owner].weights[index].shape
        if gradient:
            return self._read(lambda executor: executor.get_weight_grad(owner, index, shape))
        return self._read(lambda executor: executor.get_weight(owner, index, shape))


def _finite(array) -> bool:
    array = np.asarray(array)
    return not np.issubdtype(array.dtype, np.floating) or bool(np.isfinite(array).all())


def _first_nonfinite(reader: _Reader, loss_finite: bool) -> Finding | None:
    """The first non-finite value, in the order of the module docstring; None if every value
    read is finite."""
    model, graph = reader.model, reader.graph
    for tensor, array in reader.feeds.items():
        if not _finite(array):
            return Finding(None, "input", f"the batch fed to {tensor_name(model, tensor)}")
    for layer in graph.layers:
        for tensor in layer.outputs:
            if not _finite(reader.value(tensor)):
                return Finding(layer.name, "output",
                               f"its output {graph.tensors[tensor].spec.shape}",
                               _weights_note(reader, layer))
    objective = reader.run.objective
    last = graph.layers[graph.tensors[objective.output].producer[0]]
    if not loss_finite:
        return Finding(last.name, "loss", "the loss of its output")
    grad_tensor = last.inputs[0] if objective.through_softmax else objective.output
    if not _finite(reader.grad(grad_tensor)):
        return Finding(last.name, "loss gradient", "the loss gradient of its output")
    for layer in reversed(graph.layers):
        for index, weight in enumerate(graph.layers[layer.weight_owner].weights):
            if not _finite(reader.weight(layer, index, gradient=True)):
                return Finding(layer.name, "weight gradient",
                               f"the gradient of its weight '{weight.name}'")
        for tensor in dict.fromkeys(layer.inputs):
            if graph.tensors[tensor].producer is not None and not _finite(reader.grad(tensor)):
                return Finding(layer.name, "input gradient", f"the gradient its backward pass "
                               f"gives its input, the {tensor_name(model, tensor)}")
    return None


def _weights_note(reader: _Reader, layer) -> str:
    """Why a layer's output may not be finite: ` (as is its weight 'kernel')`."""
    owner = reader.graph.layers[layer.weight_owner]
    bad = [w.name for index, w in enumerate(owner.weights)
           if not _finite(reader.weight(layer, index, gradient=False))]
    return f" (as is its weight '{bad[0]}')" if bad else ""

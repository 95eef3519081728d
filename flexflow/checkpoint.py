"""Training state: what a run needs to go on exactly where it stopped.

`capture(model)` takes a host-side copy of a compiled FFModel's state (every weight, batch-norm
running statistics included, the optimizer's slots, the counters that seed dropout masks and
Adam's bias correction, and fit's position); `restore(model, state)` puts it back into a model
built from the same script, under any strategy and on any number of devices: weights and slots
are held whole here and sliced again into the boxes the target's strategy places. Training after
a restore gives the same numbers as training that never stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .scheduler.strategy import ParallelConfig

WeightRef = tuple[int, int]  # (owner layer index, weight index)


class CheckpointError(ValueError):
    """A checkpoint (a file, or a TrainingState) does not fit the model or is malformed; the
    message names the file and the offending entry."""


@dataclass
class TrainingState:
    weights: dict[WeightRef, np.ndarray]                 # whole arrays, every weight
    optimizer: dict[WeightRef, dict[str, np.ndarray]]    # whole slots; absent: no state yet
    step: int                                            # iterations run (dropout seeds)
    updates: int                                         # optimizer steps (Adam's bias term)
    epoch: int = 0                                       # fit's position: the epoch and
    iteration: int = 0                                   # the iterations done in it
    strategy: dict[str, ParallelConfig] = field(default_factory=dict)  # informative


def weight_specs(model) -> dict[WeightRef, object]:
    """Every weight the model's graph has, keyed by its owner layer and index: its WeightSpec."""
    return {(layer.index, k): spec for layer in model.graph.layers
            if layer.weight_owner == layer.index for k, spec in enumerate(layer.weights)}


def capture(model) -> TrainingState:
    """A host-side copy of a compiled model's training state."""
    model._require_compiled("capture")
    executor = model._executor
    weights, optimizer = {}, {}
    for ref, spec in weight_specs(model).items():
        weights[ref] = executor.get_weight(*ref, spec.shape)
        slots = executor.get_optimizer_state(*ref, spec.shape)
        if slots:
            optimizer[ref] = slots
    epoch, iteration = model._fit_position
    return TrainingState(weights, optimizer, model._ctx.step, model._ctx.updates, epoch,
                         iteration, dict(model.strategy))


def restore(model, state: TrainingState, source: str = "training state") -> None:
    """Put `state` into a compiled model of the same layers (any strategy, any device count);
    the next `fit` continues from the state's position. Checked whole before anything changes."""
    model._require_compiled("restore")
    check_fits(model, state, source)
    specs = weight_specs(model)
    model._executor.set_weights(state.weights)
    model._executor.set_optimizer_state({ref: state.optimizer.get(ref, {}) for ref in specs})
    model._ctx.step, model._ctx.updates = int(state.step), int(state.updates)
    model._fit_position = model._resume_at = (int(state.epoch), int(state.iteration))


def check_fits(model, state: TrainingState, source: str) -> None:
    """A CheckpointError unless `state` holds exactly the model's weights, in their shapes."""
    specs = weight_specs(model)
    names = {ref: f"weight {ref[1]} of layer '{model.graph.layers[ref[0]].name}'"
             for ref in specs}
    missing = [names[ref] for ref in specs if ref not in state.weights]
    if missing:
        raise CheckpointError(f"{source}: no value for {', '.join(missing)}")
    extra = sorted(set(state.weights) - set(specs)) + sorted(set(state.optimizer) - set(specs))
    if extra:
        raise CheckpointError(f"{source}: weights {extra} (owner layer, index) that the model "
                              f"does not have")
    for ref, spec in specs.items():
        arrays = [("", state.weights[ref])] + [
            (f" optimizer slot '{slot}' of", array)
            for slot, array in state.optimizer.get(ref, {}).items()]
        for what, array in arrays:
            if tuple(np.shape(array)) != tuple(spec.shape):
                raise CheckpointError(f"{source}:{what} {names[ref]} has shape "
                                      f"{tuple(np.shape(array))}, the model's is {spec.shape}")
    if min(state.step, state.updates, state.epoch, state.iteration) < 0:
        raise CheckpointError(f"{source}: negative counters (step {state.step}, updates "
                              f"{state.updates}, epoch {state.epoch}, iteration "
                              f"{state.iteration})")

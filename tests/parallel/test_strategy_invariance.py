"""A strategy changes speed, never results: every model trained under every strategy on 2 and 4
devices gives the single-device run's per-step losses and final weights (1e-4 relative). The
single-device run is checked to train (training.py), so that runs that all did nothing could not
agree."""

from typing import NamedTuple

import numpy as np
import pytest

from flexflow.core import FFConfig, FFModel, LossType, MetricsType, SGDOptimizer

from .models import BATCH, CASES, MODELS, strategy, train_losses
from .training import assert_trains

STEPS = 10


class Run(NamedTuple):
    losses: np.ndarray
    weights: dict  # "layer.weight" -> its value after the last step


def compiled(build, argv, kind=None, n=1):
    """The model `build` makes, compiled with `argv` under the strategy of `kind` on n devices
    (data parallel without one), or `kind(graph)` where it is a function; and its inputs."""
    ff = FFModel(FFConfig(argv=argv, batch_size=BATCH))
    inputs = build(ff)
    configs = (None if kind is None else kind(ff.graph) if callable(kind)
               else strategy(kind, ff.graph, n, build.__name__))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.05, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY], strategy=configs)
    return ff, inputs


def fit(ff, inputs) -> np.ndarray:
    return np.array(train_losses(ff, inputs, STEPS))


def weights(ff) -> dict:
    return {f"{layer.name}.{weight.name}": ff.get_layer_by_id(i).get_parameter_by_id(k)
            .get_weights(ff) for i, layer in enumerate(ff.graph.layers)
            for k, weight in enumerate(layer.weights)}


def train(build, argv, kind=None, n=1) -> Run:
    ff, inputs = compiled(build, argv, kind, n)
    return Run(fit(ff, inputs), weights(ff))


def trained_reference(name) -> Run:
    """The single-device run of model `name`, asserted to train."""
    ff, inputs = compiled(MODELS[name], [])
    initial = weights(ff)
    run = Run(fit(ff, inputs), weights(ff))
    assert_trains(ff.graph, initial, run.losses, run.weights)
    return run


_REFERENCE = {}


def reference(name) -> Run:
    if name not in _REFERENCE:
        _REFERENCE[name] = trained_reference(name)
    return _REFERENCE[name]


def assert_same_run(run, ref):
    """Losses within 1e-4 relative; each weight tensor within 1e-4 relative in norm. The 1e-6
    floor covers weights whose gradient is zero in exact arithmetic (attention's key bias, a bias
    batch norm cancels: training.vanishing_gradient_weights), which hold float32 rounding noise
    (~1e-9 to 1e-7) under any strategy."""
    np.testing.assert_allclose(run.losses, ref.losses, rtol=1e-4)
    assert run.weights.keys() == ref.weights.keys()
    for key, w_ref in ref.weights.items():
        assert np.linalg.norm(run.weights[key] - w_ref) <= 1e-4 * np.linalg.norm(w_ref) + 1e-6, key


@pytest.mark.parametrize("name, kind, n", CASES)
def test_strategy_gives_single_device_numbers(name, kind, n):
    run = train(MODELS[name], ["-ll:gpu", str(n), "--in-process"], kind, n)
    assert_same_run(run, reference(name))

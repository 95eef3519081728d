"""A model from flexflow.torch trains under any strategy like any other: the MLP, with its torch
weights, split by output features (parameter parallelism) over 2 in-process devices, gives the
single-device losses."""

import numpy as np
import pytest
import torch

from ..parallel.models import strategy
from . import models
from .test_training import batches, ff_losses

pytestmark = pytest.mark.filterwarnings("ignore:Implicit dimension choice for softmax")


@pytest.mark.parametrize("kind", ["parameter", "reshard"])
def test_mlp_from_torch_under_a_strategy_gives_single_device_losses(kind):
    torch.manual_seed(0)
    model = models.MLP()
    data = batches(lambda s: models.float_inputs((8, 784), seed=s), 8, 10, steps=5)
    single, _ = ff_losses(model, data, 0.05, probabilities=True)
    split, ff = ff_losses(model, data, 0.05, probabilities=True,
                          argv=["-ll:gpu", "2", "--in-process"],
                          strategy=lambda graph: strategy(kind, graph, 2))
    assert {config.degrees for config in ff.strategy.values()} != {(2, 1)}  # not data parallel
    np.testing.assert_allclose(split, single, rtol=1e-4)

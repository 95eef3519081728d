"""The memory model against what each device's store holds, under sample, parameter and
attribute splits on 2 and 4 devices in this process (tests/search/test_memory_model.py has the
counting)."""

import pytest

from ..search.test_memory_model import held_peaks, predicted_peaks
from .models import MODELS, batches
from .test_strategy_invariance import compiled

# Not yet within 10% on networks this small: where one device loads two overlapping boxes of an
# input (a parameter split reading the whole batch beside a sample split reading half of it),
# both are views of one piece, but the model counts each (10-18% over: cnn_batch_norm,
# residual_block and transformer_block split by parameter); attribute splits of residual_block
# and cnn_batch_norm (11-14% under); and networks this small on 4 devices, where the weights'
# shards and the pieces of their gradients (placed at the update) outweigh the activations.
PAIRS = [("mlp", "sample", 2), ("mlp", "parameter", 2), ("mlp", "attribute", 2),
         ("cnn_batch_norm", "sample", 4), ("residual_block", "sample", 2),
         ("transformer_block", "sample", 2), ("transformer_block", "attribute", 2)]


@pytest.mark.parametrize("name, kind, n", PAIRS)
def test_the_model_predicts_what_each_device_holds(monkeypatch, name, kind, n):
    ff, inputs = compiled(MODELS[name], ["-ll:gpu", str(n), "--in-process"], kind, n)
    [(xs, labels)] = batches(inputs, 1)
    for tensor, array in zip(inputs, xs):
        tensor.set_tensor(ff, array)
    ff.label_tensor.set_tensor(ff, labels)
    predicted, held = predicted_peaks(ff), held_peaks(ff, monkeypatch)
    for device, (p, h) in enumerate(zip(predicted, held)):
        assert p == pytest.approx(h, rel=0.1), f"device {device}: {p} predicted, {h} held"

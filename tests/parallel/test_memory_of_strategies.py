"""The memory model against what each device's store holds, under sample, parameter and
attribute splits on 2 and 4 devices in this process (tests/search/test_memory_model.py has the
counting)."""

import pytest

from ..search.test_memory_model import held_peaks, predicted_peaks
from .models import MODELS, batches
from .test_strategy_invariance import compiled

# Not yet within 10%: attribute splits whose reads assemble a box from several pieces (the
# assembled copy a forward keeps is not modelled): mlp and cnn_batch_norm split by attribute,
# concat_cnn's mixed strategy; and networks this small on 4 devices, where the weights' shards
# and the pieces of their gradients (placed at the update) outweigh the activations.
PAIRS = [("mlp", "sample", 2), ("mlp", "parameter", 2),
         ("cnn_batch_norm", "sample", 4), ("residual_block", "parameter", 2),
         ("residual_block", "sample", 2), ("transformer_block", "attribute", 2)]


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

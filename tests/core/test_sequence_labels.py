"""A sparse label of an output with more than two dims labels every position, as FlexFlow makes
the label tensor ([batch] + the output's dims but the last, then 1): training matches PyTorch's
cross-entropy over the positions, summed and divided by the batch (FlexFlow's 1/batch scaling),
and a label outside the classes is refused."""

import numpy as np
import pytest
import torch

from flexflow.core import DataType, FFConfig, FFModel, LossType, SGDOptimizer

BATCH, POSITIONS, FEATURES, CLASSES, STEPS = 4, 6, 5, 7, 5


def model(argv=("--in-process",)):
    ff = FFModel(FFConfig(argv=list(argv), batch_size=BATCH))
    x = ff.create_tensor([BATCH, POSITIONS, FEATURES], DataType.DT_FLOAT)
    ff.softmax(ff.dense(x, CLASSES))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, x


def batches():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((BATCH, POSITIONS, FEATURES)).astype(np.float32),
             rng.integers(0, CLASSES, (BATCH, POSITIONS, 1)).astype(np.int32))
            for _ in range(STEPS)]


def test_the_label_tensor_has_a_label_per_position():
    ff, _ = model()
    assert tuple(ff.label_tensor.dims) == (BATCH, POSITIONS, 1)


def test_training_matches_pytorchs_cross_entropy_over_the_positions():
    ff, x = model()
    dense = ff.get_layer_by_id(0)
    kernel, bias = (dense.get_parameter_by_id(k).get_weights(ff) for k in (0, 1))
    net = torch.nn.Linear(FEATURES, CLASSES)
    with torch.no_grad():
        net.weight.copy_(torch.from_numpy(kernel))
        net.bias.copy_(torch.from_numpy(bias))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for images, labels in batches():
        x.set_tensor(ff, images)
        ff.label_tensor.set_tensor(ff, labels)
        ff.train_step()
        optimizer.zero_grad()
        logits = net(torch.from_numpy(images)).reshape(-1, CLASSES)
        loss = torch.nn.functional.cross_entropy(
            logits, torch.from_numpy(labels).long().reshape(-1), reduction="sum") / BATCH
        loss.backward()
        optimizer.step()
    np.testing.assert_allclose(dense.get_parameter_by_id(0).get_weights(ff),
                               net.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dense.get_parameter_by_id(1).get_weights(ff),
                               net.bias.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_label_outside_the_classes_is_refused():
    ff, x = model()
    images, labels = batches()[0]
    labels[1, 2, 0] = CLASSES
    x.set_tensor(ff, images)
    ff.label_tensor.set_tensor(ff, labels)
    with pytest.raises(ValueError, match=f"labels must lie in \\[0, {CLASSES}\\)"):
        ff.train_step()

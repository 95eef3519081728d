"""Whole-model parity: the same network, the same weights and the same batches in PyTorch and in
FFModel give the same per-step training losses (SGD with momentum, and Adam)."""

import numpy as np
import pytest
import torch
from torch import nn

from flexflow.core import (ActiMode, AdamOptimizer, DataType, FFConfig, FFModel, LossType,
                           MetricsType, PoolType, SGDOptimizer)

STEPS = 20
BATCH = 16


def mlp_pair(ffmodel):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 24), nn.ReLU(),
                        nn.Linear(24, 5))
    x = ffmodel.create_tensor([BATCH, 20], DataType.DT_FLOAT)
    t = ffmodel.dense(x, 32, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, 24, ActiMode.AC_MODE_RELU)
    t = ffmodel.dense(t, 5)
    ffmodel.softmax(t)
    linears = [m for m in net if isinstance(m, nn.Linear)]
    return net, x, [(i, m) for i, m in enumerate(linears)], (20,)


def cnn_pair(ffmodel):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
                        nn.Conv2d(8, 16, 3, stride=1, padding=1), nn.ReLU(),
                        nn.AvgPool2d(2, 2), nn.Flatten(), nn.Linear(16 * 4 * 4, 5))
    x = ffmodel.create_tensor([BATCH, 3, 16, 16], DataType.DT_FLOAT)
    t = ffmodel.conv2d(x, 8, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ffmodel.pool2d(t, 2, 2, 2, 2, 0, 0)
    t = ffmodel.conv2d(t, 16, 3, 3, 1, 1, 1, 1, ActiMode.AC_MODE_RELU)
    t = ffmodel.pool2d(t, 2, 2, 2, 2, 0, 0, PoolType.POOL_AVG)
    t = ffmodel.flat(t)
    t = ffmodel.dense(t, 5)
    ffmodel.softmax(t)
    weighted = [m for m in net if isinstance(m, (nn.Conv2d, nn.Linear))]
    layer_ids = [0, 2, 5]
    return net, x, list(zip(layer_ids, weighted)), (3, 16, 16)


def make_optimizers(kind, ffmodel, params):
    if kind == "sgd":
        return (SGDOptimizer(ffmodel, lr=0.05, momentum=0.9),
                torch.optim.SGD(params, lr=0.05, momentum=0.9))
    return (AdamOptimizer(ffmodel, alpha=0.002),
            torch.optim.Adam(params, lr=0.002, eps=1e-8))


@pytest.mark.parametrize("builder", [mlp_pair, cnn_pair], ids=["mlp", "cnn"])
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_training_losses_match_pytorch(builder, kind):
    ffmodel = FFModel(FFConfig(argv=[], batch_size=BATCH))
    net, x, pairs, sample_shape = builder(ffmodel)
    ff_opt, torch_opt = make_optimizers(kind, ffmodel, net.parameters())
    ffmodel.optimizer = ff_opt
    ffmodel.compile(loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                    metrics=[MetricsType.METRICS_ACCURACY])
    ffmodel.init_layers()
    for layer_id, module in pairs:
        op = ffmodel.get_layer_by_id(layer_id)
        op.get_weight_tensor().set_weights(ffmodel, module.weight.detach().numpy())
        op.get_bias_tensor().set_weights(ffmodel, module.bias.detach().numpy())

    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((BATCH,) + sample_shape).astype(np.float32),
                rng.integers(0, 5, (BATCH, 1)).astype(np.int32)) for _ in range(4)]
    ff_losses, torch_losses = [], []
    for step in range(STEPS):
        xb, yb = batches[step % len(batches)]
        x.set_tensor(ffmodel, xb)
        ffmodel.label_tensor.set_tensor(ffmodel, yb)
        ff_losses.append(ffmodel.train_step())

        torch_opt.zero_grad()
        loss = nn.functional.cross_entropy(net(torch.tensor(xb)), torch.tensor(yb[:, 0]).long())
        loss.backward()
        torch_opt.step()
        torch_losses.append(loss.item())
    np.testing.assert_allclose(ff_losses, torch_losses, rtol=1e-4)
    assert np.mean(torch_losses[-4:]) < np.mean(torch_losses[:4])  # the run actually trained


def test_manual_loop_equals_train_step(capsys):
    """forward / zero_gradients / backward / update called one by one give the fused step's
    numbers, and backward prints each iteration's `[Metrics]` line, as FlexFlow's does."""
    losses, printed = [], []
    for fused in (True, False):
        ffmodel = FFModel(FFConfig(argv=[], batch_size=BATCH))
        net, x, _, sample_shape = mlp_pair(ffmodel)
        ffmodel.compile(optimizer=SGDOptimizer(ffmodel, lr=0.1, momentum=0.5),
                        loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                        metrics=[MetricsType.METRICS_SPARSE_CATEGORICAL_CROSSENTROPY])
        rng = np.random.default_rng(3)
        run = []
        for _ in range(5):
            x.set_tensor(ffmodel, rng.standard_normal((BATCH, 20)).astype(np.float32))
            ffmodel.label_tensor.set_tensor(ffmodel, rng.integers(0, 5, (BATCH, 1)).astype(np.int32))
            ffmodel.reset_metrics()
            if fused:
                ffmodel.train_step()
            else:
                ffmodel.forward()
                ffmodel.zero_gradients()
                ffmodel.backward()
                ffmodel.update()
            run.append(ffmodel.get_perf_metrics().mean("sparse_categorical_crossentropy"))
        losses.append(run)
        printed.append(capsys.readouterr().err.count("[Metrics]"))
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
    assert printed == [0, 5]  # train_step (ours) prints nothing; fit prints its own lines

"""FFModel's inference calls (`forward(training=False)`, `eval_step`) and the builder options
front ends need (asymmetric conv/pool padding, average pooling without padded elements, batch-norm
eps and momentum), each checked against PyTorch."""

import numpy as np
import torch
import torch.nn.functional as F

from flexflow.core import (ActiMode, DataType, FFConfig, FFModel, LossType, MetricsType,
                           PoolType, SGDOptimizer)

BATCH = 8


def new_model():
    return FFModel(FFConfig(argv=[], batch_size=BATCH))


def compile_model(ffmodel, loss=LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE, metrics=()):
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, 0.1), loss_type=loss, metrics=list(metrics))


def test_inference_forward_needs_no_label_and_disables_dropout():
    ffmodel = new_model()
    x = ffmodel.create_tensor([BATCH, 6], DataType.DT_FLOAT)
    out = ffmodel.dropout(ffmodel.dense(x, 4), 0.5)
    compile_model(ffmodel)
    data = np.random.default_rng(0).random((BATCH, 6), dtype=np.float32)
    x.set_tensor(ffmodel, data)
    ffmodel.forward(training=False)
    op = ffmodel.get_layer_by_id(0)
    kernel, bias = (op.get_parameter_by_id(i).get_weights(ffmodel) for i in range(2))
    np.testing.assert_allclose(out.get_tensor(ffmodel), data @ kernel.T + bias, rtol=1e-5,
                               atol=1e-6)
    ffmodel.forward()  # the compile mode (training): dropout zeroes about half
    dropped = out.get_tensor(ffmodel) == 0
    assert 0.2 < dropped.mean() < 0.8


def test_eval_step_uses_running_statistics_and_does_not_update():
    ffmodel = new_model()
    x = ffmodel.create_tensor([BATCH, 3, 4, 4], DataType.DT_FLOAT)
    t = ffmodel.batch_norm(x, relu=False, eps=1e-3, momentum=0.01)
    t = ffmodel.softmax(ffmodel.dense(ffmodel.flat(t), 5))
    compile_model(ffmodel, LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
                  [MetricsType.METRICS_ACCURACY])
    rng = np.random.default_rng(1)
    data = rng.normal(2.0, 3.0, (BATCH, 3, 4, 4)).astype(np.float32)
    labels = rng.integers(0, 5, (BATCH, 1)).astype(np.int32)
    x.set_tensor(ffmodel, data)
    ffmodel.label_tensor.set_tensor(ffmodel, labels)
    dense = ffmodel.get_layer_by_id(2)
    kernel = dense.get_parameter_by_id(0).get_weights(ffmodel)
    loss = ffmodel.eval_step()

    # PyTorch: eval-mode batch norm on the initial running statistics (0, 1), then dense+softmax
    normed = F.batch_norm(torch.tensor(data), torch.zeros(3), torch.ones(3), torch.ones(3),
                          torch.zeros(3), training=False, eps=1e-3)
    probs = torch.softmax(normed.flatten(1) @ torch.tensor(kernel).T, dim=1)
    expected = F.nll_loss(probs.log(), torch.tensor(labels[:, 0]).long()).item()
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_array_equal(dense.get_parameter_by_id(0).get_weights(ffmodel), kernel)
    assert ffmodel.get_perf_metrics().train_all == BATCH


def test_batch_norm_momentum_updates_running_mean_like_pytorch():
    ffmodel = new_model()
    x = ffmodel.create_tensor([BATCH, 2, 3, 3], DataType.DT_FLOAT)
    ffmodel.flat(ffmodel.batch_norm(x, relu=False, momentum=0.25))
    compile_model(ffmodel)
    data = np.random.default_rng(2).normal(1.0, 2.0, (BATCH, 2, 3, 3)).astype(np.float32)
    x.set_tensor(ffmodel, data)
    ffmodel.label_tensor.set_tensor(ffmodel, np.zeros((BATCH, 18), np.float32))
    ffmodel.train_step()
    running_mean, running_var = torch.zeros(2), torch.ones(2)
    F.batch_norm(torch.tensor(data), running_mean, running_var, training=True, momentum=0.25)
    bn = ffmodel.get_layer_by_id(0)
    np.testing.assert_allclose(bn.get_parameter_by_id(2).get_weights(ffmodel), running_mean,
                               rtol=1e-5)
    np.testing.assert_allclose(bn.get_parameter_by_id(3).get_weights(ffmodel), running_var,
                               rtol=1e-5)


def test_asymmetric_padding_and_exclusive_average_pooling():
    ffmodel = new_model()
    x = ffmodel.create_tensor([BATCH, 2, 5, 6], DataType.DT_FLOAT)
    conv = ffmodel.conv2d(x, 3, 2, 2, 1, 1, (0, 1), (1, 0), ActiMode.AC_MODE_NONE)
    pooled = ffmodel.pool2d(conv, 3, 3, 2, 2, (1, 1), (0, 1), PoolType.POOL_AVG,
                            count_include_pad=False)
    ffmodel.flat(pooled)
    compile_model(ffmodel)
    data = np.random.default_rng(3).random((BATCH, 2, 5, 6), dtype=np.float32)
    x.set_tensor(ffmodel, data)
    ffmodel.forward(training=False)
    op = ffmodel.get_layer_by_id(0)
    kernel, bias = (torch.tensor(op.get_parameter_by_id(i).get_weights(ffmodel))
                    for i in range(2))
    # F.pad takes (left, right, top, bottom)
    expected_conv = F.conv2d(F.pad(torch.tensor(data), (1, 0, 0, 1)), kernel, bias)
    np.testing.assert_allclose(conv.get_tensor(ffmodel), expected_conv, rtol=1e-5, atol=1e-6)
    # average over the window's elements inside the input: sum pool / count pool
    padded = F.pad(expected_conv, (0, 1, 1, 1))
    ones = F.pad(torch.ones_like(expected_conv), (0, 1, 1, 1))
    expected_pool = F.avg_pool2d(padded, 3, 2) / F.avg_pool2d(ones, 3, 2)
    np.testing.assert_allclose(pooled.get_tensor(ffmodel), expected_pool, rtol=1e-5, atol=1e-6)

"""`create_weight` (a parameter used as a tensor) and `set_weights` before compile (the value
compile() starts from), checked against PyTorch."""

import numpy as np
import pytest
import torch

from flexflow.core import DataType, FFConfig, FFModel, LossType, SGDOptimizer

BATCH = 4
LR = 0.5


def build(trainable=True):
    ffmodel = FFModel(FFConfig(argv=[], batch_size=BATCH))
    x = ffmodel.create_tensor([BATCH, 3], DataType.DT_FLOAT)
    w = ffmodel.create_weight([3], trainable=trainable, name="scale")
    out = ffmodel.multiply(x, w)
    return ffmodel, x, w, out


def rng_arrays():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((BATCH, 3)).astype(np.float32),
            rng.standard_normal(3).astype(np.float32),
            rng.standard_normal((BATCH, 3)).astype(np.float32))


def train_one_step(trainable):
    data, value, label = rng_arrays()
    ffmodel, x, w, out = build(trainable)
    param = w.owner_op.get_parameter_by_id(0)
    param.set_weights(ffmodel, value)  # before compile: the initial value
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, LR),
                    loss_type=LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE)
    np.testing.assert_array_equal(param.get_weights(ffmodel), value)
    x.set_tensor(ffmodel, data)
    ffmodel.label_tensor.set_tensor(ffmodel, label)
    ffmodel.train_step()
    return value, data, label, param.get_weights(ffmodel)


def test_trainable_weight_is_updated_like_torch():
    value, data, label, updated = train_one_step(trainable=True)
    w = torch.tensor(value, requires_grad=True)
    loss = ((torch.tensor(data) * w - torch.tensor(label)) ** 2).mean()
    loss.backward()
    np.testing.assert_allclose(updated, (w - LR * w.grad).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_frozen_weight_never_changes():
    value, _, _, updated = train_one_step(trainable=False)
    np.testing.assert_array_equal(updated, value)


def test_set_weights_before_compile_survives_a_recompile_and_checks_the_shape():
    ffmodel, x, w, out = build()
    param = w.owner_op.get_parameter_by_id(0)
    value = np.array([1.0, 2.0, 3.0], np.float32)
    param.set_weights(ffmodel, value)
    value[:] = 0  # the model keeps its own copy
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        param.set_weights(ffmodel, np.zeros(2, np.float32))
    for _ in range(2):
        ffmodel.compile(optimizer=SGDOptimizer(ffmodel, LR))
        np.testing.assert_array_equal(param.get_weights(ffmodel), [1.0, 2.0, 3.0])
    x.set_tensor(ffmodel, np.ones((BATCH, 3), np.float32))
    ffmodel.forward(training=False)
    np.testing.assert_array_equal(out.get_tensor(ffmodel), np.tile([1.0, 2.0, 3.0], (BATCH, 1)))


@pytest.mark.parametrize("trainable", [True, False])
def test_only_a_trainable_weight_gets_an_update_and_its_memory(trainable):
    """A frozen weight is a constant: no update task runs for it, and the simulator charges it
    no gradient and no optimizer state."""
    from flexflow.scheduler import actions as A
    from flexflow.scheduler.memory import weight_memory
    ffmodel, x, w, out = build(trainable)
    ffmodel.compile(optimizer=SGDOptimizer(ffmodel, LR, momentum=0.9),
                    loss_type=LossType.LOSS_MEAN_SQUARED_ERROR_AVG_REDUCE)
    owner = w.owner_op.idx
    taskgraph = ffmodel.compiled.executor.taskgraph
    updated = [t.action.key[0] for t in taskgraph.tasks if isinstance(t.action, A.Update)]
    assert (owner in updated) == trainable
    devices = {k: v for k, v in taskgraph.weight_devices.items() if k[0] == owner}
    weight_bytes = 3 * 4
    # trained: the weight, its gradient and one momentum buffer; frozen: the weight alone
    assert weight_memory(ffmodel.graph, devices, 1, 1, True) == [
        weight_bytes * (3 if trainable else 1)]

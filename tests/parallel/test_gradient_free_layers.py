"""A layer whose outputs carry no gradient (a bool mask: a comparison, a where over bools) still
has a backward, which frees what its forward kept; with no gradient to wait for, it must still
wait for its own forward. The case that showed it: a mask split by sample that reads an unsplit
constant from another device (a causal mask meeting a padding mask), so that the forward of the
second part waits on a message while its backward could already run."""

import numpy as np

from flexflow.core import DataType, FFConfig, FFModel, LossType, SGDOptimizer
from flexflow.scheduler.actions import Backward

BATCH, LENGTH, CLASSES, STEPS = 4, 8, 3, 3
TWO_DEVICES = ["-ll:gpu", "2", "--in-process"]


def masked_model(argv):
    """(ffmodel, ids): a padding mask from int64 ids, and-ed (as a where) with a frozen causal
    mask, cast to float and classified by a dense layer."""
    ff = FFModel(FFConfig(argv=list(argv), batch_size=BATCH))
    ids = ff.create_tensor([BATCH, LENGTH], DataType.DT_INT64)
    padding = ff.reshape(ff.cast(ids, DataType.DT_BOOLEAN), [BATCH, 1, 1, LENGTH])
    causal = ff.create_weight([1, 1, LENGTH, LENGTH], trainable=False)
    causal.owner_op.get_parameter_by_id(0).set_weights(
        ff, np.tril(np.ones((LENGTH, LENGTH), np.float32))[None, None])
    both = ff.where(ff.cast(causal, DataType.DT_BOOLEAN), padding, padding)
    features = ff.reshape(ff.cast(both, DataType.DT_FLOAT), [BATCH, LENGTH * LENGTH])
    ff.softmax(ff.dense(features, CLASSES))
    ff.compile(optimizer=SGDOptimizer(ff, 0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, ids


def losses(argv) -> list[float]:
    ff, ids = masked_model(argv)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(STEPS):
        ids.set_tensor(ff, rng.integers(0, 2, (BATCH, LENGTH)))
        ff.label_tensor.set_tensor(ff, rng.integers(0, CLASSES, (BATCH, 1)).astype(np.int32))
        out.append(ff.train_step())
    return out


def test_a_mask_split_by_sample_trains_on_two_devices_as_on_one():
    np.testing.assert_allclose(losses(TWO_DEVICES), losses([]), rtol=1e-6)


def test_every_backward_waits_for_something():
    ff, _ = masked_model(TWO_DEVICES)
    backwards = [t for t in ff.compiled.executor.taskgraph.tasks if isinstance(t.action, Backward)]
    assert backwards and all(t.deps for t in backwards)

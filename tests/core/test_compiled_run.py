"""CompiledRun (flexflow/compiled.py): what compile() makes owns the counters that running
changes, and each run reads the frozen IterationState it is given, not the model's feeds."""

import dataclasses

import numpy as np
import pytest

from flexflow.core import FFConfig, FFModel, LossType, SGDOptimizer

BATCH = 4


def build(argv=()):
    ff = FFModel(FFConfig(argv=list(argv), batch_size=BATCH))
    x = ff.create_tensor([BATCH, 6])
    ff.softmax(ff.dense(ff.dropout(ff.dense(x, 8), 0.5), 3))
    ff.compile(optimizer=SGDOptimizer(ff, 0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, x


def batch(seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((BATCH, 6)).astype(np.float32),
            rng.integers(0, 3, (BATCH, 1)).astype(np.int32))


def feed(ff, x, seed):
    images, labels = batch(seed)
    x.set_tensor(ff, images)
    ff.label_tensor.set_tensor(ff, labels)


def test_updates_are_counted_by_the_compiled_run():
    ff, x = build()
    run = ff.compiled
    assert (run.step, run.updates) == (0, 0)
    feed(ff, x, 0)
    ff.train_step()
    ff.train_step()
    assert (run.step, run.updates) == (2, 2)
    ff.eval_step()
    ff.forward()
    ff.backward()
    assert (run.step, run.updates) == (2, 2)
    ff.update()
    assert (run.step, run.updates) == (3, 3)


@pytest.mark.parametrize("argv", [[], ["-ll:gpu", "2", "--in-process"]])
def test_a_run_reads_the_state_it_is_given(argv):
    """The state keeps the batches it was made with: feeding the model, or changing the mapping
    the state was made from, does not change what a run on it computes."""
    ff, x = build(argv)
    images, labels = batch(1)
    input_id, label_id = ff.graph.inputs[0], ff.objective.label
    feeds = {input_id: images, label_id: labels}
    state = ff.compiled.iteration(feeds, training=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.step = 5
    first = ff.compiled.run(("forward", "loss"), state)
    feeds[input_id] = -images
    feed(ff, x, 2)
    again = ff.compiled.run(("forward", "loss"), state)
    other = ff.compiled.run(("forward", "loss"), ff.compiled.iteration(feeds, training=True))
    assert again == first
    assert [piece["loss"] for piece in other] != [piece["loss"] for piece in first]

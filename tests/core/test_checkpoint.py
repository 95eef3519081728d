"""Checkpoints: capture/restore of the training state in memory, and save_checkpoint /
load_checkpoint files. The oracle is the uninterrupted run of the same script: stopping, restoring
into a new model (under any strategy) and going on must give its per-step losses and weights."""

import numpy as np
import pytest

from flexflow.checkpoint import capture, restore
from flexflow.core import (ActiMode, AdamOptimizer, DataType, FFConfig, FFModel, LossType,
                           MetricsType, SGDOptimizer)
from flexflow.scheduler.strategy import ParallelConfig

BATCH, CLASSES, STEPS, STOP = 8, 4, 6, 3
OPTIMIZERS = {"sgd": lambda ff: SGDOptimizer(ff, lr=0.05, momentum=0.9),
              "adam": lambda ff: AdamOptimizer(ff, alpha=0.01)}


def build(optimizer="sgd", argv=(), strategy=None):
    """A small CNN with batch norm (running statistics) and dropout (masks seeded by the step)."""
    ff = FFModel(FFConfig(argv=list(argv), batch_size=BATCH))
    x = ff.create_tensor([BATCH, 2, 4, 4], DataType.DT_FLOAT)
    t = ff.conv2d(x, 4, 3, 3, 1, 1, 1, 1, use_bias=False)  # a bias before batch norm: noise
    t = ff.batch_norm(t)
    t = ff.dropout(t, 0.3)
    t = ff.flat(t)
    t = ff.dense(t, 8, ActiMode.AC_MODE_RELU)
    ff.softmax(ff.dense(t, CLASSES))
    ff.compile(optimizer=OPTIMIZERS[optimizer](ff),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY],
               strategy=None if strategy is None else strategy(ff.graph))
    return ff, x


def data(samples=STEPS * BATCH, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((samples, 2, 4, 4)).astype(np.float32),
            rng.integers(0, CLASSES, (samples, 1)).astype(np.int32))


def train(ff, x, steps, first=0):
    """Per-step losses of training on batches first .. first+steps-1."""
    images, labels = data()
    losses = []
    for step in range(first, first + steps):
        x.set_tensor(ff, images[step * BATCH:(step + 1) * BATCH])
        ff.label_tensor.set_tensor(ff, labels[step * BATCH:(step + 1) * BATCH])
        losses.append(ff.train_step())
    return losses


def all_weights(ff):
    return [ff.get_layer_by_id(i).get_parameter_by_id(k).get_weights(ff)
            for i in range(len(ff.graph.layers))
            for k in range(ff.get_layer_by_id(i).get_number_parameters())]


def assert_same_training(run, reference, rtol=0.0):
    np.testing.assert_allclose(run[0], reference[0], rtol=rtol)
    for w, w_ref in zip(run[1], reference[1]):
        np.testing.assert_allclose(w, w_ref, rtol=rtol, atol=1e-7 if rtol else 0)


def uninterrupted(optimizer, argv=(), strategy=None):
    ff, x = build(optimizer, argv, strategy)
    return train(ff, x, STEPS), all_weights(ff)


def split_by_features(graph):
    """Not data parallel: the convolution and the hidden dense layer split by output channels,
    the dropout by height, the rest on one device."""
    configs = {}
    for layer in graph.layers:
        rank = graph.tensors[layer.outputs[0]].spec.ndim
        degrees, devices = (1,) * rank, (layer.index % 2,)
        if layer.type_name in ("Conv2D", "Dense") and layer.index < 5:
            degrees, devices = (1, 2) + (1,) * (rank - 2), (1, 0)
        elif layer.type_name == "Dropout":
            degrees, devices = (1, 1, 2, 1), (0, 1)
        configs[layer.name] = ParallelConfig(degrees, devices)
    return configs


# ---- in memory ----------------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_restore_into_a_new_model_continues_the_same_training(optimizer):
    reference = uninterrupted(optimizer)
    ff, x = build(optimizer)
    before = train(ff, x, STOP)
    state = capture(ff)
    resumed, x2 = build(optimizer)
    restore(resumed, state)
    after = train(resumed, x2, STEPS - STOP, first=STOP)
    assert_same_training((before + after, all_weights(resumed)), reference)


def test_state_holds_every_weight_the_slots_and_the_counters():
    ff, x = build("adam")
    train(ff, x, 2)
    state = capture(ff)
    layers = ff.graph.layers
    names = {(layers[owner].type_name, layers[owner].weights[k].name)
             for owner, k in state.weights}
    assert ("BatchNorm", "running_mean") in names and ("BatchNorm", "running_var") in names
    trained = {ref for ref in state.weights
               if layers[ref[0]].weights[ref[1]].role not in ("running_mean", "running_var")}
    assert set(state.optimizer) == trained
    assert all(set(slots) == {"m", "v"} for slots in state.optimizer.values())
    assert (state.step, state.updates) == (2, 2)
    assert set(state.strategy) == {layer.name for layer in layers}


def test_restore_replaces_a_trained_models_optimizer_state():
    """A state captured before any update restores a model that has trained since: its
    optimizer slots are cleared, so the run repeats the first one exactly."""
    ff, x = build("sgd")
    initial = capture(ff)
    assert initial.optimizer == {}
    first = train(ff, x, STEPS), all_weights(ff)
    restore(ff, initial)
    again = train(ff, x, STEPS), all_weights(ff)
    assert_same_training(again, first)


def test_two_devices_split_by_features_restored_into_data_parallel():
    argv = ["-ll:gpu", "2", "--in-process"]
    reference = uninterrupted("adam")
    ff, x = build("adam", argv, split_by_features)
    assert ff.strategy != build("adam", argv)[0].strategy
    before = train(ff, x, STOP)
    resumed, x2 = build("adam", argv)
    restore(resumed, capture(ff))
    after = train(resumed, x2, STEPS - STOP, first=STOP)
    assert_same_training((before + after, all_weights(resumed)), reference, rtol=1e-4)


def test_fit_resumes_at_the_captured_epoch_and_iteration():
    """fit is stopped inside its second epoch; a new model restored from the last state fits on
    with the same `epochs` and trains exactly the batches the first run had left."""
    images, labels = data(samples=3 * BATCH)

    def fit(ff, x, losses, stop_after=None):
        step = ff.train_step

        def recording_step():
            if len(losses) == stop_after:
                raise KeyboardInterrupt
            losses.append(step())
            return losses[-1]
        ff.train_step = recording_step
        ff.fit(x=ff.create_data_loader(x, images),
               y=ff.create_data_loader(ff.label_tensor, labels), epochs=2)

    reference = []
    fit(*build("sgd"), reference)
    interrupted = []
    ff, x = build("sgd")
    with pytest.raises(KeyboardInterrupt):
        fit(ff, x, interrupted, stop_after=4)
    state = capture(ff)
    assert (state.epoch, state.iteration) == (1, 1)
    resumed, x2 = build("sgd")
    restore(resumed, state)
    fit(resumed, x2, interrupted)
    np.testing.assert_array_equal(interrupted, reference)
    assert len(reference) == 6


def test_capture_and_restore_on_a_cluster_of_worker_processes():
    """The DaskExecutor's stores live in worker processes: a state captured there continues in
    this process, and a state restored there (into a model that trained on) continues too."""
    reference = uninterrupted("adam")
    ff, x = build("adam", ["-ll:gpu", "2"], split_by_features)
    before = train(ff, x, STOP)
    state = capture(ff)
    resumed, x2 = build("adam")
    restore(resumed, state)
    assert_same_training((before + train(resumed, x2, STEPS - STOP, first=STOP),
                          all_weights(resumed)), reference, rtol=1e-4)
    train(ff, x, 2, first=STOP)
    restore(ff, state)
    assert_same_training((before + train(ff, x, STEPS - STOP, first=STOP), all_weights(ff)),
                         reference, rtol=1e-4)

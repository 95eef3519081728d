"""Windows of iterations (CompiledRun.run_window): a fit on a cluster submits one Dask graph per
window, whose programs run its iterations on the workers, and prints, trains and stops exactly
as iteration by iteration; the non-finite guard stops at the same iteration with the same
weights."""


import numpy as np
import pytest

from flexflow import compiled, keras
from flexflow.core import (ActiMode, DataType, FFConfig, FFModel, LossType, MetricsType,
                           SGDOptimizer)
from flexflow.nonfinite import NonFiniteError
from flexflow.scheduler import cluster as cluster_module

from .cluster import loopback_cluster
from .training import all_weights, metric_lines, numbers

BATCH, SAMPLES, EPOCHS = 8, 80, 2  # 10 iterations an epoch


@pytest.fixture(scope="module")
def scheduler_address():
    with loopback_cluster(workers=2) as address:
        yield address
        cluster_module.disconnect(address)


def images(bad_row=None):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SAMPLES, 10)).astype(np.float32)
    if bad_row is not None:
        x[bad_row, 3] = np.inf
    return x, (x[:, :4].argmax(1)).astype(np.int32).reshape(-1, 1)


def fit(argv, capsys, bad_row=None):
    """A 2-epoch fit of an MLP; (weights, [Metrics] lines, the error it stopped with)."""
    ff = FFModel(FFConfig(argv=argv, batch_size=BATCH, epochs=EPOCHS))
    x = ff.create_tensor([BATCH, 10], DataType.DT_FLOAT)
    ff.softmax(ff.dense(ff.dense(x, 16, ActiMode.AC_MODE_RELU), 4))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.05, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY])
    xs, ys = images(bad_row)
    capsys.readouterr()
    error = None
    try:
        ff.fit(x=ff.create_data_loader(x, xs), y=ff.create_data_loader(ff.label_tensor, ys),
               epochs=EPOCHS)
    except NonFiniteError as raised:
        error = raised
    lines = metric_lines(capsys)
    weights = all_weights(ff)
    return weights, lines, error


def assert_same_fit(run, reference):
    (weights, lines, error), (ref_weights, ref_lines, ref_error) = run, reference
    assert len(lines) == len(ref_lines)
    for line, ref_line in zip(lines, ref_lines):
        np.testing.assert_allclose(numbers(line), numbers(ref_line), rtol=1e-5, atol=1e-7)
    for w, w_ref in zip(weights, ref_weights):
        np.testing.assert_allclose(w, w_ref, rtol=1e-5, atol=1e-6)
    assert (error is None) == (ref_error is None)
    if error is not None:
        assert (error.iteration, error.layer, error.tensor) == (
            ref_error.iteration, ref_error.layer, ref_error.tensor)


def count_graphs(monkeypatch) -> list:
    """The iterations of each window submitted to a cluster."""
    from flexflow.scheduler.distributed import DaskExecutor
    windows, original = [], DaskExecutor.run_window

    def run_window(self, phases, states, *args, **kwargs):
        windows.append(len(states))
        return original(self, phases, states, *args, **kwargs)
    monkeypatch.setattr(DaskExecutor, "run_window", run_window)
    return windows


def test_a_fit_runs_in_windows_and_trains_as_iteration_by_iteration(scheduler_address,
                                                                     capsys, monkeypatch):
    reference = fit(["-ll:gpu", "2", "--in-process"], capsys)
    windows = count_graphs(monkeypatch)
    run = fit(["--scheduler", scheduler_address, "-ll:gpu", "2", "--recovery-interval", "4"],
              capsys)
    assert windows == [4, 4, 2, 2, 4, 4]  # up to each recovery copy, and each epoch's end
    assert_same_fit(run, reference)
    assert len(run[1]) == EPOCHS * SAMPLES // BATCH


def test_without_a_journal_windows_go_to_the_epoch_s_end_when_the_guard_is_off(
        scheduler_address, capsys, monkeypatch):
    monkeypatch.setattr(compiled, "WINDOW_LIMIT", 6)
    windows = count_graphs(monkeypatch)
    run = fit(["--scheduler", scheduler_address, "-ll:gpu", "2", "--recovery-interval", "0",
               "--allow-nonfinite"], capsys)
    assert windows == [6, 4] * EPOCHS
    assert_same_fit(run, fit(["-ll:gpu", "2", "--in-process", "--allow-nonfinite"], capsys))


@pytest.mark.parametrize("bad_batch", [0, 6, 9])
def test_the_guard_stops_a_window_where_iteration_by_iteration_stops(scheduler_address,
                                                                     capsys, bad_batch):
    bad_row = bad_batch * BATCH + 3
    reference = fit(["-ll:gpu", "2", "--in-process"], capsys, bad_row)
    run = fit(["--scheduler", scheduler_address, "-ll:gpu", "2", "--recovery-interval", "8"],
              capsys, bad_row)
    assert reference[2] is not None and reference[2].iteration == bad_batch + 1
    assert_same_fit(run, reference)


class StepsSeen(keras.callbacks.Callback):
    """Reads the model in its batch hook: the run's update count as each batch ends."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_batch_end(self, batch, logs=None):
        self.seen.append(self.model.ffmodel.compiled.updates)


@pytest.mark.parametrize("callback", [None, StepsSeen])
def test_keras_fit_waits_its_batch_hooks_for_a_window_only_when_they_read_logs(
        scheduler_address, monkeypatch, callback):
    windows = count_graphs(monkeypatch)
    keras.backend.clear_session()
    model = keras.models.Sequential(
        [keras.layers.Dense(16, activation="relu", input_shape=(10,)),
         keras.layers.Dense(4, activation="softmax")],
        ffconfig=FFConfig(argv=["--scheduler", scheduler_address, "-ll:gpu", "2"],
                          batch_size=BATCH))
    model.compile(keras.optimizers.SGD(learning_rate=0.05), "sparse_categorical_crossentropy",
                  ["accuracy"])
    callbacks = [callback()] if callback else []
    history = model.fit(*images(), epochs=EPOCHS, verbose=0, callbacks=callbacks)
    assert len(history.history["loss"]) == EPOCHS
    if callback:
        assert windows == [1] * (EPOCHS * SAMPLES // BATCH)
        assert callbacks[0].seen == list(range(1, EPOCHS * SAMPLES // BATCH + 1))
    else:
        assert max(windows) > 1 and sum(windows) == EPOCHS * SAMPLES // BATCH

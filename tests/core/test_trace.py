"""Hand-written loops inside begin_trace / end_trace (flexflow/trace.py): each iteration's
forward, zero_gradients, backward and update become one training step, with the numbers and the
printed `[Metrics]` lines of the calls made one by one."""

import numpy as np
import pytest

from flexflow.compiled import CompiledRun
from flexflow.core import (ActiMode, DataType, FFConfig, FFModel, LossType, MetricsType,
                           SGDOptimizer)

from ..parallel.training import all_weights, metric_lines

BATCH, SAMPLES = 8, 32
RUN = CompiledRun.run


def hand_written_loop(argv, capsys, monkeypatch, order=("forward", "zero_gradients",
                                                           "backward", "update"),
                      traced=True, inside=None):
    """Two epochs of a FlexFlow-style loop (dropout included); the weights, the printed
    metric lines and the runs made. `inside(ff)` is called inside each trace."""
    config = FFConfig(argv=argv, batch_size=BATCH)
    ff = FFModel(config)
    x = ff.create_tensor([BATCH, 6], DataType.DT_FLOAT)
    t = ff.dropout(ff.dense(x, 16, ActiMode.AC_MODE_RELU), 0.25, seed=3)
    ff.softmax(ff.dense(t, 3))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.1, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY])
    rng = np.random.default_rng(0)
    images = rng.standard_normal((SAMPLES, 6)).astype(np.float32)
    labels = images[:, :3].argmax(1).astype(np.int32).reshape(-1, 1)
    loaders = [ff.create_data_loader(x, images), ff.create_data_loader(ff.label_tensor, labels)]
    runs = []
    monkeypatch.setattr(CompiledRun, "run", lambda self, phases, *a, **k: (
        runs.append(phases), RUN(self, phases, *a, **k))[1])
    capsys.readouterr()
    for _ in range(2):
        for loader in loaders:
            loader.reset()
        ff.reset_metrics()
        for _ in range(SAMPLES // BATCH):
            for loader in loaders:
                loader.next_batch(ff)
            if traced:
                config.begin_trace(111)
            for call in order:
                getattr(ff, call)()
            if inside is not None:
                inside(ff)
            if traced:
                config.end_trace(111)
    return all_weights(ff), metric_lines(capsys), runs


@pytest.mark.parametrize("argv", [[], ["-ll:gpu", "2", "--in-process"]])
def test_a_traced_iteration_is_one_training_step_with_the_same_numbers(argv, capsys,
                                                                       monkeypatch):
    weights, lines, runs = hand_written_loop(argv, capsys, monkeypatch)
    plain_weights, plain_lines, plain_runs = hand_written_loop(argv, capsys, monkeypatch,
                                                               traced=False)
    assert runs == [("forward", "loss", "backward", "update")] * 8
    assert plain_runs == [("forward",), ("loss", "backward"), ("update",)] * 8
    assert lines == plain_lines and len(lines) == 8
    for w, plain in zip(weights, plain_weights):
        np.testing.assert_allclose(w, plain, rtol=1e-6, atol=1e-7)


def test_other_orders_inside_a_trace_are_made_call_by_call(capsys, monkeypatch):
    order = ("zero_gradients", "forward", "backward", "forward", "update")
    weights, lines, runs = hand_written_loop([], capsys, monkeypatch, order)
    plain_weights, plain_lines, _ = hand_written_loop([], capsys, monkeypatch, order,
                                                      traced=False)
    assert runs[:4] == [("forward",), ("loss", "backward"), ("forward",), ("update",)]
    assert lines == plain_lines
    for w, plain in zip(weights, plain_weights):
        np.testing.assert_allclose(w, plain, rtol=1e-6, atol=1e-7)


def test_reading_the_model_inside_a_trace_makes_what_it_deferred_first(capsys, monkeypatch):
    seen = []
    weights, _, runs = hand_written_loop(
        [], capsys, monkeypatch, inside=lambda ff: seen.append(all_weights(ff)[0].copy()))
    assert len(runs) == 8  # still one training step an iteration
    np.testing.assert_array_equal(seen[-1], weights[0])  # the last read saw the last update


def test_traces_must_be_closed_by_their_own_id():
    config = FFConfig(argv=[])
    with pytest.raises(RuntimeError, match=r"end_trace\(5\) does not end a trace: none is open"):
        config.end_trace(5)
    config.begin_trace(1)
    with pytest.raises(RuntimeError, match=r"begin_trace\(2\) inside trace 1"):
        config.begin_trace(2)
    with pytest.raises(RuntimeError, match="trace 1 is open"):
        config.end_trace(2)
    config.end_trace(1)
    assert not config.tracing

"""A whole step drops each activation and gradient at its last use (scheduler/last_use.py): the
same numbers as phases run one by one (which keep everything), only the model's outputs left on
the device afterwards, a micro-batch's rows dropped once no later read on the device meets them,
and a clear error for a host read of what was dropped."""

from __future__ import annotations

import numpy as np
import pytest

from flexflow.core import (ActiMode, DataType, FFConfig, FFModel, LossType, MetricsType,
                           SGDOptimizer)
from flexflow.scheduler.last_use import outputs

BATCH = 8


def model(argv=()):
    """A residual MLP: the block input is read twice (by the dense layer and the add)."""
    ff = FFModel(FFConfig(argv=list(argv), batch_size=BATCH))
    x = ff.create_tensor([BATCH, 16], DataType.DT_FLOAT)
    h = ff.dense(x, 16, ActiMode.AC_MODE_RELU)
    block = ff.add(ff.dense(h, 16), h)
    ff.softmax(ff.dense(ff.relu(block), 4))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.1, momentum=0.9),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,
               metrics=[MetricsType.METRICS_ACCURACY])
    rng = np.random.default_rng(0)
    x.set_tensor(ff, rng.standard_normal((BATCH, 16)).astype(np.float32))
    ff.label_tensor.set_tensor(ff, rng.integers(0, 4, (BATCH, 1)).astype(np.int32))
    return ff, h, block


def weights(ff):
    state = ff.compiled.capture()
    return [state.weights[ref] for ref in sorted(state.weights)]


def step_by_phases(ff):
    ff.forward()
    ff.zero_gradients()
    ff.backward()
    ff.update()


def test_a_step_that_frees_gives_the_numbers_of_the_phases_run_one_by_one():
    fused, _, _ = model()
    phased, _, _ = model()
    for _ in range(3):
        fused.train_step()
        step_by_phases(phased)
    for got, want in zip(weights(fused), weights(phased)):
        np.testing.assert_array_equal(got, want)


def test_after_a_step_a_device_holds_only_the_model_outputs():
    ff, _, _ = model()
    ff.train_step()
    store = ff.compiled.executor.stores[0]
    assert set(store.values) <= outputs(ff.graph) and store.values
    last = len(ff.graph.layers) - 1  # the softmax, whose backward the loss's gradient skips
    assert not store.grads and {layer for layer, _ in store.saved} <= {last}


def test_phases_run_one_by_one_keep_every_value():
    ff, h, block = model()
    step_by_phases(ff)
    assert set(ff.compiled.executor.stores[0].values) > outputs(ff.graph)
    assert h.get_tensor(ff).shape == (BATCH, 16)


def test_reading_a_freed_value_or_gradient_says_so_and_how_to_keep_it():
    ff, h, block = model()
    ff.train_step()
    with pytest.raises(RuntimeError, match=r"values of .* were freed at their last use.*"
                                           r"forward\(\)"):
        h.get_tensor(ff)
    with pytest.raises(RuntimeError, match="gradient of .* were freed"):
        block.get_gradients(ff)
    ff.forward()
    np.testing.assert_array_equal(h.get_tensor(ff), np.maximum(h.get_tensor(ff), 0))


def test_a_micro_batchs_rows_go_after_the_last_read_that_meets_them():
    """Reads of rows (0, 4), (4, 8), then (0, 4) again: rows (4, 8) go after their read, since
    no later read meets them; rows (0, 4) only with the whole, after the last read; a read of
    unknown rows (a scalar's) drops nothing early."""
    from flexflow.scheduler.last_use import GRAD, _releases
    found = [((0, 0), (0, 4)), ((1, 0), (4, 8)), ((2, 0), (0, 4))]
    assert _releases(GRAD, 7, found) == [((1, 0), (GRAD, 7, (4, 8))), ((2, 0), (GRAD, 7, None))]
    assert _releases(GRAD, 7, [((0, 0), None), ((1, 0), (0, 4))]) == [
        ((1, 0), (GRAD, 7, None))]


def test_dropping_rows_keeps_the_pieces_outside_them():
    from flexflow.ops.box import Box
    from flexflow.scheduler.last_use import VALUE, release
    from flexflow.scheduler.store import DeviceStore
    store = DeviceStore(0, np)
    for rows in ((0, 4), (4, 8), (2, 6)):
        store.put(3, Box((rows, (0, 2))), np.zeros((4, 2), np.float32))
    release(store, [(VALUE, 3, (0, 4))])
    assert [box.bounds[0] for box, _ in store.values[3]] == [(4, 8), (2, 6)]
    assert not store.released
    release(store, [(VALUE, 3, None)])
    assert 3 not in store.values and store.released == {(VALUE, 3)}

"""A data loader keeps FlexFlow's snapshot guarantee (a later change to the array never reaches
it) without a second copy of an array nothing else can write: flexflow/dataloader.py."""

from __future__ import annotations

import numpy as np
import pytest

from flexflow.core import DataType, FFConfig, FFModel, LossType, SGDOptimizer

SAMPLES, BATCH = 8, 4


def model():
    ff = FFModel(FFConfig(argv=[], batch_size=BATCH))
    x = ff.create_tensor([BATCH, 3], DataType.DT_FLOAT)
    ff.softmax(ff.dense(x, 2))
    ff.compile(optimizer=SGDOptimizer(ff, lr=0.1),
               loss_type=LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
    return ff, x


def data():
    return np.arange(SAMPLES * 3, dtype=np.float32).reshape(SAMPLES, 3)


def test_an_array_that_owns_its_memory_is_kept_as_it_is_and_made_read_only():
    ff, x = model()
    array = data()
    loader = ff.create_data_loader(x, array)
    assert np.shares_memory(loader._data.array, array)  # no second copy
    with pytest.raises(ValueError, match="read-only"):
        array[0, 0] = -1.0  # a write no longer goes unseen


def test_a_view_of_a_writable_array_is_copied_and_later_writes_do_not_reach_it():
    ff, x = model()
    whole = np.concatenate([data(), data()])
    loader = ff.create_data_loader(x, whole[:SAMPLES])
    assert not np.shares_memory(loader._data.array, whole)
    whole[:] = -1.0  # still writable, and the loader's data is its own
    np.testing.assert_array_equal(loader._data.array, data())


def test_read_only_arrays_and_memory_maps_are_used_as_they_are(tmp_path):
    ff, x = model()
    frozen = data()
    frozen.flags.writeable = False
    assert ff.create_data_loader(x, frozen)._data.array is frozen
    path = tmp_path / "samples.bin"
    data().tofile(path)
    mapped = np.memmap(path, np.float32, "r", shape=(SAMPLES, 3))
    assert np.shares_memory(ff.create_data_loader(x, mapped)._data.array, mapped)


def test_the_batches_fed_are_the_array_s_rows():
    ff, x = model()
    loader = ff.create_data_loader(x, data())
    loader.next_batch(ff)
    loader.next_batch(ff)
    np.testing.assert_array_equal(x.get_tensor(ff), data()[BATCH:2 * BATCH])

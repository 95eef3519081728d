"""Data loaders: feed a model input (or the label) batch by batch from a host array.

Batches are read sequentially from sample 0 with no shuffling, as FlexFlow does. The loader's
array is a `DataSet` (scheduler/feeds.py): on a cluster it is placed on the workers that load it
once, as FlexFlow copies a loader's array to the devices' side once, and `next_batch` hands the
model the rows of the next `batch_size` samples, which the devices cut out themselves (and
slice further to the boxes their partitions need).

FlexFlow's loader copies its array when it is made: a later change to the array does not reach
it. Ours keeps that guarantee without a second copy of the data set (a data set can be most of a
machine's memory: FlexFlow's native resnet.py builds 6.3 GB of images): an array nothing can
write any more (read-only, a read-only memory map) is used as it is; an array that owns its
memory (or a memory map), or the one view of an array nothing else refers to (`np.zeros(n *
m).reshape(n, m)`), is used as it is and made read-only, so that a later write raises numpy's
"assignment destination is read-only" instead of going unseen (pass `array.copy()` to keep
writing to yours; views made of it earlier stay writable); any other array (a view of an array
held elsewhere) is copied.
"""

from __future__ import annotations

import mmap
import sys

import numpy as np

from .ops.spec import ShapeError
from .scheduler.feeds import DataSet
from .tensor import Tensor, tensor_name
from .type import NUMPY_DTYPE


class SingleDataLoader:
    def __init__(self, ffmodel, input: Tensor, full_input, num_samples: int | None = None,
                 data_type=None):
        array = full_input._attached if isinstance(full_input, Tensor) else full_input
        if array is None:
            raise ShapeError(f"data loader for {tensor_name(ffmodel, input._id)}: the full tensor "
                             f"has no data; call attach_numpy_array on it first")
        self._model = ffmodel
        self._input = input
        self._data = DataSet(unchangeable(check_full_array(ffmodel, input, array)))
        samples = len(self._data.array)
        self._num_samples = samples if num_samples is None else int(num_samples)
        if not 0 < self._num_samples <= samples:
            raise ShapeError(f"data loader: num_samples {self._num_samples} must be in "
                             f"1..{samples}")
        self._position = 0

    @property
    def num_samples(self) -> int:
        return self._num_samples

    @num_samples.setter
    def num_samples(self, value: int) -> None:
        self._num_samples = int(value)

    def get_num_samples(self) -> int:
        return self._num_samples

    def set_num_samples(self, value: int) -> None:
        self.num_samples = value

    def reset(self) -> None:
        self._position = 0

    def next_batch(self, ffmodel=None) -> None:
        batch = self._input.dims[0]
        if self._position + batch > self._num_samples:
            self._position = 0
        self._model._feed(self._input._id,
                          self._data[self._position:self._position + batch])
        self._position += batch


def unchangeable(array: np.ndarray) -> np.ndarray:
    """`array` as a loader keeps it: itself where nothing can write it after this, else a
    copy (module docstring)."""
    owner = array.base if isinstance(array.base, np.ndarray) else array  # numpy's views
    if not (array.flags.writeable or owner.flags.writeable) and not isinstance(
            owner.base, bytearray):
        return array
    # referred to by its view, by `owner` here and by the call only
    sole_view = owner is not array and sys.getrefcount(owner) == 3
    if (owner is array or sole_view) and (owner.base is None or isinstance(owner.base, mmap.mmap)):
        for held in (array, owner):  # the loader owns it from now on
            held.flags.writeable = False
        return array
    return np.array(array)


def check_full_array(ffmodel, tensor: Tensor, array) -> np.ndarray:
    """The array a loader may read batches of `tensor` from, or a ShapeError saying why not."""
    array = np.asarray(array)
    name = tensor_name(ffmodel, tensor._id)
    expected_dtype = NUMPY_DTYPE[tensor.data_type]
    if array.ndim != tensor.num_dims or tuple(array.shape[1:]) != tensor.dims[1:]:
        raise ShapeError(f"data for {name}: expected an array of shape (num_samples,) + "
                         f"{tensor.dims[1:]}, got {tuple(array.shape)}")
    if array.dtype != np.dtype(expected_dtype):
        raise ShapeError(f"data for {name}: expected dtype {expected_dtype}, got {array.dtype}")
    if len(array) < tensor.dims[0]:
        raise ShapeError(f"data for {name}: {len(array)} samples is fewer than one batch of "
                         f"{tensor.dims[0]}")
    return np.ascontiguousarray(array)


def check_same_samples(loaders: list, what: str) -> None:
    """A ShapeError unless the loaders of one fit or eval (the inputs', then the label's) hold
    as many samples each: batches of loaders of different lengths would not pair up, and the
    shorter ones would wrap round silently."""
    counts = [loader.num_samples for loader in loaders]
    if len(set(counts)) > 1:
        inputs = ", ".join(f"x[{i}] has {n}" for i, n in enumerate(counts[:-1]))
        raise ShapeError(f"{what}: the data loaders hold different numbers of samples ({inputs}, "
                         f"y has {counts[-1]}); each input's loader must pair sample by sample "
                         f"with the label's")


class _PairedLoader:
    """FlexFlow's legacy loaders that feed an input and its label together."""

    def __init__(self, ffmodel, input, label, full_input=None, full_label=None,
                 num_samples=0, *args):
        self._loaders = [SingleDataLoader(ffmodel, input, full_input, num_samples or None),
                         SingleDataLoader(ffmodel, label, full_label, num_samples or None)]
        check_same_samples(self._loaders, type(self).__name__)

    @property
    def num_samples(self) -> int:
        return self._loaders[0].num_samples

    def next_batch(self, ffmodel=None) -> None:
        for loader in self._loaders:
            loader.next_batch(ffmodel)

    def reset(self) -> None:
        for loader in self._loaders:
            loader.reset()


class DataLoader2D(_PairedLoader):
    pass


class DataLoader4D(_PairedLoader):
    pass

"""The arrays fit/evaluate/predict receive: checked against the model before any work starts, then
cut into batches of FlexFlow's fixed batch size (`-b`).

FlexFlow reads whole batches only: fit and evaluate leave out the last `num_samples % batch_size`
samples (fit draws a new order each epoch when shuffling, so other samples are left out each
time); predict pads the last batch and returns exactly one row per sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Arrays:
    xs: list[np.ndarray]         # one per model input
    y: np.ndarray | None         # the labels (None for predict)

    def __len__(self) -> int:
        return len(self.xs[0])

    def take(self, index) -> "Arrays":
        return Arrays([x[index] for x in self.xs], None if self.y is None else self.y[index])

    def split(self, fraction: float) -> tuple["Arrays", "Arrays"]:
        """(the first part, the last `fraction` of the samples), as Keras's validation_split."""
        cut = int(len(self) * (1.0 - fraction))
        return self.take(slice(0, cut)), self.take(slice(cut, None))

    def batches(self, batch_size: int, order: np.ndarray | None = None):
        """Whole batches, in `order` (a permutation of the samples) or in sequence."""
        for start in range(0, len(self) - batch_size + 1, batch_size):
            index = (slice(start, start + batch_size) if order is None
                     else order[start:start + batch_size])
            yield self.take(index)

    def padded_batches(self, batch_size: int):
        """Every sample, in batches; the last is filled up with copies of its final sample.
        Yields (batch, number of real samples in it)."""
        for start in range(0, len(self), batch_size):
            real = min(batch_size, len(self) - start)
            index = np.minimum(np.arange(start, start + batch_size), len(self) - 1)
            yield self.take(index), real


def check_batch_size(batch_size, model_batch: int, what: str) -> None:
    if batch_size is not None and int(batch_size) != model_batch:
        raise ValueError(f"{what}: batch_size={batch_size} does not match the model's batch size "
                         f"{model_batch}; the batch size is fixed for the whole run by the -b "
                         f"flag (run the script with -b {batch_size}), or pass batch_size=None")


def check_arrays(model, x, y, what: str, need_labels: bool = True) -> Arrays:
    """`x` (an array or a list, one per model input) and `y` as the model expects them, or a
    ValueError/TypeError saying what was expected."""
    inputs = model.input
    xs = [_on_host(a) for a in (x if isinstance(x, (list, tuple)) else [x])]
    y = _on_host(y)
    if isinstance(x, (list, tuple)) and not all(isinstance(a, np.ndarray) for a in xs):
        raise TypeError(f"{what}: x must be a NumPy or Dask array, or a list of them (one per "
                        f"model input), got a {type(x).__name__} of "
                        f"{', '.join(sorted({type(a).__name__ for a in xs}))}")
    if len(xs) != len(inputs):
        raise ValueError(f"{what}: the model has {len(inputs)} input(s) "
                         f"({', '.join(t.name for t in inputs)}), got {len(xs)} array(s) for x")
    for i, (array, tensor) in enumerate(zip(xs, inputs)):
        where = f"{what}: x" + (f"[{i}]" if len(xs) > 1 else "") + f" (input '{tensor.name}')"
        _check_array(array, tensor.shape_without_batch, tensor.dtype_str, where)
    arrays = Arrays(xs, None)
    if need_labels:
        if y is None:
            raise ValueError(f"{what}: y (the labels) is missing")
        shape, dtype = model.label_shape, model.label_dtype
        hint = " (class indices, one per row)" if model.sparse_labels else ""
        _check_array(y, shape, dtype, f"{what}: y{hint}")
        arrays.y = y
        if model.sparse_labels:
            _check_classes(y, model.output.shape_without_batch[-1], what)
    counts = {len(a) for a in xs + ([y] if need_labels else [])}
    if len(counts) != 1:
        raise ValueError(f"{what}: x and y must have the same number of samples, got "
                         f"{[len(a) for a in xs]} for x and {len(y)} for y")
    batch = model.ffconfig.batch_size
    if need_labels and len(arrays) < batch:
        raise ValueError(f"{what}: {len(arrays)} samples is fewer than one batch of {batch} (the "
                         f"batch size set with -b)")
    return arrays


def _on_host(array):
    """A Dask array's values, computed once, as the NumPy array fit trains on (a NumPy memmap
    is an array already, read as batches are cut from it); anything else as it is."""
    is_dask = type(array).__module__.startswith("dask.") and hasattr(array, "compute")
    return np.asarray(array.compute()) if is_dask else array


def _check_array(array, sample_shape: tuple, dtype: str, where: str) -> None:
    expected = "(num_samples" + "".join(f", {d}" for d in sample_shape) + ")"
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{where} must be a NumPy or Dask array of shape {expected} and dtype "
                        f"{dtype}, got {type(array).__name__}")
    if array.ndim != len(sample_shape) + 1 or tuple(array.shape[1:]) != tuple(sample_shape):
        hint = (" (reshape with y.reshape(-1, 1))" if array.ndim == 1 and sample_shape == (1,)
                else "")
        raise ValueError(f"{where} must have shape {expected}, got {array.shape}{hint}")
    if array.dtype != np.dtype(dtype):
        raise ValueError(f"{where} must have dtype {dtype}, got {array.dtype} (convert with "
                         f".astype('{dtype}'))")


def _check_classes(y: np.ndarray, classes: int, what: str) -> None:
    if y.size and (int(y.min()) < 0 or int(y.max()) >= classes):
        raise ValueError(f"{what}: labels must be class indices in [0, {classes}) for a model "
                         f"with {classes} outputs, got values from {int(y.min())} to "
                         f"{int(y.max())}")

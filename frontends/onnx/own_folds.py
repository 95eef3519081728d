"""Operators the importer evaluates itself when their inputs are all constants, where ONNX's
reference implementation fails on valid inputs.

* GatherElements: the reference picks with `numpy.choose`, which takes at most 64 choices, and
  its fallback for more mis-shapes the result (exporters fold BERT's token type ids through a
  GatherElements over the sequence, 512 long in BERT-base). Here: `numpy.take_along_axis`,
  with ONNX's negative indices counted from the end and out-of-range ones refused.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .node import Node


def gather_elements(node: Node, data: np.ndarray, indices: np.ndarray) -> list[np.ndarray]:
    if data.ndim != indices.ndim:
        raise node.error(f"data is {data.ndim}-d and indices {indices.ndim}-d; GatherElements "
                         f"needs the same rank")
    axis = int(node.attr("axis", 0))
    if not -data.ndim <= axis < data.ndim:
        raise node.error(f"axis {axis} is out of range for {data.ndim}-d data")
    size = data.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise node.error(f"indices must lie in [{-size}, {size - 1}] along axis {axis}")
    return [np.take_along_axis(data, np.where(indices < 0, indices + size, indices), axis)]


OWN_FOLDS: dict[str, Callable[..., list[np.ndarray]]] = {"GatherElements": gather_elements}

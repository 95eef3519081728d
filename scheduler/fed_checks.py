"""The checks of fed values that index something (class labels, embedding indices), made on the
host as each device's piece is loaded (`actions.Load`), before it reaches the device: there they
cost a pass over a host array, where the kernels' checks of a device's array would make the
host wait for the device at every step (and an index out of range faults on a GPU). The
kernels check on host arrays as well, and on a device where their indices are computed there
rather than fed (`ops.base.Part.fed`).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from ..ops import losses
from ..ops.embedding import Embedding
from ..ops.graph import Graph

Check = Callable[[np.ndarray], None]


def fed_checks(graph: Graph, label: int | None, loss: losses.Loss | None,
               output: int | None) -> dict[int, Check]:
    """tensor id -> the check of its host pieces: the label of a sparse loss against the
    output's classes, each fed tensor an embedding reads against its table's rows."""
    checks: dict[int, Check] = {}
    if loss is not None and loss.sparse and label is not None:
        classes = graph.tensors[output].spec.shape[-1]
        checks[label] = partial(losses.check_labels, classes=classes)
    for layer in graph.layers:
        if isinstance(layer.op, Embedding) and layer.inputs[0] in graph.inputs:
            checks[layer.inputs[0]] = partial(layer.op.check_range, np)
    return checks

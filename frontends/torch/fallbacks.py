"""What the PyTorch front end does with models that cannot run as PyTorch reads them.

FlexFlow's own example `cifar10_cnn_torch.py` exports a model that is not valid PyTorch:
`(y1, y2) = torch.split(y, 1)` cuts pieces of 1 along the batch dim, as many as the batch has, and
unpacks them into two. FlexFlow's importer read `SPLIT; 1` as "dim 1, in as many equal parts as
the node has uses", built its layers, and trained them with its own initializers. Here:

* `flexflow_split`: a `SPLIT; n` node whose uses unpack it (GETITEM 0, 1, ..., k-1, k >= 2) into
  fewer or more pieces than PyTorch's reading gives is read FlexFlow's way, with a warning;
* `warn_torch_weights_unused`: when a traced module's weights do not fit the layers built in
  the dims the layers' inputs decide (because of such a reading, or because, as in that model,
  a layer disagrees with its input), none is applied and the model trains with FlexFlow's
  initializers, with one warning naming the node (`Builder._load_torch_weights`; weights that
  contradict what their node declares, another model's, are refused).

A model that loses the batch that way (PyTorch's reading at a batch it unpacks: an output of
batch 1) is built, so that it can be run forward as PyTorch runs it; compiling it for training
is refused (`deployment.check_output_batch`).
"""

from __future__ import annotations

import math
import warnings

from flexflow.tensor import Tensor
from flexflow.type import OpType

from .ir import IRNode


class TorchImportWarning(UserWarning):
    """A model was built differently from what PyTorch would run (FlexFlow's reading)."""


def unpacked_into(node: IRNode, nodes: dict[str, IRNode]) -> int | None:
    """k when the uses of `node` are GETITEM 0, 1, ..., k-1 (a tuple unpacking), k >= 2."""
    uses = [nodes.get(name) for name in node.outputs]
    if len(uses) < 2 or any(u is None or u.op_type != OpType.GETITEM for u in uses):
        return None
    indices = [u.params[0] if len(u.params) == 1 else None for u in uses]
    if not all(type(i) is int for i in indices):
        return None
    return len(uses) if sorted(indices) == list(range(len(uses))) else None


def flexflow_split(node: IRNode, nodes: dict[str, IRNode], x: Tensor, size,
                   source: str) -> tuple[int, int] | None:
    """(parts, axis) of FlexFlow's reading of `SPLIT; size` when PyTorch's reading (pieces of
    `size` along dim 0) cannot be unpacked into the node's uses and FlexFlow's can; else None."""
    parts = unpacked_into(node, nodes)
    if parts is None or not isinstance(size, int) or size <= 0:
        return None
    pieces = math.ceil(x.dims[0] / size)
    if pieces == parts or not 0 < size < x.num_dims or x.dims[size] % parts:
        return None
    warnings.warn(TorchImportWarning(
        f"{source}: node '{node.name}' (SPLIT; {size}): PyTorch cuts the input {x.dims} into "
        f"{pieces} pieces of {size} along dim 0, which do not unpack into its {parts} uses; "
        f"read as FlexFlow did: dim {size} in {parts} equal parts"), stacklevel=2)
    return parts, size


def warn_torch_weights_unused(source: str, why: str) -> None:
    warnings.warn(TorchImportWarning(
        f"{source}: {why}; the model is trained with FlexFlow's initializers (no torch weight "
        f"is applied), as FlexFlow did"), stacklevel=2)

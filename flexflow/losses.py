"""FlexFlow's loss and metric types mapped onto the loss kernel the devices run
(ops/losses.py, which holds the semantics, reference 2.9)."""

from __future__ import annotations

from typing import Sequence

from .ops.losses import Loss
from .type import LossType, MetricsType

SPARSE_LOSSES = (LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY,)
CROSS_ENTROPY_LOSSES = (LossType.LOSS_CATEGORICAL_CROSSENTROPY,
                        LossType.LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)


def loss_function(loss_type: LossType, metrics: Sequence[MetricsType], batch_size: int,
                  sample_size: int, through_softmax: bool) -> Loss:
    """The kernel of `loss_type` reporting `metrics`, for a model output of `batch_size`
    samples of `sample_size` elements each."""
    return Loss(kind=_name(loss_type, "LOSS_"),
                metrics=tuple(_name(metric, "METRICS_") for metric in metrics),
                batch_size=batch_size, sample_size=sample_size, through_softmax=through_softmax)


def _name(member, prefix: str) -> str:
    """LossType.LOSS_IDENTITY -> "identity", MetricsType.METRICS_ACCURACY -> "accuracy"."""
    return member.name[len(prefix):].lower()
